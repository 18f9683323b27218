"""Red-team tests of the Python API's privacy boundary (``dpkit.Session.release``).

Public phase (before the spend): structure only — a 2-D array for a 1-D query, a text array
for a sum — is refused with :class:`dpkit.InvalidData`, and a cost that does not
fit with :class:`dpkit.BudgetExceeded`; in both cases nothing is spent and no randomness is
drawn. Private phase (after the spend is committed): nothing observable depends on the data
except the released value — out-of-category labels, NaNs and huge answers release normally,
and a third-party target that raises becomes :class:`dpkit.errors.ReleaseFailed` whose
message carries nothing of the target's, with the spend kept (never refunded).

Budget arithmetic is exact (Fractions), read through ``dpkit.ledger.Ledger(path).spent()``.
"""

from __future__ import annotations

import json
import math
import warnings
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import dpkit
from dpkit.ledger import Ledger

CANARY = "carol_has_hiv"
SECRET = "SECRET_CANARY 7355608"


def _central() -> Any:
    import dpkit_central

    return dpkit_central


@pytest.fixture()
def ledger_path(tmp_path: Path) -> str:
    return str(tmp_path / "ledger.sqlite")


@pytest.fixture()
def session(ledger_path: str) -> Any:
    with dpkit.Session(budget=(10.0, 1e-6), ledger=ledger_path, dataset="redteam") as s:
        yield s


def _spent(path: str) -> Fraction:
    """ε spent, read through a fresh ledger handle (not the session's cached view)."""
    handle = Ledger(path)
    try:
        return Fraction(handle.spent().epsilon)
    finally:
        handle.close()


def _entry_count(path: str) -> int:
    handle = Ledger(path)
    try:
        return len(handle.entries())
    finally:
        handle.close()


def _state(rng: np.random.Generator) -> str:
    return json.dumps(rng.bit_generator.state, sort_keys=True, default=str)


def _public(entry: Any) -> dict[str, Any]:
    """What the ledger records about a release, minus its per-release identifiers."""
    record = dict(entry.as_dict())
    for key in ("release_id", "time", "seq", "session_id", "result"):
        record.pop(key, None)
    return record


# -- public phase: structural refusals and the budget, before any spend ----------------------------

STRUCTURAL = [
    ("sum_2d", lambda c: c.Sum(lower=0, upper=10, epsilon=0.5), np.ones((3, 2))),
    ("sum_text", lambda c: c.Sum(lower=0, upper=10, epsilon=0.5), np.array(["1", "2", "x"])),
    ("mean_text", lambda c: c.Mean(lower=0, upper=10, epsilon=0.5), np.array(["a", "b"])),
    (
        "quantile_text",
        lambda c: c.Quantile(q=0.5, lower=0, upper=10, epsilon=0.5),
        np.array(["a", "b"]),
    ),
    ("quantile_2d", lambda c: c.Quantile(q=0.5, lower=0, upper=10, epsilon=0.5), np.ones((2, 2))),
    ("count_2d", lambda c: c.Count(epsilon=0.5), np.ones((4, 2))),
    (
        "histogram_2d",
        lambda c: c.Histogram(categories=("a", "b"), epsilon=0.5),
        np.array([["a"], ["b"]]),
    ),
]


@pytest.mark.parametrize(("name", "make", "data"), STRUCTURAL, ids=[s[0] for s in STRUCTURAL])
def test_structural_problems_refused_before_spend(
    session: Any, ledger_path: str, name: str, make: Any, data: Any
) -> None:
    """A structurally unusable input (shape, dtype kind — never the values) is refused with
    InvalidData before the spend, K = 3 times: spent stays exactly 0, no ledger entry is
    written, and the caller's random generator is untouched (no randomness drawn)."""
    query = make(_central())
    rng = np.random.default_rng(1)
    before = _state(rng)
    for _ in range(3):
        with pytest.raises(dpkit.InvalidData):
            session.release(query, data, rng=rng)
    assert _spent(ledger_path) == 0
    assert _entry_count(ledger_path) == 0
    assert _state(rng) == before


