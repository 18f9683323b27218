"""Seeded (fast-mode) specs: every query draws its own noise, and a rerun reproduces.

The bug this guards against: with one seed for the whole spec, every query drew the same
noise, so releasing "all rows" and "rows with an income" and subtracting gave the exact number
of missing incomes.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dpkit.spec import run_spec

TRUE_COUNTS = list(range(10, 30))  # 20 inline datasets of different sizes


def seeded_session(seed: int, counts: list[int] = TRUE_COUNTS) -> dict[str, object]:
    return {
        "dpkit": "1",
        "dataset": "d",
        "budget": {"epsilon": 100.0},
        "defaults": {"rng": {"mode": "fast", "seed": seed}},
        "queries": [
            {
                "id": f"q{i}-n{n}",  # ids are unique in a spec
                "statistic": "count",
                "input": {"source": "inline", "values": [1] * n},
                "budget": {"epsilon": 0.1},
            }
            for i, n in enumerate(counts)
        ],
    }


def noises(document: dict[str, object], counts: list[int] = TRUE_COUNTS) -> list[float]:
    return [r["estimate"] - n for r, n in zip(document["results"], counts, strict=True)]  # type: ignore[index, operator]


def test_queries_sharing_a_seed_draw_different_noise(tmp_path: Path) -> None:
    """Under the bug all 20 noises are equal; independent discrete Laplace draws at ε = 0.1 are
    all equal with probability about 0.05^19 (each pair ties with probability ≈ 0.05)."""
    document = run_spec(seeded_session(7), base_dir=tmp_path, ledger=tmp_path / "a.sqlite")
    assert len(set(noises(document))) > 1


def test_the_same_spec_and_seed_reproduce(tmp_path: Path) -> None:
    first = run_spec(seeded_session(7), base_dir=tmp_path, ledger=tmp_path / "a.sqlite")
    again = run_spec(seeded_session(7), base_dir=tmp_path, ledger=tmp_path / "b.sqlite")
    assert noises(first) == noises(again)


@pytest.mark.parametrize("cli_seed", [None, 11])
def test_a_different_query_with_the_same_seed_gets_other_noise(
    tmp_path: Path, cli_seed: int | None
) -> None:
    """The same seed reused by another spec: query 0 counts other data, so it must not reuse the
    noise of the first spec's query 0 (cancelling it across the two runs)."""
    a = run_spec(
        seeded_session(7, [10] * 20), base_dir=tmp_path, ledger=tmp_path / "a.sqlite", seed=cli_seed
    )
    b = run_spec(
        seeded_session(7, [12] * 20), base_dir=tmp_path, ledger=tmp_path / "b.sqlite", seed=cli_seed
    )
    assert noises(a, [10] * 20) != noises(b, [12] * 20)
