"""Independent references for the device paths: which keystream word decides which element.

Built from :func:`dpkit.tensors.chacha.chacha20_words` (itself checked against OpenSSL's
ChaCha20 and RFC 8439's test vector) with numpy, one element at a time where it matters, so
that a fused kernel's output can be compared bit for bit with the word map its docs state.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Iterable
from typing import Any

import array_api_compat.numpy as xnp
import attrs
import numpy as np
import pytest
from dpkit_central._selection import from_the_top
from dpkit_central.noisy_max import RNM_NEGLIGIBLE_GAP

from dpkit import SecureRandom
from dpkit.tensors import libraries
from dpkit.tensors.chacha import chacha20_words


def call_key(key: bytes) -> tuple[int, ...]:
    """The device key of the first call made with ``SecureRandom.from_key(key)``."""
    return tuple(int(w) for w in SecureRandom.from_key(key).words(4).view(np.uint32))


def stream(key: tuple[int, ...], blocks: int) -> np.ndarray[Any, Any]:
    """The keystream words of blocks 0 .. blocks − 1 as an array (blocks, 16)."""
    return np.stack(chacha20_words(xnp, key, 0, blocks), axis=1)


def fused_bits_words(key: tuple[int, ...], n: int, lanes: int) -> np.ndarray[Any, Any]:
    """Word of element i in the fused bits kernel: i = 16·L·p + L·k + l ↦ word k of block L·p + l."""
    programs = -(-n // (16 * lanes))
    words = stream(key, programs * lanes)
    i = np.arange(n)
    p, rest = np.divmod(i, 16 * lanes)
    k, lane = np.divmod(rest, lanes)
    return words[p * lanes + lane, k]


def fused_graph_words(key: tuple[int, ...], n: int, tile: int) -> np.ndarray[Any, Any]:
    """Word of pair (i, j), i < j, in the fused graph kernel (an n×n array; 0 elsewhere):
    tile (I, J), lane (m, c) = block (I·tiles + J)·tile²/16 + m·tile + c, word k decides
    (I·tile + k·tile/16 + m, J·tile + c)."""
    tiles = -(-n // tile)
    sub = tile // 16
    words = stream(key, tiles * tiles * tile * tile // 16)
    out = np.zeros((n, n), dtype=np.int64)
    for i in range(n):
        for j in range(i + 1, n):
            big_i, row = divmod(i, tile)
            big_j, c = divmod(j, tile)
            k, m = divmod(row, sub)
            block = (big_i * tiles + big_j) * (tile * tile // 16) + m * tile + c
            out[i, j] = words[block, k]
    return out


class _Replay:
    """A word source handing out given 64-bit words in order: the CPU path fed chosen words."""

    keyed = True

    def __init__(self, words: np.ndarray[Any, Any]) -> None:
        self._words = words
        self._next = 0

    def words(self, size: int | None = None) -> np.ndarray[Any, Any]:
        count = 1 if size is None else int(size)
        out = self._words[self._next : self._next + count]
        self._next += count
        assert out.size == count, "the CPU path asked for more words than the device used"
        return out


def replaying(words: np.ndarray[Any, Any]) -> SecureRandom:
    """A SecureRandom whose words are the given ones, in order (and no more)."""
    rng = SecureRandom.__new__(SecureRandom)
    object.__setattr__(rng, "_source", _Replay(words))
    return rng


def on_device(
    monkeypatch: pytest.MonkeyPatch, counted: Iterable[tuple[Any, str]] = ()
) -> list[str]:
    """Host arrays of torch and array-api-strict take the device path (as a CUDA tensor would):
    every loaded dpkit module's ``array_library`` reports them off the host. The list returned
    records, by name, the calls of the ``counted`` (module, function name) pairs."""
    real = libraries.array_library

    def accelerated(values: Any, **kwargs: Any) -> Any:
        library = real(values, **kwargs)
        return None if library is None else attrs.evolve(library, on_host=False)

    for name, module in list(sys.modules.items()):
        if name.startswith("dpkit") and getattr(module, "array_library", None) is real:
            monkeypatch.setattr(module, "array_library", accelerated)
    called: list[str] = []
    for module, name in counted:
        function = getattr(module, name)

        def recorded(*args: Any, _function: Any = function, _name: str = name, **kw: Any) -> Any:
            called.append(_name)
            return _function(*args, **kw)

        monkeypatch.setattr(module, name, recorded)
    return called


class Drawless:
    """Device words that fail if a single word is drawn (a refusal must come first)."""

    secure = True

    def take(self, count: int) -> Any:
        raise AssertionError("a word was drawn before the refusal")


class RecordingWords:
    """A call's DeviceWords that keeps every word it hands out (as numpy, in order)."""

    def __init__(self, words: Any) -> None:
        self.real = words
        self.library = words.library
        self.taken: list[np.ndarray[Any, Any]] = []

    @property
    def secure(self) -> bool:
        return bool(self.real.secure)

    def take(self, count: int) -> Any:
        out = self.real.take(count)
        self.taken.append(np.from_dlpack(out).astype(np.uint64))
        return out

    def words64(self) -> np.ndarray[Any, Any]:
        w = np.concatenate(self.taken) if self.taken else np.zeros(0, np.uint64)
        return (w[0::2] << np.uint64(32)) | w[1::2]


