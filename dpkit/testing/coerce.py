"""A mechanism's ``coerce`` keeps neighbours neighbours: :func:`check_coerce`.

In a session, a mechanism's input passes its public, structural ``check_input``, the cost is
spent, and then ``coerce`` maps the input into the declared domain before ``randomize`` runs
(:mod:`dpkit.mechanism`). ``randomize`` keeps its guarantee on neighbouring inputs *of the
domain*; the release keeps it only if ``coerce`` maps neighbouring inputs to neighbouring
inputs (DESIGN, "The privacy boundary": every map applied to the data before noise must be
non-expansive in the metric the sensitivity is declared in). :func:`check_coerce` draws such
inputs with Hypothesis and checks:

* **central** mechanisms (a :class:`~dpkit.plugin.VectorDomain`: answers within Δ in L1, L2 or L∞,
  integers or not, moving one way or not): for two arrays ``x`` and ``x′`` of one shape and
  dtype that ``check_input`` accepts — integers of every width, float16/32/64, booleans, and
  object arrays of Python and numpy numbers — holding the values that break maps (halves,
  ±0, 2⁵³ ± 1, the largest integers, ±inf, NaN; often one of them throughout) and within Δ of
  each other in the declared norm (often Δ shared by every coordinate, one way), measured
  exactly (a coordinate holding the same value on both sides, NaN or ±inf included, has not
  moved; ``x′`` moves all coordinates one way if the domain is ``monotone``), ``coerce(x)``
  and ``coerce(x′)`` must be real arrays of the input's shape, integers if the domain is, still
  within Δ of each other, measured the same way (so a coordinate may be non-finite — an
  excluded candidate's −inf utility — only where it is the same on both sides). For
  mechanisms that take rows (selections: ``releases`` counts the rows), each row is one
  release and is compared on its own. With ``direct=True`` (dpkit's own mechanisms promise
  it), a direct ``randomize(x)`` (the data holder's call, without a session), whenever it
  accepts ``x``, must also release exactly what ``randomize(coerce(x))`` releases on the same
  words in each mode: its own reading of the input is then ``coerce``'s, non-expansive by the
  check above (64-bit integers beyond 2⁵³, which the doubles round, are then always among
  the inputs tried);
* **local** mechanisms (any other domain: one user's value, and any two values neighbour):
  every map keeps that relation, so ``coerce`` must only be total (never raise) and give one
  output per record, for records of the domain mixed with NaN, ±inf, out-of-range values,
  ``None`` and text, changed one record at a time.

Deterministic given the drawn inputs (exact rational arithmetic, with the relative slack
:data:`SLACK` on the outputs' Δ; Hypothesis derandomized): no false positives. Needs ``hypothesis`` (in the ``test`` extra).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from decimal import Decimal, localcontext
from fractions import Fraction
from typing import Any

import attrs
import numpy as np
from hypothesis import HealthCheck, Phase, assume, example, given, settings
from hypothesis import strategies as st

from dpkit.domains import Box, Domain, VectorDomain
from dpkit.errors import DPKitError, InvalidData
from dpkit.mechanism import Mechanism
from dpkit.testing._audit import parameter_points
from dpkit.testing.inputs import Unsupported, plan_inputs
from dpkit.testing.modes import MODES, mode_generator
from dpkit.testing.strategies import ANSWER_DTYPES, answer_arrays

__all__ = ["COERCE_EXAMPLES", "SLACK", "check_coerce"]

#: Inputs drawn per instance of a central mechanism by :func:`check_coerce` (a quarter as
#: many for a local one, whose check is only totality).
COERCE_EXAMPLES = 100
#: The relative slack on Δ for the outputs (as :meth:`dpkit.plugin.VectorDomain.are_neighbours`
#: allows): the last-bit rounding of an exact input (a fraction, a decimal) into a double is
#: not flagged; a map that moves answers by more — integers beyond 2⁵³ rounded by a whole
#: unit, halves rounded to even — is.
SLACK = Fraction(1, 10**12)


def check_coerce(
    mechanism: Mechanism | type[Mechanism],
    *,
    examples: int = COERCE_EXAMPLES,
    direct: bool = False,
) -> None:
    """Check that ``mechanism``'s ``coerce`` maps neighbours to neighbours (module docstring):
    an instance as it is, a class at its :func:`~dpkit.testing.parameter_points`; ``examples``
    inputs are drawn per instance (a quarter as many for a local mechanism). ``direct``: a
    central mechanism's direct ``randomize`` must also read its input as ``coerce`` does
    (module docstring). Raises an
    ``AssertionError`` with the falsifying inputs (Hypothesis prints them) on a violation,
    :class:`~dpkit.testing.Unsupported` when the domain declares no neighbours to draw."""
    if isinstance(mechanism, Mechanism):
        instances = [mechanism]
    elif isinstance(mechanism, type) and issubclass(mechanism, Mechanism):
        instances = [mechanism(**point) for point in parameter_points(mechanism)]
    else:
        raise TypeError(f"expected a Mechanism class or instance, got {mechanism!r}")
    for instance in instances:
        if isinstance(instance.domain, VectorDomain):
            _central(instance, examples, direct)
        else:
            _local(instance, max(1, examples // 4))


#: Derandomized (the same inputs on every run), no example database, no deadline, and no
#: explain phase (it reruns a failure many times to annotate it; the shrunk pair says enough).
_SETTINGS: dict[str, Any] = {
    "phases": [Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink],
    "derandomize": True,
    "database": None,
    "deadline": None,
    "suppress_health_check": list(HealthCheck),
}


def _accepts(mechanism: Mechanism, array: np.ndarray[Any, Any]) -> bool:
    try:
        mechanism.check_input(array)
    except InvalidData:
        return False
    return True


# -- central: answers within Δ ----------------------------------------------------------------


@attrs.frozen
class _Relation:
    """A vector domain's relation, exactly: Δ, the norm, integers, one direction; ``rows``:
    each row (last axis) of the input is one release."""

    sensitivity: Fraction
    norm: float
    integer: bool
    monotone: bool
    rows: bool
    direct: bool = False  # also: a direct randomize reads its input as coerce does

    def within(self, moves: Sequence[Fraction], slack: Fraction = Fraction(0)) -> bool:
        """Whether ``moves`` keep within Δ·(1 + ``slack``) in the norm (one way if monotone)."""
        if self.monotone and not (all(m >= 0 for m in moves) or all(m <= 0 for m in moves)):
            return False
        bound = self.sensitivity * (1 + slack)
        if self.norm == 1.0:
            return sum((abs(m) for m in moves), Fraction(0)) <= bound
        if self.norm == 2.0:
            return sum((m * m for m in moves), Fraction(0)) <= bound**2
        return max((abs(m) for m in moves), default=Fraction(0)) <= bound


def _exact(value: Any) -> Fraction | None:
    """A finite real number (booleans as 0 and 1) as an exact fraction; None otherwise."""
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value[()]
    if isinstance(value, (bool, np.bool_)):
        return Fraction(int(value))
    if isinstance(value, (int, np.integer, Fraction)):
        return Fraction(int(value)) if not isinstance(value, Fraction) else value
    if isinstance(value, (float, np.floating, Decimal)):
        try:
            exact = value if isinstance(value, Decimal) else float(value)
            return Fraction(exact) if math.isfinite(exact) else None
        except (TypeError, ValueError, OverflowError):
            return None
    return None


def _unmoved(a: Any, b: Any) -> bool:
    """The same value on both sides (one object, or equal; NaN against NaN)."""
    if a is b:
        return True
    try:
        if bool(a == b):
            return True
    except Exception:
        return False
    return bool(_is_nan(a) and _is_nan(b))


def _is_nan(value: Any) -> bool:
    try:
        return bool(value != value)
    except Exception:
        return False


def _moves(x: np.ndarray[Any, Any], y: np.ndarray[Any, Any]) -> list[Fraction] | None:
    """Each coordinate's exact move from ``x`` to ``y`` (None if one is not measurable: a
    non-number or a non-finite value that differs between the two)."""
    moves = []
    for a, b in zip(x.ravel().tolist(), y.ravel().tolist(), strict=True):
        if _unmoved(a, b):
            moves.append(Fraction(0))
            continue
        ea, eb = _exact(a), _exact(b)
        if ea is None or eb is None:
            return None
        moves.append(eb - ea)
    return moves


def _relation(mechanism: Mechanism, domain: VectorDomain) -> _Relation:
    plan = plan_inputs(mechanism, rng=np.random.default_rng(0))
    return _Relation(
        Fraction(float(domain.sensitivity)),
        float(domain.norm),
        bool(domain.integer),
        bool(getattr(domain, "monotone", False)),
        plan.mode == "vector",
    )


def _representable(value: Fraction, dtype: np.dtype[Any]) -> Any:
    """``value`` stored in ``dtype`` (rounded to its floats), or None if it does not fit."""
    if dtype.kind == "b":
        return bool(value) if value in (0, 1) else None
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        if value.denominator != 1 or not int(info.min) <= value <= int(info.max):
            return None
        return dtype.type(int(value))
    if dtype.kind == "f":
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")  # an overflow to inf: then it does not fit
            stored = dtype.type(float(value))
        return stored if np.isfinite(stored) else None
    # an object array: the exact value as an int, a float that holds it, or a Fraction
    if value.denominator == 1:
        return int(value)
    as_float = float(value)
    return as_float if Fraction(as_float) == value else value


@st.composite
def _moved(draw: st.DrawFn, x: np.ndarray[Any, Any], relation: _Relation) -> np.ndarray[Any, Any]:
    """A neighbour of ``x``: in each row, some coordinates moved (all one way if the relation
    is monotone) by steps drawn from Δ, Δ/2, Δ/m, 1 and ½ (whole steps in an integer dtype or
    domain) — or, half the time, all by one share of Δ and one way, so that a map that moves
    each coordinate a little (a tie rounded up) does so on every one —, each move kept while the
    row stays within Δ, measured exactly after the moved value is stored in ``x``'s dtype."""
    y: np.ndarray[Any, Any] = x.copy()
    rows = y.reshape(-1, y.shape[-1]) if relation.rows and y.ndim else y.reshape(1, -1)
    originals = x.reshape(rows.shape)
    delta = relation.sensitivity
    width = rows.shape[1]
    steps = [delta, delta / 2, delta / max(width, 1), Fraction(1), Fraction(1, 2)]
    integral = x.dtype.kind in "biu" or relation.integer
    if integral:
        steps = [Fraction(math.floor(s)) for s in steps]
    steps = sorted({s for s in steps if s > 0}, reverse=True)
    if not steps:
        return y
    for r in range(rows.shape[0]):
        moving = draw(st.lists(st.integers(0, width - 1), min_size=1, unique=True))
        sign = draw(st.sampled_from([1, -1]))
        even = draw(st.booleans())
        if even:  # Δ shared evenly by every coordinate (in whole steps where they must be)
            moving = list(range(width))
            moving = moving[: min(width, math.floor(delta)) or 1] if integral else moving
            share = delta / len(moving)
            share = Fraction(math.floor(share)) if integral else share
        moves: list[Fraction] = []
        for i in moving:
            start = _exact(originals[r, i])
            step = share if even else draw(st.sampled_from(steps))
            if start is None:
                continue
            if not relation.monotone and not even:
                sign = draw(st.sampled_from([1, -1]))
            stored = _representable(start + sign * step, x.dtype)
            moved = None if stored is None else _exact(stored)
            if moved is None or not relation.within([*moves, moved - start]):
                continue
            rows[r, i] = stored
            moves.append(moved - start)
    return y


