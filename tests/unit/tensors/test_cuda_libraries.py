"""The device paths on a real CUDA GPU with CuPy and JAX arrays (torch's are in
``test_cuda.py``): the caller's type and device back, secure words that are the documented
ChaCha20 stream, the same results as the portable path run on the CPU with the same key, the
law of k-ary randomized response in both modes with the library's own generator, and the
estimators counting there. Skipped, with the reason, where the library or a CUDA device is
missing (CI has neither; the GPU check runs them)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs
import numpy as np
import pytest
from support import device_reference, jax_arrays

import dpkit
from dpkit import SecureRandom
from dpkit.plugin import lie_threshold
from dpkit.tensors import array_library
from dpkit.tensors.device_random import threshold32

pytestmark = pytest.mark.cuda

KEY = bytes(range(9, 41))


@attrs.frozen
class Library:
    """How a test makes a CUDA array of one library, reads it back, and seeds its generator."""

    name: str
    to_device: Callable[[np.ndarray[Any, Any]], Any]
    to_host: Callable[[Any], np.ndarray[Any, Any]]
    generator: Callable[[int], Any]
    array_type: type


def _cupy() -> Library:
    cupy = pytest.importorskip("cupy")
    try:
        present = cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:  # no driver: CuPy raises its own runtime error
        present = False
    if not present:
        pytest.skip("no CUDA device on this machine")
    return Library("cupy", cupy.asarray, lambda a: a.get(), cupy.random.default_rng, cupy.ndarray)


def _jax() -> Library:
    jax = jax_arrays.jax
    if jax is None:
        pytest.skip("JAX is not installed")
    try:
        gpu = jax.devices("gpu")[0]
    except RuntimeError:
        pytest.skip("no CUDA device for JAX on this machine")
    return Library(
        "jax",
        lambda a: jax.device_put(jax_arrays.jnp.asarray(a), gpu),
        np.asarray,
        jax.random.key,
        jax.Array,
    )


@pytest.fixture(params=["cupy", "jax"])
def library(request: pytest.FixtureRequest) -> Library:
    return _cupy() if request.param == "cupy" else _jax()


def _portable(values: np.ndarray[Any, Any], call: Callable[[Any], Any], monkeypatch: Any) -> Any:
    """``call`` on the portable device path, run on the CPU (an array-api-strict array made to
    take it): the same words and operations as on the GPU for a library without fused kernels."""
    xs = pytest.importorskip("array_api_strict")
    with monkeypatch.context() as patched:
        device_reference.on_device(patched)
        return np.from_dlpack(call(xs.asarray(values)))


def test_arrays_stay_on_the_gpu_in_their_type(library: Library) -> None:
    x = library.to_device(np.arange(1000) % 2)
    y = dpkit.mechanism("rr", epsilon=1.0).randomize(x)
    assert isinstance(y, library.array_type)
    assert not array_library(y, owner="test").on_host


def test_secure_flips_are_the_keystream_words_in_order(library: Library) -> None:
    rr = dpkit.mechanism("rr", epsilon=1.0)
    x = (np.arange(5000) % 3 == 0).astype(np.int64)
    y = library.to_host(rr.randomize(library.to_device(x), rng=SecureRandom.from_key(KEY)))
    words = device_reference.stream(device_reference.call_key(KEY), 313).reshape(-1)[:5000]
    assert np.array_equal(y, x ^ (words < threshold32(rr._flip_threshold())))


@pytest.mark.parametrize(
    "name, values",
    [
        ("krr", np.arange(3000) % 7),
        ("geometric", np.arange(-1500, 1500)),
        ("report_noisy_max", np.tile([0.0, 1.0, -np.inf, 2.5], (500, 1))),
    ],
)
def test_integer_results_are_the_portable_paths_on_the_same_key(
    library: Library, name: str, values: np.ndarray[Any, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    options = {"k": 7} if name == "krr" else {}
    mechanism = dpkit.mechanism(name, epsilon=1.0, **options)

    def call(array: Any) -> Any:
        return mechanism.randomize(array, rng=SecureRandom.from_key(KEY))

    got = library.to_host(call(library.to_device(values)))
    assert np.array_equal(got, _portable(values, call, monkeypatch))


@pytest.mark.parametrize("output", ["dense", "packed", "coo", "csr"])
def test_the_graph_is_the_portable_paths_on_the_same_key(
    library: Library, output: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = np.random.default_rng(4)
    upper = np.triu(rng.random((300, 300)) < 0.05, 1)
    adjacency = (upper | upper.T).astype(np.uint8)
    rr = dpkit.mechanism("rr", epsilon=1.0)

    def call(array: Any, part: int) -> Any:
        out = rr.randomize_graph(array, rng=SecureRandom.from_key(KEY), output=output)
        return out[part] if isinstance(out, tuple) else out

    for part in range(1 if output in ("dense", "packed") else 2):
        got = library.to_host(call(library.to_device(adjacency), part))
        expected = _portable(adjacency, lambda array, part=part: call(array, part), monkeypatch)
        assert np.array_equal(got, expected)


@pytest.mark.parametrize("mode", ["secure", "fast"])
def test_krr_has_the_exact_law_and_its_estimator_counts_on_the_gpu(
    library: Library, mode: str
) -> None:
    # Chi-square against the exact pmf (λ rounded up to the 32-bit grid): p > 1e-6, a
    # false-positive rate of 1e-6 per library and mode.
    from scipy import stats

    krr = dpkit.mechanism("krr", epsilon=1.0, k=5)
    rng = None if mode == "secure" else library.generator(2)
    x = library.to_device(np.full(200_000, 3, dtype=np.int64))
    y = krr.randomize(x, rng=rng)
    assert isinstance(y, library.array_type)
    lie = threshold32(lie_threshold(1.0, 5)) / 2**32
    expected = np.full(5, lie / 4)
    expected[3] = 1 - lie
    estimator = dpkit.load_registry().estimator(krr)
    counts = estimator.accumulate(y).counts
    assert np.array_equal(counts, estimator.accumulate(library.to_host(y)).counts)
    assert stats.chisquare(counts, expected * 200_000).pvalue > 1e-6