def recording_calls(monkeypatch: pytest.MonkeyPatch, module: Any) -> list[RecordingWords]:
    """torch and array-api-strict host arrays take the device path (:func:`on_device`), and
    ``module``'s ``device_words`` records each call's words: the list holds one
    :class:`RecordingWords` per call (none for a call refused before drawing)."""
    made: list[RecordingWords] = []
    on_device(monkeypatch)
    real = module.device_words

    def recorded(*args: Any, **kwargs: Any) -> Any:
        words = RecordingWords(real(*args, **kwargs))
        made.append(words)
        return words

    monkeypatch.setattr(module, "device_words", recorded)
    return made


#: How far a device's log-probability may be from the host's where it takes the logarithm of a
#: value that depends on the input (duchi, duchi_multi, one_bit_mean): both libraries' ``log``
#: (and ``log1p``) of the same double within one ulp of the correctly rounded result, so two
#: representable doubles between them at most (docs/tensors.md states the contract).
LOG_ULPS = 2


def ulps_apart(a: Any, b: Any) -> np.ndarray[Any, Any]:
    """How many representable doubles lie between a and b, elementwise (0 where equal; −0.0
    and 0.0 count as one): the float64 bit patterns on one increasing integer scale."""
    bits = [np.asarray(v, dtype=np.float64).view(np.int64) for v in (a, b)]
    sign = np.int64(0x7FFF_FFFF_FFFF_FFFF)
    scale = [np.where(v < 0, -(v & sign), v) for v in bits]
    return np.abs(scale[0] - scale[1])


def assert_log_agrees(got: Any, expected: Any) -> None:
    """A device's log-probabilities against the host's: the same shape, NaN, ±inf and 0
    exactly where the host has them, every other value within :data:`LOG_ULPS`."""
    got, expected = np.asarray(got), np.asarray(expected)
    assert got.shape == expected.shape
    exact = ~np.isfinite(expected) | (expected == 0.0)
    assert np.array_equal(got[exact], expected[exact], equal_nan=True)
    assert np.all(np.isfinite(got[~exact]))
    assert int(ulps_apart(got[~exact], expected[~exact]).max(initial=0)) <= LOG_ULPS


#: float64's unit roundoff u = 2⁻⁵³: |fl(a ∘ b) − a ∘ b| ≤ u·|a ∘ b| for +, −, ×, ÷.
UNIT_ROUNDOFF = 2.0**-53