def _check_pair(
    mechanism: Mechanism, relation: _Relation, x: np.ndarray[Any, Any], y: np.ndarray[Any, Any]
) -> None:
    if relation.direct:
        _check_direct(mechanism, x)
    seed = 0
    out_x = np.asarray(mechanism.coerce(x, rng=np.random.default_rng(seed)))
    out_y = np.asarray(mechanism.coerce(y, rng=np.random.default_rng(seed)))
    name = mechanism.name
    for out in (out_x, out_y):
        assert out.shape == x.shape, f"{name}.coerce changed the shape {x.shape} to {out.shape}"
        assert out.dtype.kind in "biuf" or (
            out.dtype.kind == "O"
            and all(isinstance(e, (int, float, Fraction)) for e in out.ravel().tolist())
        ), f"{name}.coerce returned {out.dtype}, not real numbers"
        finite = [e for e in map(_exact, out.ravel().tolist()) if e is not None]
        if relation.integer:
            assert all(e.denominator == 1 for e in finite), (
                f"{name}.coerce returned a non-integer where its domain holds integers: {out!r}"
            )
    width = x.shape[-1] if relation.rows and x.ndim else x.size
    pairs = zip(
        out_x.reshape(-1, width) if width else [out_x.ravel()],
        out_y.reshape(-1, width) if width else [out_y.ravel()],
        strict=True,
    )
    for row_x, row_y in pairs:
        moves = _moves(row_x, row_y)
        assert moves is not None and relation.within(moves, SLACK), (
            f"{name}.coerce is not non-expansive in its declared metric "
            f"(Δ = {float(relation.sensitivity):g}, L{relation.norm:g}"
            f"{', integers' if relation.integer else ''}"
            f"{', one direction' if relation.monotone else ''}): the neighbours "
            f"{x.tolist()} and {y.tolist()} (dtype {x.dtype}) became {row_x.tolist()} and "
            f"{row_y.tolist()}"
        )


