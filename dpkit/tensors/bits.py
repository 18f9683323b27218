"""Randomized response on device arrays: each 0/1 element flipped with one probability.

The law is the CPU path's with the flip decided on the 32-bit grid: element x becomes
x xor [w < T] with w a uniform 32-bit word and T = :func:`~dpkit.tensors.device_random.threshold32`
of the mechanism's 64-bit threshold, i.e. the flip probability rounded up to a multiple of 2⁻³²
(never below the exact one, so the realised ε never exceeds the declared one; the rounding is
below 2.4·10⁻¹⁰).

Element ``i`` of the flattened array takes word ``i`` of the call's stream (word i mod 16 of
block i div 16) on the portable path. The fused CUDA kernel (:mod:`dpkit.tensors._kernels`)
takes, for element i = 16·L·p + L·k + l (L lanes per program), word k of block L·p + l — the
same words in another order, so that every memory access is coalesced. A graph takes one word
per unordered pair {i, j}, i < j, and mirrors it: n(n − 1)/2 words on the portable path (pair
i·n − i(i + 1)/2 + j − i − 1 in row-major order); the fused kernel works on 64×64 tiles of the
upper triangle (the tiles of the diagonal use their upper half), about n²/2 words too.

The portable path builds the graph a band of rows at a time (a multiple of 64 rows, about
2²² entries): band r0 … r1 − 1 takes the consecutive words of its pairs i < j
(:meth:`~dpkit.tensors.device_random.DeviceWords.span`), and writes its rows and, transposed,
the same columns of the rows below — so no temporary has n² entries. The same bands give the
other layouts of :func:`flip_graph`: bit-packed rows (``numpy.packbits``'s) and the upper
triangle's coordinates, on the fused kernel's words on CUDA, so every layout of one key is one
graph.
"""

from __future__ import annotations

import importlib.util
from typing import Any, Literal

import numpy as np

from dpkit.errors import InvalidData
from dpkit.tensors.device_random import (
    DeviceWords,
    below,
    device_words,
    index_dtype,
    require_64_bit,
    threshold32,
)
from dpkit.tensors.libraries import ArrayLibrary

__all__ = ["GraphOutput", "csr_from_upper", "flip_bits", "flip_graph"]

#: The layouts of a randomized graph: the n×n matrix, its rows bit-packed, or the upper
#: triangle's ones as coordinates.
GraphOutput = Literal["dense", "packed", "coo", "csr"]

_LANES = 128  # ChaCha20 blocks per program: 2048 elements
_TILE = 64  # a graph tile is 64 × 64 pairs (256 blocks)
#: Entries of one band of rows of a graph built band by band (a multiple of _TILE rows):
#: bounds the temporaries (a few bytes an entry) whatever n.
_BAND_ELEMENTS = 1 << 22
_BIT_WEIGHTS = (128, 64, 32, 16, 8, 4, 2, 1)  # numpy.packbits: the first bit is the high one


def _fused(library: ArrayLibrary, values: Any) -> bool:
    return (
        library.name == "torch"
        and values.device.type == "cuda"
        and importlib.util.find_spec("triton") is not None
    )


def _refuse_non_binary(owner: str, field: str) -> InvalidData:
    return InvalidData(f"{owner}: {field} must be 0 or 1 (or booleans)", field=field)


def _refuse_asymmetric(owner: str, field: str) -> InvalidData:
    return InvalidData(
        f"{owner}: {field} is not symmetric, so it is not an undirected graph; "
        "pass undirected=False for a directed graph",
        field=field,
    )


def _binary_dtype(library: ArrayLibrary, values: Any, *, owner: str, field: str) -> None:
    """Refuse a dtype that holds no 0/1 the host takes (complex numbers; the host's
    ``as_binary`` takes booleans, integers and floats): decided by the dtype, before any word."""
    if not library.xp.isdtype(values.dtype, ("bool", "integral", "real floating")):
        raise InvalidData(
            f"{owner}: {field} must be 0 or 1 (or booleans), got a {library.name} array of "
            f"{values.dtype}",
            field=field,
        )


