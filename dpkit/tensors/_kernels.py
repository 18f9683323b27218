# ruff: noqa: N803, N806  (Triton compile-time constants are upper case)
"""Fused Triton kernels for CUDA tensors: keystream, comparison and output in one pass.

One program handles ``LANES`` ChaCha20 blocks (secure) or ``4·LANES`` Philox calls (fast); each
lane's sixteen words decide sixteen output elements. Word ``k`` of the lanes of a program covers
a contiguous run of ``LANES`` elements, so every load and store is coalesced. The element ↔
word map is documented in :mod:`dpkit.tensors.bits`; the words are the keystream of
:mod:`dpkit.tensors.chacha` (checked against it on a GPU, and in Triton's interpreter on the
CPU, by the tests).

Imported only for a CUDA tensor with Triton installed; everything else uses the portable path.
"""

from __future__ import annotations

import triton
import triton.language as tl

__all__ = ["flip_bits_kernel", "flip_graph_band_kernel", "flip_graph_kernel", "keystream_kernel"]


@triton.jit
def _rotl(x, bits: tl.constexpr):
    return (x << bits) | (x >> (32 - bits))


@triton.jit
def _quarter(a, b, c, d):
    a = a + b
    d = _rotl(d ^ a, 16)
    c = c + d
    b = _rotl(b ^ c, 12)
    a = a + b
    d = _rotl(d ^ a, 8)
    c = c + d
    b = _rotl(b ^ c, 7)
    return a, b, c, d


@triton.jit
def _chacha_block(key_ptr, block):
    """The sixteen keystream words (uint32) of the blocks ``block`` (an int64 tensor)."""
    zero = (block * 0).to(tl.uint32)
    k0 = tl.load(key_ptr + 0).to(tl.uint32, bitcast=True)
    k1 = tl.load(key_ptr + 1).to(tl.uint32, bitcast=True)
    k2 = tl.load(key_ptr + 2).to(tl.uint32, bitcast=True)
    k3 = tl.load(key_ptr + 3).to(tl.uint32, bitcast=True)
    k4 = tl.load(key_ptr + 4).to(tl.uint32, bitcast=True)
    k5 = tl.load(key_ptr + 5).to(tl.uint32, bitcast=True)
    k6 = tl.load(key_ptr + 6).to(tl.uint32, bitcast=True)
    k7 = tl.load(key_ptr + 7).to(tl.uint32, bitcast=True)
    low = (block & 0xFFFFFFFF).to(tl.uint32)
    high = (block >> 32).to(tl.uint32)
    x0 = zero + 0x61707865
    x1 = zero + 0x3320646E
    x2 = zero + 0x79622D32
    x3 = zero + 0x6B206574
    x4 = zero + k0
    x5 = zero + k1
    x6 = zero + k2
    x7 = zero + k3
    x8 = zero + k4
    x9 = zero + k5
    x10 = zero + k6
    x11 = zero + k7
    x12 = low
    x13 = high
    x14 = zero
    x15 = zero
    for _ in range(10):
        x0, x4, x8, x12 = _quarter(x0, x4, x8, x12)
        x1, x5, x9, x13 = _quarter(x1, x5, x9, x13)
        x2, x6, x10, x14 = _quarter(x2, x6, x10, x14)
        x3, x7, x11, x15 = _quarter(x3, x7, x11, x15)
        x0, x5, x10, x15 = _quarter(x0, x5, x10, x15)
        x1, x6, x11, x12 = _quarter(x1, x6, x11, x12)
        x2, x7, x8, x13 = _quarter(x2, x7, x8, x13)
        x3, x4, x9, x14 = _quarter(x3, x4, x9, x14)
    return (
        x0 + 0x61707865,
        x1 + 0x3320646E,
        x2 + 0x79622D32,
        x3 + 0x6B206574,
        x4 + k0,
        x5 + k1,
        x6 + k2,
        x7 + k3,
        x8 + k4,
        x9 + k5,
        x10 + k6,
        x11 + k7,
        x12 + low,
        x13 + high,
        x14,
        x15,
    )


@triton.jit
def _philox_block(seed, block):
    """Sixteen uint32 words per lane from four Philox4x32-10 calls (fast mode)."""
    a0, a1, a2, a3 = tl.randint4x(seed, block * 4 + 0)
    b0, b1, b2, b3 = tl.randint4x(seed, block * 4 + 1)
    c0, c1, c2, c3 = tl.randint4x(seed, block * 4 + 2)
    d0, d1, d2, d3 = tl.randint4x(seed, block * 4 + 3)
    return (a0, a1, a2, a3, b0, b1, b2, b3, c0, c1, c2, c3, d0, d1, d2, d3)


