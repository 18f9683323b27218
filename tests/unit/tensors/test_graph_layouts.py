"""``rr.randomize_graph``'s packed and coo layouts on the device path, run on the CPU (torch and
array-api-strict arrays made to take it): the dense graph of the same key, bit for bit, built a
band of rows at a time from the words the dense output takes; the refusals before a word."""

from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")
xs = pytest.importorskip("array_api_strict")

from support import device_reference  # noqa: E402

import dpkit  # noqa: E402
from dpkit import SecureRandom  # noqa: E402
from dpkit.errors import InvalidData, InvalidParameter  # noqa: E402
from dpkit.tensors import bits  # noqa: E402
from dpkit.tensors.device_random import threshold32  # noqa: E402

RR = dpkit.mechanism("rr", epsilon=1.0)
KEY = bytes(range(32))
LIBRARIES = {"torch": torch.from_numpy, "strict": xs.asarray}


@pytest.fixture
def device(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    device_reference.on_device(monkeypatch)
    monkeypatch.setattr(bits, "_BAND_ELEMENTS", 1)  # bands of 64 rows: several for n > 64
    return monkeypatch


def _graph(n: int, seed: int = 0) -> np.ndarray:
    upper = np.triu(np.random.default_rng(seed).random((n, n)) < 0.3, 1)
    return (upper | upper.T).astype(np.uint8)


def _rng(mode: str) -> object:
    return SecureRandom.from_key(KEY) if mode == "secure" else np.random.default_rng(5)


def _host(array: object) -> np.ndarray:
    return np.asarray(np.from_dlpack(array))


@pytest.mark.parametrize("library", ["torch", "strict"])
@pytest.mark.parametrize("mode", ["secure", "fast"])
@pytest.mark.parametrize("n", [13, 64, 67])
def test_packed_and_coo_are_the_dense_graph_of_the_same_key(
    device: pytest.MonkeyPatch, library: str, mode: str, n: int
) -> None:
    adjacency = LIBRARIES[library](_graph(n, n))
    dense = _host(RR.randomize_graph(adjacency, rng=_rng(mode)))
    packed = RR.randomize_graph(adjacency, rng=_rng(mode), output="packed")
    rows, cols = RR.randomize_graph(adjacency, rng=_rng(mode), output="coo")
    for array in (packed, rows, cols):  # the caller's library
        assert type(array) is type(adjacency)
    assert tuple(packed.shape) == (n, -(-n // 8))
    assert _host(packed).dtype == np.uint8 and _host(rows).dtype == np.int64
    assert np.array_equal(_host(packed), np.packbits(dense, axis=1))
    assert np.array_equal(np.unpackbits(_host(packed), axis=1, count=n), dense)
    expected = np.nonzero(np.triu(dense, 1))
    assert np.array_equal(_host(rows), expected[0]) and np.array_equal(_host(cols), expected[1])
    indptr, indices = RR.randomize_graph(adjacency, rng=_rng(mode), output="csr")
    assert type(indptr) is type(adjacency) and _host(indices).dtype == np.int64
    _assert_csr_is(_host(indptr), _host(indices), dense)


def _assert_csr_is(indptr: np.ndarray, indices: np.ndarray, dense: np.ndarray) -> None:
    """CSR of the whole symmetric matrix, read back independently: row by row, ascending."""
    n = dense.shape[0]
    assert indptr.shape == (n + 1,) and indptr[0] == 0 and indptr[-1] == indices.size
    for i in range(n):
        assert np.array_equal(indices[indptr[i] : indptr[i + 1]], np.flatnonzero(dense[i]))


@pytest.mark.parametrize("rng", ["secure", "torch"])
def test_bands_take_the_dense_words_of_one_draw(device: pytest.MonkeyPatch, rng: str) -> None:
    # Secure: the word of pair (i, j) is word i·n − i(i + 1)/2 + j − i − 1 of the keystream,
    # across three bands. Torch's Philox (fast): a band at a time is the one large draw.
    n = 150
    adjacency = torch.from_numpy(_graph(n, 1))

    def generator() -> object:
        return SecureRandom.from_key(KEY) if rng == "secure" else torch.Generator().manual_seed(2)

    banded = RR.randomize_graph(adjacency, rng=generator()).numpy()
    if rng == "secure":
        pairs = n * (n - 1) // 2
        words = device_reference.stream(device_reference.call_key(KEY), -(-pairs // 16))
        flips = np.zeros((n, n), dtype=np.uint8)
        flips[np.triu_indices(n, 1)] = words.reshape(-1)[:pairs] < threshold32(RR._flip_threshold())
        expected = np.triu(adjacency.numpy() ^ flips, 1)
        expected = expected + expected.T
    else:
        device.setattr(bits, "_BAND_ELEMENTS", 1 << 22)  # one band
        expected = RR.randomize_graph(adjacency, rng=generator()).numpy()
    assert np.array_equal(banded, expected)


def test_immutable_arrays_are_assembled_by_concatenation(device: pytest.MonkeyPatch) -> None:
    # JAX's arrays take no slice assignment: the bands are concatenated, to the same arrays.
    adjacency = torch.from_numpy(_graph(150, 2))
    outputs = [
        [RR.randomize_graph(adjacency, rng=_rng("secure"), output=o) for o in ("dense", "packed")]
    ]
    device.setattr(bits, "_writable", lambda library: False)
    outputs.append(
        [RR.randomize_graph(adjacency, rng=_rng("secure"), output=o) for o in ("dense", "packed")]
    )
    assert all(torch.equal(a, b) for a, b in zip(*outputs, strict=True))


@pytest.mark.parametrize("mode", ["secure", "fast"])
def test_packed_graph_law_flip_rate_symmetry_and_diagonal(
    device: pytest.MonkeyPatch, mode: str
) -> None:
    # On the empty graph every reported pair is a flip: |z| < 5.3 under the exact law
    # (flip probability on the 32-bit grid), a false-positive rate of 1.2e-7 per mode.
    n = 400
    packed = RR.randomize_graph(
        torch.zeros((n, n), dtype=torch.bool), rng=_rng(mode), output="packed"
    )
    noisy = np.unpackbits(packed.numpy(), axis=1, count=n)
    assert np.array_equal(noisy, noisy.T) and not noisy.diagonal().any()
    assert not np.unpackbits(packed.numpy(), axis=1)[:, n:].any()  # the padding bits are 0
    pairs, p = n * (n - 1) // 2, threshold32(RR._flip_threshold()) / 2**32
    z = (int(np.triu(noisy, 1).sum()) - pairs * p) / math.sqrt(pairs * p * (1 - p))
    assert abs(z) < 5.3


def _refused(monkeypatch: pytest.MonkeyPatch, error: type[Exception], call: object) -> Exception:
    def no_words(*args: object, **kwargs: object) -> object:
        raise AssertionError("words were drawn before the refusal")

    monkeypatch.setattr(bits, "device_words", no_words)
    with pytest.raises(error) as caught:
        call()  # type: ignore[operator]
    return caught.value


def test_refusals_come_before_any_word(device: pytest.MonkeyPatch) -> None:
    good = torch.from_numpy(_graph(9))
    for output in ("sparse", 3, None):
        e = _refused(device, InvalidParameter, lambda o=output: RR.randomize_graph(good, output=o))
        assert e.parameter == "output" and "'dense', 'packed', 'coo'" in e.allowed
    e = _refused(
        device,
        InvalidParameter,
        lambda: RR.randomize_graph(good, output="packed", undirected=False),
    )
    assert e.parameter == "output" and "undirected" in e.allowed
    asymmetric = good.clone()
    asymmetric[0, 8] = 1 - asymmetric[8, 0]
    nonbinary = good * 2
    for output in ("packed", "coo", "csr"):
        for bad, message in [
            (torch.zeros((3, 4)), "square"),
            (asymmetric, "not symmetric"),
            (nonbinary, "0 or 1"),
        ]:
            e = _refused(
                device, InvalidData, lambda b=bad, o=output: RR.randomize_graph(b, output=o)
            )
            assert message in str(e) and e.field == "adjacency"


def test_host_arrays_give_the_same_layouts() -> None:
    # A numpy or torch CPU array takes the host path: dense, then packed or listed.
    adjacency = _graph(21, 3)
    dense = RR.randomize_graph(adjacency, rng=_rng("secure"))
    packed = RR.randomize_graph(torch.from_numpy(adjacency), rng=_rng("secure"), output="packed")
    assert isinstance(packed, torch.Tensor)
    assert np.array_equal(packed.numpy(), np.packbits(dense, axis=1))
    rows, cols = RR.randomize_graph(adjacency, rng=_rng("secure"), output="coo")
    assert rows.dtype == np.int64
    assert np.array_equal(np.stack([rows, cols]), np.nonzero(np.triu(dense, 1)))
    indptr, indices = RR.randomize_graph(adjacency, rng=_rng("secure"), output="csr")
    assert indptr.dtype == indices.dtype == np.int64
    _assert_csr_is(indptr, indices, dense)
    scipy_sparse = pytest.importorskip("scipy.sparse")  # the layout scipy reads as it is
    matrix = scipy_sparse.csr_matrix((np.ones(indices.size), indices, indptr), shape=dense.shape)
    assert np.array_equal(matrix.toarray(), dense)


def test_an_empty_and_a_one_node_graph_have_empty_sparse_layouts(
    device: pytest.MonkeyPatch,
) -> None:
    for n in (0, 1):
        for adjacency in (np.zeros((n, n), dtype=np.uint8), torch.zeros((n, n), dtype=torch.uint8)):
            indptr, indices = RR.randomize_graph(adjacency, output="csr")
            assert _host(indptr).tolist() == [0] * (n + 1) and _host(indices).size == 0
