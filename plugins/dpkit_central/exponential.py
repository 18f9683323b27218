"""The exponential mechanism (``exponential``) and its utility guarantee."""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction
from typing import Any, ClassVar

import attrs
import numpy as np
from numpy.typing import NDArray

from dpkit.plugin import (
    BoundedRangeDP,
    InvalidData,
    InvalidParameter,
    Real,
    array_library,
    describe_dtype,
    device_operands,
    exponential_indices,
    resolve_rng,
    selection_log_operands,
)
from dpkit_central._selection import Selection, exact_rate, exponential_secure, from_the_top
from dpkit_central._validation import as_utilities

__all__ = [
    "Exponential",
    "exponential_log_pmf",
    "sample_by_weight",
    "selection_indices",
    "selection_log_probability",
    "utility_guarantee",
]

POSITIVE = Real(low=0.0, low_open=True)


def utility_guarantee(
    *,
    epsilon: float,
    sensitivity: float,
    candidates: int,
    t: float,
    optimal: int = 1,
    monotone: bool = False,
) -> float:
    """The utility loss the exponential mechanism exceeds with probability at most e^(−t).

    Dwork & Roth 2014, Theorem 3.11: with |R| = ``candidates`` outputs of which |R_OPT| =
    ``optimal`` reach the optimum OPT = max_r u(x, r),

        Pr[u(M_E(x)) ≤ OPT − (2Δu/ε)(ln(|R|/|R_OPT|) + t)] ≤ e^(−t),

    and the function returns the gap (2Δu/ε)(ln(|R|/|R_OPT|) + t). For the monotone variant,
    which samples ∝ exp(ε·u/Δu), the same proof gives (Δu/ε)(ln(|R|/|R_OPT|) + t).
    Corollary 3.12 is ``optimal=1``.
    """
    owner = "utility_guarantee"
    for name, value in (("epsilon", epsilon), ("sensitivity", sensitivity)):
        if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
            raise InvalidParameter(name, value, "a finite real > 0", owner=owner)
    if not (isinstance(candidates, int) and candidates >= 1):
        raise InvalidParameter("candidates", candidates, "an integer >= 1", owner=owner)
    if not (isinstance(optimal, int) and 1 <= optimal <= candidates):
        raise InvalidParameter(
            "optimal", optimal, f"an integer in [1, candidates={candidates}]", owner=owner
        )
    if not (isinstance(t, (int, float)) and math.isfinite(t) and t >= 0):
        raise InvalidParameter("t", t, "a finite real >= 0", owner=owner)
    factor = (1.0 if monotone else 2.0) * sensitivity / epsilon
    return factor * (math.log(candidates / optimal) + t)


def sample_by_weight(
    log_weights: NDArray[np.float64],
    rng: np.random.Generator,
    size: int | None = None,
    *,
    rate: float = 1.0,
) -> NDArray[np.int64]:
    """Draw index i with probability ∝ exp(rate · log_weights[..., i]) along the last axis.

    Numerically stable for any finite log-weights: the row maximum is subtracted before
    ``exp`` (so the largest weight is exactly 1 and the total is in [1, m]); −inf has weight 0
    and is never drawn. Inverse-CDF sampling: a uniform U·total is located in the cumulative
    weights, i.e. the first index whose cumulative weight exceeds it. With ``size`` (1-D input
    only) that many independent draws are made from the same weights.

    Floating point: weights below ~2⁻⁵³ of the total (and below the smallest double after
    ``exp``) are never drawn; with a numpy Generator the uniforms are PCG64 doubles, not a
    cryptographic source (dpkit's SecureRandom can be passed instead: only ``rng.random`` is
    used).
    """
    # u − max(u) and λ(u − max u) may overflow to −inf for utilities near ∓1.8e308 (or a large
    # λ): that is the right weight, 0, so the overflow is not reported.
    with np.errstate(over="ignore"):
        z = log_weights - np.max(log_weights, axis=-1, keepdims=True)
        if rate != 1.0:
            z *= rate
    np.exp(z, out=z)
    np.cumsum(z, axis=-1, out=z)
    total = z[..., -1]
    if size is not None:
        target = rng.random(size) * total
        # U < 1, but U·total can round up to total; the last positive weight is then drawn.
        np.minimum(target, np.nextafter(total, 0.0), out=target)
        return np.asarray(np.searchsorted(z, target, side="right"), dtype=np.int64)
    target = rng.random(total.shape) * total
    target = np.minimum(target, np.nextafter(total, 0.0))
    return np.asarray(np.count_nonzero(z <= np.asarray(target)[..., None], axis=-1), dtype=np.int64)


def selection_indices(outputs: Any, m: int, shape: tuple[int, ...]) -> tuple[Any, Any]:
    """Broadcast candidate indices against a batch shape: (clipped int indices, in-range mask)."""
    raw = np.asarray(outputs)
    if raw.dtype == np.bool_ or not (
        np.issubdtype(raw.dtype, np.integer) or np.issubdtype(raw.dtype, np.floating)
    ):
        raise InvalidData(
            f"outputs must be candidate indices (integers), got an array of {describe_dtype(raw)}",
            field="outputs",
        )
    with np.errstate(invalid="ignore"):
        valid = (raw >= 0) & (raw < m) & (raw == np.floor(raw))
    idx = np.where(valid, raw, 0).astype(np.int64)
    common = np.broadcast_shapes(idx.shape, shape)
    return np.broadcast_to(idx, common), np.broadcast_to(valid, common)