def _check_direct(mechanism: Mechanism, x: np.ndarray[Any, Any]) -> None:
    """A direct ``randomize(x)`` (the data holder's call, without a session) must release what
    ``randomize(coerce(x))`` releases on the same words, in each mode it runs in, whenever it
    accepts ``x`` at all (it may refuse: a typed :class:`~dpkit.errors.DPKitError`). Its own
    reading of ``x`` is then ``coerce``'s, which the pair check proves non-expansive."""
    for mode in MODES:
        try:
            direct = mechanism.randomize(x, rng=mode_generator(mode, 0, np.random.default_rng(0)))
        except DPKitError:  # this mode, or this input, refused by a typed error
            continue
        coerced = mechanism.coerce(x, rng=np.random.default_rng(0))
        via = mechanism.randomize(coerced, rng=mode_generator(mode, 0, np.random.default_rng(0)))
        assert np.array_equal(np.asarray(direct), np.asarray(via), equal_nan=True), (
            f"{mechanism.name}.randomize read {x.tolist()} (dtype {x.dtype}) otherwise than "
            f"its coerce ({np.asarray(coerced).tolist()}) in {mode} mode: released "
            f"{np.asarray(direct).tolist()} against {np.asarray(via).tolist()}"
        )


def _central(mechanism: Mechanism, examples: int, direct: bool) -> None:
    domain = mechanism.domain
    assert isinstance(domain, VectorDomain)
    relation = attrs.evolve(_relation(mechanism, domain), direct=direct)

    @st.composite
    def inputs(draw: st.DrawFn) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
        width = draw(st.integers(1, 4))
        shape = (
            (draw(st.integers(1, 3)), width) if relation.rows and draw(st.booleans()) else (width,)
        )
        dtypes = [d for d in ANSWER_DTYPES if _accepts(mechanism, _harmless(shape, d))]
        assume(dtypes)
        x = draw(answer_arrays(shape, dtypes))
        assume(_accepts(mechanism, x))
        y = draw(_moved(x, relation))
        moves = _moves(x, y)
        assert moves is not None and _rows_within(relation, moves, width), (x, y)
        return x, y

    @settings(max_examples=examples, **_SETTINGS)
    @given(pair=inputs())
    def non_expansive(pair: tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]) -> None:
        _check_pair(mechanism, relation, *pair)

    for wide in _WIDE if direct else ():  # always tried: the 64-bit integers no double holds
        x = np.array(wide[0], dtype=wide[1])
        if _accepts(mechanism, x):
            non_expansive = example(pair=(x, x))(non_expansive)
    for pair in _inexact_pairs(relation):  # always tried: answers that no double holds
        if _accepts(mechanism, pair[0]):
            non_expansive = example(pair=pair)(non_expansive)
    non_expansive()


