"""``dpkit run``'s progress on stderr: on a terminal (a pseudo-terminal here) one line rewritten
while the file is read, batch by batch, and while the queries are released, ending with a
summary; elsewhere, with ``--progress``, the summary line alone; and the same text whatever
the file's values.

The CLI runs in a subprocess through a small driver that shrinks the reader's block (4 KiB, so
a 120 kB file is read in some 30 batches) and removes the line's delay and redraw interval,
so that every update is drawn: the progress of a long read, shown on a small file.
"""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import sys
from pathlib import Path

import pytest

DRIVER = """
import sys
from dpkit.spec import columnar
from dpkit.commands import _progress, run
columnar.BLOCK_BYTES = 4096
_progress.ProgressLine.INTERVAL = 0.0
run._Progress.DELAY = 0.0
from dpkit.cli import main
raise SystemExit(main(sys.argv[1:]))
"""


def _write_case(directory: Path, values: list[int]) -> Path:
    rows = "".join(f"u{i:06d},{v:08d}\n" for i, v in enumerate(values))
    (directory / "data.csv").write_text("user,amount\n" + rows, encoding="utf-8")
    spec = {
        "dpkit": "1",
        "id": "progress",
        "dataset": "progress",
        "budget": {"epsilon": 1.0, "composition": "basic"},
        "defaults": {
            "input": {"source": "csv", "path": "data.csv", "column": "amount"},
            "rng": {"mode": "fast", "seed": 1},
        },
        "queries": [
            {"id": "rows", "statistic": "count", "budget": {"epsilon": 0.1}},
            {"id": "total", "statistic": "sum", "params": {"lower": 0, "upper": 100},
             "budget": {"epsilon": 0.1}},
            {"id": "mean", "statistic": "mean", "params": {"lower": 0, "upper": 100},
             "budget": {"epsilon": 0.1}},
        ],
    }  # fmt: skip
    (directory / "spec.json").write_text(json.dumps(spec), encoding="utf-8")
    return directory / "spec.json"


def _run(spec: Path, *options: str, terminal: bool) -> tuple[int, str]:
    """Exit code and stderr of ``dpkit run SPEC`` (stderr on a pseudo-terminal if asked)."""
    command = [sys.executable, "-c", DRIVER, "run", str(spec), "--ledger", "l.sqlite", *options]
    if not terminal:
        done = subprocess.run(
            command, cwd=spec.parent, capture_output=True, text=True, check=False, timeout=120
        )
        return done.returncode, done.stderr
    main, secondary = pty.openpty()
    process = subprocess.Popen(
        command, cwd=spec.parent, stdout=subprocess.DEVNULL, stderr=secondary, env=os.environ
    )
    os.close(secondary)
    received = b""
    while True:
        try:
            chunk = os.read(main, 1 << 16)
        except OSError:  # the other end closed (Linux: EIO)
            break
        if not chunk:
            break
        received += chunk
    os.close(main)
    return process.wait(timeout=120), received.decode("utf-8").replace("\r\n", "\n")


VALUES = list(range(5000))
SUMMARY = r"read data\.csv \(0\.1 MB\) in \d+\.\d s; released 3 queries in \d+\.\d s"


def test_a_terminal_sees_the_read_and_the_queries_on_one_line(tmp_path: Path) -> None:
    code, err = _run(_write_case(tmp_path, VALUES), terminal=True)
    assert code == 0, err
    # One line: every update starts with a carriage return, a single newline ends the summary.
    assert err.count("\n") == 1 and err.endswith("\n")
    updates = [text.removesuffix("\x1b[K") for text in err.rstrip("\n").split("\r")[1:]]
    shares = [
        int(m[1]) for m in map(re.compile(r"reading data\.csv: +(\d+)% of").match, updates) if m
    ]
    assert len([s for s in shares if s < 100]) >= 10, updates  # incremental, batch by batch
    assert shares == sorted(shares) and shares[-1] == 100
    released = [u for u in updates if u.startswith("released")]
    assert released == [f"released {i} of 3 queries" for i in (1, 2, 3)]
    assert updates.index(released[0]) > max(i for i, u in enumerate(updates) if "reading" in u)
    assert re.fullmatch(SUMMARY, updates[-1]), updates[-1]


def test_elsewhere_progress_is_one_summary_line(tmp_path: Path) -> None:
    spec = _write_case(tmp_path, VALUES)
    code, err = _run(spec, "--progress", terminal=False)
    assert code == 0 and re.fullmatch(SUMMARY + "\n", err), repr(err)
    code, err = _run(spec, "--ledger", "other.sqlite", terminal=False)  # not asked: nothing
    assert code == 0 and err == ""


@pytest.mark.parametrize("terminal", [True, False], ids=["terminal", "pipe"])
def test_progress_does_not_depend_on_the_values(tmp_path: Path, terminal: bool) -> None:
    """Two files of the same size, with different values (all clamped away in the second):
    the same progress text, once the durations are masked."""
    texts = []
    for name, values in (("a", VALUES), ("b", [99_999_999 - v for v in VALUES])):
        (tmp_path / name).mkdir()
        code, err = _run(_write_case(tmp_path / name, values), "--progress", terminal=terminal)
        assert code == 0, err
        texts.append(re.sub(r"\d+\.\d s", "… s", err))
    assert texts[0] == texts[1]
