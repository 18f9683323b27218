"""Hypothesis strategies for auditing mechanisms and table queries.

**Mechanisms.** Parameters come from each mechanism's declaration
(:func:`dpkit.params.parameter` with ``typical=(low, high)``): a declared ``typical`` range is
drawn from, every other parameter keeps its default — so a mechanism must be constructible
that way. Neighbouring inputs come from the declared domain (:mod:`dpkit.testing.inputs`),
always mixing in the worst-case pairs. :func:`answer_arrays` draws what a session may hand a
mechanism's ``coerce``: arrays of every dtype its public check accepts, holding the values
that break maps (halves, ±0, 2⁵³ ± 1, the largest integers, ±inf, NaN, Python numbers of
several types in one object array).

**Tables** (:mod:`dpkit.testing.tables`). :func:`logical_tables` draws adversarial tables: a
*heavy person* (one id with many rows in many groups), ids and keys spelled across types
(``1``, ``1.0``, ``True``, ``"1"``, ``-0.0``, ``2**53 ± 1``, NaN, ``None``, ``""``, NFC and
NFD text, bytes) in object columns that mix them and in every Arrow type a column can have
(integers of each width, float16/32/64, decimal128, bool, the string, binary and view types,
dictionaries that differ from chunk to chunk, run-end encoded, timestamps and dates), and odd
chunkings (:func:`layouts`: empty chunks, one row per chunk, many chunks). :func:`public_keys`
draws key lists that name groups by keys of other types (a number for its text), and now and
then one group in several spellings (equal once coerced to the column's type: refused).
The table is engine-free; :meth:`~dpkit.testing.tables.LogicalTable.native` builds it on
pandas, Polars, PyArrow (also through Parquet), DuckDB and Dask.

Needs ``hypothesis`` (in the ``test`` extra); importing this module without it fails.
"""

from __future__ import annotations

import itertools
import warnings
from collections.abc import Sequence
from decimal import Decimal
from fractions import Fraction
from typing import Any

import numpy as np
from hypothesis import strategies as st

from dpkit.mechanism import Mechanism
from dpkit.params import Integer, Real
from dpkit.testing.inputs import InputPlan, plan_inputs, random_pairs, worst_case_pairs
from dpkit.testing.tables import (
    GROUPS,
    ID,
    LABEL_STORAGES,
    STORAGES,
    VALUE,
    Column,
    LogicalTable,
    identity,
    key_spellings,
    pool,
)

__all__ = [
    "ANSWER_DTYPES",
    "answer_arrays",
    "layouts",
    "logical_tables",
    "mechanisms",
    "neighbouring_pairs",
    "parameters",
    "public_keys",
    "spellings",
]


def parameters(cls: type[Mechanism]) -> st.SearchStrategy[dict[str, Any]]:
    """Dictionaries of parameter values drawn from the declared ``typical`` ranges."""
    drawn: dict[str, st.SearchStrategy[Any]] = {}
    for name, spec in cls.parameters().items():
        if spec.typical is None:
            continue
        low, high = spec.typical
        if isinstance(spec.domain, Integer):
            drawn[name] = st.integers(int(low), int(high))
        elif isinstance(spec.domain, Real):
            drawn[name] = st.floats(
                float(low),
                float(high),
                allow_nan=False,
                allow_infinity=False,
                allow_subnormal=False,
            )
    return st.fixed_dictionaries(drawn)


def mechanisms(cls: type[Mechanism]) -> st.SearchStrategy[Mechanism]:
    """Instances of ``cls`` at parameters drawn by :func:`parameters`."""
    return parameters(cls).map(lambda params: cls(**params))


def neighbouring_pairs(
    mechanism: Mechanism, plan: InputPlan | None = None
) -> st.SearchStrategy[tuple[Any, Any]]:
    """Pairs of neighbouring inputs of ``mechanism``'s declared relation, worst cases included.

    Random pairs are produced from a Hypothesis-drawn seed, so they replay and shrink like any
    other example.
    """
    plan = plan or plan_inputs(mechanism, rng=np.random.default_rng(0))
    worst = worst_case_pairs(mechanism, plan)
    drawn = st.integers(0, 2**32 - 1).map(
        lambda seed: random_pairs(mechanism, plan, 1, rng=np.random.default_rng(seed))[0]
    )
    return st.one_of(st.sampled_from(worst), drawn)


