"""An independent red-team review of this session's new surface: private group keys, the
columnar CSV reader's id column, and neighbours of them.

Each test plays an attack through the public API or the CLI and measures what leaks between
neighbouring datasets (one record or one person added), the DP release itself aside. A leak
that DP accounts for is bounded by the declared sensitivity or by δ; the ones these tests
measure were deterministic (probability 1) and are fixed, the tests then hold the line.
"""

from __future__ import annotations

import json
import math
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import polars as pl
import pyarrow as pa
import pytest
from dpkit_central import Count, Histogram, PrivateKeys

import dpkit

pytestmark = pytest.mark.integration


def _table(kind: str, column: list[Any]) -> Any:
    if kind == "pandas":
        return pd.DataFrame({"k": column})
    if kind == "polars":
        return pl.DataFrame({"k": column})
    return pa.table({"k": column})


def _private_keys(table: Any) -> list[tuple[Any, ...]]:
    """The keys a private-keys count releases (fast mode, a fixed seed: the selection's coins
    are the same for both neighbours; every key below has 300 rows, kept with probability 1)."""
    query = Count(epsilon=1.0).on(by="k", keys=PrivateKeys(epsilon=1.0, delta=1e-6))
    session = dpkit.Session(budget=(10.0, 1e-3), ledger=":memory:")
    released = session.release(query, table, rng=np.random.default_rng(0)).values
    return list(released.keys)


# -- private keys: what one record's cell does to the released key set ------------------------


@pytest.mark.parametrize("kind", ["pandas", "polars", "pyarrow"])
def test_the_sign_of_one_zero_key_is_not_released(kind: str) -> None:
    """Attack: a float key column; the group 0.0 is large (kept with probability 1). One
    person's row holds the key −0.0, which equals 0.0 and falls into the same group. The group
    was released under the spelling of its first row, so the released key said whether that
    person (placed first) is in the data: −0.0 with them, 0.0 without — with probability 1, not
    δ. Now a group's key is one spelling per group (0.0), whatever rows it holds."""
    others = [0.0] * 300 + [1.0] * 300
    without = _private_keys(_table(kind, others))
    with_person = _private_keys(_table(kind, [-0.0, *others]))
    assert [repr(k) for k in with_person] == [repr(k) for k in without]


@pytest.mark.parametrize("first", [True, 1.0, np.int64(1), np.float32(1.0)])
def test_the_type_of_one_object_key_is_not_released(first: Any) -> None:
    """Attack: a pandas object column where 1, 1.0 and True compare equal. When they were one
    group, it was released under its first row's value, so ``True`` or ``1.0`` in the output
    named that one row's type. Now an object column's keys are their text (as on Dask): the
    person's ``True`` or ``1.0`` is a group of its own, held by one id, which partition selection
    releases with probability ≤ δ = 1e-6 (the test's false-positive rate); ``np.int64(1)`` is
    the text ``"1"`` of the large group."""
    others = [1] * 300 + ["x"] * 300
    without = _private_keys(pd.DataFrame({"k": pd.Series(others, dtype=object)}))
    with_person = _private_keys(pd.DataFrame({"k": pd.Series([first, *others], dtype=object)}))
    assert [repr(k) for k in with_person] == [repr(k) for k in without]
    assert [type(k[0]) for k in with_person] == [type(k[0]) for k in without]


def test_the_order_of_released_keys_does_not_depend_on_dropped_keys() -> None:
    """Attack: an object column of text keys, two large groups ``a`` and ``b'``; one person's
    row holds the number 7 — a key held by one id, dropped by partition selection except with
    probability δ. Text and numbers do not compare, so the keys were sorted by another order
    (by their ``repr``, where ``"b'"`` comes before ``'a'``) as soon as the number was among
    the keys *found*: the order of the two released keys said whether the person is in the
    data. Now the keys are sorted by one fixed total order, so the relative order of two keys
    never depends on the others."""
    others = ["a"] * 300 + ["b'"] * 300
    without = _private_keys(pd.DataFrame({"k": pd.Series(others, dtype=object)}))
    person = pd.DataFrame({"k": pd.Series([*others, 7], dtype=object)})
    with_person = [k for k in _private_keys(person) if k != (7,)]
    assert with_person == without == [("a",), ("b'",)]