def _inexact_pairs(relation: _Relation) -> list[tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]]:
    """Explicit neighbours of every check of real answers: three answers that no double holds
    near 2⁵² (where the doubles are 1 apart), each moved the same way — 2⁵² + 1/3 by Δ/3 as
    fractions, 2⁵² + 0.4 by Δ/4 as decimals (L1 and L2), 2⁵² + 1/2 by Δ (L∞). A map that
    rounds them to the nearest double moves each by up to a whole unit more: about three
    times Δ = 1 in L1, and in L∞ the tie 2⁵² + 1/2 goes down to 2⁵² while 2⁵² + 3/2 goes up
    to 2⁵² + 2, two apart. Only exact answers stay within Δ. (Pairs outside the relation are
    left out: the last one in L1 and L2, the first two in L∞ where they stay within it.)"""
    if relation.integer:
        return []
    base = Fraction(2**52)
    starts_and_moves: list[tuple[Fraction, Fraction, Callable[[Fraction], Any]]] = [
        (base + Fraction(1, 3), relation.sensitivity / 3, Fraction),
        (base + Fraction(2, 5), relation.sensitivity / 4, _decimal),
        (base + Fraction(1, 2), relation.sensitivity, Fraction),
    ]
    pairs = []
    for start, move, spell in starts_and_moves:
        x = np.empty(3, dtype=object)
        y = np.empty(3, dtype=object)
        for i in range(3):
            x[i] = spell(start)
            y[i] = spell(start + move)
        moves = _moves(x, y)
        if moves is not None and relation.within(moves):
            pairs.append((x, y))
    return pairs