# -- answers: what a session may hand a mechanism's coerce ------------------------------------

#: The dtypes of :func:`answer_arrays` (``"O"``: an object array of Python and numpy numbers).
ANSWER_DTYPES = (
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "float16",
    "float32",
    "float64",
    "bool",
    "O",
)
_BIG = 2**53
#: Answers that break maps: halves (rounding ties), ±0, the edges of exact float integers,
#: the largest integers of each width, huge and tiny floats, ±inf and NaN.
_ANSWERS: tuple[Any, ...] = (
    0,
    1,
    -1,
    0.5,
    1.5,
    2.5,
    -0.5,
    -0.0,
    0.25,
    _BIG - 1,
    _BIG,
    _BIG + 1,
    _BIG + 2,
    _BIG + 3,
    2**62,
    2**63 - 1,
    -(2**63),
    2**64 - 1,
    1e308,
    -1e308,
    5e-324,
    float("inf"),
    float("-inf"),
    float("nan"),
)
#: Families of answers an array may be made of throughout, besides any mix of them: a map that
#: moves each coordinate a little (rounding ties to even, integers beyond 2⁵³ to the nearest
#: double) moves a vector of such coordinates by a multiple of it.
_FAMILIES: tuple[tuple[Any, ...], ...] = (
    _ANSWERS,
    (0.5, 1.5, 2.5, -0.5, -1.5),
    (_BIG - 1, _BIG, _BIG + 1, _BIG + 2, _BIG + 3),
)


def _fits(value: Any, dtype: np.dtype[Any]) -> bool:
    """Whether ``value`` is stored exactly as itself in ``dtype`` (else it is not drawn there)."""
    if dtype.kind == "b":
        return value in (0, 1) and not (isinstance(value, float) and value != value)
    if dtype.kind in "iu":
        if not isinstance(value, int):
            return False
        info = np.iinfo(dtype)
        return int(info.min) <= value <= int(info.max)
    if dtype.kind == "f":
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")  # an overflow to inf: then it does not fit
            stored = float(np.asarray(value, dtype=np.float64).astype(dtype).item())
        return stored == value or (stored != stored and value != value)
    return True


def _object_spelling(value: Any) -> st.SearchStrategy[Any]:
    """``value`` as one of the Python and numpy types that hold it exactly."""
    options: list[Any] = [value]
    if isinstance(value, int):
        options += [float(value)] if float(value) == value else []
        options += [Fraction(value), Decimal(value)]
        if -(2**63) <= value < 2**63:
            options.append(np.int64(value))
    elif isinstance(value, float):
        options.append(np.float64(value))
        if value == value and abs(value) != float("inf"):
            options += [Fraction(value)]
            if value == int(value):
                options.append(int(value))
    return st.sampled_from(options)


@st.composite
def answer_arrays(
    draw: st.DrawFn, shape: tuple[int, ...], dtypes: Sequence[str] = ANSWER_DTYPES
) -> np.ndarray[Any, Any]:
    """An array of ``shape`` and a dtype from ``dtypes`` holding adversarial answers (each
    value only where the dtype stores it exactly; an object array mixes Python ints, floats,
    fractions, decimals and numpy scalars): any mix of them, or all rounding ties, or all near
    2⁵³ (:data:`_FAMILIES`), half the time one answer throughout. The dtype's kind is drawn first (integers, unsigned
    integers, floats, booleans, objects), then its width: each kind a check accepts is drawn as
    often as any other, so that an object array of Python values — which reach ``coerce``
    holding what no other dtype can — is not one dtype among thirteen."""
    kinds: dict[str, list[str]] = {}
    for name in dtypes:
        kinds.setdefault(np.dtype(name).kind, []).append(name)
    dtype = np.dtype(draw(st.sampled_from(list(kinds.values())).flatmap(st.sampled_from)))
    family = draw(st.sampled_from(_FAMILIES))
    choices = [v for v in family if _fits(v, dtype)] or [v for v in _ANSWERS if _fits(v, dtype)]
    size = int(np.prod(shape, dtype=np.int64))
    if draw(st.booleans()):  # one answer throughout: a map's error on it adds up
        values = [draw(st.sampled_from(choices))] * size
    else:
        values = draw(st.lists(st.sampled_from(choices), min_size=size, max_size=size))
    if dtype.kind == "O":
        values = [draw(_object_spelling(v)) for v in values]
        out = np.empty(size, dtype=object)
        for i, value in enumerate(values):
            out[i] = value
        return out.reshape(shape)
    return np.array(values, dtype=dtype).reshape(shape)


