"""Ctrl-C sent to dpkit at moments of its run: exit 130, one line on stderr, never a
traceback, and a ledger that is all or nothing (budget verify passes)."""

from __future__ import annotations

import random
import signal
import sqlite3
import subprocess
import sys
import time
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

# Timed races (signals sent to the command at moments of its run): they run in the serial
# run, alone on the machine (the `serial` marker; scripts/test).
pytestmark = [pytest.mark.integration, pytest.mark.serial]

LABELS = ["bus", "bike", "car", "train", "walk"]


# -- SIGINT at moments of a run ------------------------------------------------------------------


@pytest.fixture(scope="module")
def big_csv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """2·10⁵ rows (about 3 MB), written once for the module."""
    path = tmp_path_factory.mktemp("big") / "big.csv"
    lines = ["age,label,score"]
    lines += [
        f"{18 + (i * 7919) % 73},{LABELS[i % 5]},{(i * 104729) % 10000 / 100}"
        for i in range(200_000)
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.slow
@pytest.mark.parametrize("extra_delay", [0.0, 0.6], ids=["at_ledger_creation", "during_release"])
def test_sigint(rt: Any, big_csv: Path, tmp_path: Path, extra_delay: float) -> None:
    """SIGINT while a run reads and releases a large CSV: exit 130, one line on stderr, no
    traceback; the ledger is consistent (``budget verify`` exits 0) and the session is all or
    nothing (spent is 0 or the full session cost)."""
    q = lambda statistic, column, **params: {  # noqa: E731
        "statistic": statistic,
        "input": {"source": "csv", "path": big_csv.name, "column": column},
        "budget": {"epsilon": 0.1},
        **({"params": params} if params else {}),
    }
    spec = rt.write_json(
        big_csv.parent / f"session-{extra_delay}.json",
        {
            "dpkit": "1",
            "dataset": "big",
            "budget": {"epsilon": 10.0},
            "queries": [
                q("count", "age"),
                q("sum", "age", lower=0, upper=100),
                q("mean", "score", lower=0, upper=100),
                q("quantile", "score", q=0.5, lower=0, upper=100),
                q("histogram", "label", categories=LABELS),
                q("quantile", "age", q=0.9, lower=0, upper=100),
            ],
        },
    )
    ledger = tmp_path / "ledger.sqlite"
    process = subprocess.Popen(
        rt.dpkit_command("run", "--json", str(spec), "--ledger", str(ledger)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    deadline = time.monotonic() + 30
    while not ledger.exists() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    time.sleep(extra_delay)
    if process.poll() is None:
        process.send_signal(signal.SIGINT)
    # else: the run ended before the signal could be sent (a fast machine); it is then checked
    # below as a completed run, never skipped.
    try:
        _, err = process.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        process.kill()
        pytest.fail("dpkit did not stop within 60 s of SIGINT")
    assert "Traceback" not in err, err
    if process.returncode == 0:
        # The run finished in the instant between the last poll and the signal: then it must
        # have released everything, and the ledger must say so.
        assert rt.ledger_spent(ledger) == Fraction(6, 10)
    else:
        assert process.returncode == 130, (process.returncode, err[-2000:])
        assert len(err.strip().splitlines()) == 1, err
    verify = rt.run_cli("budget", "verify", "--ledger", str(ledger))
    if verify.returncode != 0:
        # Interrupted while the ledger was being created: its schema is one transaction, so the
        # file holds no ledger at all (an empty database, treated as absent), never half of one.
        assert verify.returncode == 2 and "no ledger at" in verify.stderr, verify.explain()
        db = sqlite3.connect(ledger)
        try:
            assert db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] == 0
        finally:
            db.close()
        return
    assert rt.ledger_spent(ledger) in (Fraction(0), Fraction(6, 10))
    assert rt.entries_spent(ledger) == rt.ledger_spent(ledger)


def _seconds(command: list[str]) -> tuple[float, float]:
    """The fastest and the slowest of three runs of ``command`` (the machine may be shared)."""
    times = []
    for _ in range(3):
        started = time.monotonic()
        subprocess.run(command, capture_output=True, check=False, stdin=subprocess.DEVNULL)
        times.append(time.monotonic() - started)
    return min(times), max(times)


_INSTALLED = Path(sys.executable).with_name("dpkit")


@pytest.mark.parametrize(
    ("launcher", "args"),
    [
        ([sys.executable, "-m", "dpkit"], ["mechanisms"]),
        ([str(_INSTALLED)], ["mechanisms"]),
        (
            [sys.executable, "-m", "dpkit"],
            ["account", "--delta", "1e-5", "gaussian(noise_multiplier=1)*10"],
        ),
    ],
    ids=["python-m-mechanisms", "installed-mechanisms", "python-m-account"],
)
def test_sigint_during_start_up_is_one_line(launcher: list[str], args: list[str]) -> None:
    """Ctrl-C while the command starts — while it imports dpkit's modules, the plugins, numpy,
    an extra — exits 130 with one line, never a traceback. Python prints the traceback of an
    interrupt in an import that nothing catches, and the console script imports ``dpkit.cli``
    before it calls ``entry``: the package imports its names lazily, so dpkit's handler is in
    place ~50 ms after the interpreter starts, before any heavy import.

    The 16 delays are spread over the command's run, from twice the time the interpreter takes
    to start (measured before each try; before then an interrupt lands where no code of
    dpkit's runs yet) plus 30 ms, to the end of a (fastest) whole run; they come from a fixed
    seed (they are the test's input). Before the lazy package, about 14 of 16 such interrupts
    printed a traceback."""
    if launcher[0] == str(_INSTALLED) and not _INSTALLED.exists():
        pytest.skip(f"no installed dpkit command next to {sys.executable}")
    whole = _seconds([*launcher, *args])[0]
    rng = random.Random(2026)
    for _ in range(16):
        # the interpreter's own start-up just now (the machine may be shared), doubled, and
        # 30 ms for dpkit's outermost modules (dpkit and dpkit.cli: a few milliseconds)
        interpreter = _seconds([sys.executable, "-c", "pass"])[1]
        earliest = 2 * interpreter + 0.03
        delay = rng.uniform(earliest, max(whole, earliest + 0.05))
        process = subprocess.Popen(
            [*launcher, *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
        )
        time.sleep(delay)
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=60)
        assert "Traceback" not in err, (delay, err[-3000:])
        if process.returncode != 0:  # else it ended before the signal: a complete run
            assert process.returncode == 130, (delay, process.returncode, err[-2000:])
            assert err == "dpkit: interrupted\n", (delay, err[-2000:])


def test_an_interrupt_in_a_callback_python_ignores_prints_no_traceback() -> None:
    """A Ctrl-C that lands where Python ignores exceptions (an import lock's weakref callback,
    a finaliser) would be printed as "Exception ignored in ..." with its traceback; the
    command's hook (installed by ``entry``) keeps those quiet and every other one as Python
    prints it. Deterministic: the finalisers raise directly."""
    code = (
        "import sys, dpkit.cli as cli\n"
        "sys.argv = ['dpkit', 'mechanisms']\n"
        "cli.entry()\n"
        "class Interrupted:\n"
        "    def __del__(self): raise KeyboardInterrupt\n"
        "class Broken:\n"
        "    def __del__(self): raise ValueError('another error')\n"
        "Interrupted(); Broken()\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert "KeyboardInterrupt" not in done.stderr, done.stderr
    assert "ValueError: another error" in done.stderr


def test_an_interrupt_inside_generated_source_still_exits_130(tmp_path: Path) -> None:
    """An interrupt that leaves an ``exec`` of source text (dataclasses and namedtuple build
    their methods so, while a module imports) makes CPython end the process by SIGINT at exit
    although the command handled it; the command clears that state, so the exit code is 130.
    Deterministic: the interrupt is raised inside such an exec."""
    package = tmp_path / "interrupted_in_exec"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "__main__.py").write_text(
        "import sys\n"
        "import dpkit.cli as cli\n"
        "def main(argv=None):\n"
        "    exec('raise KeyboardInterrupt')\n"
        "cli.main = main\n"
        "sys.exit(cli.entry())\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", package.name],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (done.returncode, done.stderr) == (130, "dpkit: interrupted\n")