@pytest.mark.parametrize("data", [[[1, 2], [3]], [[1.0], [2.0, 3.0]], [1, [2, 3]]])
def test_ragged_python_lists_are_records(session: Any, ledger_path: str, data: Any) -> None:
    """Whether a record of a Python list is itself a list is a value, not structure: a ragged
    list is a 1-D array of records (the list-valued ones missing), released and charged like
    any neighbour — refusing it would answer "is some record a list?" for free."""
    session.release(_central().Mean(lower=0, upper=10, epsilon=0.5), data)
    assert _spent(ledger_path) == Fraction(1, 2)


def test_budget_exceeded_before_any_randomness(session: Any, ledger_path: str) -> None:
    """A cost that does not fit is refused (BudgetExceeded, K = 3 times) before the spend and
    before any randomness: spent unchanged (exactly), generator state unchanged."""
    query = _central().Sum(lower=0, upper=10, epsilon=20.0)
    rng = np.random.default_rng(2)
    before = _state(rng)
    for _ in range(3):
        with pytest.raises(dpkit.BudgetExceeded):
            session.release(query, np.array([1.0, 2.0]), rng=rng)
    assert _spent(ledger_path) == 0 and _entry_count(ledger_path) == 0
    assert _state(rng) == before


# -- private phase: total over the data -----------------------------------------------------------


def _released_text(release: Any) -> str:
    return " ".join(
        [
            repr(release),
            str(release.values),
            repr(release.values),
            json.dumps(release.entry.as_dict(), default=str),
        ]
    )


@pytest.mark.parametrize("other", [False, True])
def test_out_of_category_label_releases_normally(
    session: Any, ledger_path: str, other: bool
) -> None:
    """Attack: is someone's label 'carol_has_hiv'? A histogram over the known labels, on the
    dataset with that record and on its neighbour (the record is 'a' instead).

    Both release normally (no exception on either side), the ledger records the same public
    entry, the label never appears in any message/repr of the result, and the released vector
    has the declared shape (k, or k + 1 with the 'other' cell)."""
    hist = _central().Histogram(
        categories=("a", "b"), epsilon=0.5, **({"other": True} if other else {})
    )
    releases = []
    for record in (CANARY, "a"):
        data = np.array(["a", "b", record, "a", "b"])
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            releases.append(session.release(hist, data, rng=np.random.default_rng(3)))
    for release in releases:
        assert CANARY not in _released_text(release)
        assert np.shape(release.values.value) == (3 if other else 2,)
    assert _public(releases[0].entry) == _public(releases[1].entry)
    assert _spent(ledger_path) == Fraction(1)


def test_python_enumeration_of_ages(session: Any, ledger_path: str) -> None:
    """Attack: for a candidate age v, a histogram over every *other* age, and bounds
    [v, v + 1], on the dataset with a record of age v and on the neighbour where it is 40.

    Every call releases (no exception distinguishes the neighbours) and the public ledger
    entries are identical pairwise."""
    central = _central()
    others = tuple(a for a in range(18, 78) if a != 37)
    base = np.array(others, dtype=np.int64)
    for v in (37, 7355608, -3):
        probes = [
            central.Histogram(categories=others, epsilon=0.1),
            central.Sum(lower=v, upper=v + 1, epsilon=0.1),
            central.Quantile(q=0.5, lower=v, upper=v + 1, epsilon=0.1),
        ]
        for probe in probes:
            pair = [
                session.release(probe, np.append(base, record), rng=np.random.default_rng(4))
                for record in (v, 40)
            ]
            assert _public(pair[0].entry) == _public(pair[1].entry)
    assert _spent(ledger_path) == Fraction(18, 10)


@pytest.mark.parametrize(
    "make",
    [
        lambda c: c.Sum(lower=0, upper=10, epsilon=0.5),
        lambda c: c.Mean(lower=0, upper=10, epsilon=0.5),
        lambda c: c.Quantile(q=0.5, lower=0, upper=10, epsilon=0.5),
        lambda c: c.Count(epsilon=0.5),
        lambda c: c.Histogram(categories=(1, 3), epsilon=0.5),
    ],
    ids=["sum", "mean", "quantile", "count", "histogram"],
)
@pytest.mark.parametrize(
    "data",
    [[1.0, math.nan, 3.0], [math.nan] * 4, [], [math.inf, -math.inf, 3.0]],
    ids=["one_nan", "all_nan", "empty", "infinities"],
)
@pytest.mark.parametrize("mode", ["fast", "secure"])
def test_missing_values_dropped_silently(
    session: Any,
    ledger_path: str,
    capsys: pytest.CaptureFixture[str],
    make: Any,
    data: list,
    mode: str,
) -> None:
    """NaNs are dropped without a message, even when nothing is left (an empty set after the
    drop is a data-dependent condition a leaky query fails on); infinities are clamped.
    Every call releases a finite value (or vector), emits no warning and prints nothing."""
    query = make(_central())
    rng = np.random.default_rng(5) if mode == "fast" else None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        release = session.release(query, np.array(data, dtype=np.float64), rng=rng)
    value = np.asarray(release.values.value, dtype=np.float64)
    assert np.all(np.isfinite(value)), release
    assert capsys.readouterr() == ("", "")
    assert _spent(ledger_path) == Fraction(1, 2)


