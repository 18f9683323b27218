"""Neighbouring inputs for the auditor, from a mechanism's declared domain.

A violation is only visible on the right pair of neighbours (auditing note §1; Ding et al. 2018,
§5.1), so the auditor always includes the *worst-case* pairs of the declared relation. Pairs come
from three sources, all screened alike (:mod:`dpkit.testing.blackbox`):

* **declared** — any domain that declares its neighbours (:attr:`dpkit.plugin.Domain.declares_neighbours`:
  the built-in :class:`~dpkit.plugin.CategoricalDomain`, :class:`~dpkit.plugin.Interval` and :class:`~dpkit.plugin.Box`,
  or a third party's :class:`~dpkit.plugin.Domain` subclass) gives its worst-case pairs with
  ``domain.pairs()`` and random ones with ``domain.neighbours(rng, n)``; an input is whatever
  those pairs hold (a category index, a number, a vector of shape ``(d,)``, ...), and a batch of
  ``n`` copies of it is stacked along a new first axis;
* **derived** — :class:`~dpkit.plugin.VectorDomain` (central DP, answers within a sensitivity), whose
  pairs depend on how ``randomize`` takes its input:

  * *scalar* mode, where ``randomize`` maps an array of answers element by element: ``x = 0``
    and ``x' = ±Δ``. The one-dimensional reduction is exact for the mechanisms dpkit knows:
    product Laplace/geometric noise has privacy loss ε·‖x − x'‖₁/Δ₁ whichever coordinates
    move, and an isotropic Gaussian's loss depends only on ‖x − x'‖₂ (Balle & Wang 2018,
    Lemma 3), so moving one coordinate by the full Δ is worst;
  * *vector* mode, where one input is a vector (the utilities of the exponential mechanism, the
    scores of report-noisy-max) and ``randomize`` maps a batch of rows: StatDP's patterns
    (Ding et al. 2018, §5.1) clipped to the norm ball — one coordinate up, all coordinates up
    ("all shift", which exposes a released noisy maximum), and the "x-shape" pair where one
    coordinate goes up and the rest go down (which exposes an exponential mechanism missing its
    factor 2 on a non-monotone utility). Pairs that move coordinates in both directions are
    left out when the domain declares ``monotone=True``;
* **explicit** — pairs the caller names (``audit(pairs=...)``, ``dp_check(..., pairs=...)``,
  ``dpkit audit --pair``), checked with ``domain.are_neighbours`` where the domain implements
  it (:func:`check_pairs`).

The plan of how to call ``randomize`` is found by probing it once with a small batch: the
auditor never guesses a calling convention it has not seen work.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Literal

import attrs
import numpy as np
from numpy.typing import NDArray

from dpkit.domains import CategoricalDomain, Domain, VectorDomain
from dpkit.errors import InvalidParameter
from dpkit.mechanism import Mechanism

__all__ = ["InputPlan", "Unsupported", "check_pairs", "plan_inputs"]

#: Number of candidates (coordinates) used for vector-input mechanisms.
VECTOR_DIMENSION = 8
#: The batch size the calling convention is probed with.
PROBE = 16


class Unsupported(Exception):
    """The auditor cannot handle this mechanism (or this tier of it); the message says why."""


@attrs.frozen
class InputPlan:
    """How to feed one input value ``n`` times to ``randomize`` and which pairs to try.

    ``mode`` is ``"categorical"`` (a :class:`~dpkit.plugin.CategoricalDomain`), ``"declared"``
    (another domain that declares its neighbours), ``"scalar"`` or ``"vector"`` (the two
    calling conventions of a :class:`~dpkit.plugin.VectorDomain`). ``sensitivity`` is the declared Δ
    of a vector domain, and for a declared domain the largest distance between the inputs of
    its worst-case pairs (a length scale for the exact tier's integration window).
    """

    mode: Literal["categorical", "declared", "scalar", "vector"]
    dimension: int
    sensitivity: float
    integer: bool
    #: The shape of one output, as seen when probing ``randomize`` (``()`` for a scalar).
    output_shape: tuple[int, ...] = ()

    def batch(self, value: Any, n: int) -> NDArray[Any]:
        """``n`` copies of one input, shaped for a vectorised ``randomize`` call."""
        if self.mode == "declared":
            array = np.asarray(value)
            return np.repeat(array[np.newaxis, ...], n, axis=0)
        if self.mode == "vector":
            return np.tile(np.asarray(value, dtype=self.dtype), (n, 1))
        return np.full(n, value, dtype=self.dtype)

    @property
    def dtype(self) -> type:
        return np.int64 if self.mode == "categorical" or self.integer else np.float64

    def describe(self, value: Any) -> str:
        array = np.asarray(value)
        if array.dtype.kind not in "biuf":
            return str(value)
        if array.ndim == 0:
            return f"{array.item():g}" if self.mode != "categorical" else str(int(array))
        return "[" + ", ".join(f"{v:g}" for v in array.ravel().tolist()) + "]"


def key(value: Any) -> Any:
    """A hashable key of one input value or dataset (equal values, equal keys; NaN included)."""
    array = np.asarray(value)
    if array.dtype.kind == "O":
        return ("O", array.shape, tuple(repr(v) for v in array.ravel().tolist()))
    if array.ndim == 0:
        item = array.item()
        return repr(item) if isinstance(item, float) and item != item else item
    return (array.dtype.str, array.shape, array.tobytes())


def _first_dimension(output: Any) -> int | None:
    shape = np.shape(output)
    return shape[0] if shape else None


def _probe(mechanism: Mechanism, plan: InputPlan, value: Any, what: str) -> InputPlan:
    try:
        output = mechanism.randomize(plan.batch(value, PROBE), rng=np.random.default_rng(0))
    except Exception as error:
        raise Unsupported(f"randomize refused {what} ({type(error).__name__}: {error})") from None
    if _first_dimension(output) != PROBE:
        raise Unsupported(
            f"randomize of {PROBE} copies of one input returned shape {np.shape(output)}, "
            f"not one output per input"
        )
    return attrs.evolve(plan, output_shape=tuple(np.shape(output)[1:]))


def _declared_plan(mechanism: Mechanism, domain: Domain) -> InputPlan:
    try:
        pairs = domain.pairs()
    except Exception as error:
        raise Unsupported(
            f"{type(domain).__name__}.pairs() failed ({type(error).__name__}: {error})"
        ) from None
    if not pairs:
        raise Unsupported(f"{type(domain).__name__}.pairs() declared no neighbouring pair")
    first = np.asarray(pairs[0][0])
    spread = max(
        (_distance(a, b) for a, b in pairs if np.shape(a) == np.shape(b)),
        default=1.0,
    )
    plan = InputPlan(
        "declared",
        int(first.size),
        spread if math.isfinite(spread) and spread > 0 else 1.0,
        first.dtype.kind in "iub",
    )
    return _probe(mechanism, plan, pairs[0][0], f"the declared input {plan.describe(first)}")


def _distance(a: Any, b: Any) -> float:
    try:
        move = np.asarray(b, dtype=np.float64) - np.asarray(a, dtype=np.float64)
    except (TypeError, ValueError):
        return 1.0
    return float(np.max(np.abs(move))) if move.size else 1.0


def plan_inputs(
    mechanism: Mechanism, *, rng: np.random.Generator, dimension: int | None = None
) -> InputPlan:
    """Find how ``randomize`` takes a batch of one input, or raise :class:`Unsupported`.

    ``dimension`` sets the number of candidates of a vector-input mechanism (default
    :data:`VECTOR_DIMENSION`).
    """
    domain = mechanism.domain
    if isinstance(domain, CategoricalDomain):
        plan = InputPlan("categorical", 1, 1.0, True)
        return _probe(mechanism, plan, 0, "category indices")
    if not isinstance(domain, VectorDomain):
        if isinstance(domain, Domain) and domain.declares_neighbours:
            return _declared_plan(mechanism, domain)
        raise Unsupported(
            f"the input domain {type(domain).__name__} does not declare its neighbours "
            "(implement pairs() and neighbours(rng, n) on it: see the plugin guide)"
        )
    sensitivity = float(domain.sensitivity)
    if not math.isfinite(sensitivity) or sensitivity <= 0:
        raise Unsupported(f"declared sensitivity {sensitivity!r} is not a positive number")
    integer = bool(domain.integer)
    if integer:
        # Integer answers within Δ of each other differ by at most ⌊Δ⌋.
        sensitivity = float(math.floor(sensitivity))
        if sensitivity < 1:
            raise Unsupported(
                f"no two integer answers are within the sensitivity {domain.sensitivity:g}"
            )
    scalar = InputPlan("scalar", 1, sensitivity, integer)
    try:
        output = mechanism.randomize(scalar.batch(0, PROBE), rng=rng)
        if _first_dimension(output) == PROBE:
            return attrs.evolve(scalar, output_shape=tuple(np.shape(output)[1:]))
    except Exception:
        pass
    m = dimension or VECTOR_DIMENSION
    vector = InputPlan("vector", m, sensitivity, integer)
    try:
        output = mechanism.randomize(vector.batch(np.zeros(m), PROBE), rng=rng)
    except Exception as error:
        raise Unsupported(
            "randomize accepts neither an array of answers (one output each) nor a batch of "
            f"vectors, one per row ({type(error).__name__}: {error})"
        ) from None
    if _first_dimension(output) != PROBE:
        raise Unsupported(
            f"randomize of a ({PROBE}, {m}) batch returned shape "
            f"{np.shape(output)}, not one output per row"
        )
    return attrs.evolve(vector, output_shape=tuple(np.shape(output)[1:]))


def worst_case_pairs(mechanism: Mechanism, plan: InputPlan) -> list[tuple[Any, Any]]:
    """The worst-case neighbouring pairs of the declared relation (both orders)."""
    domain = mechanism.domain
    if plan.mode in ("categorical", "declared"):
        return list(domain.pairs())
    delta = plan.sensitivity
    if plan.mode == "scalar":
        return (
            [(0.0, delta), (delta, 0.0)] if not plan.integer else [(0, int(delta)), (int(delta), 0)]
        )
    assert isinstance(domain, VectorDomain)
    m = plan.dimension
    zero = np.zeros(m)
    one_up = zero.copy()
    one_up[0] = delta
    pairs = [(zero, one_up), (one_up, zero)]
    if domain.norm == math.inf:
        all_up = np.full(m, delta)
        pairs += [(zero, all_up), (all_up, zero)]
        if not getattr(domain, "monotone", False):
            rest_up = all_up.copy()
            rest_up[0] = 0.0
            pairs += [(one_up, rest_up), (rest_up, one_up)]
    if plan.integer:
        pairs = [(np.rint(a).astype(np.int64), np.rint(b).astype(np.int64)) for a, b in pairs]
    return pairs


def random_pairs(
    mechanism: Mechanism, plan: InputPlan, count: int, *, rng: np.random.Generator
) -> list[tuple[Any, Any]]:
    """Further neighbouring pairs drawn at random from the declared relation."""
    domain = mechanism.domain
    pairs: list[tuple[Any, Any]] = []
    if count <= 0:
        return pairs
    if plan.mode in ("categorical", "declared"):
        return list(domain.neighbours(rng, count))
    delta = plan.sensitivity
    for _ in range(count):
        if plan.mode == "scalar":
            base = rng.uniform(-10.0, 10.0) * delta
            shift = rng.choice([-1.0, 1.0]) * delta * rng.uniform(0.5, 1.0)
            if plan.integer:
                base, shift = round(base), int(rng.choice([-1, 1]) * delta)
            pairs.append((base, base + shift))
            continue
        origin = rng.uniform(-2.0, 2.0, size=plan.dimension) * delta
        assert isinstance(domain, VectorDomain)
        if domain.norm == math.inf:
            move = rng.uniform(-1.0, 1.0, size=plan.dimension) * delta
            if getattr(domain, "monotone", False):
                move = np.abs(move) * rng.choice([-1.0, 1.0])
        else:
            move = np.zeros(plan.dimension)
            move[rng.integers(plan.dimension)] = rng.choice([-1.0, 1.0]) * delta
        if plan.integer:
            origin, move = np.rint(origin), np.trunc(move)
        pairs.append((origin, origin + move))
    return pairs


def _shape_ok(plan: InputPlan, value: Any) -> bool:
    ndim = np.ndim(value)
    if plan.mode in ("categorical", "scalar"):
        return ndim == 0
    if plan.mode == "vector":
        return ndim == 1
    return True


def check_pairs(
    domain: Domain,
    plan: InputPlan | None,
    pairs: Sequence[Any],
    *,
    field: str = "pairs",
    owner: str = "audit",
) -> tuple[list[tuple[Any, Any]], str]:
    """Check explicitly given pairs before anything runs; return them and how they were checked.

    Each must be two inputs that neighbour under ``domain`` (``domain.are_neighbours``) and
    fit the calling convention found by ``plan``; a bad pair is an
    :class:`~dpkit.errors.InvalidParameter` naming ``field``, the pair and what is allowed.
    A domain that cannot check a pair (no ``are_neighbours``) has its pairs used as given, and
    the returned note says so.
    """
    checked: list[tuple[Any, Any]] = []
    note = f"checked by {type(domain).__name__}.are_neighbours"
    for pair in pairs:
        try:
            x, y = pair
        except (TypeError, ValueError):
            raise InvalidParameter(
                field, pair, "a pair [x, y] of two inputs", owner=owner
            ) from None
        x, y = _as_input(plan, x), _as_input(plan, y)
        if plan is not None and not (_shape_ok(plan, x) and _shape_ok(plan, y)):
            shape = {
                "categorical": "two category indices",
                "scalar": "two numbers",
                "vector": "two vectors of one length",
            }.get(plan.mode, "two inputs")
            raise InvalidParameter(field, pair, f"{shape} (the mechanism's inputs)", owner=owner)
        try:
            ok = domain.are_neighbours(x, y)
        except NotImplementedError:
            note = f"used as given: {type(domain).__name__} does not implement are_neighbours"
            ok = True
        if not ok:
            raise InvalidParameter(
                field, pair, f"two neighbouring inputs ({_relation(domain)})", owner=owner
            )
        checked.append((x, y))
    if plan is not None and plan.mode == "vector" and checked:
        lengths = {np.shape(v)[0] for pair in checked for v in pair}
        if len(lengths) != 1:
            raise InvalidParameter(
                field, pairs, "vectors of one length (the number of candidates)", owner=owner
            )
    return checked, note


def with_pairs(
    mechanism: Mechanism,
    pairs: Sequence[Any] | None,
    *,
    rng: np.random.Generator,
    field: str = "pairs",
) -> tuple[InputPlan, list[tuple[Any, Any]], str]:
    """The plan for ``mechanism`` and its explicit ``pairs``, checked (:func:`check_pairs`).

    Explicit vector-mode pairs set the number of candidates of the derived pairs too.
    Raises :class:`Unsupported` when no plan is found, :class:`~dpkit.errors.InvalidParameter`
    for a bad pair.
    """
    plan = plan_inputs(mechanism, rng=rng)
    if not pairs:
        return plan, [], ""
    explicit, note = check_pairs(mechanism.domain, plan, pairs, field=field, owner=mechanism.name)
    if plan.mode == "vector":
        length = int(np.shape(explicit[0][0])[0])
        if length != plan.dimension:
            plan = plan_inputs(mechanism, rng=rng, dimension=length)
    return plan, explicit, note


def _as_input(plan: InputPlan | None, value: Any) -> Any:
    """A given input in the form the plan feeds to ``randomize``: a JSON list becomes an array,
    and numbers take the plan's type (integers for categories and integer domains, floats
    otherwise) when they are numbers of that kind already."""
    if plan is None:
        return value
    array = np.asarray(value) if isinstance(value, (list, tuple)) else value
    if np.asarray(array).dtype.kind not in "iuf":
        return array
    integral = bool(np.all(np.asarray(array) == np.rint(np.asarray(array, dtype=np.float64))))
    wants_int = plan.mode == "categorical" or plan.integer
    if wants_int and not integral:
        return array  # refused by the domain check
    converted = np.asarray(array, dtype=np.int64 if wants_int else np.float64)
    return converted.item() if converted.ndim == 0 else converted


def _relation(domain: Domain) -> str:
    relation = getattr(domain, "relation", "")
    return str(relation) if relation else type(domain).__name__