@triton.jit
def _words(key_ptr, seed, block, SECURE: tl.constexpr):
    if SECURE:
        return _chacha_block(key_ptr, block)
    else:
        return _philox_block(seed, block)


@triton.jit
def keystream_kernel(key_ptr, out_ptr, first_block, blocks, LANES: tl.constexpr):
    """The raw keystream in the standard order (word j of block b at 16·b + j), as int64."""
    lane = tl.program_id(0) * LANES + tl.arange(0, LANES)
    block = first_block + lane.to(tl.int64)
    w = _chacha_block(key_ptr, block)
    inside = lane < blocks
    base = lane.to(tl.int64) * 16
    tl.store(out_ptr + base + 0, w[0].to(tl.int64), mask=inside)
    tl.store(out_ptr + base + 1, w[1].to(tl.int64), mask=inside)
    tl.store(out_ptr + base + 2, w[2].to(tl.int64), mask=inside)
    tl.store(out_ptr + base + 3, w[3].to(tl.int64), mask=inside)
    tl.store(out_ptr + base + 4, w[4].to(tl.int64), mask=inside)
    tl.store(out_ptr + base + 5, w[5].to(tl.int64), mask=inside)
    tl.store(out_ptr + base + 6, w[6].to(tl.int64), mask=inside)
    tl.store(out_ptr + base + 7, w[7].to(tl.int64), mask=inside)
    tl.store(out_ptr + base + 8, w[8].to(tl.int64), mask=inside)
    tl.store(out_ptr + base + 9, w[9].to(tl.int64), mask=inside)
    tl.store(out_ptr + base + 10, w[10].to(tl.int64), mask=inside)
    tl.store(out_ptr + base + 11, w[11].to(tl.int64), mask=inside)
    tl.store(out_ptr + base + 12, w[12].to(tl.int64), mask=inside)
    tl.store(out_ptr + base + 13, w[13].to(tl.int64), mask=inside)
    tl.store(out_ptr + base + 14, w[14].to(tl.int64), mask=inside)
    tl.store(out_ptr + base + 15, w[15].to(tl.int64), mask=inside)


@triton.jit
def _flip_one(x_ptr, out_ptr, offsets, n, word, threshold):
    inside = offsets < n
    x = tl.load(x_ptr + offsets, mask=inside, other=0)
    one = x != 0
    flip = word.to(tl.int64) < threshold
    tl.store(out_ptr + offsets, (one ^ flip).to(out_ptr.dtype.element_ty), mask=inside)
    return (x != 0) & (x != 1)


@triton.jit
def flip_bits_kernel(
    x_ptr,
    out_ptr,
    bad_ptr,
    n,
    key_ptr,
    seed,
    first_block,
    threshold,
    SECURE: tl.constexpr,
    LANES: tl.constexpr,
):
    """out[i] = x[i] xor (word(i) < threshold); element i = program p, word k, lane l with
    i = 16·LANES·p + LANES·k + l, its word being word k of block first_block + LANES·p + l.
    ``bad`` is set to 1 if an element is neither 0 nor 1."""
    pid = tl.program_id(0).to(tl.int64)
    lane = tl.arange(0, LANES).to(tl.int64)
    w = _words(key_ptr, seed, first_block + pid * LANES + lane, SECURE)
    base = pid * (16 * LANES) + lane
    bad = _flip_one(x_ptr, out_ptr, base + 0 * LANES, n, w[0], threshold)
    bad |= _flip_one(x_ptr, out_ptr, base + 1 * LANES, n, w[1], threshold)
    bad |= _flip_one(x_ptr, out_ptr, base + 2 * LANES, n, w[2], threshold)
    bad |= _flip_one(x_ptr, out_ptr, base + 3 * LANES, n, w[3], threshold)
    bad |= _flip_one(x_ptr, out_ptr, base + 4 * LANES, n, w[4], threshold)
    bad |= _flip_one(x_ptr, out_ptr, base + 5 * LANES, n, w[5], threshold)
    bad |= _flip_one(x_ptr, out_ptr, base + 6 * LANES, n, w[6], threshold)
    bad |= _flip_one(x_ptr, out_ptr, base + 7 * LANES, n, w[7], threshold)
    bad |= _flip_one(x_ptr, out_ptr, base + 8 * LANES, n, w[8], threshold)
    bad |= _flip_one(x_ptr, out_ptr, base + 9 * LANES, n, w[9], threshold)
    bad |= _flip_one(x_ptr, out_ptr, base + 10 * LANES, n, w[10], threshold)
    bad |= _flip_one(x_ptr, out_ptr, base + 11 * LANES, n, w[11], threshold)
    bad |= _flip_one(x_ptr, out_ptr, base + 12 * LANES, n, w[12], threshold)
    bad |= _flip_one(x_ptr, out_ptr, base + 13 * LANES, n, w[13], threshold)
    bad |= _flip_one(x_ptr, out_ptr, base + 14 * LANES, n, w[14], threshold)
    bad |= _flip_one(x_ptr, out_ptr, base + 15 * LANES, n, w[15], threshold)
    if tl.max(bad.to(tl.int32), axis=0) > 0:
        tl.store(bad_ptr, 1)