def exponential_log_pmf(xp: Any, device: Any, utilities: Any, rate: float) -> Any:
    """log Pr[r | u] = λ(u(r) − u*) − ln Σ_r′ exp(λ(u(r′) − u*)) for every candidate, shape
    (..., m), of float64 utilities of the namespace ``xp`` (numpy's on the host, an
    accelerator's on its device), u* the row's largest utility (:func:`from_the_top`): a stable
    log-sum-exp (each term in [0, 1], their sum in [1, m]) that no common offset of the
    utilities rounds; −inf utilities give −inf."""
    z = rate * from_the_top(xp, utilities)
    log_norm = xp.log(xp.sum(xp.exp(z), axis=-1))
    return z - log_norm[..., None]


def selection_log_probability(
    outputs: Any,
    inputs: Any,
    log_pmf: Callable[[Any, Any, Any], Any],
    /,
    *,
    owner: str,
) -> Any:
    """``log_probability`` of a selection whose log Pr[r | u] for every candidate is
    ``log_pmf(xp, device, u)`` (shape (..., m)): the value at each output index, broadcasting,
    −inf at an index outside 0..m−1.

    One formula for the host and the device. Neither operand an accelerator's array: numpy,
    the host's checks (``as_utilities`` naming ``inputs``, then the indices), float64. An
    accelerator's array (either operand; a numpy or list operand beside it is copied there as
    public data, :func:`dpkit.tensors.log_probability.device_operands`): the same checks,
    dtypes and shapes before any value (:func:`dpkit.tensors.selection.selection_log_operands`),
    and the formula with the device's operations, float64 in the caller's type.
    """
    operands = device_operands(outputs, inputs, owner=owner)
    if operands is None:
        utilities = as_utilities(inputs, owner=owner, field="inputs")
        idx, valid = selection_indices(outputs, utilities.shape[-1], utilities.shape[:-1])
        xp, device, u = np, None, utilities
        none: Any = np.float64(-np.inf)
    else:
        u, idx, valid = selection_log_operands(operands, owner=owner)
        xp, device = operands.library.xp, operands.library.device
        none = xp.asarray(-math.inf, dtype=xp.float64, device=device)
    rows = log_pmf(xp, device, u)
    rows = xp.broadcast_to(rows, (*tuple(idx.shape), int(rows.shape[-1])))
    chosen = xp.take_along_axis(rows, idx[..., None], axis=-1)[..., 0]
    result = xp.where(valid, chosen, none)
    return np.asarray(result, dtype=np.float64) if operands is None else result


