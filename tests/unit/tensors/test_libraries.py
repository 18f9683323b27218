"""Which inputs are tensors, and what comes back: the caller's type, on a zero-copy view."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
xs = pytest.importorskip("array_api_strict")

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