def _check_binary(library: ArrayLibrary, values: Any, *, owner: str, field: str) -> None:
    xp = library.xp
    if values.dtype == xp.bool:
        return
    if bool(xp.any((values != 0) & (values != 1))):
        raise _refuse_non_binary(owner, field)


def _ones(xp: Any, values: Any) -> Any:
    """``values != 0`` as booleans (a bool array as it is: the standard compares it with bools
    only)."""
    return values if values.dtype == xp.bool else values != 0


def _flip(library: ArrayLibrary, values: Any, flips: Any) -> Any:
    xp = library.xp
    return xp.astype(xp.not_equal(_ones(xp, values), flips), values.dtype)


def _kernel_arguments(words: DeviceWords, device: Any) -> tuple[Any, int]:
    import torch

    key = words.key if words.key is not None else (0,) * 8
    key_tensor = torch.tensor(
        [w - (1 << 32) if w >= 1 << 31 else w for w in key], dtype=torch.int32, device=device
    )
    return key_tensor, int(words.seed or 0) & ((1 << 31) - 1)


def flip_bits(
    library: ArrayLibrary,
    values: Any,
    *,
    threshold64: int,
    rng: Any,
    owner: str,
    field: str = "values",
) -> Any:
    """``values`` (0/1 of any shape and dtype, on their device) with each element flipped with
    probability ⌈threshold64/2³²⌉/2³²; the same type, dtype, shape and device."""
    _binary_dtype(library, values, owner=owner, field=field)
    threshold = threshold32(threshold64)
    words = device_words(library, rng, owner=owner)
    if _fused(library, values):
        return _flip_bits_fused(values, words, threshold, owner=owner, field=field)
    _check_binary(library, values, owner=owner, field=field)
    xp = library.xp
    flat = xp.reshape(values, (-1,))
    flips = below(xp, words.take(int(flat.shape[0])), threshold)
    return xp.reshape(_flip(library, flat, flips), values.shape)


