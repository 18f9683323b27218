"""Budget-tracked sessions and the ledger, in one process."""

from __future__ import annotations

import json
import sqlite3
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import dpkit
from dpkit.budget import Budget
from dpkit.cli import main
from dpkit.privacy import ApproximateDP, PureDP


def _data() -> np.ndarray:
    return np.array([0, 1, 1, 0, 1])


def test_ten_releases_of_a_tenth_fit_exactly(tmp_path: Path) -> None:
    session = dpkit.Session(budget=(1.0, 0.0), ledger=tmp_path / "l.db", dataset="survey")
    rr = dpkit.mechanism("rr", epsilon=0.1)
    for seed in range(10):
        session.release(rr, _data(), rng=np.random.default_rng(seed))
    assert session.remaining.epsilon == 0
    assert session.spent.epsilon == Fraction(1)
    with pytest.raises(dpkit.BudgetExceeded) as info:
        session.release(rr, _data(), rng=np.random.default_rng(0))
    assert info.value.remaining.epsilon == 0
    assert info.value.requested.epsilon == Fraction(1, 10)


def test_refusal_draws_no_randomness(tmp_path: Path) -> None:
    session = dpkit.Session(budget=(0.5, 0.0), ledger=tmp_path / "l.db")
    rng = np.random.default_rng(3)
    before = rng.bit_generator.state
    with pytest.raises(dpkit.BudgetExceeded):
        session.release(dpkit.mechanism("rr", epsilon=1.0), _data(), rng=rng)
    assert rng.bit_generator.state == before
    assert session.history() == []


def test_release_is_the_mechanism_output_and_is_recorded(tmp_path: Path) -> None:
    session = dpkit.Session(budget=(2.0, 1e-6), ledger=tmp_path / "l.db", dataset="d1")
    krr = dpkit.mechanism("krr", epsilon=1.0, k=4)
    release = session.release(krr, np.array([0, 1, 2, 3]), rng=np.random.default_rng(5))
    expected = krr.randomize(np.array([0, 1, 2, 3]), rng=np.random.default_rng(5))
    np.testing.assert_array_equal(release.values, expected)
    (entry,) = session.history()
    assert entry.release_id == release.release_id
    assert entry.mechanism == "krr"
    assert entry.parameters["epsilon"] == 1.0
    assert entry.event["type"] == "rr" and entry.event["k"] == 4
    assert entry.dataset_id == "d1" and entry.session_id == session.session_id
    assert entry.randomness == "fast"


def test_secure_mode_is_the_default_and_is_recorded(tmp_path: Path) -> None:
    session = dpkit.Session(budget=(1.0, 0.0), ledger=tmp_path / "l.db")
    release = session.release(dpkit.mechanism("rr", epsilon=0.5), _data())
    assert release.entry.randomness == "secure"