@pytest.mark.parametrize(
    ("name", "params"),
    [
        ("laplace", {"epsilon": 1.0, "sensitivity": 1.0}),
        ("gaussian", {"epsilon": 0.5, "delta": 1e-6, "sensitivity": 1.0}),
    ],
)
@pytest.mark.parametrize(
    "answer",
    [[1e308, -1e308, 1.7976931348623157e308], [math.inf, -math.inf]],
    ids=["huge", "infinite"],
)
def test_secure_lattice_clamps_huge_answers(
    session: Any, name: str, params: dict, answer: list
) -> None:
    """A huge (or infinite) answer under secure laplace/gaussian would overflow the lattice; a
    failure there would say "the answer is huge". It releases a finite value instead."""
    mechanism = dpkit.mechanism(name, **params)
    release = session.release(mechanism, np.array(answer), rng=None)
    assert np.all(np.isfinite(np.asarray(release.values, dtype=np.float64)))


def test_secure_sum_of_huge_values_is_finite(session: Any) -> None:
    """Sum with huge bounds over values at (and beyond) the bound: the answer is far outside
    any useful lattice range. Bounds too large to construct are refused at construction (public
    phase, no data involved); the largest accepted bound is used."""
    central = _central()
    for upper in (1e308, 1e100, 1e50):
        try:
            query = central.Sum(lower=0, upper=upper, epsilon=1.0)
        except dpkit.InvalidParameter:
            continue
        break
    else:
        pytest.fail("no large bound accepted")
    release = session.release(query, np.array([1e308, 1e308, math.inf, 1e308]), rng=None)
    assert math.isfinite(release.values.value)


def test_local_mechanism_out_of_category_value(session: Any, ledger_path: str) -> None:
    """k-RR with declared categories and a record outside them: the record is replaced by a
    uniformly random category before randomizing, so n is unchanged and nothing names it."""
    krr = dpkit.mechanism("krr", epsilon=1.0, categories=["bus", "bike", "car"])
    data = np.array(["bus", CANARY, "car", "bike"])
    release = session.release(krr, data, rng=np.random.default_rng(6))
    reports = np.asarray(release.values)
    assert reports.shape[0] == 4
    assert CANARY not in _released_text(release)
    assert _spent(ledger_path) == Fraction(1)


# -- failures in the private phase: ReleaseFailed, the spend kept ----------------------------------


class Exploding:
    """A third-party query whose ``run`` raises (with a message that would leak data)."""

    name = "exploding"

    def __init__(self, error: BaseException, epsilon: float = 0.25):
        self.error = error
        self.epsilon = epsilon

    @property
    def privacy(self) -> Any:
        return dpkit.PureDP(epsilon=self.epsilon)

    def run(self, data: Any, /, *, rng: Any = None) -> Any:
        raise self.error


