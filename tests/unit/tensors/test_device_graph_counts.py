"""Noisy degrees and noisy k-stars on the device path, run on the CPU (torch tensors and
array-api-strict arrays treated as an accelerator's): the counts of the lists (the projection
included), the exact discrete Laplace law of the noise in both modes against the mechanism's
own ``log_probability``, and the CPU's refusals before any word is drawn.

χ² tests below: each refuses a correct law with probability at most ALPHA = 1e-6."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from scipy import stats

torch = pytest.importorskip("torch")
xs = pytest.importorskip("array_api_strict")

from dpkit_ldp import graph_degree  # noqa: E402
from support import device_reference  # noqa: E402

from dpkit.errors import InvalidData  # noqa: E402
from dpkit.tensors import device_random, list_counts  # noqa: E402

ALPHA = 1e-6
DEGREE = graph_degree.NoisyDegree(epsilon=1.0, nodes=9)
KSTAR = graph_degree.LocalKStars(epsilon=2.0, nodes=9, max_degree=4, k=2)


@pytest.fixture
def device_arrays(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """torch and array-api-strict host arrays take the device path; the calls of the device
    function, recorded."""
    return device_reference.on_device(monkeypatch, [(graph_degree, "noisy_list_counts")])


def _host(array: Any) -> np.ndarray:
    return array.numpy() if isinstance(array, torch.Tensor) else np.from_dlpack(array)


@pytest.mark.parametrize("spell", ["torch", "strict"])
@pytest.mark.parametrize("mech", [DEGREE, KSTAR], ids=["degree", "kstar"])
def test_the_counts_are_the_cpus(
    spell: str, mech: Any, device_arrays: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Noise switched off to read the counts: every degree 0 … 8, so the k-star projection at
    # D = 4 shows; lists in a (3, 3, 8) array of booleans, integers or floats.
    monkeypatch.setattr(list_counts, "geometric_noise", lambda library, counts, **kw: counts)
    lists = np.tril(np.ones((9, 8)), -1)[:, ::-1].reshape(3, 3, 8)
    for dtype in (np.bool_, np.int32, np.float32):
        values = lists.astype(dtype)
        got = mech.randomize(torch.from_numpy(values) if spell == "torch" else xs.asarray(values))
        assert tuple(got.shape) == (3, 3)
        degrees = values.astype(bool).sum(axis=-1)
        assert np.array_equal(_host(got), mech.count(degrees.reshape(-1)).reshape(3, 3))
    assert set(device_arrays) == {"noisy_list_counts"}


@pytest.mark.parametrize("rng", ["secure", "fast"])
@pytest.mark.parametrize("mech", [DEGREE, KSTAR], ids=["degree", "kstar"])
def test_the_noise_has_the_exact_law_in_both_modes(
    rng: str, mech: Any, device_arrays: list[str]
) -> None:
    # 20 000 releases of one list of degree 5: the outputs' counts against the mechanism's own
    # pmf (log_probability) on its output window, the tails beyond it pooled.
    lists = np.zeros((20_000, 8), dtype=np.int64)
    lists[:, :5] = 1
    generator = None if rng == "secure" else torch.Generator().manual_seed(2)
    out = _host(mech.randomize(torch.from_numpy(lists), rng=generator))
    assert out.dtype == np.int64 and device_arrays == ["noisy_list_counts"]
    window = np.arange(*mech.output_window())
    inside = np.exp(mech.log_probability(window, np.broadcast_to(lists[0], (window.size, 8))))
    observed = np.append(np.bincount(out - window[0], minlength=window.size)[: window.size], 0)
    observed[-1] = np.count_nonzero((out < window[0]) | (out > window[-1]))
    expected = np.append(inside, max(1.0 - inside.sum(), 0.0)) * out.size
    keep = expected > 5  # the χ² approximation's rule; the rare outputs pooled into the last
    pooled = np.append(observed[keep], observed[~keep].sum())
    pooled_expected = np.append(expected[keep], expected[~keep].sum())
    assert (
        stats.chisquare(pooled, pooled_expected * pooled.sum() / pooled_expected.sum()).pvalue
        > ALPHA
    )


@pytest.mark.usefixtures("device_arrays")
def test_the_device_path_refuses_what_the_cpu_refuses(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(list_counts, "geometric_noise", _no_noise_expected)
    for bad, message in (
        (torch.tensor([0, 2, 1]), "must hold 0 or 1"),
        (torch.tensor([0.0, float("nan")]), "must hold 0 or 1"),
        (torch.tensor(1), "must be a 0/1 array"),
        (torch.tensor([1 + 1j]), "must be a 0/1 array"),
    ):
        for mech in (DEGREE, KSTAR):
            with pytest.raises(InvalidData, match=message) as refused:
                mech.randomize(bad)
            assert refused.value.field == "values"
            with pytest.raises(InvalidData, match=message):
                mech.randomize(_host(bad))  # the CPU says the same
    monkeypatch.setattr(device_random, "index_dtype", lambda xp: xp.int32)  # JAX without x64
    with pytest.raises(InvalidData, match="64-bit integers"):
        DEGREE.randomize(torch.tensor([0, 2]))  # the library is refused before the values


def _no_noise_expected(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("noise was drawn before the refusal")