# -- adversarial tables ---------------------------------------------------------------------


def spellings() -> st.SearchStrategy[Any]:
    """One value of an object column, any spelling: ``1``, ``1.0``, ``True``, ``"1"``,
    ``-0.0``, ``2**53 + 1``, NFC or NFD text, bytes, ``None``, NaN, ..."""
    classes, missing = pool("object")
    return st.sampled_from([*classes, *((m,) for m in missing)]).flatmap(st.sampled_from)


def layouts(rows: int, *, max_chunks: int = 8) -> st.SearchStrategy[tuple[int, ...]]:
    """How ``rows`` rows are split into chunks (record batches, row groups, partitions): all in
    one, one row per chunk, or cut anywhere with empty chunks among them (at most
    ``max_chunks`` chunks, beyond one per row)."""
    if rows == 0:
        return st.sampled_from([(), (0,), (0, 0)])

    def cut(points: list[int]) -> tuple[int, ...]:
        edges = [0, *sorted(points), rows]
        return tuple(b - a for a, b in itertools.pairwise(edges))

    anywhere = st.lists(st.integers(0, rows), max_size=max_chunks - 1).map(cut)
    return st.one_of(st.just((rows,)), st.just((1,) * rows), anywhere)


def _cells(classes: Sequence[tuple[Any, ...]], missing: Sequence[Any]) -> st.SearchStrategy[Any]:
    """A cell: one in ten missing, the others a spelling of one of ``classes``."""
    present = st.sampled_from(list(classes)).flatmap(st.sampled_from)
    absent = st.sampled_from(list(missing))
    return st.integers(0, 9).flatmap(lambda r: absent if r == 9 else present)


@st.composite
def logical_tables(
    draw: st.DrawFn,
    *,
    ids: Sequence[str] = STORAGES,
    groups: tuple[int, int] = (0, 2),
    group_storages: Sequence[str] = LABEL_STORAGES,
    values: Sequence[str] | None = STORAGES,
    min_rows: int = 0,
    max_rows: int = 12,
    max_chunks: int = 8,
) -> LogicalTable:
    """Adversarial tables with an id column (:data:`~dpkit.testing.tables.ID`), 0 to 2 group
    columns (:data:`~dpkit.testing.tables.GROUPS`) and a value column
    (:data:`~dpkit.testing.tables.VALUE`; none if ``values`` is None), each of a storage
    drawn from the given ones.

    One *heavy person* — a value of the id column, each of its rows spelling it any way its
    value can be spelled — owns any number of the rows, about half of them in one group of its
    own and the others in whichever groups; the other rows belong to a few other ids or to
    none (a missing id). Ids and group keys come from a few values each, so persons
    and groups repeat; their spellings, missing cells and the values come from the storage's
    adversarial pool (:func:`dpkit.testing.tables.pool`). Rows are shuffled (a person's rows
    spread over chunks) and cut into chunks by :func:`layouts`; ``min_rows`` to ``max_rows``
    rows in all.
    """
    width = draw(st.integers(*groups))
    names = [ID, *GROUPS[:width], *([VALUE] if values is not None else [])]
    storages = {ID: draw(st.sampled_from(list(ids)))}
    for name in GROUPS[:width]:
        storages[name] = draw(st.sampled_from(list(group_storages)))
    if values is not None:
        storages[VALUE] = draw(st.sampled_from(list(values)))
    cells: dict[str, st.SearchStrategy[Any]] = {}
    universe: dict[str, list[tuple[Any, ...]]] = {}
    for name in names:
        classes, missing = pool(storages[name])
        if name == VALUE:
            universe[name] = list(classes)
        else:
            few = 4 if name == ID else 2
            universe[name] = draw(
                st.lists(st.sampled_from(classes), min_size=1, max_size=few, unique=True)
            )
        cells[name] = _cells(universe[name], missing)
    heavy = draw(st.sampled_from(universe[ID]))
    home = {name: draw(cells[name]) for name in GROUPS[:width]}  # the heavy person's group
    size = draw(st.integers(min_rows, max_rows))
    own = draw(st.integers(0, size))
    rows: list[dict[str, Any]] = []
    for i in range(size):
        row = {name: draw(cells[name]) for name in names}
        if i < own:
            row[ID] = draw(st.sampled_from(heavy))
            if draw(st.booleans()):  # at home: many rows in one group, beyond max_rows
                row.update(home)
        rows.append(row)
    order = draw(st.permutations(range(size)))
    columns = tuple(
        (name, Column(storages[name], tuple(rows[i][name] for i in order))) for name in names
    )
    return LogicalTable(columns, draw(layouts(size, max_chunks=max_chunks)))


