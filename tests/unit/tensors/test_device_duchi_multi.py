"""Duchi et al.'s vector mechanism on the device path, run on the CPU (torch tensors and
array-api-strict arrays treated as an accelerator's): the keystream word map, each vertex's
probability against the CPU's own ``log_probability`` in both modes, and the CPU's refusals
(typed, naming the field, before any word is drawn).

χ² tests below: each refuses a correct law with probability at most ALPHA = 1e-6."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from scipy import stats

torch = pytest.importorskip("torch")
xs = pytest.importorskip("array_api_strict")

from dpkit_ldp import duchi  # noqa: E402
from support import device_reference  # noqa: E402

from dpkit import SecureRandom  # noqa: E402
from dpkit.errors import InvalidData  # noqa: E402
from dpkit.tensors import device_random  # noqa: E402
from dpkit.tensors import duchi_multi as device_duchi_multi  # noqa: E402

KEY = bytes(range(32))
ALPHA = 1e-6


@pytest.fixture
def device_arrays(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """torch and array-api-strict host arrays take the device path; the calls of the device
    function, recorded."""
    return device_reference.on_device(monkeypatch, [(duchi, "duchi_multi_reports")])


def _host(reports: Any) -> np.ndarray:
    return reports.numpy() if isinstance(reports, torch.Tensor) else np.from_dlpack(reports)


@pytest.mark.parametrize("spell", ["torch", "strict"])
def test_secure_reports_follow_the_stated_word_map(spell: str, device_arrays: list[str]) -> None:
    # d = 3 (odd: the first candidate is always taken): row i's u_j from the 64-bit word of
    # words 2(3i + j), 2(3i + j) + 1 (blocks 0-5), its heads word from words 96 + 2i, 97 + 2i
    # (blocks 6-7), its signs from bits 0-2 of word 128 + 4i (blocks 8-11: four candidates a
    # row), negated when Σ s < 0.
    mech = duchi.DuchiMulti(epsilon=1.0, lower=-2.0, upper=5.0, dimension=3)
    x = np.random.default_rng(7).uniform(-2.0, 5.0, size=(16, 3))
    x[0] = [-2.0, 5.0, 1.5]  # both ends and the centre
    values: Any = torch.from_numpy(x) if spell == "torch" else xs.asarray(x)
    reports = mech.randomize(values, rng=SecureRandom.from_key(KEY))
    assert device_arrays == ["duchi_multi_reports"]
    assert type(reports) is type(values) and tuple(reports.shape) == (16, 3)
    w = device_reference.stream(device_reference.call_key(KEY), 12).reshape(-1).astype(np.uint64)
    words = (w[0:128:2] << np.uint64(32)) | w[1:128:2]
    t = mech.standardize(x)
    up = (words[:48] >> np.uint64(11)).astype(np.float64).reshape(16, 3) * 2.0**-53 < (1 + t) / 2
    heads = words[48:64] < np.uint64(duchi._heads_threshold(1.0, 3))
    signs = ((w[128:192:4, None] >> np.arange(3, dtype=np.uint64)) & np.uint64(1)).astype(bool)
    signs ^= (2 * signs.sum(axis=1) - 3 < 0)[:, None]
    plus = up == (signs == heads[:, None])
    low, high = mech.to_data(np.array([-mech.bound, mech.bound]))
    assert np.array_equal(_host(reports), np.where(plus, high, low))
    assert 0 < heads.sum() < 16 and 0 < up.sum() < 48


@pytest.mark.parametrize("rng", ["secure", "fast"])
@pytest.mark.parametrize("dimension", [2, 3, 4])
def test_vertices_have_the_cpus_probabilities_in_both_modes(
    rng: str, dimension: int, device_arrays: list[str]
) -> None:
    # 30 000 reports of one row: the counts of the 2^d vertices against the CPU's
    # log_probability (even d: the on-plane sign vectors, drawn again or kept by the coin).
    mech = duchi.DuchiMulti(epsilon=1.5, lower=0.0, upper=1.0, dimension=dimension)
    row = np.linspace(0.1, 0.8, dimension)
    n = 30_000
    generator = None if rng == "secure" else torch.Generator().manual_seed(12)
    reports = _host(mech.randomize(torch.from_numpy(np.tile(row, (n, 1))), rng=generator))
    assert device_arrays == ["duchi_multi_reports"]
    vertices = mech.output_space()
    index = (reports > mech.centre).astype(np.int64) @ (1 << np.arange(dimension)[::-1])
    observed = np.bincount(index, minlength=2**dimension)
    order = (vertices > mech.centre).astype(np.int64) @ (1 << np.arange(dimension)[::-1])
    expected = np.empty(2**dimension)
    expected[order] = np.exp(mech.log_probability(vertices, np.tile(row, (len(vertices), 1))))
    assert math.isclose(expected.sum(), 1.0, rel_tol=1e-12)
    assert stats.chisquare(observed, n * expected).pvalue > ALPHA


@pytest.mark.usefixtures("device_arrays")
def test_the_device_path_refuses_what_the_cpu_refuses(monkeypatch: pytest.MonkeyPatch) -> None:
    mech = duchi.DuchiMulti(epsilon=1.0, lower=-2.0, upper=5.0, dimension=3)
    for bad, message in (
        (torch.zeros((4, 2), dtype=torch.float64), "must have 3 columns"),
        (torch.zeros((), dtype=torch.float64), "must have 3 columns"),
        (torch.tensor([[0.0, 1.0, math.nan]]), r"NaN or values outside \[-2, 5\]"),
        (torch.tensor([[0.0, 1.0, 5.5]]), r"NaN or values outside \[-2, 5\]"),
        (torch.tensor([[1 + 1j, 0, 0]]), "must be real numbers"),
    ):
        monkeypatch.setattr(
            device_duchi_multi, "device_words", lambda *a, **k: device_reference.Drawless()
        )
        with pytest.raises(InvalidData, match=message) as refused:
            mech.randomize(bad)
        assert refused.value.field == "values"
    monkeypatch.setattr(device_random, "index_dtype", lambda xp: xp.int32)  # JAX without x64
    with pytest.raises(InvalidData, match="float64 and 64-bit integers"):
        mech.randomize(torch.zeros((1, 3), dtype=torch.float64))