def test_released_keys_of_an_object_column_are_its_text_in_order() -> None:
    """An object column's keys are read as text (as pandas' string dtype and Dask read them),
    so numbers and text in one column come out as text, in one fixed order whichever others
    were found."""
    column = pd.Series([2.5] * 300 + ["b"] * 300 + [1] * 300 + ["a"] * 300, dtype=object)
    assert _private_keys(pd.DataFrame({"k": column})) == [("1",), ("2.5",), ("a",), ("b",)]


# -- the CSV reader's id column -----------------------------------------------------------------


def _id_world(rt: Any, world: Path, extra: list[str]) -> Any:
    """Ten people, each written once as ``k`` and once as ``00k`` (one id: ``7`` and ``007``
    are documented as one id), five rows each spelling; ``max_rows`` = 5. A count at ε = 1000
    (geometric noise of scale 0.005: |noise| ≥ 1 with probability 2e^(−200), never)."""
    rows = [f"{k},1\n" for k in range(1, 11) for _ in range(5)]
    rows += [f"00{k},1\n" for k in range(1, 11) for _ in range(5)]
    world.mkdir()
    (world / "data.csv").write_text("user,v\n" + "".join(rows + extra), encoding="utf-8")
    rt.write_json(
        world / "spec.json",
        rt.query_spec(
            "count",
            "v",
            epsilon=1000.0,
            session_epsilon=1e6,
            privacy_unit={"kind": "id", "column": "user", "max_rows": 5},
        ),
    )
    result = rt.fork_cli("run", "--json", "spec.json", "--ledger", "l.sqlite", cwd=world)
    assert result.returncode == 0, result.explain()
    return result.json()["results"][0]["estimate"]


@pytest.mark.parametrize("cell", ["x", "+7", "99999999999999999999", "0x7", " 7"])
def test_one_id_cell_does_not_change_how_other_ids_are_read(
    rt: Any, tmp_path: Path, cell: str
) -> None:
    """Attack: whether the id column was read as integers (``7`` = ``007``) or by its bytes
    depended on *every* cell: one person whose id is not a plain integer switched the whole
    column to bytes, splitting every other person in two and doubling their rows past the
    bound. Adding that one-row person moved the count from 50 to 101, where one id may move
    it by at most ``max_rows`` = 5. Now each cell is read on its own."""
    without = _id_world(rt, tmp_path / "without", [])
    with_person = _id_world(rt, tmp_path / "with", [f"{cell},1\n"])
    assert abs(with_person - without) <= 5, (without, with_person)
    json.dumps([without, with_person])


# -- refunds: Ledger.abort on a session's spend ---------------------------------------------------


def test_a_spend_cannot_be_aborted_while_its_data_are_read(tmp_path: Path) -> None:
    """Attack: ``Ledger.abort`` gives back a spend whose result is not stored yet (meant for a
    reservation whose data were never read). A session's release stores its result only after
    the run, so a second handle on the ledger (another thread or process; here the analyst's
    own loader) could abort the spend *while the data are read* — the release still came out,
    and record_result's refusal was swallowed. Five releases at ε = 1 came out of a budget of
    ε = 1. Now a session's spend is final from its commit: abort refuses it."""
    from dpkit.ledger import Ledger

    path = str(tmp_path / "l.sqlite")
    session = dpkit.Session(budget=(1.0, 0.0), ledger=path)
    other = Ledger(path)
    refunds = []

    def load() -> Any:
        try:
            other.abort(other.entries()[-1].release_id)
            refunds.append(True)
        except dpkit.DPKitError:
            refunds.append(False)
        return np.array([1.0, 2.0, 3.0])

    laplace = dpkit.mechanism("laplace", epsilon=1.0, sensitivity=1.0)
    released = 0
    for _ in range(5):
        try:
            session.release(laplace, dpkit.Deferred(load), rng=np.random.default_rng(0))
            released += 1
        except dpkit.BudgetExceeded:
            break
    assert refunds == [False] and released == 1
    assert Fraction(session.spent.epsilon) == 1
    other.close()