def sum_of_logs_bound(total: Any, *, terms: int, constant: float) -> np.ndarray[Any, Any]:
    """The most a device's T′ = fl(Σ_j L′_j − c) may differ from the host's T = fl(Σ_j L_j − c)
    given the host's T, for m = ``terms`` logarithms L_j ≤ 0 of the same doubles summed in the
    same order (zeros between them add exactly) and c = ``constant`` ≥ 0 (multibit's
    −log C(d, m) + Σ_drawn log P[±B | t_j]).

    Derivation (u the unit roundoff, A = Σ_j |L_j|, docs/tensors.md states the result):

    * each L′_j is at most :data:`LOG_ULPS` representable doubles from L_j; a gap between
      doubles is at most 2u times the larger magnitude, so |L′_j − L_j| ≤ η|L_j| with
      η = 2·LOG_ULPS·u/(1 − 2·LOG_ULPS·u), and A′ = Σ|L′_j| ≤ (1 + η)A;
    * a sum of m terms of one sign taken left to right is within γ_{m−1} of the exact sum
      relative to Σ|terms| = |Σ terms| (Higham, *Accuracy and Stability of Numerical
      Algorithms*, 2nd ed., 2002, §4.2: |E| ≤ γ_{n−1}·Σ|x_i|, γ_k = ku/(1 − ku)), so
      |S′ − S| ≤ ηA + γ_{m−1}(A + A′) ≤ (η + γ_{m−1}(2 + η))·A;
    * each side's − c rounds once: |T − (S − c)| ≤ u(|S| + c) with |S| ≤ (1 + γ_{m−1})A,
      the same for T′ with A′;

    |T′ − T| ≤ (η + γ_{m−1}(2 + η))·A + u·((1 + γ_{m−1})(2 + η)·A + 2c) — to first order in
    u, (m + 2)·2⁻⁵²·A + 2⁻⁵²·c. A is bounded by the host's result alone: T = (S − c)(1 + δ)
    with |δ| ≤ u and S ≤ 0 give |S| ≤ |T|/(1 − u) − c, and |S| ≥ (1 − γ_{m−1})A. The bound
    is evaluated in float64 with a relative 32u added (its dozen or so positive roundings)."""
    u = UNIT_ROUNDOFF
    gamma = (terms - 1) * u / (1.0 - (terms - 1) * u)
    eta = 2 * LOG_ULPS * u / (1.0 - 2 * LOG_ULPS * u)
    a = np.maximum(np.abs(np.asarray(total, dtype=np.float64)) / (1.0 - u) - constant, 0.0)
    a = a / (1.0 - gamma)
    bound = (eta + gamma * (2.0 + eta)) * a + u * ((1.0 + gamma) * (2.0 + eta) * a + 2 * constant)
    return np.asarray(bound * (1.0 + 32 * u))


def assert_sum_of_logs_agrees(got: Any, expected: Any, *, terms: int, constant: float) -> None:
    """A device's sums of ``terms`` logarithms (less ``constant``) against the host's: the
    same shape, NaN, ±inf and 0 exactly where the host has them, every other value within
    :func:`sum_of_logs_bound` of the host's."""
    got, expected = np.asarray(got), np.asarray(expected)
    assert got.shape == expected.shape
    exact = ~np.isfinite(expected) | (expected == 0.0)
    assert np.array_equal(got[exact], expected[exact], equal_nan=True)
    assert np.all(np.isfinite(got[~exact]))
    bound = sum_of_logs_bound(expected[~exact], terms=terms, constant=constant)
    assert np.all(np.abs(got[~exact] - expected[~exact]) <= bound)


#: How far one side's ``logaddexp`` of two given doubles may be from the real
#: m + log1p(exp(−d̂)) of the same difference d̂ (absolutely, before the final addition's
#: rounding): its exp and log1p within 3u relatively each (one ulp from the correctly rounded
#: double, so 1.5 ulp ≤ 3u), log1p 1-Lipschitz on [0, ∞) and below ln(2 + 3u) there, so
#: 3u + 3u·0.694 < 5.1u; 6u keeps a margin for the second-order terms.
LOGADDEXP_ERROR = 6 * UNIT_ROUNDOFF


