"""Many processes and threads spending against one ledger; processes killed mid-release.

Each worker is a separate Python process (``python -c``) with several threads sharing one
Session; the checks are exact: the number of entries, the exact total, and that every release
a worker saw returned is in the ledger. Every test runs on both backends (``ledger_store``): an
SQLite file (8 processes × 4 threads) and a ledger on a real PostgreSQL server (4 processes × 4
threads, standing in for the hosts that share it).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import dpkit

# Timed races (processes racing on one ledger, and killed at chosen moments): they run in the
# serial run, alone on the machine (the `serial` marker; scripts/test).
pytestmark = pytest.mark.serial

WORKER = r"""
import json, sys, threading
import numpy as np
import dpkit

path, threads, releases, epsilon = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
session = dpkit.Session(ledger=path)
rr = dpkit.mechanism("rr", epsilon=epsilon)
results = {"ok": [], "refused": 0}
lock = threading.Lock()

def work(seed):
    rng = np.random.default_rng(seed)
    for _ in range(releases):
        try:
            release = session.release(rr, np.array([0, 1, 1]), rng=rng)
        except dpkit.BudgetExceeded:
            with lock:
                results["refused"] += 1
        else:
            with lock:
                results["ok"].append(release.release_id)

pool = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
for t in pool: t.start()
for t in pool: t.join()
print(json.dumps(results))
"""

CRASHER = r"""
import os, sys
import numpy as np
import dpkit

path, out = sys.argv[1], sys.argv[2]
session = dpkit.Session(ledger=path)
rr = dpkit.mechanism("rr", epsilon=0.001)
rng = np.random.default_rng(int(sys.argv[3]))
fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
os.write(fd, b"started\n")
while True:
    release = session.release(rr, np.array([0, 1, 1, 0]), rng=rng)
    os.write(fd, (release.release_id + "\n").encode())  # only after release() returned
"""


def _spawn(code: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", code, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _spawn_quiet(code: str, log: Path, *args: str) -> subprocess.Popen[bytes]:
    with open(log, "wb") as errors:
        return subprocess.Popen(
            [sys.executable, "-c", code, *args], stdout=subprocess.DEVNULL, stderr=errors
        )


#: tests/conftest.py's LedgerStore (a conftest cannot be imported under --import-mode=importlib)
LedgerStore = Any
#: (processes, releases tried per thread) of 4 threads each: 1600 attempts on SQLite, 640 on
#: PostgreSQL (where each spend is a round trip and a durable commit on the server).
WORKERS = {"sqlite": (8, 50), "postgresql": (4, 40)}


@pytest.mark.slow
@pytest.mark.parametrize(
    "ledger_store,budget,expected",
    [("sqlite", 10, 1000), ("sqlite", 5, 500), ("postgresql", 3, 300)],
    indirect=["ledger_store"],
)
def test_processes_and_threads_never_overspend(
    ledger_store: LedgerStore, budget: int, expected: int
) -> None:
    path = ledger_store.location
    dpkit.Session(budget=(budget, 0), ledger=path, dataset="concurrency")
    processes, tries = WORKERS[ledger_store.kind]
    workers = [_spawn(WORKER, str(path), "4", str(tries), "0.01") for _ in range(processes)]
    outputs = []
    for worker in workers:
        stdout, stderr = worker.communicate(timeout=300)
        assert worker.returncode == 0, stderr
        outputs.append(json.loads(stdout))
    returned = [rid for out in outputs for rid in out["ok"]]
    refused = sum(out["refused"] for out in outputs)
    assert len(returned) == expected
    assert refused == processes * 4 * tries - expected
    ledger = dpkit.Ledger(path)
    totals = ledger.verify()
    assert totals.epsilon == Fraction(budget)  # exactly, with no float drift
    entries = ledger.entries()
    assert len(entries) == expected
    assert {e.release_id for e in entries} == set(returned)
    assert ledger.remaining().epsilon == 0


def _read_ids(path: Path) -> tuple[bool, list[str]]:
    if not path.exists():
        return False, []
    lines = path.read_text().split("\n")
    complete = lines[:-1]  # the last piece may be a line cut by the kill
    return "started" in complete, [line for line in complete if line and line != "started"]


@pytest.mark.slow
def test_killed_processes_leave_a_consistent_ledger(
    ledger_store: LedgerStore, tmp_path: Path
) -> None:
    path = ledger_store.location
    dpkit.Session(budget=(10**6, 0), ledger=path, dataset="crash")
    rng = np.random.default_rng(20261122)
    outs = [tmp_path / f"ids-{i}.txt" for i in range(12)]
    for round_ in range(3):  # 3 rounds of 4 workers, each killed at a random moment
        batch = range(4 * round_, 4 * round_ + 4)
        workers = {
            i: _spawn_quiet(CRASHER, tmp_path / f"err-{i}.txt", str(path), str(outs[i]), str(i))
            for i in batch
        }
        deadline = time.monotonic() + 30
        while not all(_read_ids(outs[i])[0] for i in batch):  # wait until each is releasing
            assert time.monotonic() < deadline, "workers did not start"
            for worker in workers.values():
                assert worker.poll() is None, next(iter(tmp_path.glob("err-*.txt"))).read_text()
            time.sleep(0.05)
        for i in batch:
            time.sleep(float(rng.uniform(0.05, 0.4)))
            os.kill(workers[i].pid, signal.SIGKILL)
            workers[i].wait(timeout=30)
            assert workers[i].returncode == -signal.SIGKILL
    ledger = dpkit.Ledger(path)
    totals = ledger.verify()  # integrity check, totals equal the sum of the entries
    entries = {e.release_id: e for e in ledger.entries()}
    returned = [rid for out in outs for rid in _read_ids(out)[1]]
    assert len(returned) >= 12, "too few releases completed before the kills"
    missing = [rid for rid in returned if rid not in entries or entries[rid].status != "spent"]
    assert missing == []
    assert totals.epsilon == Fraction(len(entries), 1000)
    # entries may exceed the returned results (killed after commit, before returning): that is
    # the safe direction; and the ledger still accepts spends
    session = dpkit.Session(ledger=path)
    session.release(
        dpkit.mechanism("rr", epsilon=0.001), np.array([1]), rng=np.random.default_rng(0)
    )
    assert len(session.history()) == len(entries) + 1


CREATOR = r"""
import sys
import numpy as np
import dpkit

session = dpkit.Session(budget=(1.0, 0.0), ledger=sys.argv[1], dataset="race")
release = session.release(dpkit.mechanism("rr", epsilon=0.1), np.array([1]), rng=np.random.default_rng(0))
print(release.release_id)
"""


@pytest.mark.slow
def test_processes_creating_the_same_ledger_at_once(ledger_store: LedgerStore) -> None:
    path = ledger_store.location
    workers = [_spawn(CREATOR, str(path)) for _ in range(6)]
    outputs = [worker.communicate(timeout=120) for worker in workers]  # every pipe closed
    for worker, (_, stderr) in zip(workers, outputs, strict=True):
        assert worker.returncode == 0, stderr
    ids = [stdout.strip() for stdout, _ in outputs]
    ledger = dpkit.Ledger(path)
    assert ledger.verify().epsilon == Fraction(6, 10)
    assert sorted(e.release_id for e in ledger.entries()) == sorted(ids)