def test_a_failed_release_cannot_be_aborted(tmp_path: Path) -> None:
    """Attack: a release whose target raises keeps its spend (``ReleaseFailed``), so that
    whether it raises — which may depend on the data — is not free. Its result was never
    stored, so ``session.ledger.abort(release_id)`` gave the spend back, and the failure oracle
    could be asked again and again for free. Now the spend stands."""

    class Fails:
        name = "fails"
        privacy = dpkit.PureDP(epsilon=0.5)

        def run(self, data: Any, /, *, rng: Any) -> Any:
            raise ValueError("a data-dependent failure")

    session = dpkit.Session(budget=(1.0, 0.0), ledger=str(tmp_path / "l.sqlite"))
    with pytest.raises(dpkit.ReleaseFailed) as failed:
        session.release(Fails(), [1, 2, 3], rng=np.random.default_rng(0))
    release_id = failed.value.release_id
    with pytest.raises(dpkit.DPKitError):
        session.ledger.abort(release_id)
    assert Fraction(session.spent.epsilon) == Fraction(1, 2)


# -- Parquet columns of types no query can read ----------------------------------------------------

_NESTED = {
    "list": pa.array([[1, 2], None, []], pa.list_(pa.int64())),
    "struct": pa.array([{"a": 1}, None, {"a": 2}], pa.struct([("a", pa.int64())])),
    "map": pa.array([[("k", 1)], None, []], pa.map_(pa.string(), pa.int64())),
}


@pytest.mark.parametrize("kind", sorted(_NESTED))
@pytest.mark.parametrize("role", ["value", "group", "id"])
def test_parquet_columns_of_nested_types_are_refused_before_the_spend(
    rt: Any, tmp_path: Path, kind: str, role: str
) -> None:
    """Attack: name a Parquet column of a nested type (a list, a struct, a map) as the value,
    a group or the id column. Its type is in the footer (public), but the query failed only
    after the spend (exit 1, ``ReleaseFailed``): budget burnt by a failure that the public phase
    could decide. Now it is a public-phase refusal (exit 2, ``column_type``), nothing spent."""
    import pyarrow.parquet as pq

    pq.write_table(
        pa.table({"odd": _NESTED[kind], "user": ["a", "b", "c"], "v": [1.0, 2.0, 3.0]}),
        tmp_path / "data.parquet",
    )
    column = {"value": "odd", "group": "v", "id": "v"}[role]
    spec = rt.query_spec("count", column, path="data.parquet")
    spec["input"]["source"] = "parquet"
    if role == "group":
        spec["group_by"] = {
            "columns": ["odd"],
            "keys": "private",
            "selection": {"epsilon": 1.0, "delta": 1e-6},
        }
        spec["session_budget"]["delta"] = 0.01
    if role == "id":
        spec["privacy_unit"] = {"kind": "id", "column": "odd", "max_rows": 2}
    rt.write_json(tmp_path / "spec.json", spec)
    result = rt.fork_cli("run", "--json", "spec.json", "--ledger", "l.sqlite", cwd=tmp_path)
    document = rt.assert_clean_refusal(result)
    assert [e["code"] for e in document["errors"]] == ["column_type"], result.explain()
    assert rt.ledger_spent(tmp_path / "l.sqlite") == 0


# -- DataFrames whose column types an engine cannot process ----------------------------------------


def test_a_decimal_key_column_never_fails_on_one_value() -> None:
    """Attack: public number keys on a PyArrow decimal column. Matching them cast the column
    to the keys' integer type, which fails if *any* value has a fraction: the release raised
    (``ReleaseFailed``, spend kept) exactly when one person's value was 1.5 — an exception
    oracle on the data. Now decimal keys are read as float64, record by record."""
    import decimal

    query = Count(epsilon=1.0).on(by="k", keys=[1, 2])
    outcomes = []
    for last in ("1.0", "1.5"):
        cells = [decimal.Decimal("1.0")] * 50 + [decimal.Decimal(last)]
        table = pa.table({"k": pa.array(cells, pa.decimal128(5, 1))})
        session = dpkit.Session(budget=(10.0, 0.0), ledger=":memory:")
        released = session.release(query, table, rng=np.random.default_rng(0)).values
        outcomes.append(released.keys)
    assert outcomes[0] == outcomes[1] == ((1,), (2,))