def sum_of_logaddexp_bound(total: Any, *, terms: int, constant: float) -> np.ndarray[Any, Any]:
    """The most a device's T′ = fl(Σ_i P′_i − c) may differ from the host's T = fl(Σ_i P_i − c)
    given the host's T, for k = ``terms`` per-bit values P_i = logaddexp(a_i, b_i) of the same
    doubles a_i, b_i on both sides, summed in any order, and c = ``constant`` ≥ 0 (rappor's
    Σ_i log(π·q^c(1 − q)^{T−c} + (1 − π)·p^c(1 − p)^{T−c}) − log m).

    Derivation (u the unit roundoff, docs/tensors.md states the result): both sides compute
    d̂ = |a − b| and the maximum m the same (IEEE operations on the same doubles); take as
    common reference P*_i = m + log1p(exp(−d̂)), a real number, and A = Σ_i |P*_i|.

    * one side's P′_i = fl(m + l′), l′ within β = :data:`LOGADDEXP_ERROR` of log1p(exp(−d̂)),
      so |P′_i − P*_i| ≤ β + u(|P*_i| + β) and Σ|P′_i| ≤ (1 + u)A + kβ(1 + u);
    * its sum, in any order of pairwise additions (numpy's pairwise, torch's cascade, a GPU's
      tree: Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed., 2002, §4.2,
      |E| ≤ γ_{k−1}·Σ|x_i|, γ_j = ju/(1 − ju)), is within
      E_S = (1 + γ)(1 + u)kβ + (u + γ(1 + u))A of Σ_i P*_i;
    * − c rounds once: within E_S(1 + u) + u(A + c) of Σ_i P*_i − c, on each side;

    so |T′ − T| ≤ 2[E_S(1 + u) + u(A + c)] — to first order 12k·u + (2k + 2)u·A + 2u·c.
    A is bounded by the host's result alone: the true per-bit log-probabilities are ≤ 0;
    a and b are sums of non-positive terms, each within about 6u of its own magnitude, and
    logaddexp's gradient is two weights summing to 1, so logaddexp(a, b) is within
    6u(|P| + 1/e) of the true P, and P*_i within u·d̂·e^{−d̂} ≤ u/e of that: P*_i < 3u, so
    A ≤ −Σ P*_i + 6uk ≤ |T| − c + E + 6uk, E the one-side bound above: solved for A (with 8uk).
    Evaluated in float64 with a relative 32u added (its dozen or so positive roundings)."""
    u = UNIT_ROUNDOFF
    k = terms
    gamma = (k - 1) * u / (1.0 - (k - 1) * u)
    beta = LOGADDEXP_ERROR
    kappa = (1.0 + gamma) * (1.0 + u) * k * beta
    rho = u + gamma * (1.0 + u)
    host = np.abs(np.asarray(total, dtype=np.float64))
    a = (host - (1.0 - u) * constant + kappa * (1.0 + u) + 8 * u * k) / (1.0 - u - rho * (1.0 + u))
    a = np.maximum(a, 0.0)
    bound = 2.0 * ((kappa + rho * a) * (1.0 + u) + u * (a + constant))
    return np.asarray(bound * (1.0 + 32 * u))


def assert_sum_of_logaddexp_agrees(got: Any, expected: Any, *, terms: int, constant: float) -> None:
    """A device's sums of ``terms`` logaddexps (less ``constant``) against the host's: the
    same shape, −inf (and NaN) exactly where the host has them, every other value finite and
    within :func:`sum_of_logaddexp_bound` of the host's."""
    got, expected = np.asarray(got), np.asarray(expected)
    assert got.shape == expected.shape
    exact = ~np.isfinite(expected)
    assert np.array_equal(got[exact], expected[exact], equal_nan=True)
    assert np.all(np.isfinite(got[~exact]))
    bound = sum_of_logaddexp_bound(expected[~exact], terms=terms, constant=constant)
    assert np.all(np.abs(got[~exact] - expected[~exact]) <= bound)


#: The unit roundoff of float64, 2⁻⁵³: IEEE 754's +, −, × round within it, relatively.
UNIT = 2.0**-53
#: The relative error of a library's float64 ``exp``, ``log`` and ``log1p`` assumed by the
#: selections' bounds: one ulp from the correctly rounded double (CUDA's documented bound;
#: numpy's and torch's CPU measured so against mpmath), so 1.5 ulp ≤ 3u from the exact value.
FUNCTION_ERROR = 3 * UNIT