@attrs.frozen
class Exponential(Selection):
    """The exponential mechanism: choose candidate r with probability ∝ exp(ε·u(r)/(2Δu)).

    McSherry & Talwar 2007 ("Mechanism Design via Differential Privacy", FOCS);
    Dwork & Roth 2014, Definition 3.4 and Theorem 3.10 (ε-DP): neighbouring datasets change each
    utility by at most Δu (``sensitivity``), which moves the numerator by a factor e^(ε/2) and the
    normaliser by another. With ``monotone=True`` — every utility moves in the same direction
    between neighbours, e.g. counts or the revenue of a fixed price — the normaliser moves
    against the numerator, and Pr[r] ∝ exp(ε·u(r)/Δu) is ε-DP (McSherry & Talwar 2007,
    Section 2; Dwork & Roth 2014, remark after Theorem 3.10).

    The input of ``randomize`` is the utility array itself: shape (m,) for one selection among
    m candidates, or (..., m) for a batch of independent selections (each row its own dataset's
    utilities; each selection is one ε-DP release). The output is the chosen candidate index,
    of shape ``utilities.shape[:-1]``. Utilities may be −inf (never chosen); NaN, +inf and an
    empty candidate set are errors of ``randomize`` (in a session ``coerce`` maps them first:
    see :mod:`dpkit_central._selection`; a batch of R rows is R releases). The sampler subtracts the row maximum before ``exp``, so
    utilities such as 0, 1000, 2000 at ε = 1 are fine (see :func:`sample_by_weight`).

    Equivalently the output is argmax_r (ε·u(r)/(2Δu) + G_r) with G_r iid standard Gumbel
    (the Gumbel-max trick; Yellott 1977, J. Math. Psych. 15(2)); adding one-sided exponential
    noise instead does NOT give this mechanism — it gives permute-and-flip (see
    :mod:`dpkit_central.noisy_max`).
    """

    name: ClassVar[str] = "exponential"
    device_methods: ClassVar[frozenset[str]] = frozenset({"randomize", "log_probability"})

    @property
    def privacy(self) -> BoundedRangeDP:
        """ε-bounded range (Durfee & Rogers 2019): the loss is λ(u(o) − u′(o)) minus a
        constant, and u − u′ spans at most 2Δu (Δu when monotone), so λ = ε/(2Δu) (ε/Δu) keeps
        it in an interval of width ε. zCDP and RDP charge it ε²/8 (Cesar & Rogers 2021)."""
        return BoundedRangeDP(epsilon=self.epsilon)

    @property
    def rate(self) -> float:
        """The factor λ in Pr[r] ∝ exp(λ·u(r)): ε/(2Δu), or ε/Δu when monotone."""
        return self.epsilon / ((1.0 if self.monotone else 2.0) * self.sensitivity)

    @property
    def exact_rate(self) -> Fraction:
        """λ as an exact rational, at ε's smaller reading and Δu's larger one (used in
        secure mode: :func:`dpkit_central._selection.exact_rate`)."""
        return exact_rate(self.epsilon, self.sensitivity, self.monotone)

    def randomize(self, values: Any, /, *, rng: Any = None, size: int | None = None) -> Any:
        """Chosen candidate indices, shape ``utilities.shape[:-1]``.

        With ``size=N`` (one utility row only) the result is N independent selections from the
        same utilities; they are N releases and cost N·ε together.

        Fast mode (a numpy Generator): inverse-CDF sampling on float weights
        (:func:`sample_by_weight`). Secure mode (``rng=None`` or a SecureRandom): exact
        rejection sampling — a uniform proposal accepted with the exact Bernoulli(exp(−γ_r)),
        γ_r = λ(u* − u_r) an exact rational of the float utilities, ε and Δu (see
        :func:`dpkit_central._selection.exponential_secure`); the output law is then exactly
        :meth:`log_probability`'s, with no rounding and the declared ε.

        An accelerator's array is selected on its device, int64 indices in its type
        (:mod:`dpkit.tensors.selection`): in secure mode by the same exact rejection sampler
        (ChaCha20 words on the device, the exact coins of :mod:`dpkit.tensors.exp_coins`), in
        fast mode (a numpy or ``torch.Generator``) by the inverse-CDF sampling above.
        """
        library = array_library(values, owner=self.name)
        if library is not None:  # an accelerator's array (host arrays arrive as numpy views)
            self._check_size(size, len(values.shape))
            return exponential_indices(
                library,
                values,
                rate=self.rate,
                rng=rng,
                owner=self.name,
                exact_rate=self.exact_rate,
                size=None if size is None else int(size),
            )
        rng = resolve_rng(rng, owner=self.name)[0]
        utilities = as_utilities(values, owner=self.name, exact=True)
        self._check_size(size, utilities.ndim)
        copies = None if size is None else int(size)
        if isinstance(rng, np.random.Generator):  # values no double holds: nearest doubles
            floats = np.asarray(utilities, dtype=np.float64)
            return sample_by_weight(floats, rng, copies, rate=self.rate)
        return exponential_secure(utilities, self.exact_rate, rng, copies)

    def _check_size(self, size: Any, ndim: int) -> None:
        if size is not None:
            if ndim != 1:
                raise InvalidParameter(
                    "size", size, "None when utilities is a batch (2-D or more)", owner=self.name
                )
            if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 0:
                raise InvalidParameter("size", size, "an integer >= 0", owner=self.name)

    def log_probability(self, outputs: Any, inputs: Any, /) -> Any:
        """log Pr[r | u] = λu(r) − ln Σ_r′ exp(λu(r′)), computed as a stable log-sum-exp
        (:func:`exponential_log_pmf`).

        ``inputs`` are utilities of shape (..., m), ``outputs`` candidate indices broadcasting
        against ``inputs.shape[:-1]``; an index outside 0..m−1 has log-probability −inf.
        An accelerator's array (either operand) is scored on its device, float64, in its type
        (:func:`selection_log_probability`): the same formula with the device's ``exp`` and
        ``log`` and its summation order, within the bound of docs/tensors.md of the host's
        value, −inf exactly where the host's is.
        """
        rate = self.rate
        return selection_log_probability(
            outputs,
            inputs,
            lambda xp, device, u: exponential_log_pmf(xp, device, u, rate),
            owner=self.name,
        )

    def output_space(self, candidates: int | None = None) -> NDArray[np.int64]:
        """The candidate indices 0 .. m−1; m is the length of the utility vector."""
        if candidates is None or isinstance(candidates, bool) or candidates < 1:
            raise InvalidParameter(
                "candidates",
                candidates,
                "the number m >= 1 of candidates (the output space is 0 .. m-1)",
                owner=self.name,
            )
        return np.arange(int(candidates), dtype=np.int64)

    def utility_guarantee(self, candidates: int, t: float, *, optimal: int = 1) -> float:
        """:func:`utility_guarantee` at this mechanism's ε, Δu and monotonicity."""
        return utility_guarantee(
            epsilon=self.epsilon,
            sensitivity=self.sensitivity,
            candidates=candidates,
            t=t,
            optimal=optimal,
            monotone=self.monotone,
        )