def _odd_typed(kind: str, values: list[Any]) -> Any:
    """A table with one column ``k`` of an odd type, filled from ``values``."""
    if kind == "polars_float32":
        return pl.DataFrame({"k": pl.Series(values, dtype=pl.Float32)})
    if kind == "polars_int128":
        return pl.DataFrame({"k": pl.Series([int(v) for v in values], dtype=pl.Int128)})
    if kind == "polars_enum":
        return pl.DataFrame(
            {"k": pl.Series(["a" if v else "b" for v in values], dtype=pl.Enum(["a", "b"]))}
        )
    if kind == "pandas_float16":
        return pd.DataFrame({"k": np.array(values, dtype=np.float16)})
    return pa.table({"k": pa.array(np.array(values, dtype=np.float16))})  # pyarrow_float16


_ODD_QUERIES = {
    "number_keys": Count(epsilon=1.0).on(by="k", keys=[1, 2]),
    "private_keys": Count(epsilon=1.0).on(by="k", keys=PrivateKeys(epsilon=1.0, delta=1e-6)),
    "histogram": Histogram(categories=("a", "1"), epsilon=1.0).on("k"),
    "id_unit": Count(epsilon=1.0).on(unit=dpkit.IdUnit("k", max_rows=2)),
}


@pytest.mark.parametrize(
    "kind", ["polars_float32", "polars_int128", "polars_enum", "pandas_float16", "pyarrow_float16"]
)
@pytest.mark.parametrize("query", sorted(_ODD_QUERIES))
def test_column_types_an_engine_cannot_process_never_fail_after_the_spend(
    kind: str, query: str
) -> None:
    """Attack: column types the schema check admits but an engine cannot process for this
    query — Float32 keys against integer keys (Polars is_in), a float16 group-by (pandas), an
    Int128 id (no numpy type), an Enum histogram with a category outside the Enum, float16
    comparisons (PyArrow). Each raised after the spend (``ReleaseFailed``). Now the query is
    run on no rows of the table in the public phase, so a type it cannot process is refused
    from the schema alone (a typed error, nothing spent), or the release succeeds — the same
    outcome for neighbouring tables."""
    target = _ODD_QUERIES[query]
    outcomes = []
    for values in ([1.0, 2.0, 1.0] * 20, [1.0, 2.0, 1.0] * 20 + [2.0]):
        session = dpkit.Session(budget=(10.0, 1e-3), ledger=":memory:")
        try:
            session.release(target, _odd_typed(kind, values), rng=np.random.default_rng(0))
            outcomes.append("released")
        except dpkit.ReleaseFailed:
            outcomes.append("failed after the spend")
        except dpkit.DPKitError as error:
            assert session.spent.epsilon == 0
            outcomes.append(type(error).__name__ + str(error))
    assert "failed after the spend" not in outcomes and outcomes[0] == outcomes[1], outcomes


# -- calibration ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("epsilon", "count"), [(1.0, 2), (1.0, 10), (8.0, 2), (8.0, 10)])
def test_a_calibrated_gaussian_never_reports_more_than_its_target(
    epsilon: float, count: int
) -> None:
    """Attack on the contract "``epsilon`` is never above ``target_epsilon``": the exact
    Gaussian path solved σ = √k/μ and reported the accountant's ε for it, which is rounded
    up and came out 1e-12 above the target at δ = 1e-8 (so a session with exactly that
    budget could refuse the calibrated plan). Now σ is nudged up until the reported ε fits."""
    found = dpkit.calibrate("gaussian", epsilon=epsilon, delta=1e-8, count=count)
    assert found.epsilon <= epsilon
    again = dpkit.account(
        [(dpkit.GaussianDP(noise_multiplier=found.value, delta=1e-8), count)], delta=1e-8
    )
    assert again.epsilon <= epsilon


