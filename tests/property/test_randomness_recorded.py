"""The ledger records what a release's randomness is: ``"secure"``, ``"keyed"`` or ``"fast"``.

"secure" promises draws nobody can reproduce; a :class:`dpkit.SecureRandom` fixed by a key
(``SecureRandom.from_key``, or one built on a keyed ``SecureWordSource``) runs secure mode's
samplers on a stream that whoever knows the key replays, so it must be recorded as "keyed".
For any sequence of releases — mechanisms, central and table queries, single and in batches —
each with a generator drawn among fast (a seeded numpy ``Generator``), secure (``None``: the
process-wide source, or a fresh ``SecureRandom()``) and keyed (a drawn key, through either
constructor, used once or again), every ledger entry, and ``dpkit budget history``'s JSON,
records the mode the generator is; and two releases on one key are identical (why "keyed" is
not "secure").

False-positive rate: 0. The recorded mode is decided by the generator alone (deterministic);
the comparison of two keyed releases is exact (one key, one stream, one output). Hypothesis is
derandomized (the same examples on every run).
"""

from __future__ import annotations

import contextlib
import io
import json
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from dpkit_central import Count, Mean
from hypothesis import given, settings
from hypothesis import strategies as st
from support.table_cases import SETTINGS

import dpkit
from dpkit.cli import main
from dpkit.randomness.source import SecureWordSource

#: Sequences drawn: a keyed generator is drawn in seven sequences of eight (a third of the
#: releases), so a keyed stream recorded as secure shows in the first few.
EXAMPLES = 40
BUDGET = (1000.0, 0.0)
TABLE = pd.DataFrame({"user": [1, 1, 2, 3], "v": [1.0, 2.0, 3.0, 4.0]})


def _targets() -> list[tuple[Any, Any]]:
    """Targets of one (record) unit, so that every sequence can share one ledger."""
    return [
        (dpkit.mechanism("laplace", epsilon=0.5, sensitivity=1.0), np.array([3.0, 4.0])),
        (dpkit.mechanism("krr", epsilon=0.5, k=4), np.arange(20) % 4),
        (Mean(lower=0.0, upper=5.0, epsilon=0.5), np.array([1.0, 2.0, 3.0])),
        (Count(epsilon=0.5).on(), TABLE),
    ]


TARGETS = _targets()


@st.composite
def generators(draw: st.DrawFn) -> tuple[Any, str, bytes | None]:
    """A generator, the mode it is (as defined here, not read from dpkit), and its key."""
    kind = draw(st.sampled_from(["fast", "secure", "keyed"]))
    if kind == "fast":
        return np.random.default_rng(draw(st.integers(0, 2**32 - 1))), "fast", None
    if kind == "secure":
        return draw(st.sampled_from([None, "fresh"])), "secure", None
    key = draw(st.sampled_from([bytes(32), b"\x01" * 32, bytes(range(32))]))
    return draw(st.sampled_from(["from_key", "source"])), "keyed", key


def _made(spec: Any, key: bytes | None) -> Any:
    """The generator a drawn spec names (built at release time: a generator is used once)."""
    if spec == "fresh":
        return dpkit.SecureRandom()
    if spec == "from_key":
        assert key is not None
        return dpkit.SecureRandom.from_key(key)
    if spec == "source":
        assert key is not None
        return dpkit.SecureRandom(SecureWordSource.from_key(key))
    return spec


releases = st.lists(
    st.lists(st.tuples(st.integers(0, len(TARGETS) - 1), generators()), min_size=1, max_size=3),
    min_size=1,
    max_size=5,
)


@settings(max_examples=EXAMPLES, **SETTINGS)
@given(steps=releases)
def test_each_release_records_the_randomness_it_drew_from(steps: list[Any]) -> None:
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "ledger.db"
        session = dpkit.Session(budget=BUDGET, ledger=path)
        expected: list[str] = []
        by_key: dict[tuple[int, bytes], Any] = {}
        for batch in steps:
            items = [
                (TARGETS[t][0], TARGETS[t][1], _made(spec, key)) for t, (spec, _, key) in batch
            ]
            done = (
                [session.release(*items[0][:2], rng=items[0][2])]
                if len(items) == 1
                else session.release_all(items)
            )
            for (t, (_, mode, key)), release in zip(batch, done, strict=True):
                expected.append(mode)
                assert release.entry.randomness == mode, (
                    f"a release drawn from {mode} randomness is recorded as "
                    f"{release.entry.randomness!r}"
                )
                if key is not None and len(batch) == 1:  # one key, one stream: one output
                    values = np.asarray(release.values, dtype=object)
                    first = by_key.setdefault((t, key), values)
                    assert np.array_equal(first, values), "one key gave two streams"
        recorded = [entry.randomness for entry in session.history()]
        assert recorded == expected
        history = _history(path)
        assert [row["randomness"] for row in history] == expected, history


def _history(path: Path) -> list[dict[str, Any]]:
    """``dpkit budget history --json`` of the ledger, as the CLI prints it."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["budget", "history", "--ledger", str(path), "--json"]) == 0
    return list(json.loads(out.getvalue()))