def _named(table: LogicalTable, name: str) -> list[tuple[Any, ...]]:
    """The spellings of each value a key may name in column ``name`` (those with at least one
    key that names them): the column's values and one of its storage's (absent, perhaps)."""
    column = table.column(name)
    classes, _ = pool(column.storage)
    named: dict[Any, Any] = {}
    for value in (*table.distinct(name), classes[-1][0]):
        group = identity(value, column.storage)
        if group is not None:
            named.setdefault(group, value)
    found = [key_spellings(v, column.storage) for v in named.values()]
    return [spellings for spellings in found if spellings]


@st.composite
def _spelled(draw: st.DrawFn, spellings: Sequence[tuple[Any, ...]], twice: bool) -> list[Any]:
    """Keys for some of the values, each in one of its spellings; if ``twice``, one value with
    several spellings is named in two or more of them (a list the public phase refuses)."""
    keys: list[Any] = []
    for chosen in spellings:
        if draw(st.integers(0, 3)):  # three in four values are named
            keys.append(draw(st.sampled_from(list(chosen))))
    several = [chosen for chosen in spellings if len({_python_key(k) for k in chosen}) > 1]
    if twice and several:
        chosen = draw(st.sampled_from(several))
        taken = {_python_key(k) for k in chosen}
        keys = [k for k in keys if _python_key(k) not in taken]
        keys += draw(st.lists(st.sampled_from(list(chosen)), min_size=2, unique_by=_python_key))
    return keys or [draw(st.sampled_from(list(spellings)))[0]]


@st.composite
def public_keys(
    draw: st.DrawFn, table: LogicalTable, by: Sequence[str], *, max_keys: int = 8
) -> list[Any]:
    """A list of distinct public keys (Python values; a tuple per key for several group
    columns) for the group columns ``by`` of ``table``: some of each column's values and the
    last value of its storage's pool (absent from the table, perhaps), each in one of the
    spellings that name it (:func:`dpkit.testing.tables.key_spellings`: the value itself, or a
    number for its text, ...); in one list of four, one column names a value in several of its
    spellings — keys that differ as Python values but are one group once coerced to the
    column's type, which the public phase must refuse
    (:func:`dpkit.testing.tables.refused_keys`). With several columns, every combination of
    the columns' keys, the first ``max_keys`` of them."""
    twice = draw(st.integers(0, 3)) == 0
    column = draw(st.integers(0, max(len(by) - 1, 0)))
    per_column = [
        draw(_spelled(_named(table, name), twice and i == column)) for i, name in enumerate(by)
    ]
    # PublicKeys refuses keys equal as Python values (1 and 1.0, say): one of each
    distinct = {tuple(map(_python_key, key)): key for key in itertools.product(*per_column)}
    keys = list(distinct.values())[:max_keys]
    return [k[0] for k in keys] if len(by) == 1 else keys


def _python_key(value: Any) -> Any:
    """``value``'s class under Python's equality (``1``, ``1.0``, ``True``, ``Decimal(1)`` are
    one) as a hashable that never raises (``Decimal(1) == np.int64(1)`` does): a real number
    by its exact value, anything else by its type and itself."""
    if isinstance(value, (bool, np.bool_, int, np.integer)):
        return "number", Fraction(int(value))
    if isinstance(value, (float, np.floating, Decimal, Fraction)):
        exact = value if isinstance(value, (Decimal, Fraction)) else float(value)
        try:
            return "number", Fraction(exact)
        except (ValueError, OverflowError):  # ±inf, NaN
            return "number", repr(float(exact))
    return type(value).__name__, value