@triton.jit
def _flip_pair(x_ptr, out_ptr, rows, cols, n, word, threshold):
    upper = (rows < cols) & (cols < n)
    x = tl.load(x_ptr + rows * n + cols, mask=upper, other=0)
    flip = word.to(tl.int64) < threshold
    value = ((x != 0) ^ flip).to(out_ptr.dtype.element_ty)
    tl.store(out_ptr + rows * n + cols, value, mask=upper)
    return (x != 0) & (x != 1)


@triton.jit
def flip_graph_kernel(
    x_ptr,
    out_ptr,
    bad_ptr,
    n,
    key_ptr,
    seed,
    first_block,
    threshold,
    SECURE: tl.constexpr,
    TILE: tl.constexpr,
):
    """Randomized response on the pairs i < j of a TILE×TILE tile (I ≤ J) of an n×n adjacency,
    written to (i, j) and mirrored to (j, i). Tile (I, J) uses the TILE²/16 blocks from
    first_block + (I·tiles + J)·TILE²/16; lane (m, c) holds block m·TILE + c of those, and its
    word k decides the pair (I·TILE + k·TILE/16 + m, J·TILE + c). The diagonal is left to the
    caller (it is zero). ``bad`` is set to 1 if a pair's entry is neither 0 nor 1."""
    tile_row = tl.program_id(0).to(tl.int64)
    tile_col = tl.program_id(1).to(tl.int64)
    if tile_row <= tile_col:
        tiles = tl.num_programs(1).to(tl.int64)
        SUB: tl.constexpr = TILE // 16
        m = tl.arange(0, SUB).to(tl.int64)[:, None]
        c = tl.arange(0, TILE).to(tl.int64)[None, :]
        blocks_per_tile: tl.constexpr = TILE * TILE // 16
        block = first_block + (tile_row * tiles + tile_col) * blocks_per_tile + m * TILE + c
        w = _words(key_ptr, seed, block, SECURE)
        rows = tile_row * TILE + m
        cols = tile_col * TILE + c
        bad = _flip_pair(x_ptr, out_ptr, rows + 0 * SUB, cols, n, w[0], threshold)
        bad |= _flip_pair(x_ptr, out_ptr, rows + 1 * SUB, cols, n, w[1], threshold)
        bad |= _flip_pair(x_ptr, out_ptr, rows + 2 * SUB, cols, n, w[2], threshold)
        bad |= _flip_pair(x_ptr, out_ptr, rows + 3 * SUB, cols, n, w[3], threshold)
        bad |= _flip_pair(x_ptr, out_ptr, rows + 4 * SUB, cols, n, w[4], threshold)
        bad |= _flip_pair(x_ptr, out_ptr, rows + 5 * SUB, cols, n, w[5], threshold)
        bad |= _flip_pair(x_ptr, out_ptr, rows + 6 * SUB, cols, n, w[6], threshold)
        bad |= _flip_pair(x_ptr, out_ptr, rows + 7 * SUB, cols, n, w[7], threshold)
        bad |= _flip_pair(x_ptr, out_ptr, rows + 8 * SUB, cols, n, w[8], threshold)
        bad |= _flip_pair(x_ptr, out_ptr, rows + 9 * SUB, cols, n, w[9], threshold)
        bad |= _flip_pair(x_ptr, out_ptr, rows + 10 * SUB, cols, n, w[10], threshold)
        bad |= _flip_pair(x_ptr, out_ptr, rows + 11 * SUB, cols, n, w[11], threshold)
        bad |= _flip_pair(x_ptr, out_ptr, rows + 12 * SUB, cols, n, w[12], threshold)
        bad |= _flip_pair(x_ptr, out_ptr, rows + 13 * SUB, cols, n, w[13], threshold)
        bad |= _flip_pair(x_ptr, out_ptr, rows + 14 * SUB, cols, n, w[14], threshold)
        bad |= _flip_pair(x_ptr, out_ptr, rows + 15 * SUB, cols, n, w[15], threshold)
        if tl.max(tl.max(bad.to(tl.int32), axis=1), axis=0) > 0:
            tl.store(bad_ptr, 1)
        # The mirror: read the tile just written back (this program's own stores, visible
        # after the barrier) and write its transpose, so both writes are coalesced.
        tl.debug_barrier()
        r = tl.arange(0, TILE).to(tl.int64)[:, None]
        q = tl.arange(0, TILE).to(tl.int64)[None, :]
        upper = (tile_row * TILE + r < tile_col * TILE + q) & (tile_col * TILE + q < n)
        tile = tl.load(out_ptr + (tile_row * TILE + r) * n + tile_col * TILE + q, mask=upper)
        lower = (tile_row * TILE + q < tile_col * TILE + r) & (tile_col * TILE + r < n)
        target = out_ptr + (tile_col * TILE + r) * n + tile_row * TILE + q
        tl.store(target, tl.trans(tile), mask=lower)