# -- CSV framing --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "unclosed",
    [
        '"unclosed note,1\n',  # the merged record is one field wide: PyArrow refuses the file
        'note,"unclosed\n',  # two fields wide, the quote open to the end: PyArrow accepts it
    ],
)
def test_one_record_with_an_unclosed_quote_does_not_remove_the_others(
    rt: Any, tmp_path: Path, unclosed: str
) -> None:
    """Attack: one person's record starts a quoted field and never closes it. Everything
    after it was read as the inside of that field; the merged record had the wrong width and
    was dropped, so a count at ε = 1000 moved by the number of records after that person (50),
    where one record may move it by 1. Records are now framed by lines: a quote cannot span a
    line end, and the open line is one record (here of the wrong width, dropped) alone."""
    counts = []
    for extra in ([], [unclosed]):
        world = tmp_path / str(len(extra))
        world.mkdir()
        rows = [f"r{i},1\n" for i in range(10)] + extra + [f"s{i},1\n" for i in range(50)]
        (world / "data.csv").write_text("note,v\n" + "".join(rows), encoding="utf-8")
        spec = rt.query_spec("count", "v", epsilon=1000.0, session_epsilon=1e6)
        rt.write_json(world / "spec.json", spec)
        result = rt.fork_cli("run", "--json", "spec.json", "--ledger", "l.sqlite", cwd=world)
        assert result.returncode == 0, result.explain()
        counts.append(result.json()["results"][0]["estimate"])
    assert abs(counts[1] - counts[0]) <= 3, counts


# -- ledger locations ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "mysql://u@host/db?password=hunter2",  # a password in the query: was echoed
        "mysql://u:hunter2@[bad/x",  # an unparsable URL: was a traceback
        "redis://:hunter2@host:notaport/0",
    ],
)
@pytest.mark.parametrize("command", ["run", "budget"])
def test_a_ledger_url_of_another_store_is_refused_without_its_password(
    rt: Any, tmp_path: Path, url: str, command: str
) -> None:
    """Attack: a ledger URL of a store dpkit does not have. The refusal quoted the URL with
    only a ``user:password@`` password removed — a ``?password=`` stayed in the message — and
    a URL that does not parse raised a ValueError (a traceback, exit 1). Now the refusal
    quotes the scheme only, exit 2."""
    rt.write_json(tmp_path / "spec.json", rt.query_spec("count", "v"))
    (tmp_path / "data.csv").write_text("v\n1\n", encoding="utf-8")
    args = ["run", "--json", "spec.json"] if command == "run" else ["budget", "show"]
    result = rt.fork_cli(*args, "--ledger", url, cwd=tmp_path)
    rt.assert_no_traceback(result)
    assert result.returncode == 2, result.explain()
    assert "hunter2" not in result.stdout + result.stderr, result.explain()


# -- extreme noise scales -----------------------------------------------------------------------------


@pytest.mark.parametrize(("epsilon", "sensitivity"), [(2000.0, 1.0), (1e12, 1.0), (1e6, 1e-6)])
def test_geometric_with_a_tiny_scale_releases_in_secure_mode(
    epsilon: float, sensitivity: float
) -> None:
    """Attack: a geometric release whose scale Δ/ε has a float value with a denominator above
    2⁶² (ε/Δ ≳ 1000). The exact sampler refused it — after the spend (``ReleaseFailed``), for
    a reason the parameters decide. Now the scale is rounded up to a rational the sampler takes
    (the realised ε can only fall)."""
    mechanism = dpkit.mechanism("geometric", epsilon=epsilon, sensitivity=sensitivity)
    assert mechanism.secure_scale >= Fraction(sensitivity) / Fraction(epsilon)
    session = dpkit.Session(budget=(1e13, 0.0), ledger=":memory:")
    released = session.release(mechanism, np.array([3, 5]))
    assert np.asarray(released.values).dtype == np.int64


@pytest.mark.parametrize(
    ("epsilon", "sensitivity"), [(1e-12, 1e6), (1e-9, 1e9), (1e-12, 1e12), (1e-12, 1e100)]
)
def test_geometric_with_a_huge_scale_is_refused_before_the_spend(
    epsilon: float, sensitivity: float
) -> None:
    """Attack: a geometric release with an enormous scale Δ/ε. Secure mode overflowed int64
    after the spend (``ReleaseFailed`` with probability about 1e-4 per draw at Δ/ε = 1e18, and
    always beyond 2⁶²); fast mode's numpy draws saturated, G₁ − G₂ = 0, and the *exact* answer
    came out: the release 5 for the answer 5, eight times out of eight. Now Δ/ε > 2⁵² is an
    InvalidParameter at construction, so nothing is spent."""
    if sensitivity / epsilon > 2.0**64:  # fast mode's failure that the refusal prevents
        rng = np.random.default_rng(3)
        p = -math.expm1(-epsilon / sensitivity)
        assert not np.any(rng.geometric(p, size=8) - rng.geometric(p, size=8))
    with pytest.raises(dpkit.InvalidParameter, match="sensitivity"):
        dpkit.mechanism("geometric", epsilon=epsilon, sensitivity=sensitivity)


