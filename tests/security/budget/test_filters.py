"""Red-team tests of the composition rules at the privacy boundary.

Every refusal of the Gaussian-DP filter, of a "best" ledger and of a declared plan happens in
the public phase: before the spend, before any randomness is drawn and before any private
value is read (a :class:`dpkit.session.Deferred` loader that records its calls is never called), and
nothing is written. ``dpkit account --calibrate`` and pure-DP questions refuse bad input with
a one-line typed error and exit code 2, never a traceback.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import dpkit
from dpkit.ledger import Ledger


class _Loader:
    """Private data behind a loader that counts its calls."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self) -> np.ndarray:
        self.calls += 1
        return np.array([1.0, 0.0, 1.0])


class _Query:
    def __init__(self, privacy: dpkit.plugin.PrivacyEvent) -> None:
        self.privacy = privacy
        self.name = type(privacy).__name__

    def run(self, data: Any, /, *, rng: np.random.Generator) -> float:
        return float(np.sum(data)) + float(rng.normal())


def _refused(session: dpkit.Session, items: list[Any], error: type[Exception]) -> None:
    loaders = [item[1].load for item in items]
    rngs = [item[2] for item in items]
    states = [rng.bit_generator.state for rng in rngs]
    before = session.history()
    with pytest.raises(error):
        if len(items) == 1:
            target, data, rng = items[0]
            session.release(target, data, rng=rng)
        else:
            session.release_all(items)
    assert all(loader.calls == 0 for loader in loaders)  # no private value was read
    assert [rng.bit_generator.state for rng in rngs] == states  # no randomness drawn
    assert session.history() == before  # nothing written


def _item(privacy: dpkit.plugin.PrivacyEvent, seed: int = 0) -> tuple[Any, ...]:
    return (_Query(privacy), dpkit.session.Deferred(_Loader()), np.random.default_rng(seed))


def test_the_gaussian_dp_filter_refuses_in_the_public_phase(tmp_path: Path) -> None:
    session = dpkit.Session(budget=(1.0, 1e-6), ledger=tmp_path / "g.db", composition="gdp")
    _refused(session, [_item(dpkit.ApproximateDP(0.1, 1e-8))], dpkit.InvalidParameter)
    _refused(
        session,
        [_item(dpkit.SubsampledDP(dpkit.GaussianDP(1.0, 1e-6), 0.01))],
        dpkit.InvalidParameter,
    )
    _refused(session, [_item(dpkit.GaussianDP(0.01, 1e-6))], dpkit.BudgetExceeded)
    ok = _item(dpkit.GaussianDP(50.0, 1e-6))
    session.release(ok[0], ok[1], rng=ok[2])
    assert ok[1].load.calls == 1  # read once, after the spend


def test_a_plan_that_does_not_fit_reads_nothing(tmp_path: Path) -> None:
    session = dpkit.Session(budget=(1.0, 1e-6), ledger=tmp_path / "p.db")
    plan = [_item(dpkit.GaussianDP(1.0, 1e-7), seed) for seed in range(10)]
    _refused(session, plan, dpkit.BudgetExceeded)
    mixed = [_item(dpkit.PureDP(0.1)), _item(dpkit.ApproximateDP(0.1, 1e-5))]
    _refused(session, mixed, dpkit.BudgetExceeded)  # δ over: the plan keeps Σδ
    assert Ledger(str(tmp_path / "p.db")).spent().epsilon == 0


def test_a_refused_first_spend_does_not_fix_the_rule_of_best(tmp_path: Path) -> None:
    path = tmp_path / "b.db"
    session = dpkit.Session(budget=(1.0, 1e-6), ledger=path, composition="best")
    _refused(session, [_item(dpkit.GaussianDP(0.05, 1e-6))], dpkit.BudgetExceeded)
    assert session.rule is None
    session.release(dpkit.mechanism("rr", epsilon=0.1), np.array([1]), rng=np.random.default_rng(0))
    assert Ledger(str(path)).rule == "basic"


