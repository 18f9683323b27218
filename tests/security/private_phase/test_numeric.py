"""Red-team tests of the numeric local mechanisms and the spec's local ``mean``.

An analyst who writes specs (or calls a session) tries to learn a private value from anything
but the DP release: refusals, exit codes, messages, how many records were usable, the low bits
of a secure report. Each CLI attack compares *everything observable* (exit code, stderr, the
result document without the noisy fields) between neighbouring datasets; equal observations
carry no information about the difference. The private phase of a numeric mechanism clamps
out-of-range values and replaces non-numbers by the midpoint, record by record, so every probe
releases, in both worlds, and spends exactly its budget.
"""

from __future__ import annotations

import json
import math
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from dpkit_ldp.piecewise import piecewise_lattice
from dpkit_ldp.square_wave import square_wave_lattice

import dpkit

ROW_WIDTH = 40
AGES = list(range(18, 78))
MEAN_MECHANISMS = ("duchi", "pm", "hm")


def _dataset(path: Path, cells: list[Any]) -> None:
    """One fixed-width row per record, so neighbouring files have the same (public) size."""
    lines = ["age,note"]
    for cell in cells:
        body = f"{cell},"
        lines.append(body + "x" * (ROW_WIDTH - len(body)))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _local_mean(name: str, lower: float, upper: float, epsilon: float = 0.5) -> dict[str, Any]:
    return {
        "statistic": "mean",
        "mechanism": {"name": name, "params": {"lower": lower, "upper": upper}},
        "input": {"source": "csv", "path": "data.csv", "column": "age"},
        "budget": {"epsilon": epsilon},
    }


def _session(queries: list[dict[str, Any]]) -> dict[str, Any]:
    return {"dpkit": "1", "dataset": "redteam", "budget": {"epsilon": 1000.0}, "queries": queries}


def _run(rt: Any, world: Path, cells: list[Any], spec: dict[str, Any]) -> Any:
    _dataset(world / "data.csv", cells)
    rt.write_json(world / "spec.json", spec)
    return rt.fork_cli("run", "--json", "spec.json", "--ledger", "ledger.sqlite", cwd=world)


@pytest.mark.parametrize(
    "secret",
    [7355608, -3, "NaN", "", "carol_has_hiv", "1e999", 37.5],
    ids=["canary", "below", "nan", "empty", "text", "overflow", "inside"],
)
def test_a_record_cannot_be_read_through_a_local_mean(rt: Any, tmp_path: Path, secret: Any) -> None:
    """Attack: local means whose bounds exclude the secret, or sit right around a candidate
    value ([v, v + 1]), hoping a leaky implementation refuses, warns, or reports fewer records
    when the secret occurs. Recovered bits: none — both neighbours (the secret, or 40 in its
    place) give identical observables, every probe releases, the secret is never printed."""
    probes = []
    for name in MEAN_MECHANISMS:
        probes += [_local_mean(name, 18, 90), _local_mean(name, 37, 38)]
    spec = _session(probes)
    with_secret = _run(rt, tmp_path / "with", [*AGES[:30], secret, *AGES[30:]], spec)
    without = _run(rt, tmp_path / "without", [*AGES[:30], 40, *AGES[30:]], spec)
    assert with_secret.observable() == without.observable(), (
        with_secret.explain() + "\n=== neighbour ===\n" + without.explain()
    )
    assert with_secret.returncode == 0, with_secret.explain()
    results = with_secret.json()["results"]
    assert {r["n"] for r in results} == {len(AGES) + 1}  # no record dropped
    rt.assert_not_echoed([with_secret, without], [str(rt.CANARY_NUMBER), rt.CANARY_LABEL])
    assert rt.ledger_spent(tmp_path / "with" / "ledger.sqlite") == Fraction(len(probes), 2)


def test_the_maximum_is_not_readable_through_bounds(rt: Any, tmp_path: Path) -> None:
    """Attack: sweep the upper bound of a local mean across the true maximum (77). Recovered
    bits: every run exits 0 with the same stderr and the same result shape."""
    _dataset(tmp_path / "data.csv", AGES)
    observed = []
    for t in (60, 76, 77, 78, 1000):
        spec = _session([_local_mean(name, 0, t) for name in MEAN_MECHANISMS])
        rt.write_json(tmp_path / f"t{t}.json", spec)
        observed.append(
            rt.fork_cli("run", "--json", f"t{t}.json", "--ledger", "ledger.sqlite", cwd=tmp_path)
        )
    assert {r.returncode for r in observed} == {0}, [r.explain() for r in observed]
    assert len({r.stderr for r in observed}) == 1
    shapes = {json.dumps(sorted(rt.strip_released(r.json())["results"][0])) for r in observed}
    assert len(shapes) == 1


def test_bad_record_counts_are_not_readable(rt: Any, tmp_path: Path) -> None:
    """Attack: datasets with 0, 1 and 5 unusable cells (empty, NaN, text, out of range): the
    counts of bad records must not show in anything but the noisy estimates."""
    bad = ["", "NaN", "abc", "-9999", "N/A"]
    runs = []
    for k in (0, 1, 5):
        cells: list[Any] = list(AGES)
        for i in range(k):
            cells[5 + 10 * i] = bad[i]
        spec = _session([_local_mean(name, 18, 90) for name in MEAN_MECHANISMS])
        runs.append(_run(rt, tmp_path / f"bad{k}", cells, spec))
    assert runs[0].observable() == runs[1].observable() == runs[2].observable()
    rt.assert_not_echoed(runs, ["abc", "N/A", "-9999"])