def _gamma(n: Any) -> Any:
    """Higham's γ_n = nu/(1 − nu): the relative error of a sum of n + 1 terms of one sign, in
    any order (Higham 2002, Accuracy and Stability of Numerical Algorithms, §4.2)."""
    return n * UNIT / (1.0 - n * UNIT)


def exponential_tolerance(u: Any, rate: float) -> np.ndarray[Any, Any]:
    """How far a device's exponential-mechanism log-probabilities may be from the host's, for
    every candidate of the utility rows ``u`` (..., m): the bound of docs/tensors.md.

    Both compute z = λ(u − u*), u* the row's largest utility, with the same IEEE operations
    (the same doubles); then each side's ``exp`` and ``log`` within one ulp of the correctly
    rounded double (:data:`FUNCTION_ERROR` relatively), its sum of m terms in [0, 1] in any
    order (relative γ_{m−1}, S ∈ [1, m]), L = log S and z_r − L rounded (u|L|, u|r|): per
    side |error| ≤ (3u + γ_{m−1})(1 + 3u) + 3u·ln m + u|L| + u|r|, and the two sides twice
    that (plus 2u of second-order slack)."""
    z = rate * from_the_top(np, np.asarray(u, dtype=np.float64))
    m = z.shape[-1]
    log_norm = np.log(np.sum(np.exp(z), axis=-1, keepdims=True))
    result = z - log_norm
    side = (
        (FUNCTION_ERROR + _gamma(m - 1)) * (1 + FUNCTION_ERROR)
        + FUNCTION_ERROR * math.log(m)
        + UNIT * np.abs(log_norm)
        + UNIT * np.abs(result)
        + UNIT
    )
    return np.asarray(2 * side, dtype=np.float64)


def permute_and_flip_tolerance(u: Any, rate: float) -> np.ndarray[Any, Any]:
    """How far a device's permute-and-flip log-probabilities may be from the host's, for every
    candidate of the utility rows ``u`` (..., m): the bound of docs/tensors.md, from the host's
    intermediate values of ``permute_and_flip_log_pmf``.

    Per side, with each ``exp``, ``log`` and ``log1p`` within :data:`FUNCTION_ERROR` = 3u
    relatively and IEEE rounding u: p_j = exp(λ(u_j − u*)) (3u) times the node t_k (u): x_jk
    relative 4u, so f_jk = log1p(−x_jk) absolutely within a_jk = 4u·x/(1 − x) + 3u|f_jk|; the
    sum over j
    (one sign) within Σ_j a_jk + γ_{m−1}|Σ_j f_jk|; the product over j ≠ r, v_rk, within
    E_rk = that + a_rk + u|v_rk|. The weighted log-sum-exp over k is 1-Lipschitz in its
    arguments (max_k E_rk passes through) and rounds within u·max_k|v_rk − top_r| (the shift),
    3u (exp), u (× w), γ_{n−1} (the sum), 3u|log s| (its log), u|I_r| (+ top), u|result|
    (+ log p_r). The two sides: twice that, plus 2u of second-order slack."""
    z = np.asarray(u, dtype=np.float64)
    m = z.shape[-1]
    n = m // 2 + 1
    nodes, weights = np.polynomial.legendre.leggauss(n)
    t, w = 0.5 * (nodes + 1.0), 0.5 * weights
    log_p = rate * (z - np.max(z, axis=-1, keepdims=True))
    x = np.exp(log_p)[..., :, None] * t
    f = np.log1p(-x)
    a = (FUNCTION_ERROR + UNIT) * x / (1.0 - x) + FUNCTION_ERROR * np.abs(f)
    log_all = np.sum(f, axis=-2, keepdims=True)
    all_error = np.sum(a, axis=-2, keepdims=True) + _gamma(m - 1) * np.abs(log_all)
    v = log_all - f
    error = np.max(all_error + a + UNIT * np.abs(v), axis=-1)
    top = np.max(v, axis=-1, keepdims=True)
    s = np.sum(w * np.exp(v - top), axis=-1)
    integral = np.log(s) + top[..., 0]
    result = log_p + integral
    side = (
        error
        + UNIT * np.max(np.abs(v - top), axis=-1)
        + FUNCTION_ERROR
        + UNIT
        + _gamma(n - 1)
        + FUNCTION_ERROR * np.abs(np.log(s))
        + UNIT * np.abs(integral)
        + UNIT * np.abs(result)
        + UNIT
    )
    return np.asarray(2 * np.where(np.isfinite(side), side, 0.0), dtype=np.float64)