def test_a_broken_privacy_event_is_refused_before_the_data() -> None:
    session = dpkit.Session(budget=(1.0, 1e-6))
    loader = _Loader()
    broken = _Query(dpkit.PureDP(0.1))
    broken.privacy = "pure"  # type: ignore[assignment]
    with pytest.raises(dpkit.InvalidParameter):
        session.release(broken, dpkit.session.Deferred(loader), rng=np.random.default_rng(0))
    with pytest.raises(dpkit.InvalidParameter):
        dpkit.plugin.CompositeDP(("pure",))  # type: ignore[arg-type]
    with pytest.raises(dpkit.InvalidParameter):
        dpkit.SubsampledDP(dpkit.plugin.CompositeDP((dpkit.PureDP(1.0),)), 0.1)
    with pytest.raises(dpkit.InvalidParameter):
        dpkit.SubsampledDP(dpkit.PureDP(1.0), 0.1, scheme="shuffle")
    assert loader.calls == 0 and session.history() == []


def test_gdp_needs_a_delta_and_specs_say_so_before_the_spend(rt: Any, tmp_path: Path) -> None:
    with pytest.raises(dpkit.InvalidParameter, match="delta > 0"):
        dpkit.Session(budget=(1.0, 0.0), composition="gdp")
    spec = {
        "dpkit": "1",
        "dataset": "numbers",
        "budget": {"epsilon": 1, "composition": "gdp"},
        "defaults": {"input": {"source": "inline", "values": [0, 1]}, "rng": {"mode": "fast"}},
        "queries": [{"statistic": "count", "budget": {"epsilon": 0.5}}],
    }
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec))
    result = rt.fork_cli("run", path, "--ledger", tmp_path / "l.db")
    assert result.returncode == 2, result.explain()
    assert "Traceback" not in result.stderr and "delta" in result.stderr
    assert not (tmp_path / "l.db").exists() or Ledger(str(tmp_path / "l.db")).entries() == []


@pytest.mark.parametrize(
    "args",
    [
        ["--calibrate", "-1", "gaussian*10"],
        ["--calibrate", "nan", "--delta", "1e-5", "gaussian*10"],
        ["--calibrate", "1", "--delta", "1e-5", "gaussian*10", "laplace*3"],
        ["--calibrate", "1", "--delta", "1e-5", "gaussian(noise_multiplier=1)*10"],
        ["--calibrate", "1e-300", "--delta", "1e-5", "laplace*1000000"],
        ["--calibrate", "1", "gaussian*10"],
        ["--delta", "1.5", "pure(epsilon=1)"],
        ["--delta", "-0.1", "pure(epsilon=1)"],
        ["--delta", "0", "--method", "rdp", "pure(epsilon=1)"],
        ["approx(epsilon=1,delta=1e-6)"],
        ["pure(epsilon=1,scheme=without_replacement)"],
        ["pure(epsilon=1,sampling_rate=0.1,scheme=shuffle)"],
        ["bounded_range(epsilon=-1)"],
    ],
)
def test_account_refuses_bad_questions_with_exit_2(rt: Any, args: list[str]) -> None:
    result = rt.fork_cli("account", *args)
    assert result.returncode == 2, result.explain()
    assert result.stderr.startswith("dpkit: error:") and "Traceback" not in result.stderr
    assert result.stderr.count("\n") == 1  # one line


def test_no_privacy_is_an_answer_not_an_error(rt: Any) -> None:
    """A noise multiplier of 1e-320 has no privacy: ε = inf, exit 0, and no numpy warning."""
    result = rt.fork_cli(
        "account",
        "--delta",
        "1e-5",
        "subsampled_gaussian(noise_multiplier=1e-320,sampling_rate=0.5)*3",
    )
    assert result.returncode == 0, result.explain()
    assert result.stdout.startswith("ε = inf") and result.stderr == ""
