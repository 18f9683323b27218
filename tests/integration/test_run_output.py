"""What ``dpkit run`` shows a person: every release with its interval and method, budgets in
decimals with how the total was composed (exact fractions in ``--json``)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
VALID = ROOT / "schemas" / "examples" / "valid"
SCRIPT = Path(sys.executable).with_name("dpkit")
FRACTION = re.compile(r"\d+/\d+")


def dpkit(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPT), *map(str, args)], capture_output=True, text=True, check=False
    )


def test_every_release_has_an_interval_with_its_method(tmp_path: Path) -> None:
    run = dpkit("run", VALID / "visits_by_city.json", "--ledger", tmp_path / "l.sqlite", "--json")
    assert run.returncode == 0, run.stderr
    results = {r["query_id"]: r for r in json.loads(run.stdout)["results"]}
    for result in results.values():
        interval = result["confidence_interval"]
        assert interval is not None and interval["method"], result["query_id"]
    mean = results["mean-minutes"]["confidence_interval"]
    assert len(mean["lower"]) == len(results["mean-minutes"]["estimate"]) == 5
    for low, value, high in zip(
        mean["lower"], results["mean-minutes"]["estimate"], mean["upper"], strict=True
    ):
        assert 0 <= low <= value <= high <= 120
    median = results["median-minutes"]["confidence_interval"]
    assert median["unit"] == "ranks" and median["half_width"] > 0


def test_the_table_and_the_plan_show_each_interval_and_its_method(tmp_path: Path) -> None:
    spec = VALID / "people_session.json"
    plan = dpkit("run", spec, "--plan")
    assert plan.returncode == 0, plan.stderr
    mean_row = next(line for line in plan.stdout.splitlines() if line.startswith("mean-age"))
    assert "at n=1,000" in mean_row
    assert "median-age: exponential mechanism's rank guarantee" in plan.stdout
    run = dpkit("run", spec, "--ledger", tmp_path / "l.sqlite")
    assert run.returncode == 0, run.stderr
    rows = {line.split()[0]: line for line in run.stdout.splitlines() if line[:1].isalpha()}
    assert re.search(r"\[\d+\.?\d*, \d+\.?\d*\] \(95%\)", rows["mean-age"])
    assert "ranks (95%)" in rows["median-age"]
    assert "how each interval was computed:" in run.stdout
    assert "mean-age: noisy centred sum over noisy count" in run.stdout


def test_budgets_are_decimals_and_say_how_the_total_was_composed(tmp_path: Path) -> None:
    spec = VALID / "people_session.json"
    plan = dpkit("run", spec, "--plan")
    footer = plan.stdout.splitlines()[-1]
    assert footer.startswith("the run will be charged the joint PLD price of 7 queries: ε = ")
    assert "(their sum would be 1)" in footer and "sum of their costs" not in plan.stdout
    ledger = tmp_path / "l.sqlite"
    run = dpkit("run", spec, "--ledger", ledger)
    tail = run.stdout.splitlines()[-2:]
    assert tail[0].startswith("this run was charged the joint PLD price of 7 queries")
    assert tail[1].startswith(f"ledger {ledger}: spent ε=0.96")
    assert not FRACTION.search("\n".join(tail).replace(str(ledger), ""))
    document = json.loads(dpkit("run", spec, "--ledger", tmp_path / "m.sqlite", "--json").stdout)
    charged = document["session"]["charged"]
    assert "/" in charged["epsilon_exact"] and charged["composed"].startswith("the joint PLD")


def test_the_plan_and_the_run_name_the_same_noise(tmp_path: Path) -> None:
    """Secure mode adds discrete noise on a lattice: both say so (not 'laplace' in one)."""
    (tmp_path / "people.csv").write_text(
        "age,smoker\n" + "".join(f"{20 + i % 60},{i % 5 == 0:d}\n" for i in range(300)),
        encoding="utf-8",
    )
    spec = {
        "dpkit": "1",
        "dataset": "people",
        "budget": {"epsilon": 1.0},
        "defaults": {"input": {"source": "csv", "path": "people.csv", "column": "age"}},
        "queries": [
            {"id": "rows", "statistic": "count", "budget": {"epsilon": 0.2}},
            {"id": "mean-age", "statistic": "mean", "params": {"lower": 18, "upper": 90},
             "budget": {"epsilon": 0.3}},
            {"id": "smokers", "statistic": "sum", "params": {"lower": 0, "upper": 1},
             "input": {"source": "csv", "path": "people.csv", "column": "smoker"},
             "budget": {"epsilon": 0.5}},
        ],
    }  # fmt: skip
    path = tmp_path / "report.json"
    path.write_text(json.dumps(spec), encoding="utf-8")
    plan = json.loads(dpkit("run", path, "--plan", "--json").stdout)
    run = json.loads(dpkit("run", path, "--ledger", tmp_path / "l.sqlite", "--json").stdout)
    for planned, released in zip(plan["queries"], run["results"], strict=True):
        accuracy = planned["accuracy"]
        if accuracy["noise"] is not None:
            assert released["noise"]["distribution"] == accuracy["noise"]["distribution"]
        else:  # the mean: its parts' noise
            kinds = {part["noise"]["distribution"] for part in accuracy["parts"].values()}
            assert released["mechanism"]["noise"] == f"{'/'.join(sorted(kinds))} (sum and count)"
    text = dpkit("run", path, "--ledger", tmp_path / "m.sqlite").stdout
    assert "discrete_laplace (sum and count)" in text and " laplace " not in text


@pytest.mark.parametrize("existing", [False, True])
def test_a_result_file_is_written_whole_or_not_at_all(tmp_path: Path, existing: bool) -> None:
    """A write of ``--out`` that fails part way (here the file-size limit: a full disk fails
    alike) left a truncated JSON document, read later as a result; now the file is written
    beside and renamed, so ``--out`` holds the whole result or what it held before."""
    out = tmp_path / "result.json"
    if existing:
        out.write_text("before\n", encoding="utf-8")
    script = (
        "import resource, signal, sys\n"
        "from pathlib import Path\n"
        "from dpkit.commands.run import _write\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (4096, resource.RLIM_INFINITY))\n"
        "sys.exit(_write({'results': ['x' * 100] * 200}, Path(sys.argv[1])))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(out)], capture_output=True, text=True, check=False
    )
    assert done.returncode != 0 and "cannot write" in done.stderr
    assert (out.read_text(encoding="utf-8") if existing else out.exists()) == (
        "before\n" if existing else False
    )
    assert [p.name for p in tmp_path.iterdir()] == (["result.json"] if existing else [])