#: Explicit inputs of every central check: 64-bit integers that the doubles round (2⁵³ + 2 is
#: exact, 2⁵³ + 3 is not) and the largest ones, which a direct ``randomize`` must read as
#: ``coerce`` does (clamped to ±2⁵³ for the float mechanisms, ±2⁶² for the integer ones).
_WIDE: tuple[tuple[list[int], str], ...] = (
    ([2**53 + 2, 2**53 + 3, 2**63 - 1, -(2**63)], "int64"),
    ([2**53 + 2, 2**53 + 3, 2**63 + 1, 2**64 - 1], "uint64"),
)


def _decimal(value: Fraction) -> Any:
    """``value`` as a Decimal, exactly (its denominator divides a power of ten)."""
    with localcontext() as context:
        context.prec = 60
        return Decimal(value.numerator) / Decimal(value.denominator)


def _rows_within(relation: _Relation, moves: list[Fraction], width: int) -> bool:
    if not relation.rows:
        return relation.within(moves)
    return all(relation.within(moves[i : i + width]) for i in range(0, len(moves), width))


def _harmless(shape: tuple[int, ...], dtype: str) -> np.ndarray[Any, Any]:
    """Zeros of ``shape`` and ``dtype``: what a structural check must judge like any values."""
    if dtype == "O":
        out = np.empty(shape, dtype=object)
        out[...] = 0
        return out
    return np.zeros(shape, dtype=dtype)


# -- local: one user's value, any two of which neighbour ---------------------------------------

#: Records no domain holds, mixed in with the domain's own.
_STRANGE: tuple[Any, ...] = (
    math.nan,
    math.inf,
    -math.inf,
    1e308,
    -1.0,
    0.5,
    2**53 + 1,
    None,
    "x",
    True,
)


def _domain_records(domain: Domain) -> list[Any]:
    try:
        pairs = domain.pairs()
    except NotImplementedError:
        raise Unsupported(
            f"the input domain {type(domain).__name__} does not declare its neighbours"
        ) from None
    found: list[Any] = []
    for pair in pairs:
        for value in pair:
            if not any(_unmoved(np.asarray(value).tolist(), np.asarray(f).tolist()) for f in found):
                found.append(value)
    return found


def _local(mechanism: Mechanism, examples: int) -> None:
    domain = mechanism.domain
    own = _domain_records(domain)
    width = domain.dimension if isinstance(domain, Box) else None

    def record(value: Any) -> Any:
        if width is None or np.ndim(value) == 1:
            return value
        return [value] * width

    records = st.sampled_from([*own, *_STRANGE]).map(record)

    @st.composite
    def inputs(draw: st.DrawFn) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
        values = draw(st.lists(records, min_size=1, max_size=6))
        changed = draw(st.integers(0, len(values) - 1))
        other = list(values)
        other[changed] = draw(records)
        dtype = draw(st.sampled_from([None, "float64", "int64", "O"]))
        arrays = [_records_array(v, dtype) for v in (values, other)]
        assume(all(a is not None for a in arrays))
        x, y = arrays
        assume(_accepts(mechanism, x) and _accepts(mechanism, y))  # type: ignore[arg-type]
        return x, y  # type: ignore[return-value]

    @settings(max_examples=examples, **_SETTINGS)
    @given(pair=inputs())
    def total(pair: tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]) -> None:
        for values in pair:
            out = np.asarray(mechanism.coerce(values, rng=np.random.default_rng(0)))
            assert out.shape[:1] == values.shape[:1], (
                f"{mechanism.name}.coerce turned {values.shape[0]} records into "
                f"{out.shape[:1] or 'a scalar'}: {values!r} became {out!r}"
            )

    total()


def _records_array(values: list[Any], dtype: str | None) -> np.ndarray[Any, Any] | None:
    """The records as an array: of the dtype numpy infers (None), of floats or integers when
    every record is a number of that kind, or of objects; None when they are not."""
    if dtype == "O":
        out = np.empty(len(values), dtype=object)
        for i, value in enumerate(values):
            out[i] = value
        return out
    flat = [v for value in values for v in (value if isinstance(value, list) else [value])]
    numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in flat)
    if dtype == "float64" and not numbers:
        return None
    if dtype == "int64" and not (numbers and all(isinstance(v, int) for v in flat)):
        return None
    try:
        with np.errstate(all="ignore"):
            return np.array(values, dtype=dtype)
    except (TypeError, ValueError, OverflowError):
        return None