def test_a_table_query_whose_noise_cannot_be_drawn_is_refused_at_construction() -> None:
    """The same limit reached through contribution bounds: a count at ε = 1e-10 with
    R = 10⁶ rows per id has noise scale 10¹⁶. Its noise mechanism was built only in the
    private phase (``ReleaseFailed`` after the spend); now it is built with the query."""
    with pytest.raises(dpkit.InvalidParameter, match="sensitivity"):
        Count(epsilon=1e-10, noise="geometric").on(
            by="c", keys=["a"], unit=dpkit.IdUnit("u", max_rows=10**6, max_groups=1)
        )


@pytest.mark.parametrize(
    ("sampler", "parameter"),
    [
        ("discrete_laplace", Fraction(1, 2**62)),  # was a MemoryError
        ("discrete_laplace", 2**62),  # was an OverflowError (a "probability below e^(-2^40)")
        ("discrete_gaussian", 1e-300),  # was an OverflowError
        ("discrete_gaussian", Fraction(2**124, 3)),  # was an OverflowError
    ],
)
def test_samplers_refuse_parameters_they_cannot_draw_with_a_typed_error(
    sampler: str, parameter: Any
) -> None:
    """Attack: the public samplers at the ends of their documented ranges. Each raised an
    untyped error (memory, overflow) after starting to draw; now each parameter outside the
    range the sampler can draw exactly is an InvalidParameter before any word is read."""
    with pytest.raises(dpkit.InvalidParameter):
        getattr(dpkit, sampler)(parameter, size=1000, rng=dpkit.SecureRandom())


def test_a_numpy_integer_scale_is_a_scale() -> None:
    """``np.int64(3)`` is a rational scale; it raised a TypeError inside Fraction arithmetic."""
    z = dpkit.discrete_laplace(np.int64(3), size=10, rng=np.random.default_rng(0))
    assert z.shape == (10,)


# -- the progress indicator -----------------------------------------------------------------------------


class _LoggedCounter(list[int]):
    """The reader's byte counter, logging every value it takes."""

    def __init__(self) -> None:
        super().__init__([0])
        self.values: list[int] = []

    def __setitem__(self, index: Any, value: Any) -> None:
        self.values.append(value)
        super().__setitem__(index, value)


@pytest.mark.parametrize("malformed", [False, True])
def test_reading_progress_only_grows_whatever_the_records(tmp_path: Path, malformed: bool) -> None:
    """Attack: ``dpkit run --progress`` shows the share of the file read. A file with one
    malformed record (a row of the wrong width) is read a second time, then by the Python
    path; the byte counter was reset to 0 before each attempt, so the percentage shown went
    *down* — a sign on stderr, beyond the read's duration, that some record is malformed. Now
    the counter only grows (the duration itself stays an open timing channel: docs/security)."""
    from dpkit.spec import columnar

    rows = [f"r{i},{i}\n" for i in range(2000)] + (["a,b,c\n"] if malformed else [])
    path = tmp_path / "data.csv"
    path.write_text("note,v\n" + "".join(rows), encoding="utf-8")
    counter = _LoggedCounter()
    with path.open("rb") as handle:
        columnar._read_csv(handle, counter, ["v"], path.stat().st_size, ("note", "v"))
    assert counter.values == sorted(counter.values) and counter.values[-1] > 0


# -- the table printed by dpkit run ---------------------------------------------------------------------