@pytest.mark.parametrize(
    "error",
    [
        ValueError(f"{SECRET}: row 17 is {CANARY}"),
        RuntimeError(SECRET),
        ZeroDivisionError(SECRET),
        dpkit.InvalidData(f"{SECRET} is not a valid value"),
    ],
    ids=["ValueError", "RuntimeError", "ZeroDivisionError", "InvalidData"],
)
def test_failing_release_is_charged_every_time(
    session: Any, ledger_path: str, error: BaseException
) -> None:
    """Attack: a target that fails on some data, repeated K = 4 times — if failures were
    refunded, the analyst could probe the data for free; if the error were relayed, its message
    (or type) would leak the data.

    Each call raises ReleaseFailed (a DPKitError) whose message and repr contain neither the
    target's message nor the data, and which does not hold the target's error (as its cause or
    its context); the remaining budget decreases by exactly K × 1/4."""
    release_failed = dpkit.errors.ReleaseFailed
    assert issubclass(release_failed, dpkit.DPKitError)
    target = Exploding(error)
    start = _spent(ledger_path)
    for k in range(1, 5):
        with pytest.raises(release_failed) as caught:
            session.release(target, np.array([CANARY]), rng=np.random.default_rng(7))
        text = str(caught.value) + repr(caught.value) + " ".join(map(str, caught.value.args))
        assert "SECRET_CANARY" not in text and CANARY not in text and "7355608" not in text
        # Nor does it carry the target's error: ``raise ... from None`` inside the handler
        # only hid it from printed tracebacks, as ``__context__`` (type, message, traceback).
        assert caught.value.__cause__ is None and caught.value.__context__ is None
        assert _spent(ledger_path) == start + k * Fraction(1, 4)
    assert session.remaining.epsilon == Fraction(10) - Fraction(1)


def test_failing_release_refused_when_it_no_longer_fits(ledger_path: str) -> None:
    """The charge for failing releases is real: with a budget of 1, the fifth failing release
    of ε = 1/4 is refused with BudgetExceeded (before running), never refunded into fitting."""
    with dpkit.Session(budget=(1.0, 0.0), ledger=ledger_path, dataset="redteam") as session:
        target = Exploding(ValueError(SECRET))
        for _ in range(4):
            with pytest.raises(dpkit.errors.ReleaseFailed):
                session.release(target, [1], rng=np.random.default_rng(8))
        with pytest.raises(dpkit.BudgetExceeded):
            session.release(target, [1], rng=np.random.default_rng(8))
    assert _spent(ledger_path) == Fraction(1)


# -- batched selections: R selections cost R × ε ----------------------------------------------------

SELECTIONS = ["exponential", "report_noisy_max", "permute_and_flip"]


@pytest.mark.parametrize("name", SELECTIONS)
@pytest.mark.parametrize("mode", ["fast", "secure"])
def test_batched_selection_charged_per_selection(ledger_path: str, name: str, mode: str) -> None:
    """Attack: pass utilities of shape (R, m) — R selections, each an ε-DP release of its own
    row — and pay for one. Budget 2: a batch of R = 3 at ε = 1/2 costs exactly 3/2; a second
    batch (3/2 > 1/2 left) is refused with BudgetExceeded before any randomness; one more
    single row (1/2) fits exactly."""
    mechanism = dpkit.mechanism(name, epsilon=0.5)
    utilities = np.arange(12, dtype=np.float64).reshape(3, 4)
    rng = np.random.default_rng(9) if mode == "fast" else None
    with dpkit.Session(budget=(2.0, 0.0), ledger=ledger_path, dataset="redteam") as session:
        release = session.release(mechanism, utilities, rng=rng)
        assert np.shape(release.values) == (3,)
        assert _spent(ledger_path) == Fraction(3, 2)
        probe = np.random.default_rng(10)
        before = _state(probe)
        with pytest.raises(dpkit.BudgetExceeded):
            session.release(mechanism, utilities, rng=probe if mode == "fast" else None)
        assert _state(probe) == before
        assert _spent(ledger_path) == Fraction(3, 2)
        session.release(mechanism, utilities[0], rng=rng)
        assert _spent(ledger_path) == Fraction(2)


@pytest.mark.parametrize("name", SELECTIONS)
def test_batch_of_batches_charged_per_selection(ledger_path: str, name: str) -> None:
    """Utilities of shape (2, 3, 4) are 6 selections: exactly 6 × 1/2 = 3 of a budget of 3."""
    mechanism = dpkit.mechanism(name, epsilon=0.5)
    with dpkit.Session(budget=(3.0, 0.0), ledger=ledger_path, dataset="redteam") as session:
        release = session.release(mechanism, np.zeros((2, 3, 4)), rng=np.random.default_rng(11))
        assert np.shape(release.values) == (2, 3)
        assert _spent(ledger_path) == Fraction(3)
        with pytest.raises(dpkit.BudgetExceeded):
            session.release(mechanism, np.zeros(4), rng=np.random.default_rng(11))
