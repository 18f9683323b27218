"""The exact law of a frequency oracle's support count, and an interval with exact coverage.

For a "pure" frequency oracle (Wang, Blocki, Li & Jha 2017, Section 3: rr, krr, the unary
encodings, olh, hr), a report supports the user's own value with probability p and any other
given value with probability q < p, independently across users. So the number C_v of the n
reports that support v, when x users hold v, is exactly

    C_v | x  ~  Binomial(x, p) + Binomial(n − x, q)      (independent terms).

Replacing one q-coin by a p-coin makes C_v stochastically larger, so the law is stochastically
increasing in x.

**A randomized interval with exact coverage.** C_v takes integer values, so no deterministic
interval can cover with probability exactly 1 − α for every x: where its standard deviation is
one or two counts, coverage jumps between lattice points (krr, k = 256, ε = 4, n = 500: a
category nobody holds is covered by the score interval with probability 0.976, and the next
tighter rule would give 0.921). The randomized probability integral transform removes the
lattice: with U ~ Uniform(0, 1) independent of the reports,

    T(x) = P(C < c | x) + U · P(C = c | x)

is exactly Uniform(0, 1) when x is the true count (Brockwell 2007, "Universal residuals", and
the randomized tests of Stevens 1950, "Fiducial limits of the parameter of a discontinuous
distribution"). The set {x ∈ {0..n} : α/2 ≤ T(x) ≤ 1 − α/2} therefore contains the true count
with probability exactly 1 − α, for every x. T is non-increasing in x (a convex combination of
two CDF values of a stochastically increasing family), so the set is an integer interval
[x_lo, x_hi]; it is empty with small probability when the law is nearly deterministic (then
both ends are NaN). The interval depends on U: it is a *fuzzy* confidence interval (Geyer &
Meeden 2005), which is the price of exact coverage on a lattice.

**A deterministic interval with at least the stated coverage.** Accepting x when *some* U
puts T(x) in the band, i.e. when

    P(C < c | x) ≤ 1 − α/2   and   P(C ≤ c | x) ≥ α/2,

gives the union of the randomized sets over U, so it contains the set for the actual U and
covers the true count with probability ≥ 1 − α for every x. It is the equal-tailed interval
got by pivoting the discrete CDF of a stochastically increasing family (Casella & Berger 2002,
*Statistical Inference*, Theorem 9.2.12; Clopper & Pearson 1934 for one binomial): conservative,
as any deterministic interval on a lattice must be to guarantee 1 − α, and an integer interval
whose lower end uses U = 0 and upper end U = 1 (:func:`exact_interval`).

Two exact evaluations of the law are used: for n ≤ :data:`TABLE_LIMIT` a table of the whole
conditional pmf, C | x for every x (one convolution per x); above it, bisection on x with the
pmf of C | x convolved over the window where it has mass (±:data:`WINDOW_SDS` standard
deviations plus :data:`WINDOW_PAD` counts, outside which the binomial tails are below 1e-20).
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpkit.errors import InvalidParameter

__all__ = [
    "TABLE_LIMIT",
    "exact_interval",
    "randomized_interval",
    "support_count_pmf",
    "support_count_table",
]

#: Largest n for which the conditional pmf is tabulated for every x (an (n+1)² table).
TABLE_LIMIT = 1000
#: Half-width of a pmf window in standard deviations, plus a fixed pad (Poisson-like tails).
WINDOW_SDS = 12.0
WINDOW_PAD = 40


def _log_factorials(n: int) -> NDArray[np.float64]:
    """ln k! for k = 0..n (a cumulative sum of logs; relative error ~1e-13 at n = 10⁷)."""
    table = np.zeros(n + 1)
    if n:
        np.cumsum(np.log(np.arange(1, n + 1, dtype=np.float64)), out=table[1:])
    return table


def _binomial_pmf(m: int, r: float, start: int, stop: int, lf: NDArray[np.float64]) -> Any:
    """P(Binomial(m, r) = j) for j = start..stop−1 (zero outside 0..m)."""
    j = np.arange(start, stop)
    inside = (j >= 0) & (j <= m)
    jj = np.clip(j, 0, m)
    if r <= 0.0:
        log = np.where(jj == 0, 0.0, -np.inf)
    elif r >= 1.0:
        log = np.where(jj == m, 0.0, -np.inf)
    else:
        log = lf[m] - lf[jj] - lf[m - jj] + jj * math.log(r) + (m - jj) * math.log1p(-r)
    return np.where(inside, np.exp(log), 0.0)


def support_count_pmf(n: int, p: float, q: float, x: int) -> NDArray[np.float64]:
    """The exact pmf of C | x on 0..n (one convolution; for tests and small n)."""
    lf = _log_factorials(n)
    return np.convolve(_binomial_pmf(x, p, 0, x + 1, lf), _binomial_pmf(n - x, q, 0, n - x + 1, lf))


def support_count_table(n: int, p: float, q: float) -> NDArray[np.float64]:
    """``table[x, c]`` = P(C = c | x) for x, c in 0..n."""
    lf = _log_factorials(n)
    table = np.empty((n + 1, n + 1))
    for x in range(n + 1):
        table[x] = np.convolve(
            _binomial_pmf(x, p, 0, x + 1, lf), _binomial_pmf(n - x, q, 0, n - x + 1, lf)
        )
    return table


@functools.lru_cache(maxsize=8)
def _cached_law(n: int, p: float, q: float) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """``[c, x]``: P(C = c | x) and P(C < c | x), read-only and one row per count, so that the
    rows of the observed counts are gathered contiguously (an experiment repeats the same
    (n, p, q) thousands of times; 8 tables of n ≤ 1000 hold at most 64 MiB)."""
    table = support_count_table(n, p, q)
    below = np.ascontiguousarray((np.cumsum(table, axis=1) - table).T)
    table = np.ascontiguousarray(table.T)
    table.setflags(write=False)
    below.setflags(write=False)
    return table, below


def _check(n: int, p: float, q: float, level: float) -> None:
    if not 0.0 <= q < p <= 1.0:
        raise InvalidParameter("support_probabilities", (p, q), "0 <= q < p <= 1")
    if not isinstance(level, (int, float)) or not 0.0 < level < 1.0:
        raise InvalidParameter("level", level, "a real number in (0, 1)")
    if n < 0:
        raise InvalidParameter("n", n, "a whole number >= 0")


def randomized_interval(
    counts: Any, uniforms: Any, *, n: int, p: float, q: float, level: float = 0.95
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """The exact-coverage interval [x_lo, x_hi] for each observed support count (module
    docstring); ``uniforms`` are the independent U ~ Uniform(0, 1), one per count. Empty
    intervals are (NaN, NaN)."""
    _check(n, p, q, level)
    c = np.asarray(counts, dtype=np.int64)
    u = np.broadcast_to(np.asarray(uniforms, dtype=np.float64), c.shape)
    return _interval(c, u, u, n=n, p=p, q=q, level=level)


def exact_interval(
    counts: Any, *, n: int, p: float, q: float, level: float = 0.95
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """The deterministic interval with coverage ≥ ``level`` for every true count (module
    docstring): the lower end pivots P(C < c | x), the upper end P(C ≤ c | x)."""
    _check(n, p, q, level)
    c = np.asarray(counts, dtype=np.int64)
    if n <= TABLE_LIMIT:  # a function of the count alone: every count's ends, once
        lows, highs = _exact_ends(n, p, q, level)
        clipped = np.clip(c, 0, n)
        return lows[clipped], highs[clipped]
    return _interval(c, np.zeros(c.shape), np.ones(c.shape), n=n, p=p, q=q, level=level)


@functools.lru_cache(maxsize=8)
def _exact_ends(
    n: int, p: float, q: float, level: float
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """The exact interval's ends for every count 0..n, from the table (the same arithmetic as
    for observed counts, all rows at once): an experiment or a session of estimates repeats the
    same (n, p, q, level), and each of its intervals is then a lookup."""
    every = np.arange(n + 1, dtype=np.int64)
    lows, highs = _by_table(
        every, np.zeros(every.shape), np.ones(every.shape), n=n, p=p, q=q, level=level
    )
    lows.setflags(write=False)
    highs.setflags(write=False)
    return lows, highs


def _interval(
    c: NDArray[np.int64],
    u_low: NDArray[np.float64],
    u_high: NDArray[np.float64],
    *,
    n: int,
    p: float,
    q: float,
    level: float,
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """{x : T_low(x) ≤ 1 − α/2 and T_high(x) ≥ α/2}, T_low and T_high being T with the
    uniforms ``u_low`` and ``u_high`` (the same for the randomized interval)."""
    if n <= TABLE_LIMIT:
        return _by_table(c, u_low, u_high, n=n, p=p, q=q, level=level)
    return _by_bisection(c, u_low, u_high, n=n, p=p, q=q, level=level)


def _band(
    t_low: NDArray[np.float64], t_high: NDArray[np.float64], level: float
) -> NDArray[np.bool_]:
    alpha = 1.0 - level
    return (t_high >= alpha / 2.0) & (t_low <= 1.0 - alpha / 2.0)


def _ends(accepted: NDArray[np.bool_]) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """First and last accepted x along the last axis (NaN where none is)."""
    any_ = accepted.any(axis=-1)
    first = np.argmax(accepted, axis=-1).astype(np.float64)
    last = (accepted.shape[-1] - 1 - np.argmax(accepted[..., ::-1], axis=-1)).astype(np.float64)
    return np.where(any_, first, np.nan), np.where(any_, last, np.nan)


def _by_table(
    c: NDArray[np.int64],
    u_low: NDArray[np.float64],
    u_high: NDArray[np.float64],
    *,
    n: int,
    p: float,
    q: float,
    level: float,
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    table, below = _cached_law(n, p, q)  # [c, x]: P(C = c | x) and P(C < c | x)
    flat_c, flat_low, flat_high = np.clip(c.ravel(), 0, n), u_low.ravel(), u_high.ravel()
    low = np.empty(flat_c.size)
    high = np.empty(flat_c.size)
    step = max(1, (1 << 22) // (n + 1))  # rows per chunk: bounded memory
    for start in range(0, flat_c.size, step):
        cc = flat_c[start : start + step]
        ul, uh = flat_low[start : start + step], flat_high[start : start + step]
        # T(x) for every x, one row per count.
        rows, below_rows = table[cc], below[cc]
        t_low = below_rows + ul[:, None] * rows
        t_high = below_rows + uh[:, None] * rows
        low[start : start + step], high[start : start + step] = _ends(_band(t_low, t_high, level))
    return low.reshape(c.shape), high.reshape(c.shape)


def _windows(m: NDArray[np.int64], r: float) -> tuple[NDArray[np.int64], int]:
    """Start of the window of mass of Binomial(m, r) for each m, and one common length."""
    mean = m * r
    sd = np.sqrt(m * r * (1.0 - r))
    start = np.maximum(0, (mean - WINDOW_SDS * sd).astype(np.int64) - WINDOW_PAD)
    stop = np.minimum(m, (mean + WINDOW_SDS * sd).astype(np.int64) + WINDOW_PAD) + 1
    return start, int((stop - start).max(initial=1))


def _binomial_rows(
    m: NDArray[np.int64], r: float, start: NDArray[np.int64], length: int, lf: Any
) -> NDArray[np.float64]:
    """Row i: P(Binomial(m_i, r) = start_i + j) for j = 0..length−1 (0 outside 0..m_i)."""
    j = start[:, None] + np.arange(length)[None, :]
    mm = m[:, None]
    inside = j <= mm
    jj = np.minimum(j, mm)
    if r <= 0.0 or r >= 1.0:
        log = np.where(jj == (0 if r <= 0.0 else mm), 0.0, -np.inf)
    else:
        log = lf[mm] - lf[jj] - lf[mm - jj] + jj * math.log(r) + (mm - jj) * math.log1p(-r)
    return np.where(inside, np.exp(log), 0.0)


def _t_values(
    c: NDArray[np.int64],
    u: NDArray[np.float64],
    x: NDArray[np.int64],
    *,
    n: int,
    p: float,
    q: float,
    lf: NDArray[np.float64],
) -> NDArray[np.float64]:
    """T(x) for each (c, U, x) triple: with A ~ Bin(x, p) and B ~ Bin(n − x, q) on their windows
    of mass, P(C = c) = Σ_j P(A = j)·P(B = c − j) and P(C < c) = Σ_j P(A = j)·P(B ≤ c − 1 − j)."""
    out = np.empty(c.size)
    # Rows per chunk: at most 2²² window entries (a window is longest at m = n).
    whole = np.array([n])
    step = max(1, (1 << 22) // (_windows(whole, p)[1] + _windows(whole, q)[1]))
    for lo in range(0, c.size, step):
        ci, ui, xi = c[lo : lo + step], u[lo : lo + step], x[lo : lo + step]
        a0, la = _windows(xi, p)
        b0, lb = _windows(n - xi, q)
        pmf_a = _binomial_rows(xi, p, a0, la, lf)
        pmf_b = _binomial_rows(n - xi, q, b0, lb, lf)
        cdf_b = np.cumsum(pmf_b, axis=1)
        # Position of c − j in B's window, for every j of A's window.
        at = ci[:, None] - (a0[:, None] + np.arange(la)[None, :]) - b0[:, None]
        clipped = np.clip(at, 0, lb - 1)
        equal = np.where((at >= 0) & (at < lb), np.take_along_axis(pmf_b, clipped, 1), 0.0)
        before = np.clip(at - 1, 0, lb - 1)
        below = np.where(
            at - 1 >= lb, 1.0, np.where(at - 1 >= 0, np.take_along_axis(cdf_b, before, 1), 0.0)
        )
        out[lo : lo + step] = np.einsum("ij,ij->i", pmf_a, below) + ui * np.einsum(
            "ij,ij->i", pmf_a, equal
        )
    return out


def _by_bisection(
    c: NDArray[np.int64],
    u_low: NDArray[np.float64],
    u_high: NDArray[np.float64],
    *,
    n: int,
    p: float,
    q: float,
    level: float,
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    lf = _log_factorials(n)
    alpha = 1.0 - level
    flat_c = c.ravel()

    # T is non-increasing in x: x_lo is the first x with T(x) ≤ 1 − α/2, x_hi the last with
    # T(x) ≥ α/2; each is found by bisection on the integers 0..n.
    def first_at_most(bound: float, u: NDArray[np.float64]) -> NDArray[np.int64]:
        lo = np.zeros(flat_c.size, dtype=np.int64)  # invariant: answer in [lo, hi]
        hi = np.full(flat_c.size, n + 1, dtype=np.int64)  # n + 1 means "none"
        while np.any(lo < hi):
            mid = (lo + hi) // 2
            active = lo < hi
            t = _t_values(flat_c, u, np.minimum(mid, n), n=n, p=p, q=q, lf=lf)
            ok = (t <= bound) & active
            hi = np.where(ok, mid, hi)
            lo = np.where(active & ~ok, mid + 1, lo)
        return lo

    x_lo = first_at_most(1.0 - alpha / 2.0, u_low.ravel())
    # The last x with T(x) ≥ α/2 is one below the first x with T(x) < α/2.
    x_hi = first_at_most(np.nextafter(alpha / 2.0, -math.inf), u_high.ravel()) - 1
    empty = (x_lo > n) | (x_hi < 0) | (x_lo > x_hi)
    low = np.where(empty, np.nan, x_lo.astype(np.float64))
    high = np.where(empty, np.nan, x_hi.astype(np.float64))
    return low.reshape(c.shape), high.reshape(c.shape)