def test_public_refusals_spend_nothing(rt: Any, tmp_path: Path) -> None:
    """Inverted bounds, a distribution or vector mechanism under ``mean``, parameters in the
    wrong place: exit 2, one line on stderr, nothing spent."""
    _dataset(tmp_path / "data.csv", AGES)
    wrong = [
        _local_mean("pm", 90, 18),
        {**_local_mean("pm", 18, 90), "params": {"lower": 18, "upper": 90}},
        {**_local_mean("pm", 18, 90), "mechanism": {"name": "sw"}},
        {**_local_mean("pm", 18, 90), "mechanism": {"name": "pm_multi"}},
    ]
    for i, query in enumerate(wrong):
        rt.write_json(tmp_path / f"w{i}.json", _session([query]))
        result = rt.fork_cli(
            "run", "--json", f"w{i}.json", "--ledger", "ledger.sqlite", cwd=tmp_path
        )
        rt.assert_clean_refusal(result)
    assert rt.spent_entry_count(tmp_path / "ledger.sqlite") == 0


# --- the Python API ------------------------------------------------------------------------------


def _ledger_spent(session: dpkit.Session) -> Fraction:
    return Fraction(session.spent.epsilon)


@pytest.mark.parametrize(
    ("name", "data"),
    [
        ("pm", np.zeros((3, 2))),  # a scalar mechanism takes one number per record
        ("pm", np.array(["18", "90"])),  # text is refused from its dtype
        ("duchi_multi", np.zeros(4)),  # a vector mechanism takes rows of d numbers
        ("pm_multi", np.zeros((5, 3))),  # d = 4 columns
        ("sw", np.array(b"xy")),
    ],
)
def test_structure_is_refused_before_the_spend(name: str, data: Any) -> None:
    session = dpkit.Session(budget=(10.0, 0.0))
    mechanism = dpkit.mechanism(name, epsilon=1.0)
    with pytest.raises(dpkit.InvalidData):
        session.release(mechanism, data, rng=np.random.default_rng(0))
    assert _ledger_spent(session) == 0


@pytest.mark.parametrize("name", ["duchi", "pm", "hm", "sw", "duchi_multi", "pm_multi", "hm_multi"])
@pytest.mark.parametrize("secure", [False, True], ids=["fast", "secure"])
def test_the_private_phase_is_total(name: str, secure: bool) -> None:
    """Adversarial records after the spend: released, one report each, all finite."""
    mechanism = dpkit.mechanism(name, epsilon=1.0, lower=0.0, upper=10.0)
    records = np.empty(7, dtype=object)
    records[:] = [math.nan, math.inf, -math.inf, "carol_has_hiv", None, 10**400, 5]
    d = getattr(mechanism, "dimension", 1)
    data = np.repeat(records[:, None], d, axis=1) if d > 1 else records
    session = dpkit.Session(budget=(10.0, 0.0))
    release = session.release(mechanism, data, rng=None if secure else np.random.default_rng(1))
    reports = np.asarray(release.values, dtype=float)
    assert reports.shape[0] == 7 and np.all(np.isfinite(reports))
    assert _ledger_spent(session) == 1
    coerced = mechanism.coerce(data)
    assert np.all((coerced >= 0.0) & (coerced <= 10.0))


def test_direct_calls_refuse_values_outside_the_domain() -> None:
    """The holder of the data, calling randomize directly, is told (the session clamps)."""
    pm = dpkit.mechanism("pm", epsilon=1.0, lower=0.0, upper=10.0)
    with pytest.raises(dpkit.InvalidData, match="outside"):
        pm.randomize(np.array([5.0, 11.0]), rng=np.random.default_rng(0))
    with pytest.raises(dpkit.InvalidData, match="NaN"):
        pm.randomize(np.array([np.nan]), rng=np.random.default_rng(0))


# --- secure mode: no low bit depends on the input ------------------------------------------------


@pytest.mark.parametrize("epsilon", [0.5, 2.0, 9.0])
def test_secure_reports_lie_on_a_fixed_lattice(epsilon: float) -> None:
    """Mironov's attack reads the input off which floats a float sampler can reach. In secure
    mode the piecewise and square-wave reports are centres of a fixed lattice, whatever the
    input: (y/g − ½) (pm, standard units) and (ṽ/g + H/2 − ½) (sw) are whole numbers."""
    rng = dpkit.SecureRandom()
    pm = dpkit.mechanism("pm", epsilon=epsilon)
    lattice = piecewise_lattice(epsilon)
    sw = dpkit.mechanism("sw", epsilon=epsilon)
    secure_sw = square_wave_lattice(epsilon)
    for x in (-1.0, -0.123456789, 0.0, 1 / 3, 1.0):
        y = pm.randomize(np.full(5000, x), rng=rng)
        cells = y / float(lattice.step) - 0.5
        assert np.array_equal(cells, np.round(cells))
        v = sw.randomize(np.full(5000, (x + 1) / 2), rng=rng)
        shifted = v * secure_sw.per_unit + secure_sw.lattice.band / 2 - 0.5
        assert np.array_equal(shifted, np.round(shifted))
    fast = pm.randomize(np.full(5000, 1 / 3), rng=np.random.default_rng(3))
    off = fast / float(lattice.step) - 0.5
    assert not np.array_equal(off, np.round(off))  # the check can tell: fast floats are not