def _flip_bits_fused(
    values: Any, words: DeviceWords, threshold: int, *, owner: str, field: str
) -> Any:
    import torch

    from dpkit.tensors import _kernels

    flat = values.contiguous().reshape(-1)
    out = torch.empty_like(flat)
    bad = torch.zeros(1, dtype=torch.int32, device=values.device)
    n = flat.numel()
    programs = -(-n // (16 * _LANES))
    first = words.reserve_blocks(programs * _LANES)
    key, seed = _kernel_arguments(words, values.device)
    if n:
        _kernels.flip_bits_kernel[(programs,)](
            flat, out, bad, n, key, seed, first, threshold, SECURE=words.secure, LANES=_LANES
        )
    if int(bad.item()):
        raise _refuse_non_binary(owner, field)
    return out.reshape(values.shape)


def flip_graph(
    library: ArrayLibrary,
    adjacency: Any,
    *,
    threshold64: int,
    rng: Any,
    owner: str,
    field: str,
    output: GraphOutput = "dense",
) -> Any:
    """Randomized response on a symmetric n×n adjacency: one draw per unordered pair {i, j},
    i < j, mirrored to (j, i); a zero diagonal. The caller has checked that it is square; an
    asymmetric or non-0/1 adjacency is an :class:`~dpkit.errors.InvalidData`.

    ``output``: ``"dense"`` (n×n, the adjacency's dtype), ``"packed"`` (uint8, n × ⌈n/8⌉, the
    layout of ``numpy.packbits(dense, axis=1)``), ``"coo"`` (int64 ``(rows, cols)`` of the
    upper triangle's ones, i < j, row-major) or ``"csr"`` (int64 ``(indptr, indices)`` of the
    whole symmetric matrix, :func:`csr_from_upper`). Each pair takes the same word in all of
    them, so with the same key (or seed) they describe the same noisy graph. They are built a
    band of rows at a time (:func:`_flip_graph_banded`), except the dense output of the fused
    CUDA kernel, which writes the n×n matrix in one pass.
    """
    _binary_dtype(library, adjacency, owner=owner, field=field)
    if output == "dense" and _fused(library, adjacency):
        threshold = threshold32(threshold64)
        words = device_words(library, rng, owner=owner)
        xp = library.xp
        if not bool(xp.all(adjacency == xp.matrix_transpose(adjacency))):
            raise _refuse_asymmetric(owner, field)
        return _flip_graph_fused(adjacency, words, threshold, owner=owner, field=field)
    graph = _flip_graph_banded(
        library,
        adjacency,
        threshold64=threshold64,
        rng=rng,
        owner=owner,
        field=field,
        output="coo" if output == "csr" else output,
    )
    if output == "csr":
        rows, cols = graph
        return csr_from_upper(library.xp, rows, cols, int(adjacency.shape[0]), library.device)
    return graph


def csr_from_upper(xp: Any, rows: Any, cols: Any, n: int, device: Any = None) -> tuple[Any, Any]:
    """The whole symmetric n×n 0/1 matrix whose upper triangle's ones are (rows, cols), i < j,
    in compressed sparse row form: ``(indptr, indices)``, int64, row i's columns
    ``indices[indptr[i]:indptr[i + 1]]`` in ascending order — the layout of
    ``scipy.sparse.csr_matrix((ones, indices, indptr))`` and ``torch.sparse_csr_tensor``. Each
    edge is listed twice, (i, j) and (j, i): 16 bytes a reported pair, as the coordinates.
    ``xp`` is an array-API namespace on ``device``, or numpy itself (the host path)."""
    join = np.concatenate if xp is np else xp.concat
    both_rows = join([rows, cols])
    both_cols = join([cols, rows])
    order = xp.argsort(both_rows * n + both_cols)  # distinct keys: any sort gives this order
    sorted_rows = xp.take(both_rows, order)
    indices = xp.take(both_cols, order)
    if xp is np:  # numpy before 2.0 has no concat, astype or device arguments
        return np.searchsorted(sorted_rows, np.arange(n + 1)).astype(np.int64), indices
    starts = xp.arange(n + 1, dtype=xp.int64, device=device)
    indptr = xp.astype(xp.searchsorted(sorted_rows, starts), xp.int64)
    return indptr, indices


def _flip_graph_fused(
    adjacency: Any, words: DeviceWords, threshold: int, *, owner: str, field: str
) -> Any:
    import torch

    from dpkit.tensors import _kernels

    matrix = adjacency.contiguous()
    n = int(matrix.shape[0])
    out = torch.empty_like(matrix)
    bad = torch.zeros(1, dtype=torch.int32, device=matrix.device)
    tiles = -(-n // _TILE)
    first = words.reserve_blocks(tiles * tiles * (_TILE * _TILE // 16))
    key, seed = _kernel_arguments(words, matrix.device)
    if n:
        _kernels.flip_graph_kernel[(tiles, tiles)](
            matrix, out, bad, n, key, seed, first, threshold, SECURE=words.secure, TILE=_TILE
        )
        out.diagonal().zero_()
    if int(bad.item()):
        raise _refuse_non_binary(owner, field)
    return out


def _bands(n: int) -> list[tuple[int, int]]:
    """The bands of rows [r0, r1): r0 a multiple of _TILE (so of 8: a band's columns start on a
    byte of the packed layout, and on a tile of the fused kernel)."""
    height = max(_TILE, (_BAND_ELEMENTS // max(n, 1)) // _TILE * _TILE)
    return [(r0, min(r0 + height, n)) for r0 in range(0, n, height)]


def _row_start(row: int, n: int) -> int:
    """The row-major number of the first pair (row, j > row): row·n − row(row + 1)/2."""
    return row * n - row * (row + 1) // 2


def _check_graph_by_bands(library: ArrayLibrary, adjacency: Any, *, owner: str, field: str) -> None:
    """The dense path's refusals (asymmetric, then non-0/1), a band at a time: no n×n
    temporary, and nothing drawn yet."""
    xp = library.xp
    n = int(adjacency.shape[0])
    bands = _bands(n)
    for r0, r1 in bands:
        rows = adjacency[r0:r1, :]
        if not bool(xp.all(rows == xp.matrix_transpose(adjacency[:, r0:r1]))):
            raise _refuse_asymmetric(owner, field)
    if adjacency.dtype != xp.bool:
        for r0, r1 in bands:
            rows = adjacency[r0:r1, :]
            if bool(xp.any((rows != 0) & (rows != 1))):
                raise _refuse_non_binary(owner, field)


def _portable_band(
    library: ArrayLibrary,
    adjacency: Any,
    words: DeviceWords,
    first_block: int,
    threshold: int,
    r0: int,
    r1: int,
) -> Any:
    """The noisy pairs (i, j), r0 ≤ i < r1, j > i, as a bool (r1 − r0, n − r0) array (entry
    (a, b) is the pair (r0 + a, r0 + b); False on and below the diagonal), from the words
    start(r0) … start(r1) − 1 of the stream: pair (i, j) takes word i·n − i(i + 1)/2 + j − i − 1,
    as on the dense path."""
    xp, device = library.xp, library.device
    n = int(adjacency.shape[0])
    start = _row_start(r0, n)
    count = _row_start(r1, n) - start
    height, width = r1 - r0, n - r0
    integers = index_dtype(xp)
    a = xp.reshape(xp.arange(height, dtype=integers, device=device), (height, 1))
    b = xp.reshape(xp.arange(width, dtype=integers, device=device), (1, width))
    upper = b > a
    if count == 0:
        return xp.zeros((height, width), dtype=xp.bool, device=device)
    flips = below(xp, words.span(first_block, start, count), threshold)
    # Pair (r0 + a, r0 + b) is number start(r0 + a) − start(r0) + b − a − 1 of the band.
    local = a * (n - 1 - r0) - (a * (a - 1)) // 2 + b - a - 1
    index = xp.where(upper, local, xp.zeros_like(local))
    flipped = xp.reshape(xp.take(flips, xp.reshape(index, (-1,))), (height, width))
    ones = _ones(xp, adjacency[r0:r1, r0:])
    return xp.logical_and(xp.not_equal(ones, flipped), upper)


def _fused_band(
    adjacency: Any, words: DeviceWords, first_block: int, threshold: int, r0: int, r1: int
) -> Any:
    """:func:`_portable_band` on CUDA with the dense fused kernel's words (its 64×64 tiles of
    the rows r0 … r1 − 1, r0 a multiple of _TILE), so the band is that of the dense output."""
    import torch

    from dpkit.tensors import _kernels

    matrix = adjacency.contiguous()
    n = int(matrix.shape[0])
    out = torch.zeros((r1 - r0, n - r0), dtype=torch.uint8, device=matrix.device)
    tiles = -(-n // _TILE)
    key, seed = _kernel_arguments(words, matrix.device)
    grid = (-(-(r1 - r0) // _TILE), tiles - r0 // _TILE)
    _kernels.flip_graph_band_kernel[grid](
        matrix,
        out,
        n,
        key,
        seed,
        first_block,
        threshold,
        r0 // _TILE,
        tiles,
        SECURE=words.secure,
        TILE=_TILE,
    )
    return out != 0


def _pack_rows(xp: Any, bits: Any, device: Any) -> Any:
    """A bool (r, c) array as uint8 (r, ⌈c/8⌉): numpy.packbits(bits, axis=1), computed with
    ``xp`` (eight bits a byte, the first the high one, the last byte padded with 0 bits)."""
    rows, cols = int(bits.shape[0]), int(bits.shape[1])
    pad = -cols % 8
    if pad:
        bits = xp.concat([bits, xp.zeros((rows, pad), dtype=xp.bool, device=device)], axis=1)
    grouped = xp.reshape(xp.astype(bits, xp.uint8), (rows, (cols + pad) // 8, 8))
    weights = xp.asarray(_BIT_WEIGHTS, dtype=xp.uint8, device=device)
    return xp.sum(grouped * weights, axis=2, dtype=xp.uint8)


def _writable(library: ArrayLibrary) -> bool:
    """Whether the library's arrays take slice assignment (JAX's are immutable)."""
    return library.name != "jax"


def _flip_graph_banded(
    library: ArrayLibrary,
    adjacency: Any,
    *,
    threshold64: int,
    rng: Any,
    owner: str,
    field: str,
    output: GraphOutput,
) -> Any:
    """The noisy graph a band of rows at a time: peak memory the output plus one band's
    temporaries (:data:`_BAND_ELEMENTS` entries), never a temporary of n² entries.

    A band holds the noisy pairs i < j of its rows r0 … r1 − 1 (its upper part). Dense or
    packed: rows r0 … r1 − 1 of the output, from column r0 (byte r0/8) on, are that part with
    its square's mirror; the part's columns after the square, transposed, are columns
    r0 … r1 − 1 of the rows below. Both are written into the preallocated output, except for
    JAX, whose immutable arrays are concatenated at the end (peak twice the output). Coo: the
    nonzeros of each band, in order, concatenated at the end (peak twice the coordinates)."""
    xp, device = library.xp, library.device
    if output == "coo":
        require_64_bit(library, owner=owner, field=field, needs="coo indices are int64")
    _check_graph_by_bands(library, adjacency, owner=owner, field=field)
    threshold = threshold32(threshold64)
    words = device_words(library, rng, owner=owner)
    n = int(adjacency.shape[0])
    fused = _fused(library, adjacency)
    if fused:
        tiles = -(-n // _TILE)
        first_block = words.reserve_blocks(tiles * tiles * (_TILE * _TILE // 16))
    else:
        first_block = words.reserve_blocks(-(-(n * (n - 1) // 2) // 16))

    def band(r0: int, r1: int) -> Any:
        if fused:
            return _fused_band(adjacency, words, first_block, threshold, r0, r1)
        return _portable_band(library, adjacency, words, first_block, threshold, r0, r1)

    if output == "coo":
        rows, cols = [], []
        for r0, r1 in _bands(n):
            a, b = xp.nonzero(band(r0, r1))
            rows.append(xp.astype(a, xp.int64) + r0)
            cols.append(xp.astype(b, xp.int64) + r0)
        if not rows:
            empty = xp.zeros((0,), dtype=xp.int64, device=device)
            return empty, empty
        return xp.concat(rows), xp.concat(cols)
    dense = output == "dense"
    per_byte = 1 if dense else 8
    dtype = adjacency.dtype if dense else xp.uint8

    def encode(bits: Any) -> Any:
        return xp.astype(bits, dtype) if dense else _pack_rows(xp, bits, device)

    width = -(-n // per_byte)
    out = xp.zeros((n, width), dtype=dtype, device=device) if _writable(library) else None
    parts = []
    for r0, r1 in _bands(n):
        noisy = band(r0, r1)
        height, column = r1 - r0, r0 // per_byte
        square = noisy[:, :height]
        diagonal = xp.logical_or(square, xp.matrix_transpose(square))
        row = encode(xp.concat([diagonal, noisy[:, height:]], axis=1))
        lower = encode(xp.matrix_transpose(noisy[:, height:]))
        if out is not None:
            out[r0:r1, column:] = row
            out[r1:, column : column + int(lower.shape[1])] = lower
        else:
            parts.append((r0, r1, row, lower))
    if out is not None:
        return out
    assembled = [
        xp.concat([*(lower[r0 - a1 : r1 - a1, :] for _, a1, _, lower in parts[:c]), row], axis=1)
        for c, (r0, r1, row, _) in enumerate(parts)
    ]
    if not assembled:
        return xp.zeros((0, 0), dtype=dtype, device=device)
    return xp.concat(assembled, axis=0)