def assert_selection_log_agrees(got: Any, expected: Any, tolerance: Any) -> None:
    """A device's selection log-probabilities against the host's: the same shape, −inf exactly
    where the host's is, every other value within ``tolerance`` (broadcast) of the host's."""
    got, expected = np.asarray(got), np.asarray(expected)
    assert got.shape == expected.shape
    exact = ~np.isfinite(expected)
    assert np.array_equal(got[exact], expected[exact], equal_nan=True)
    assert np.all(np.isfinite(got[~exact]))
    bound = np.broadcast_to(tolerance, expected.shape)
    assert np.all(np.abs(got[~exact] - expected[~exact]) <= bound[~exact])


#: The smallest positive double: an ``exp`` that underflows may be off by one such step.
_TINY = 2.0**-1074
_LOG_HALF = math.log(0.5)


def _log_error(log_scale: float, value: float, error: float, log_error: float) -> float:
    """log of a bound on |Ŝ − S| where S = e^``log_scale``·``value`` and Ŝ = e^(``log_scale``
    ± ``log_error``)·V̂ with |V̂ − ``value``| ≤ ``error``: the first-order form, or, where that
    overflows (a huge ``log_error``, from the rounding of huge logarithms), max(Ŝ, S)."""
    with np.errstate(over="ignore"):
        first = (value + error) * math.expm1(min(log_error, 709.0)) + error
    crude = math.log(value + error) + log_error if value + error > 0 else -math.inf
    fine = math.log(first) if first > 0 else -math.inf
    return log_scale + (fine if log_error < 709.0 else crude)


def _rnm_row_tolerance(v: np.ndarray[Any, Any], width: int) -> np.ndarray[Any, Any]:
    """The per-side bound of :func:`report_noisy_max_tolerance` for one row of finite scaled
    utilities ``v`` (less their largest), of a row of ``width`` candidates (the device's sums
    run over all of them): each candidate's near set (``dpkit_central.noisy_max._rnm_row``)
    by :func:`_rnm_expansion_tolerance`."""
    out = np.empty(v.shape[0])
    for r in range(v.shape[0]):
        near = v >= v[r] - RNM_NEGLIGIBLE_GAP
        out[r] = _rnm_expansion_tolerance(v[near], width)[int(np.count_nonzero(near[:r]))]
    return out