@triton.jit
def _flip_band_pair(x_ptr, out_ptr, rows, cols, n, row0, word, threshold):
    upper = (rows < cols) & (cols < n)
    x = tl.load(x_ptr + rows * n + cols, mask=upper, other=0)
    flip = word.to(tl.int64) < threshold
    value = ((x != 0) ^ flip).to(out_ptr.dtype.element_ty)
    tl.store(out_ptr + (rows - row0) * (n - row0) + cols - row0, value, mask=upper)


@triton.jit
def flip_graph_band_kernel(
    x_ptr,
    out_ptr,
    n,
    key_ptr,
    seed,
    first_block,
    threshold,
    first_tile,
    tiles,
    SECURE: tl.constexpr,
    TILE: tl.constexpr,
):
    """The pairs i < j of the tile rows first_tile, first_tile + 1, … of an n×n adjacency, with
    :func:`flip_graph_kernel`'s words (tile (I, J) of ``tiles`` per side, the same blocks and
    lanes), written without the mirror to a band of n − r0 columns, r0 = first_tile·TILE: pair
    (i, j) to (i − r0)·(n − r0) + j − r0. The caller has checked the values."""
    tile_row = first_tile + tl.program_id(0).to(tl.int64)
    tile_col = first_tile + tl.program_id(1).to(tl.int64)
    if tile_row <= tile_col:
        SUB: tl.constexpr = TILE // 16
        m = tl.arange(0, SUB).to(tl.int64)[:, None]
        c = tl.arange(0, TILE).to(tl.int64)[None, :]
        blocks_per_tile: tl.constexpr = TILE * TILE // 16
        block = first_block + (tile_row * tiles + tile_col) * blocks_per_tile + m * TILE + c
        w = _words(key_ptr, seed, block, SECURE)
        rows = tile_row * TILE + m
        cols = tile_col * TILE + c
        row0 = first_tile * TILE
        _flip_band_pair(x_ptr, out_ptr, rows + 0 * SUB, cols, n, row0, w[0], threshold)
        _flip_band_pair(x_ptr, out_ptr, rows + 1 * SUB, cols, n, row0, w[1], threshold)
        _flip_band_pair(x_ptr, out_ptr, rows + 2 * SUB, cols, n, row0, w[2], threshold)
        _flip_band_pair(x_ptr, out_ptr, rows + 3 * SUB, cols, n, row0, w[3], threshold)
        _flip_band_pair(x_ptr, out_ptr, rows + 4 * SUB, cols, n, row0, w[4], threshold)
        _flip_band_pair(x_ptr, out_ptr, rows + 5 * SUB, cols, n, row0, w[5], threshold)
        _flip_band_pair(x_ptr, out_ptr, rows + 6 * SUB, cols, n, row0, w[6], threshold)
        _flip_band_pair(x_ptr, out_ptr, rows + 7 * SUB, cols, n, row0, w[7], threshold)
        _flip_band_pair(x_ptr, out_ptr, rows + 8 * SUB, cols, n, row0, w[8], threshold)
        _flip_band_pair(x_ptr, out_ptr, rows + 9 * SUB, cols, n, row0, w[9], threshold)
        _flip_band_pair(x_ptr, out_ptr, rows + 10 * SUB, cols, n, row0, w[10], threshold)
        _flip_band_pair(x_ptr, out_ptr, rows + 11 * SUB, cols, n, row0, w[11], threshold)
        _flip_band_pair(x_ptr, out_ptr, rows + 12 * SUB, cols, n, row0, w[12], threshold)
        _flip_band_pair(x_ptr, out_ptr, rows + 13 * SUB, cols, n, row0, w[13], threshold)
        _flip_band_pair(x_ptr, out_ptr, rows + 14 * SUB, cols, n, row0, w[14], threshold)
        _flip_band_pair(x_ptr, out_ptr, rows + 15 * SUB, cols, n, row0, w[15], threshold)