def test_released_keys_cannot_drive_the_terminal(rt: Any, tmp_path: Path) -> None:
    """Attack (by data subjects, on the analyst): 300 people give the city
    ``ESC[31mFAKE ESC[0m`` followed by backspaces. The key is common enough to be released, and
    ``dpkit run`` printed it raw: the terminal ran the escape sequences (colours, cursor
    moves, a right-to-left override), which can redraw the table the analyst reads. Now keys
    and categories are printed with their control characters escaped; ``--json`` escapes them
    anyway."""
    fake = "\x1b[31mFAKE\x1b[0m\x08\x08\u202e"
    rows = [f"u{i},{fake},1\n" for i in range(300)] + [f"v{i},Lyon,1\n" for i in range(300)]
    (tmp_path / "data.csv").write_text("user,city,v\n" + "".join(rows), encoding="utf-8")
    spec = rt.query_spec("count", "v", epsilon=1.0, session_epsilon=100.0)
    spec["session_budget"]["delta"] = 0.01
    spec["group_by"] = {
        "columns": ["city"],
        "keys": "private",
        "selection": {"epsilon": 1.0, "delta": 1e-6},
    }
    rt.write_json(tmp_path / "spec.json", spec)
    result = rt.fork_cli("run", "spec.json", "--ledger", "l.sqlite", cwd=tmp_path)
    assert result.returncode == 0, result.explain()
    assert "FAKE" in result.stdout and "Lyon" in result.stdout
    assert not any(c in result.stdout for c in "\x1b\x08\u202e"), repr(result.stdout)


def test_a_large_unsigned_id_is_an_id(rt: Any, tmp_path: Path) -> None:
    """Attack: a Parquet id column of type uint64. Its ids were cast to int64, which fails
    if *any* id is at least 2⁶³: the release then failed after the spend (exit 1), and
    released normally otherwise — an exit-code oracle on one person's id. Now a uint64 column
    is coded by distinct value, whatever the values."""
    import pyarrow.parquet as pq

    outcomes = []
    for big in (2**62, 2**63):
        world = tmp_path / str(big)
        world.mkdir()
        table = pa.table({"user": pa.array([1, 2, big], pa.uint64()), "v": [1.0, 2.0, 3.0]})
        pq.write_table(table, world / "data.parquet")
        spec = rt.query_spec("count", "v", path="data.parquet")
        spec["input"]["source"] = "parquet"
        spec["privacy_unit"] = {"kind": "id", "column": "user", "max_rows": 1}
        rt.write_json(world / "spec.json", spec)
        result = rt.fork_cli("run", "--json", "spec.json", "--ledger", "l.sqlite", cwd=world)
        outcomes.append(result.observable())
    assert outcomes[0] == outcomes[1], outcomes
    assert outcomes[0][0] == 0


# -- defences that hold: the CSV reader's two paths ------------------------------------------------------

_ODD_RECORDS = {
    "quote_then_text": b'"ab"cd,1\n',
    "inner_quote": b'ab"cd,1\n',
    "cr_only": b"x,1\ry,2\r",
    "crlf_in_quotes": b'"x\r\ny",1\n',
    "lone_cr_in_quotes": b'"a\rb",1\n',
    "nul": b"x\x00y,1\n",
    "bom_in_body": b"\xef\xbb\xbfq,1\n",
    "quote_space": b'"ab" ,1\n',
    "space_quote": b' "ab",1\n',
    "empty_quoted": b'"",1\n',
    "controls": b"x\x0b,1\n\x0cy,2\n",
    "unicode_separators": "x\u2028y,1\nz\x85w,2\n".encode(),
    "cr_cr_lf": b"x,1\r\r\ny,2\n",
    "invalid_utf8": b"\xff\xfe,1\n",
}


@pytest.mark.parametrize("name", sorted(_ODD_RECORDS))
def test_which_csv_path_runs_does_not_change_other_records(tmp_path: Path, name: str) -> None:
    """Attack (defence holds): one malformed record (a row of the wrong width) sends the whole
    file from PyArrow's reader to Python's csv module. If the two read any *other* record
    differently, that record's cells would depend on whether someone else's row is malformed.
    Every odd record here is read the same by both paths (the malformed row aside)."""
    import os

    from dpkit.spec.columnar import FileTable

    def cells(body: bytes, where: Path) -> list[tuple[Any, Any]]:
        where.mkdir()
        path = where / "data.csv"
        path.write_bytes(body)
        info = os.stat(path)
        table = FileTable(path, (info.st_dev, info.st_ino), 1 << 30, header=("a", "b"))
        table.expect("a", "text")
        table.expect("b", "text")
        a, b = table.converted("a", "text"), table.converted("b", "text")
        return list(zip(a.to_pylist(), b.to_pylist(), strict=True))

    body = b"a,b\n" + _ODD_RECORDS[name] + b"k,9\n"
    arrow = cells(body, tmp_path / "arrow")
    python = cells(body + b"one,too,many\n", tmp_path / "python")
    assert arrow == python and arrow[-1] == ("k", "9")