def _rnm_expansion_tolerance(v: np.ndarray[Any, Any], width: int) -> np.ndarray[Any, Any]:
    """The per-side bound for every candidate of one row of finite scaled utilities, all of
    them taken into account: the host's expansion (``dpkit_central.noisy_max._rnm_expansion``)
    recomputed step by step with the error each step may add."""
    n = v.shape[0]
    if n == 1:
        return np.zeros(1)  # 0 exactly on both
    u, f = UNIT, FUNCTION_ERROR
    g = _gamma(width - 1)
    eps_coef = _gamma(5 * (width - 1))  # B_j (3u) and two roundings per step, one sign
    c = np.unique(v)
    out = np.empty(n)
    for r in range(n):
        others = np.delete(v, r)
        # First segment: n·log½ + n·c₀ − Σv − log n, the sum Σv in any order.
        first = n * _LOG_HALF + n * c[0] - v.sum() - math.log(n)
        e_first = (
            g * float(np.abs(v).sum())
            + u * abs(n * _LOG_HALF + n * c[0] - v.sum())
            + f * math.log(n)
            + u * abs(first)
        )
        parts = [first]  # the host's log of each segment's contribution
        errors = [_log_error(first + e_first, 1.0, 0.0, e_first)]  # log of each one's error bound
        for k in range(1, len(c) + 1):
            a = c[k - 1]
            last = k == len(c)
            length = math.inf if last else c[k] - a
            below = others[others <= a]
            above = others[others > a]
            r_below = v[r] <= a
            log_d = _LOG_HALF + (-(a - v[r]) if r_below else (a - v[r]))
            log_c = above.size * _LOG_HALF + float(np.sum(a - above))
            e_c = g * float(np.abs(a - above).sum()) + u * abs(log_c)  # a sum in any order
            coef = np.ones(1)
            for b in 0.5 * np.exp(-(a - below)):
                coef = np.append(coef, 0.0) - b * np.append(0.0, coef)
            kappa = above.size + (-1 if r_below else 1) - np.arange(coef.size)
            log_i = np.empty(coef.size)
            e_i = np.empty(coef.size)
            for t, kap in enumerate(kappa):
                if last:
                    log_i[t] = -math.log(-kap)
                    e_i[t] = f * math.log(-kap)
                elif kap == 0:
                    log_i[t] = math.log(length)
                    e_i[t] = f * abs(math.log(length))
                elif kap > 0:
                    ell = math.log(-math.expm1(-kap * length))
                    log_i[t] = kap * length + ell - math.log(kap)
                    e_i[t] = (
                        -math.log1p(-f)
                        + f * abs(ell)
                        + u * abs(kap * length + ell)
                        + f * math.log(kap)
                        + u * abs(log_i[t])
                    )
                else:
                    ell = math.log(-math.expm1(kap * length))
                    log_i[t] = ell - math.log(-kap)
                    e_i[t] = -math.log1p(-f) + f * abs(ell) + f * math.log(-kap) + u * abs(log_i[t])
            with np.errstate(divide="ignore"):
                log_coef = np.log(np.abs(coef))
            live = coef != 0
            log_terms = log_coef + log_i
            top = float(np.max(log_terms))
            e_terms = (
                -math.log1p(-eps_coef)
                + f * np.abs(log_coef)
                + e_i
                + u * np.abs(log_terms)
                + u * np.abs(log_terms - top)
            )
            scaled = np.exp(log_terms - top)
            magnitude = float(scaled[live].sum())  # Σ|terms|, scaled by e^(−top)
            total = float(np.sum(np.sign(coef) * scaled))
            # |x̂_t − x_t| ≤ x_t·ρ_t, ρ_t = e^(e_t)(1 + 3u) − 1, or, for a huge e_t beside a
            # term far below the largest, x_t·e^(e_t)·(2 + 3u) (both at most that; e^(y + e) of
            # y = −10³⁰⁰ and e = 10²⁸⁴ is still 0).
            y = log_terms[live] - top
            with np.errstate(over="ignore"):
                rho = np.expm1(np.minimum(e_terms[live], 709.0)) * (1 + f) + f
                term_error = np.exp(y + np.minimum(np.log(rho), e_terms[live] + math.log(2 + f)))
            t_error = float(term_error.sum()) + 4 * width**2 * 2.0**width * _TINY  # subnormal B
            t_error += g * (magnitude + t_error)
            log_total = math.log(total) if total > 0 else 0.0
            log_t_hat = abs(log_total) + 1 if 2 * t_error <= total else 745.0
            d = log_d + log_c
            seg = d + top + log_total
            phi = e_c + u * abs(d) + u * abs(d + top) + u * abs(seg) + f * log_t_hat
            if total > 0:
                parts.append(seg)
            # The host's T and d stand in for the exact ones: within t_error and φ of them.
            errors.append(_log_error(d + top + phi, max(total, 0.0) + t_error, t_error, phi))
        result = float(np.logaddexp.reduce(parts))  # ≈ the host's log Pr[r]
        ratio = math.exp(min(float(np.logaddexp.reduce(errors)) - result, 0.0))
        if ratio >= 2.0**-10:
            out[r] = math.inf  # no claim (a test asking for one fails)
            continue
        q = ratio / (1 - 2 * ratio)  # Δ over the true sum, which is ≥ e^result·(1 − 2·ratio)
        peak = max(parts)
        y = np.asarray(parts) - peak  # ≤ 0; one of them 0
        eps_lse = float(
            np.sum(
                np.exp(y * (1 - u)) * np.minimum(1.0, u * np.abs(y))
                + f * np.exp(y) * (1 + u * np.abs(y))
                + _TINY
            )
            + _gamma(width + 1) * (1 + float(np.exp(y).sum()))
        )
        out[r] = (
            -math.log1p(-q) - math.log1p(-eps_lse) + f * math.log(width + 1) + u * abs(result) + u
        ) * (1 + 2.0**-8)  # the host's values standing in for the exact ones: second order
    return out


