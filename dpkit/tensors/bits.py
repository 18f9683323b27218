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
"""

from __future__ import annotations

import importlib.util
from typing import Any

from dpkit.errors import InvalidData
from dpkit.tensors.device_random import (
    DeviceWords,
    below,
    device_words,
    index_dtype,
    threshold32,
)
from dpkit.tensors.libraries import ArrayLibrary

__all__ = ["flip_bits", "flip_graph"]

_LANES = 128  # ChaCha20 blocks per program: 2048 elements
_TILE = 64  # a graph tile is 64 × 64 pairs (256 blocks)


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


def _check_binary(library: ArrayLibrary, values: Any, *, owner: str, field: str) -> None:
    xp = library.xp
    if values.dtype == xp.bool:
        return
    if bool(xp.any((values != 0) & (values != 1))):
        raise _refuse_non_binary(owner, field)


def _flip(library: ArrayLibrary, values: Any, flips: Any) -> Any:
    xp = library.xp
    return xp.astype(xp.not_equal(values != 0, flips), values.dtype)


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
    library: ArrayLibrary, adjacency: Any, *, threshold64: int, rng: Any, owner: str, field: str
) -> Any:
    """Randomized response on a symmetric n×n adjacency: one draw per unordered pair {i, j},
    i < j, mirrored to (j, i); a zero diagonal. The caller has checked that it is square; an
    asymmetric or non-0/1 adjacency is an :class:`~dpkit.errors.InvalidData`."""
    threshold = threshold32(threshold64)
    words = device_words(library, rng, owner=owner)
    n = int(adjacency.shape[0])
    xp = library.xp
    if not bool(xp.all(adjacency == xp.matrix_transpose(adjacency))):
        raise _refuse_asymmetric(owner, field)
    if _fused(library, adjacency):
        return _flip_graph_fused(adjacency, words, threshold, owner=owner, field=field)
    _check_binary(library, adjacency, owner=owner, field=field)
    device = library.device
    pairs = n * (n - 1) // 2
    flips = below(xp, words.take(pairs), threshold)
    integers = index_dtype(xp)
    if pairs >= 2**31 and integers != xp.int64:
        raise InvalidData(
            f"{owner}: {field} has {n} nodes, too many pairs for {library.name}'s 32-bit "
            "indices (for JAX, enable jax_enable_x64)",
            field=field,
        )
    rows = xp.reshape(xp.arange(n, dtype=integers, device=device), (n, 1))
    cols = xp.reshape(xp.arange(n, dtype=integers, device=device), (1, n))
    low, high = xp.minimum(rows, cols), xp.maximum(rows, cols)
    # The pair {i, j}, i < j, is number i·n − i(i + 1)/2 + (j − i − 1) in row-major order.
    pair = low * n - (low * (low + 1)) // 2 + (high - low - 1)
    off_diagonal = rows != cols
    index = xp.where(off_diagonal, pair, xp.zeros_like(pair))
    if pairs:
        flipped = xp.reshape(xp.take(flips, xp.reshape(index, (-1,))), (n, n))
    else:
        flipped = xp.zeros((n, n), dtype=xp.bool, device=device)
    noisy = _flip(library, adjacency, flipped)
    return xp.where(off_diagonal, noisy, xp.zeros_like(noisy))


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
