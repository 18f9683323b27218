"""Which inputs are tensors, and what comes back: the caller's type, on a zero-copy view."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
xs = pytest.importorskip("array_api_strict")

from support import device_reference, jax_arrays  # noqa: E402

import dpkit  # noqa: E402
from dpkit import SecureRandom  # noqa: E402
from dpkit.errors import InvalidData  # noqa: E402
from dpkit.tensors import array_library  # noqa: E402

RR = dpkit.mechanism("rr", epsilon=1.0)
KEY = bytes(range(32))


@pytest.mark.parametrize("values", [np.zeros(3), [0, 1], (1,), 1, np.int64(1)])
def test_numpy_arrays_lists_and_scalars_take_the_numpy_path(values: object) -> None:
    assert array_library(values, owner="t") is None


def test_table_columns_with_array_protocols_keep_the_numpy_path() -> None:
    pa = pytest.importorskip("pyarrow")
    pd = pytest.importorskip("pandas")
    for column in (pa.array([0, 1, 1]), pd.Series([0, 1, 1])):  # pyarrow has __dlpack__ too
        assert array_library(column, owner="t") is None
        assert isinstance(RR.randomize(column), np.ndarray)


def test_a_torch_cpu_tensor_is_a_host_array_of_torch() -> None:
    library = array_library(torch.zeros(2), owner="t")
    assert library is not None and library.name == "torch" and library.on_host


def test_an_unsupported_array_type_is_named_in_a_typed_error() -> None:
    class Foreign:
        def __dlpack__(self) -> None: ...

    with pytest.raises(InvalidData, match="Foreign, an array type dpkit does not support") as e:
        RR.randomize(Foreign())
    assert e.value.field == "values"


def test_the_decision_reads_the_type_never_an_instance_attribute() -> None:
    # A Spark Connect frame answers every attribute through ``__getattr__`` by analysing its
    # plan on the server; asking the instance would run work, or fail, inside the check.
    class Lazy:
        def __getattr__(self, name: str) -> object:
            raise AssertionError(f"instance attribute {name} was read")

    assert array_library(Lazy(), owner="t") is None


@pytest.mark.parametrize("dtype", [torch.uint8, torch.bool, torch.int32, torch.float64])
def test_rr_on_a_torch_cpu_tensor_returns_a_tensor_equal_to_the_numpy_path(dtype: object) -> None:
    x = torch.tensor([[0, 1, 1], [1, 0, 0]]).to(dtype)
    y = RR.randomize(x, rng=SecureRandom.from_key(KEY))
    assert isinstance(y, torch.Tensor) and y.dtype == x.dtype and y.shape == x.shape
    expected = RR.randomize(x.numpy(), rng=SecureRandom.from_key(KEY))
    assert np.array_equal(y.numpy(), expected)


def test_rr_graph_on_a_torch_cpu_tensor_and_an_array_api_strict_array() -> None:
    adjacency = np.array([[0, 1, 0], [1, 0, 1], [0, 1, 0]])
    expected = RR.randomize_graph(adjacency, rng=SecureRandom.from_key(KEY))
    out = RR.randomize_graph(torch.from_numpy(adjacency), rng=SecureRandom.from_key(KEY))
    assert isinstance(out, torch.Tensor) and np.array_equal(out.numpy(), expected)
    strict = RR.randomize_graph(xs.asarray(adjacency), rng=SecureRandom.from_key(KEY))
    assert type(strict).__module__.startswith("array_api_strict")
    assert np.array_equal(np.from_dlpack(strict), expected)


def test_a_torch_generator_is_fast_mode_reproducible_from_its_seed() -> None:
    x = torch.zeros(1000, dtype=torch.uint8)
    first = RR.randomize(x, rng=torch.Generator().manual_seed(5))
    again = RR.randomize(x, rng=torch.Generator().manual_seed(5))
    other = RR.randomize(x, rng=torch.Generator().manual_seed(6))
    assert torch.equal(first, again) and not torch.equal(first, other)


def test_non_binary_tensor_values_are_refused_like_numpy_ones() -> None:
    with pytest.raises(InvalidData, match=r"outside the domain 0\.\.1"):
        RR.randomize(torch.tensor([0, 1, 2]))


LAPLACE = dpkit.mechanism("laplace", epsilon=1.0)
PM = dpkit.mechanism("pm", epsilon=1.0)


def test_a_sparse_or_meta_tensor_is_refused_from_its_type_on_every_path() -> None:
    # Both used to fail with torch's own error (BufferError, RuntimeError, NotImplementedError)
    # wherever they were first used; now an InvalidData naming the field, before any value
    # is read, on the host path and on the device path (the meta device is not the host).
    x = torch.tensor([0.25, 0.5], dtype=torch.float64)
    for unreadable in (x.to_sparse(), x.to("meta")):
        with pytest.raises(InvalidData, match=r"layout|meta device") as refused:
            array_library(unreadable, owner="laplace")
        assert refused.value.field == "values"
        for mechanism in (LAPLACE, PM, RR):
            with pytest.raises(InvalidData, match=r"layout|meta device"):
                mechanism.randomize(unreadable, rng=SecureRandom.from_key(KEY))


def _graph_leaves(result: object) -> list[object]:
    """Every tensor an autograd graph of ``result`` reaches: its leaves and saved inputs."""
    found: list[object] = []
    stack = [getattr(result, "grad_fn", None)]
    while stack:
        step = stack.pop()
        if step is None:
            continue
        found.extend(v for a in dir(step) if a.startswith("_saved_") for v in [getattr(step, a)])
        found.extend([step.variable] if hasattr(step, "variable") else [])
        stack.extend(following for following, _ in step.next_functions)
    return found


@pytest.mark.parametrize("device_path", [False, True])
def test_a_release_of_a_tensor_that_requires_grad_carries_no_graph_back_to_it(
    device_path: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # pm's fast release on the device path was a tensor whose autograd graph held the input
    # itself (the graph's leaf, and clamp's saved input): the private values, readable from
    # the release. The host path failed (torch refuses DLPack of such a tensor).
    if device_path:
        device_reference.on_device(monkeypatch)
    x = torch.tensor([0.3, -0.7], dtype=torch.float64, requires_grad=True)
    for mechanism in (PM, LAPLACE, RR):
        values = x if mechanism is not RR else torch.tensor([1.0, 0.0], requires_grad=True)
        for rng in (torch.Generator().manual_seed(1), SecureRandom.from_key(KEY)):
            released = mechanism.randomize(values, rng=rng)
            assert isinstance(released, torch.Tensor) and not released.requires_grad
            assert not _graph_leaves(released)


def test_a_bfloat16_host_tensor_is_read_exactly_and_a_0_d_one_comes_back_0_d() -> None:
    # numpy has no bfloat16 (torch's DLPack export failed on the host path): it is read as
    # float32, exactly, so the release is the float32 tensor's. A 0-d result used to come back
    # as a numpy scalar (laplace) or a tensor of shape (1,) (krr).
    x = torch.tensor([0.25, -0.5, 3.0], dtype=torch.bfloat16)
    got = LAPLACE.randomize(x, rng=SecureRandom.from_key(KEY))
    same = LAPLACE.randomize(x.float(), rng=SecureRandom.from_key(KEY))
    assert got.dtype == torch.float64 and torch.equal(got, same)
    if jax_arrays.jax is not None:  # JAX's bfloat16 too
        jnp = jax_arrays.jnp
        narrow = LAPLACE.randomize(
            jnp.asarray(x.float().numpy(), dtype=jnp.bfloat16), rng=SecureRandom.from_key(KEY)
        )
        assert jax_arrays.is_jax(narrow) and np.array_equal(
            jax_arrays.to_numpy(narrow), same.numpy()
        )
    krr = dpkit.mechanism("krr", epsilon=1.0, k=4)
    for mechanism, scalar in ((LAPLACE, torch.tensor(3.0)), (krr, torch.tensor(2))):
        out = mechanism.randomize(scalar, rng=SecureRandom.from_key(KEY))
        assert isinstance(out, torch.Tensor) and out.shape == ()
    strict = LAPLACE.randomize(xs.asarray(3.0), rng=SecureRandom.from_key(KEY))
    assert type(strict) is type(xs.asarray(3.0)) and strict.shape == ()