def report_noisy_max_tolerance(u: Any, scale: float) -> np.ndarray[Any, Any]:
    """How far a device's report-noisy-max log-probabilities may be from the host's, for
    every candidate of the utility rows ``u`` (..., m) at Laplace ``scale``: the bound of
    docs/tensors.md, from the host's intermediate values (0 where the host's value is −inf).

    Both sides run the host's segment expansion on the same doubles v = u/b (the device's in
    branch-free form, ``dpkit_central.noisy_max._rnm_rows``); they differ by each side's
    ``exp``, ``expm1`` and ``log`` (:data:`FUNCTION_ERROR` relatively), the roundings after
    them, and the order of the sums over the candidates. Per side, against the same
    expansion in exact arithmetic on those doubles, with γ = γ_{m−1}:

    * the coefficients of ∏(1 − B_j e^(−s)), B_j = ½e^(−(a − v_j)), are each a sum of
      monomials of one sign, so each is within γ_{5(m−1)} relatively (3u per B_j, two
      roundings per step);
    * each term's logarithm log|c_t| + log I_t within e_t (the ``log``, ``expm1``, the
      additions, the shift by the largest term); ``exp`` of it within ρ_t = e^(e_t)(1 + 3u) − 1;
      their signed sum T within ε_T = max ρ_t + γ(1 + max ρ_t) of Σ|terms| (Higham 2002,
      §4.2) — the cancellation: relative to T that is ε_T·cond, cond = Σ|terms|/T;
    * log_c (a sum over the candidates above the segment, in any order) within γ·Σ|a − v_j|,
      and the additions forming the segment's logarithm within u of each partial sum;
    * so each segment's contribution S_k is within ε_T·Σ|terms| + (its value)(e^φ − 1) — a
      segment whose computed T is ≤ 0, dropped by the host, is within that too, being at
      most ε_T·Σ|terms| — and the sum P of the contributions within Δ = Σ_k of those;
    * the final log-sum-exp over segments: each shift y_k = seg_k − max rounds within u|y_k|,
      each ``exp`` 3u, the sum γ_{K}, the ``log`` 3u|log s|, the + max u|result|.

    Per side |error| ≤ −log(1 − Δ/P) − log(1 − ε_lse) + 3u·log(m + 1) + u|result| + u
    (Δ/P from the host's values with slack: Δ/e^result/(1 − 2Δ/e^result), and the whole times
    1 + 2⁻⁸ for the host's values standing in for the exact ones); the two sides twice that.
    Where Δ/e^result ≥ 2⁻¹⁰ the bound is +inf: no claim (for a candidate more than about 10¹³
    scales below the best, whose near set spans that much, where each side's roundings of
    logarithms that large reach the result's size); a test that asks for a claim there
    fails."""
    z = from_the_top(np, np.asarray(u, dtype=np.float64) / scale)
    m = z.shape[-1]
    flat = z.reshape(-1, m)
    out = np.zeros(flat.shape)
    for i, row in enumerate(flat):
        keep = np.isfinite(row)
        out[i, keep] = _rnm_row_tolerance(row[keep], m)
    return np.asarray(2 * out.reshape(z.shape), dtype=np.float64)
