"""JAX arrays: refused without JAX's 64-bit types (decided from its configuration, before any
value is read), a JAX key as the fast-mode generator on the host and the device path, and the
device graph of randomized response built without writing into an array (JAX's are
immutable). The properties of ``tests/property`` run every mechanism on JAX arrays as well."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from support import device_reference, jax_arrays

if jax_arrays.jax is None:
    pytest.skip("JAX is not installed (it is in the test extra)", allow_module_level=True)

import dpkit
from dpkit import SecureRandom
from dpkit.errors import InvalidData, InvalidParameter

jax = jax_arrays.jax
jnp = jax_arrays.jnp
KEY = bytes(range(5, 37))


def test_an_array_without_64_bit_types_is_refused_naming_its_field() -> None:
    laplace = dpkit.mechanism("laplace", epsilon=1.0, sensitivity=1.0)
    with jax_arrays.without_x64():
        values = jnp.asarray([3.0e9, 1.0])  # float32 here: the result would be rounded
        with pytest.raises(InvalidData, match="jax array without 64-bit types") as refused:
            laplace.randomize(values)
        assert refused.value.field == "values"
        krr = dpkit.mechanism("krr", epsilon=1.0, k=3)
        with pytest.raises(InvalidData) as refused:
            dpkit.load_registry().estimator(krr).accumulate(jnp.asarray([0, 1, 2]))
        assert refused.value.field == "reports"


def test_with_64_bit_types_the_result_is_a_jax_array_of_the_numpy_paths_values() -> None:
    geometric = dpkit.mechanism("geometric", epsilon=1.0, sensitivity=1)
    values = np.array([3_000_000_000, -5, 0])  # beyond int32
    got = geometric.randomize(jax_arrays.asarray(values), rng=SecureRandom.from_key(KEY))
    expected = geometric.randomize(values, rng=SecureRandom.from_key(KEY))
    assert isinstance(got, jax.Array) and got.dtype == jnp.int64
    assert np.array_equal(np.asarray(got), expected)


def _host_and_device(monkeypatch: pytest.MonkeyPatch, call: Any) -> tuple[Any, Any]:
    host = call()
    device_reference.on_device(monkeypatch)
    return host, call()


@pytest.mark.parametrize("name", ["krr", "laplace"])
def test_a_jax_key_seeds_fast_mode_reproducibly_on_both_paths(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    mechanism = dpkit.mechanism(name, epsilon=1.0, **({"k": 4} if name == "krr" else {}))
    values = jax_arrays.asarray(np.arange(400) % 4)

    def draw(seed: int) -> np.ndarray[Any, Any]:
        out = mechanism.randomize(values, rng=jax.random.key(seed))
        assert isinstance(out, jax.Array)
        return np.asarray(out)

    for path in range(2):  # the host path, then the device path
        if path:
            device_reference.on_device(monkeypatch)
        assert np.array_equal(draw(1), draw(1)), "the same key must give the same draw"
        assert not np.array_equal(draw(1), draw(2)), "other keys, other draws"


def test_a_jax_key_is_refused_beside_another_librarys_array_and_as_an_array_of_keys(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    torch = pytest.importorskip("torch")
    device_reference.on_device(monkeypatch)
    rr = dpkit.mechanism("rr", epsilon=1.0)
    with pytest.raises(InvalidParameter) as refused:
        rr.randomize(torch.zeros(8, dtype=torch.int64), rng=jax.random.key(0))
    assert refused.value.parameter == "rng"
    with pytest.raises(InvalidParameter) as refused:
        rr.randomize(
            jax_arrays.asarray(np.zeros(8, dtype=np.int64)), rng=jax.random.split(jax.random.key(0))
        )
    assert refused.value.parameter == "rng"


@pytest.mark.parametrize("output", ["dense", "packed", "coo"])
def test_the_device_graph_of_a_jax_adjacency_is_the_torch_graph_of_the_same_key(
    output: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    torch = pytest.importorskip("torch")
    device_reference.on_device(monkeypatch)
    rng = np.random.default_rng(3)
    upper = np.triu(rng.random((70, 70)) < 0.2, 1)  # two bands of rows (64 + 6)
    adjacency = (upper | upper.T).astype(np.uint8)
    rr = dpkit.mechanism("rr", epsilon=1.0)
    got = rr.randomize_graph(
        jax_arrays.asarray(adjacency), rng=SecureRandom.from_key(KEY), output=output
    )
    expected = rr.randomize_graph(
        torch.from_numpy(adjacency), rng=SecureRandom.from_key(KEY), output=output
    )
    parts = got if isinstance(got, tuple) else (got,)
    twins = expected if isinstance(expected, tuple) else (expected,)
    for part, twin in zip(parts, twins, strict=True):
        assert isinstance(part, jax.Array)
        assert np.array_equal(np.asarray(part), twin.numpy())