def test_each_release_records_its_randomness_keyed_apart_from_secure(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A SecureRandom.from_key stream is reproducible, not secret: recorded as "keyed"."""
    path = tmp_path / "l.db"
    session = dpkit.Session(budget=(5.0, 0.0), ledger=path)
    krr = dpkit.mechanism("krr", epsilon=0.5, k=4)
    data = np.arange(200) % 4
    first = session.release(krr, data, rng=dpkit.SecureRandom.from_key(bytes(32)))
    second = session.release(krr, data, rng=dpkit.SecureRandom.from_key(bytes(32)))
    np.testing.assert_array_equal(first.values, second.values)  # the key fixes every draw
    fresh = session.release(krr, data, rng=dpkit.SecureRandom())
    session.release(krr, data)  # rng=None: the process-wide SecureRandom
    session.release(krr, data, rng=np.random.default_rng(0))
    recorded = [entry.randomness for entry in session.history()]
    assert recorded == ["keyed", "keyed", "secure", "secure", "fast"]
    assert [first.entry.randomness, fresh.entry.randomness] == ["keyed", "secure"]
    assert main(["budget", "history", "--ledger", str(path)]) == 0  # its RANDOMNESS column
    rows = [line.split() for line in capsys.readouterr().out.splitlines()]
    assert sum("keyed" in row for row in rows) == 2 and sum("secure" in row for row in rows) == 2


def test_an_out_of_domain_value_is_coerced_and_charged(tmp_path: Path) -> None:
    """rr's domain is {0, 1}: a 7 is replaced in the private phase (never an error), and the
    spend stands."""
    session = dpkit.Session(budget=(1.0, 0.0), ledger=tmp_path / "l.db")
    release = session.release(
        dpkit.mechanism("rr", epsilon=0.5), np.array([7]), rng=np.random.default_rng(1)
    )
    assert release.values.shape == (1,) and int(release.values[0]) in (0, 1)
    assert session.remaining.epsilon == Fraction(1, 2)
    (entry,) = session.history()
    assert entry.status == "spent"
    session.ledger.verify()


class _Failing:
    """A third-party query whose run raises (a plugin bug): the spend must not be given back."""

    name = "failing"
    privacy = PureDP(epsilon=0.25)

    def run(self, data: Any, /, *, rng: Any) -> float:
        raise ValueError("secret 1234 in the data")


def test_a_failing_query_keeps_its_spend(tmp_path: Path) -> None:
    session = dpkit.Session(budget=(1.0, 0.0), ledger=tmp_path / "l.db")
    for _ in range(2):
        with pytest.raises(dpkit.ReleaseFailed) as info:
            session.release(_Failing(), np.array([1.0]), rng=np.random.default_rng(1))
        assert "1234" not in str(info.value)
    assert session.remaining.epsilon == Fraction(1, 2)
    assert [e.status for e in session.history()] == ["spent", "spent"]
    session.ledger.verify()


class _Query:
    """A central query following the convention: privacy + run(data, /, *, rng)."""

    privacy = ApproximateDP(epsilon=0.25, delta=1e-7)

    def run(self, data: Any, /, *, rng: np.random.Generator) -> float:
        return float(np.sum(data)) + float(rng.laplace(scale=4.0))


def test_query_objects_are_released_with_run(tmp_path: Path) -> None:
    session = dpkit.Session(budget=(1.0, 1e-6), ledger=tmp_path / "l.db")
    release = session.release(_Query(), _data(), rng=np.random.default_rng(2))
    assert isinstance(release.values, float)
    assert session.spent.delta == Fraction(1, 10**7)
    assert release.entry.mechanism == "_Query"


def test_other_targets_are_refused(tmp_path: Path) -> None:
    session = dpkit.Session(budget=(1.0, 0.0), ledger=tmp_path / "l.db")
    with pytest.raises(dpkit.InvalidParameter):
        session.release(object(), _data(), rng=np.random.default_rng(2))  # type: ignore[arg-type]


def test_zcdp_session_uses_rho(tmp_path: Path) -> None:
    session = dpkit.Session(budget=(1.0, 1e-6), ledger=tmp_path / "z.db", composition="zcdp")
    rho_budget = session.budget.rho
    assert rho_budget is not None
    assert dpkit.accounting.zcdp_epsilon(float(rho_budget), 1e-6) <= 1.0
    rr = dpkit.mechanism("rr", epsilon=0.02)  # ρ = ε²/2 = 1/5000 each
    n = int(rho_budget / Fraction(1, 5000))
    for seed in range(n):
        session.release(rr, _data(), rng=np.random.default_rng(seed))
    assert n * 0.02 > 2.0  # over twice as many releases as basic composition would allow
    with pytest.raises(dpkit.BudgetExceeded):
        session.release(rr, _data(), rng=np.random.default_rng(0))
    with pytest.raises(dpkit.DPKitError):
        session.release(_Query(), _data(), rng=np.random.default_rng(0))  # (ε, δ) has no ρ


@pytest.mark.parametrize("composition", ["zcdp", "gdp", "best"])
def test_a_budget_in_another_currency_must_not_exceed_its_epsilon_delta(composition: str) -> None:
    # The ledger stores ρ or μ² as the budget *for* (ε, δ) and admits releases up to it: with
    # ρ = μ² = 50 for (1, 1e-6), a hundred σ = 1 Gaussians (ε ≈ 97 at δ = 1e-6) would fit.
    exact = dpkit.Session(budget=(1.0, 1e-6), composition=composition).budget
    too_much = Budget(exact.epsilon, exact.delta, Fraction(50), Fraction(50))
    with pytest.raises(dpkit.InvalidParameter, match="the most"):
        dpkit.Session(budget=too_much, composition=composition)
    with pytest.raises(dpkit.InvalidParameter, match="delta = 0"):
        dpkit.Session(budget=Budget(Fraction(1), Fraction(0), Fraction(50)), composition="best")
    assert dpkit.Session(budget=exact, composition=composition).budget == exact  # its own
    smaller = Budget(exact.epsilon, exact.delta, Fraction(1, 100), Fraction(1, 100))
    kept = dpkit.Session(budget=smaller, composition=composition).budget  # safe: kept
    assert (kept.rho or kept.mu2) == Fraction(1, 100)


def test_reopening_checks_dataset_budget_and_rule(tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    dpkit.Session(budget=(1.0, 1e-6), ledger=path, dataset="a")
    same = dpkit.Session(ledger=path)
    assert same.dataset == "a" and same.budget.epsilon == 1
    with pytest.raises(dpkit.ledger.LedgerMismatch) as info:
        dpkit.Session(ledger=path, dataset="b")
    assert info.value.field == "dataset"
    with pytest.raises(dpkit.ledger.LedgerMismatch):
        dpkit.Session(budget=(2.0, 1e-6), ledger=path, dataset="a")
    with pytest.raises(dpkit.ledger.LedgerMismatch):
        dpkit.Session(ledger=path, composition="zcdp")


def test_non_ledgers_are_refused_and_untouched(tmp_path: Path) -> None:
    text = tmp_path / "notes.txt"
    text.write_text("not a database")
    other = tmp_path / "other.db"
    connection = sqlite3.connect(other)
    connection.execute("CREATE TABLE t (x)")
    connection.commit()
    connection.close()
    before = {p: p.read_bytes() for p in (text, other)}
    for path in (text, other):
        with pytest.raises(dpkit.ledger.NotALedger):
            dpkit.Session(budget=(1.0, 0.0), ledger=path)
        assert path.read_bytes() == before[path]
    with pytest.raises(dpkit.ledger.LedgerError):
        dpkit.Ledger(tmp_path / "missing.db")
    assert not (tmp_path / "missing.db").exists()


def test_url_and_memory_ledgers(tmp_path: Path) -> None:
    session = dpkit.Session(budget=(1.0, 0.0), ledger=f"sqlite:///{tmp_path / 'u.db'}")
    session.release(dpkit.mechanism("rr", epsilon=0.5), _data(), rng=np.random.default_rng(0))
    assert (tmp_path / "u.db").exists()
    with pytest.raises(dpkit.InvalidParameter):
        dpkit.Session(budget=(1.0, 0.0), ledger="mysql://host/db")  # not a built-in store
    memory = dpkit.Session(budget=(1.0, 0.0))
    memory.release(dpkit.mechanism("rr", epsilon=0.5), _data(), rng=np.random.default_rng(0))
    assert memory.remaining.epsilon == Fraction(1, 2)


def test_budget_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "l.db"
    session = dpkit.Session(budget=(1.0, 1e-6), ledger=path, dataset="survey")
    for seed in range(3):
        session.release(
            dpkit.mechanism("rr", epsilon=0.1), _data(), rng=np.random.default_rng(seed)
        )
    assert main(["budget", "show", "--ledger", str(path), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["dataset"] == "survey"
    assert shown["spent"]["epsilon_exact"] == "3/10"
    assert shown["remaining"]["epsilon_exact"] == "7/10"
    assert shown["releases"] == 3
    assert main(["budget", "history", "--ledger", str(path), "--json"]) == 0
    history = json.loads(capsys.readouterr().out)
    assert [h["mechanism"] for h in history] == ["rr"] * 3
    assert main(["budget", "history", "--ledger", str(path)]) == 0
    assert "rr" in capsys.readouterr().out
    bogus = tmp_path / "x.txt"
    bogus.write_text("hello")
    assert main(["budget", "show", "--ledger", str(bogus)]) == 2
    assert "not a dpkit ledger" in capsys.readouterr().err
    assert bogus.read_text() == "hello"


def test_account_cli(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["account", "--delta", "1e-5", "--json", "gaussian(noise_multiplier=2.0)*100"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["method"] == "exact-gaussian" and out["delta"] == 1e-5
    assert main(["account", "--method", "basic", "--json", "laplace(epsilon=0.1)*10"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["epsilon"] == 1.0 and out["epsilon_exact"] == "1" and out["method"] == "basic"
    args = [
        "account",
        "--delta",
        "1e-5",
        "--method",
        "rdp",
        "--json",
        "subsampled_gaussian(noise_multiplier=1.0,sampling_rate=0.01)*1000",
        "krr(epsilon=1,k=4)",
        "pure(epsilon=0.5)",
        "rr(epsilon=1)*2",
    ]
    assert main(args) == 0
    assert json.loads(capsys.readouterr().out)["method"] == "rdp"
    assert (
        main(["account", "--delta", "1e-5", "--target-epsilon", "1", "--json", "gaussian*100"]) == 0
    )
    out = json.loads(capsys.readouterr().out)
    assert out["epsilon"] == pytest.approx(1.0, rel=1e-9)
    assert out["noise_multiplier"] == pytest.approx(
        dpkit.accounting.gaussian_noise_multiplier(1.0, delta=1e-5, steps=100)
    )


@pytest.mark.parametrize(
    "event",
    [
        "foo(x=1)",
        "rr(epsilon=__import__('os'))",
        "rr(epsilon=1",
        "rr(epsilon=-1)",
        "krr(epsilon=1,k=2.5)",
        "rr(epsilon=1)*-3",
        "rr(eps=1)",
        "gaussian(noise_multiplier=1,noise_multiplier=2)",
        "approx(epsilon=1)",
    ],
)
def test_account_cli_rejects_bad_events(event: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["account", "--delta", "1e-5", event]) == 2
    err = capsys.readouterr().err
    assert err.startswith("dpkit: error:") and "Traceback" not in err


def test_account_cli_needs_delta(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["account", "gaussian(noise_multiplier=1)"]) == 2
    assert "--delta" in capsys.readouterr().err


def test_pure_events_are_exported() -> None:
    assert dpkit.account([(PureDP(0.5), 2)], delta=1e-6, method="basic").epsilon == 1.0


class _GaussianQuery:
    """A Gaussian count calibrated (exactly, by the accountant) to ε = 0.1 at δ = 1e-7."""

    def __init__(self) -> None:
        sigma = dpkit.accounting.gaussian_noise_multiplier(0.1, delta=1e-7)
        self.privacy = dpkit.GaussianDP(noise_multiplier=sigma, delta=1e-7)
        self.sigma = sigma

    def run(self, data: Any, /, *, rng: np.random.Generator) -> float:
        return float(np.sum(data)) + float(rng.normal(scale=self.sigma))


def test_calibrated_gaussians_cost_exactly_their_epsilon(tmp_path: Path) -> None:
    query = _GaussianQuery()
    assert query.privacy.epsilon == 0.1
    from dpkit.privacy import gaussian_delta

    assert gaussian_delta(0.1, query.sigma) <= 1e-7  # the reported ε is on the safe side
    session = dpkit.Session(budget=(1.0, 1e-6), ledger=tmp_path / "g.db")
    for seed in range(10):
        session.release(query, _data(), rng=np.random.default_rng(seed))
    assert session.remaining.epsilon == 0 and session.remaining.delta == 0
