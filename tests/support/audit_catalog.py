"""A catalog of mechanisms and queries with known privacy — correct ones and known bugs — to
check the auditor's verdicts. Written for the test suite and the benchmark
(``benchmarks/bench_audit.py``), independently of the built-in plugins.

Everything is registered as a third party would: :class:`CatalogPlugin` implements
``dpkit_register_mechanisms`` and ``dpkit_register_queries``, :func:`catalog_registry` loads it
beside the installed plugins, and every audited object is built through that registry by name
(``registry.mechanism(name, **params)``, ``registry.query(name, **params)``). The built-in
queries (count, sum, mean, histogram, quantile) are audited whole through the same registry.

Each :class:`Case` states the true privacy of what it builds (with its source) and which tier
must catch a bug: ``"statistical"`` when the sampler alone proves it, ``"exact"`` when only the
declared distribution can (an (ε, δ) violation in a tail of mass ~1e-5, a pmf that does not sum
to 1), ``"any"`` otherwise.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, ClassVar, Literal

import attrs
import numpy as np
from numpy.typing import NDArray

import dpkit
from dpkit.testing import AuditReport, audit, audit_query

POSITIVE = dpkit.plugin.Real(low=0.0, low_open=True)
REAL = dpkit.plugin.Real()


def _epsilon(default: float = 1.0) -> Any:
    return dpkit.plugin.parameter(POSITIVE, doc="claimed ε", default=default)


def _factor(default: float = 1.0, doc: str = "bug factor (1 is correct)") -> Any:
    return dpkit.plugin.parameter(POSITIVE, doc=doc, default=default)


class _Pure:
    """The claim of a pure ε-DP mechanism or query."""

    epsilon: float

    @property
    def privacy(self) -> dpkit.PureDP:
        return dpkit.PureDP(epsilon=self.epsilon)


@attrs.frozen
class _Scaled(_Pure, dpkit.plugin.Mechanism):
    """A pure ε-DP mechanism whose bug multiplies something by ``factor`` (1 is correct)."""

    epsilon: float = _epsilon()
    factor: float = _factor()


# ----------------------------------------------------------------------------- local, categorical


@attrs.frozen
class RandomizedResponse(_Scaled):
    """Warner's randomized response on one bit, keeping the truth with p = e^{fε}/(1 + e^{fε})
    (Warner 1965; Dwork & Roth 2014, §3.2): true ε = f·ε; f = 2 is the bug."""

    name: ClassVar[str] = "cat_rr"
    kind: ClassVar[Literal["local", "central"]] = "local"

    @property
    def domain(self) -> dpkit.plugin.CategoricalDomain:
        return dpkit.plugin.CategoricalDomain(2)

    def randomize(self, values: Any, /, *, rng: np.random.Generator) -> NDArray[np.int64]:
        x = np.asarray(values, dtype=np.int64)
        keep = 1.0 / (1.0 + math.exp(-self.factor * self.epsilon))
        return np.where(rng.random(x.shape) < keep, x, 1 - x)


@attrs.frozen
class KaryRR(_Pure, dpkit.plugin.Mechanism):
    """k-RR: the truth with p = e^ε/(e^ε + k − 1), each other value with q = 1/(e^ε + k − 1)
    (Kairouz, Oh & Viswanath 2014, §III.A). ``excess`` adds to the *declared* p only, so the
    declared pmf sums to 1 + excess (the sampler is right): a declaration bug the exact tier
    must name."""

    name: ClassVar[str] = "cat_krr"
    kind: ClassVar[Literal["local", "central"]] = "local"
    epsilon: float = _epsilon()
    k: int = dpkit.plugin.parameter(dpkit.plugin.Integer(low=2), doc="categories", default=4)
    excess: float = dpkit.plugin.parameter(
        dpkit.plugin.Real(low=0.0), doc="declared pmf excess", default=0.0
    )

    @property
    def domain(self) -> dpkit.plugin.CategoricalDomain:
        return dpkit.plugin.CategoricalDomain(self.k)

    def randomize(self, values: Any, /, *, rng: np.random.Generator) -> NDArray[np.int64]:
        x = np.asarray(values, dtype=np.int64)
        lie = rng.random(x.shape) >= math.exp(self.epsilon) / (math.exp(self.epsilon) + self.k - 1)
        other = rng.integers(0, self.k - 1, size=x.shape)
        return np.where(lie, other + (other >= x), x)

    def log_probability(self, outputs: Any, inputs: Any, /) -> NDArray[np.float64]:
        e = math.exp(self.epsilon)
        p, q = e / (e + self.k - 1) + self.excess, 1.0 / (e + self.k - 1)
        return np.where(np.asarray(outputs) == np.asarray(inputs), math.log(p), math.log(q))

    def output_space(self) -> NDArray[np.int64]:
        return np.arange(self.k)


@attrs.frozen
class UnaryEncoding(_Pure, dpkit.plugin.Mechanism):
    """Unary encoding of one of k values as k bits (Wang et al. 2017, USENIX Security, §4.2).

    ``variant``: ``"sue"`` keeps each bit with p = e^{ε/2}/(1 + e^{ε/2}) (q = 1 − p);
    ``"oue"`` sets the true bit with p = ½ and the others with q = 1/(e^ε + 1); both ε-LDP.
    ``"sue_not_halved"`` uses ε for ε/2 (true 2ε). ``"sue_or"`` and ``"oue_or"`` reproduce
    pure-LDP 1.1.2's bug (Arcolezi & Gambs, PETS 2024): every bit is drawn with q and the true
    bit OR-ed in with p, so P[true bit] = p + (1 − p)q; the two-bit event gives true ε =
    ln(e^ε + e^{ε/2} + 1) and ln(e^ε + 2) (derived in the auditing note, §2, LDP-Auditor).
    """

    name: ClassVar[str] = "cat_unary"
    kind: ClassVar[Literal["local", "central"]] = "local"
    epsilon: float = _epsilon()
    k: int = dpkit.plugin.parameter(dpkit.plugin.Integer(low=2), doc="categories", default=6)
    variant: str = dpkit.plugin.parameter(
        dpkit.plugin.Choice(("sue", "oue", "sue_not_halved", "sue_or", "oue_or")),
        doc="encoding and bug",
        default="sue",
    )

    @property
    def domain(self) -> dpkit.plugin.CategoricalDomain:
        return dpkit.plugin.CategoricalDomain(self.k)

    def _pq(self) -> tuple[float, float]:
        if self.variant.startswith("oue"):
            return 0.5, 1.0 / (math.exp(self.epsilon) + 1.0)
        half = self.epsilon if self.variant == "sue_not_halved" else self.epsilon / 2
        p = 1.0 / (1.0 + math.exp(-half))
        return p, 1.0 - p

    def randomize(self, values: Any, /, *, rng: np.random.Generator) -> NDArray[np.bool_]:
        x = np.asarray(values, dtype=np.int64)
        onehot = np.arange(self.k) == x[:, None]
        p, q = self._pq()
        noise = rng.random(onehot.shape) < q
        truth = rng.random(onehot.shape) < p
        if self.variant.endswith("_or"):
            return np.asarray(noise | (onehot & truth))
        return np.where(onehot, truth, noise)


# ----------------------------------------------------------------------------- local, interval


@attrs.frozen
class Duchi(_Scaled):
    """Duchi, Jordan & Wainwright 2018 (JASA), one-dimensional: x ∈ [−1, 1] is reported as ±C,
    C = (e^ε + 1)/(e^ε − 1), with P[+C] = ½ + x(e^ε − 1)/(2(e^ε + 1)). ``factor`` f runs it
    at f·ε (true ε = f·ε: the issue's 1.5× leak)."""

    name: ClassVar[str] = "cat_duchi"
    kind: ClassVar[Literal["local", "central"]] = "local"
    output_type: ClassVar[Literal["discrete", "continuous"]] = "discrete"

    @property
    def domain(self) -> dpkit.plugin.Interval:
        return dpkit.plugin.Interval(-1.0, 1.0)

    def _plus(self, x: Any) -> tuple[Any, float]:
        e = math.exp(self.factor * self.epsilon)
        return 0.5 + np.asarray(x, dtype=np.float64) * (e - 1) / (2 * (e + 1)), (e + 1) / (e - 1)

    def randomize(self, values: Any, /, *, rng: np.random.Generator) -> NDArray[np.float64]:
        plus, c = self._plus(values)
        return np.where(rng.random(np.shape(plus)) < plus, c, -c)

    def log_probability(self, outputs: Any, inputs: Any, /) -> NDArray[np.float64]:
        plus, _ = self._plus(inputs)
        return np.where(np.asarray(outputs) > 0, np.log(plus), np.log1p(-plus))

    def output_space(self) -> NDArray[np.float64]:
        _, c = self._plus(0.0)
        return np.array([-c, c])


@attrs.frozen
class Piecewise(_Pure, dpkit.plugin.Mechanism):
    """The Piecewise Mechanism (Wang et al. 2019, ICDE, Algorithm 2): x ∈ [−1, 1],
    C = (e^{ε/2} + 1)/(e^{ε/2} − 1), l(x) = (C + 1)x/2 − (C − 1)/2, r(x) = l(x) + C − 1; the
    output is uniform on [l, r] with probability P = e^{ε/2}/(e^{ε/2} + 1), else uniform on
    [−C, l) ∪ (r, C]. Densities P/(C − 1) and (1 − P)/(C + 1), ratio e^{ε/2}·(C + 1)/(C − 1) =
    e^ε. ``centre_unhalved`` uses P = e^ε/(e^ε + 1): ratio e^{3ε/2} (true 1.5ε)."""

    name: ClassVar[str] = "cat_piecewise"
    kind: ClassVar[Literal["local", "central"]] = "local"
    output_type: ClassVar[Literal["discrete", "continuous"]] = "continuous"
    epsilon: float = _epsilon()
    centre_unhalved: bool = dpkit.plugin.parameter(
        dpkit.plugin.Boolean(), doc="the bug", default=False
    )

    @property
    def domain(self) -> dpkit.plugin.Interval:
        return dpkit.plugin.Interval(-1.0, 1.0)

    def _shape(self, x: Any) -> tuple[Any, Any, float, float]:
        half = math.exp(self.epsilon / 2)
        c = (half + 1) / (half - 1)
        e = math.exp(self.epsilon) if self.centre_unhalved else half
        left = (c + 1) / 2 * np.asarray(x, dtype=np.float64) - (c - 1) / 2
        return left, left + c - 1, c, e / (e + 1)

    def randomize(self, values: Any, /, *, rng: np.random.Generator) -> NDArray[np.float64]:
        left, right, c, centre = self._shape(values)
        inner = left + rng.random(left.shape) * (c - 1)
        u = rng.random(left.shape) * (c + 1)  # position along [−C, l) ∪ (r, C]
        outer = np.where(u < left + c, -c + u, right + (u - (left + c)))
        return np.where(rng.random(left.shape) < centre, inner, outer)

    def log_probability(self, outputs: Any, inputs: Any, /) -> NDArray[np.float64]:
        left, right, c, centre = self._shape(inputs)
        y = np.asarray(outputs, dtype=np.float64)
        density = np.where((y >= left) & (y <= right), centre / (c - 1), (1 - centre) / (c + 1))
        with np.errstate(divide="ignore"):
            return np.where(np.abs(y) <= c, np.log(density), -np.inf)


@attrs.frozen
class SquareWave(_Scaled):
    """The Square Wave mechanism (Li et al. 2020, SIGMOD, §4.1): v ∈ [0, 1], output on
    [−b, 1 + b] with b = (εe^ε − e^ε + 1)/(2e^ε(e^ε − 1 − ε)), density p = e^ε/(2be^ε + 1)
    within b of v and q = 1/(2be^ε + 1) elsewhere. ``factor`` f computes p and q at f·ε with
    the same b (true ε = f·ε)."""

    name: ClassVar[str] = "cat_square_wave"
    kind: ClassVar[Literal["local", "central"]] = "local"
    output_type: ClassVar[Literal["discrete", "continuous"]] = "continuous"

    @property
    def domain(self) -> dpkit.plugin.Interval:
        return dpkit.plugin.Interval(0.0, 1.0)

    def _pqb(self) -> tuple[float, float, float]:
        e = math.exp(self.epsilon)
        b = (self.epsilon * e - e + 1) / (2 * e * (e - 1 - self.epsilon))
        f = math.exp(self.factor * self.epsilon)
        return f / (2 * b * f + 1), 1 / (2 * b * f + 1), b

    def randomize(self, values: Any, /, *, rng: np.random.Generator) -> NDArray[np.float64]:
        v = np.asarray(values, dtype=np.float64)
        p, _, b = self._pqb()
        window = v - b + rng.random(v.shape) * 2 * b
        u = rng.random(v.shape)  # position along [−b, v − b) ∪ (v + b, 1 + b], length 1
        outside = np.where(u < v, -b + u, v + b + (u - v))
        return np.where(rng.random(v.shape) < 2 * b * p, window, outside)

    def log_probability(self, outputs: Any, inputs: Any, /) -> NDArray[np.float64]:
        p, q, b = self._pqb()
        y, v = np.asarray(outputs, dtype=np.float64), np.asarray(inputs, dtype=np.float64)
        density = np.where(np.abs(y - v) <= b, p, q)
        with np.errstate(divide="ignore"):
            return np.where((y >= -b) & (y <= 1 + b), np.log(density), -np.inf)


def _laplace_log_pdf(y: Any, centre: Any, scale: float) -> NDArray[np.float64]:
    gap = np.abs(np.asarray(y, dtype=np.float64) - np.asarray(centre, dtype=np.float64))
    return np.asarray(-gap / scale - math.log(2 * scale), dtype=np.float64)


@attrs.frozen
class IntervalLaplace(_Scaled):
    """x ∈ [0, 10] plus Laplace noise of scale width/ε (Dwork et al. 2006; the width is the
    sensitivity of one value under replace-one LDP). ``factor`` ½ uses width/2 — the
    "half-width" mistake, true 2ε."""

    name: ClassVar[str] = "cat_interval_laplace"
    kind: ClassVar[Literal["local", "central"]] = "local"
    output_type: ClassVar[Literal["discrete", "continuous"]] = "continuous"

    @property
    def domain(self) -> dpkit.plugin.Interval:
        return dpkit.plugin.Interval(0.0, 10.0)

    def randomize(self, values: Any, /, *, rng: np.random.Generator) -> NDArray[np.float64]:
        x = np.asarray(values, dtype=np.float64)
        return x + rng.laplace(0.0, 10.0 * self.factor / self.epsilon, size=x.shape)

    def log_probability(self, outputs: Any, inputs: Any, /) -> NDArray[np.float64]:
        return _laplace_log_pdf(outputs, inputs, 10.0 * self.factor / self.epsilon)


def classic_sigma(epsilon: float, delta: float) -> float:
    """σ = √(2 ln(1.25/δ))/ε per unit sensitivity (Dwork & Roth 2014, Theorem A.1: valid for
    ε < 1; at ε = 10, δ = 1e-5 the exact δ(ε) is 2.27e-5, Balle & Wang 2018, §2)."""
    return math.sqrt(2 * math.log(1.25 / delta)) / epsilon


@attrs.frozen
class IntervalGaussian(dpkit.plugin.Mechanism):
    """x ∈ [0, 1] plus N(0, σ²) with the classic σ of (``sigma_epsilon``, δ), claiming
    (ε, δ). Correct with ``sigma_epsilon = epsilon = 0.5``; at ``epsilon = 10`` the claim fails
    by δ(ε) = 2.27e-5 > 1e-5, a violation no sampler can see."""

    name: ClassVar[str] = "cat_interval_gaussian"
    kind: ClassVar[Literal["local", "central"]] = "local"
    output_type: ClassVar[Literal["discrete", "continuous"]] = "continuous"
    epsilon: float = _epsilon(0.5)
    delta: float = dpkit.plugin.parameter(
        dpkit.plugin.Real(low=0, high=1, low_open=True), doc="δ", default=1e-5
    )

    @property
    def domain(self) -> dpkit.plugin.Interval:
        return dpkit.plugin.Interval(0.0, 1.0)

    @property
    def privacy(self) -> dpkit.ApproximateDP:
        return dpkit.ApproximateDP(epsilon=self.epsilon, delta=self.delta)

    @property
    def sigma(self) -> float:
        return classic_sigma(self.epsilon, self.delta)

    def randomize(self, values: Any, /, *, rng: np.random.Generator) -> NDArray[np.float64]:
        x = np.asarray(values, dtype=np.float64)
        return x + rng.normal(0.0, self.sigma, size=x.shape)

    def log_probability(self, outputs: Any, inputs: Any, /) -> NDArray[np.float64]:
        z = (
            np.asarray(outputs, dtype=np.float64) - np.asarray(inputs, dtype=np.float64)
        ) / self.sigma
        return np.asarray(-0.5 * z * z - math.log(self.sigma * math.sqrt(2 * math.pi)))


@attrs.frozen
class BoxLaplace(_Pure, dpkit.plugin.Mechanism):
    """x ∈ [0, 1]³ plus independent Laplace noise of scale d/ε per coordinate (the L1
    sensitivity of the vector is d; Dwork et al. 2006). ``split=False`` uses 1/ε: each
    coordinate alone shows only ε, the three together 3ε — visible only to joint events.
    No declared density: the sampler must prove it."""

    name: ClassVar[str] = "cat_box_laplace"
    kind: ClassVar[Literal["local", "central"]] = "local"
    output_type: ClassVar[Literal["discrete", "continuous"]] = "continuous"
    epsilon: float = _epsilon()
    split: bool = dpkit.plugin.parameter(
        dpkit.plugin.Boolean(), doc="split ε over coordinates", default=True
    )

    @property
    def domain(self) -> dpkit.plugin.Box:
        return dpkit.plugin.Box.cube(0.0, 1.0, 3)

    def randomize(self, values: Any, /, *, rng: np.random.Generator) -> NDArray[np.float64]:
        x = np.asarray(values, dtype=np.float64)
        scale = (x.shape[-1] if self.split else 1.0) / self.epsilon
        return x + rng.laplace(0.0, scale, size=x.shape)


# ----------------------------------------------------------------------------- central, scalar


@attrs.frozen
class Laplace(_Scaled):
    """Answer + Laplace(factor·Δ/ε) (Dwork et al. 2006); factor ½ is the bug (true 2ε)."""

    name: ClassVar[str] = "cat_laplace"
    kind: ClassVar[Literal["local", "central"]] = "central"
    output_type: ClassVar[Literal["discrete", "continuous"]] = "continuous"

    @property
    def domain(self) -> dpkit.plugin.VectorDomain:
        return dpkit.plugin.VectorDomain(1.0, norm=1.0)

    def randomize(self, values: Any, /, *, rng: np.random.Generator) -> NDArray[np.float64]:
        x = np.asarray(values, dtype=np.float64)
        return x + rng.laplace(0.0, self.factor / self.epsilon, size=x.shape)

    def log_probability(self, outputs: Any, inputs: Any, /) -> NDArray[np.float64]:
        return _laplace_log_pdf(outputs, inputs, self.factor / self.epsilon)


@attrs.frozen
class Geometric(_Scaled):
    """Integer answer + two-sided geometric noise, P[k] ∝ a^|k| with a = e^{−fε/Δ} (Ghosh,
    Roughgarden & Sundararajan 2009), drawn as the difference of two geometric variables;
    f = 2 is the bug (true 2ε)."""

    name: ClassVar[str] = "cat_geometric"
    kind: ClassVar[Literal["local", "central"]] = "central"

    @property
    def domain(self) -> dpkit.plugin.VectorDomain:
        return dpkit.plugin.VectorDomain(1.0, integer=True)

    @property
    def _a(self) -> float:
        return math.exp(-self.factor * self.epsilon)

    def randomize(self, values: Any, /, *, rng: np.random.Generator) -> NDArray[np.int64]:
        x = np.asarray(values, dtype=np.int64)
        p = 1.0 - self._a
        return x + rng.geometric(p, size=x.shape) - rng.geometric(p, size=x.shape)

    def log_probability(self, outputs: Any, inputs: Any, /) -> NDArray[np.float64]:
        a = self._a
        gap = np.abs(np.asarray(outputs) - np.asarray(inputs))
        return np.asarray(math.log((1 - a) / (1 + a)) + gap * math.log(a), dtype=np.float64)


@attrs.frozen
class Gaussian(dpkit.plugin.Mechanism):
    """Answer + N(0, σ²) with the classic σ, claiming (ε, δ) (see :func:`classic_sigma`)."""

    name: ClassVar[str] = "cat_gaussian"
    kind: ClassVar[Literal["local", "central"]] = "central"
    output_type: ClassVar[Literal["discrete", "continuous"]] = "continuous"
    epsilon: float = _epsilon(0.5)
    delta: float = dpkit.plugin.parameter(
        dpkit.plugin.Real(low=0, high=1, low_open=True), doc="δ", default=1e-5
    )

    @property
    def domain(self) -> dpkit.plugin.VectorDomain:
        return dpkit.plugin.VectorDomain(1.0, norm=2.0)

    @property
    def privacy(self) -> dpkit.ApproximateDP:
        return dpkit.ApproximateDP(epsilon=self.epsilon, delta=self.delta)

    def randomize(self, values: Any, /, *, rng: np.random.Generator) -> NDArray[np.float64]:
        x = np.asarray(values, dtype=np.float64)
        return x + rng.normal(0.0, classic_sigma(self.epsilon, self.delta), size=x.shape)

    def log_probability(self, outputs: Any, inputs: Any, /) -> NDArray[np.float64]:
        sigma = classic_sigma(self.epsilon, self.delta)
        z = (np.asarray(outputs, dtype=np.float64) - np.asarray(inputs, dtype=np.float64)) / sigma
        return np.asarray(-0.5 * z * z - math.log(sigma * math.sqrt(2 * math.pi)))


# ----------------------------------------------------------------------------- vector outputs


class ReplaceOneCounts(dpkit.plugin.Domain):
    """Histograms (count vectors of k cells) of a dataset of fixed size under replace-one: one
    record changes category, so one count goes down by 1 and another up by 1 (Δ₁ = 2).

    A third party's domain, declaring its neighbours through the public protocol.
    """

    relation = "replace one record: one count down by 1, another up by 1"

    def __init__(self, k: int) -> None:
        self.k = k

    def _moved(self, counts: NDArray[np.float64], down: int, up: int) -> NDArray[np.float64]:
        moved = counts.copy()
        moved[down] -= 1
        moved[up] += 1
        return moved

    def pairs(self) -> list[tuple[Any, Any]]:
        base = np.full(self.k, 5.0)
        moved = self._moved(base, 0, 1)
        return [(base, moved), (moved, base)]

    def neighbours(self, rng: np.random.Generator, n: int) -> list[tuple[Any, Any]]:
        out: list[tuple[Any, Any]] = []
        for _ in range(n):
            base = rng.integers(1, 10, size=self.k).astype(np.float64)
            down, up = rng.choice(self.k, size=2, replace=False)
            out.append((base, self._moved(base, int(down), int(up))))
        return out

    def are_neighbours(self, x: Any, y: Any) -> bool:
        a, b = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
        if a.shape != (self.k,) or b.shape != (self.k,):
            return False
        move = b - a
        return bool(np.sort(move).tolist() == [-1.0] + [0.0] * (self.k - 2) + [1.0])


@attrs.frozen
class ReplaceOneHistogram(_Pure, dpkit.plugin.Mechanism):
    """Counts + Laplace(Δ₁/ε) per cell, with Δ₁ = 2 under replace-one (Dwork & Roth 2014,
    §3.3). ``sensitivity=1`` is the issue's bug: each count alone moves by 1 (loss ε, so every
    per-coordinate event passes), the two counts together give 2ε."""

    name: ClassVar[str] = "cat_replace_one_histogram"
    kind: ClassVar[Literal["local", "central"]] = "central"
    output_type: ClassVar[Literal["discrete", "continuous"]] = "continuous"
    epsilon: float = _epsilon()
    sensitivity: float = dpkit.plugin.parameter(POSITIVE, doc="Δ₁ used (2 is right)", default=2.0)

    @property
    def domain(self) -> ReplaceOneCounts:
        return ReplaceOneCounts(4)

    def randomize(self, values: Any, /, *, rng: np.random.Generator) -> NDArray[np.float64]:
        counts = np.asarray(values, dtype=np.float64)
        return counts + rng.laplace(0.0, self.sensitivity / self.epsilon, size=counts.shape)


# ----------------------------------------------------------------------------- vector inputs


def _batch(values: Any) -> NDArray[np.float64]:
    u = np.asarray(values, dtype=np.float64)
    if u.ndim != 2:
        raise ValueError("a (n, m) batch of score vectors")
    return u


@attrs.frozen
class NoisyMax(_Pure, dpkit.plugin.Mechanism):
    """Report noisy max with Laplace(2Δ/ε) noise (Dwork & Roth 2014, §3.3, Claim 3.9 with the
    factor 2 for non-monotone scores). ``release_value`` returns the noisy maximum instead of
    its index: true ε = mε/2 = 4ε on the all-shift pair (m = 8; Ding et al. 2018)."""

    name: ClassVar[str] = "cat_noisy_max"
    kind: ClassVar[Literal["local", "central"]] = "central"
    output_type: ClassVar[Literal["discrete", "continuous"]] = "discrete"
    epsilon: float = _epsilon()
    release_value: bool = dpkit.plugin.parameter(
        dpkit.plugin.Boolean(), doc="the bug", default=False
    )

    @property
    def domain(self) -> dpkit.plugin.VectorDomain:
        return dpkit.plugin.VectorDomain(1.0, norm=math.inf)

    def randomize(self, values: Any, /, *, rng: np.random.Generator) -> NDArray[Any]:
        u = _batch(values)
        noisy = u + rng.laplace(0.0, 2.0 / self.epsilon, size=u.shape)
        return noisy.max(axis=1) if self.release_value else noisy.argmax(axis=1)


@attrs.frozen
class ExponentialMechanism(_Pure, dpkit.plugin.Mechanism):
    """Pr[r] ∝ exp(ε u(r)/(fΔ)) (McSherry & Talwar 2007; Dwork & Roth 2014, Def. 3.4): f = 2
    is right; f = 1 leaks ln(e(1 + 7e)/(e + 7)) ≈ 1.72ε on the x-shape pair (m = 8)."""

    name: ClassVar[str] = "cat_exponential"
    kind: ClassVar[Literal["local", "central"]] = "central"
    epsilon: float = _epsilon()
    factor: float = _factor(2.0, "f in exp(εu/(fΔ)); 2 is correct")

    @property
    def domain(self) -> dpkit.plugin.VectorDomain:
        return dpkit.plugin.VectorDomain(1.0, norm=math.inf)

    def randomize(self, values: Any, /, *, rng: np.random.Generator) -> NDArray[np.int64]:
        logits = self.epsilon * _batch(values) / self.factor
        return np.asarray(np.argmax(logits + rng.gumbel(size=logits.shape), axis=1))

    def log_probability(self, outputs: Any, inputs: Any, /) -> NDArray[np.float64]:
        logits = self.epsilon * np.asarray(inputs, dtype=np.float64) / self.factor
        peak = logits.max(axis=-1, keepdims=True)
        log_norm = np.log(np.exp(logits - peak).sum(axis=-1)) + peak[..., 0]
        index = np.asarray(outputs)
        chosen = np.take_along_axis(
            np.broadcast_to(logits, index.shape + logits.shape[-1:]), index[..., None], -1
        )[..., 0]
        return np.asarray(chosen - log_norm)


@attrs.frozen
class SparseVector(_Pure, dpkit.plugin.Mechanism):
    """The sparse vector technique with one ⊤ (c = 1), Lyu, Su & Li 2017 (PVLDB), Algorithm 1:
    ρ ~ Lap(2Δ/ε), ν_i ~ Lap(4Δ/ε); output 1 at the first i with q_i + ν_i ≥ T + ρ, 0 before,
    −1 after (halted). ``query_noise=False`` is Algorithm 5 (Stoddard et al. 2014): no ν_i,
    not private at all (a pattern possible under one input is impossible under its neighbour).
    """

    name: ClassVar[str] = "cat_sparse_vector"
    kind: ClassVar[Literal["local", "central"]] = "central"
    epsilon: float = _epsilon()
    query_noise: bool = dpkit.plugin.parameter(
        dpkit.plugin.Boolean(), doc="noise the queries", default=True
    )
    threshold: float = dpkit.plugin.parameter(REAL, doc="threshold T", default=0.5)

    @property
    def domain(self) -> dpkit.plugin.VectorDomain:
        return dpkit.plugin.VectorDomain(1.0, norm=math.inf)

    def randomize(self, values: Any, /, *, rng: np.random.Generator) -> NDArray[np.int64]:
        q = _batch(values)
        rho = rng.laplace(0.0, 2.0 / self.epsilon, size=(len(q), 1))
        nu = rng.laplace(0.0, 4.0 / self.epsilon, size=q.shape) if self.query_noise else 0.0
        above = q + nu >= self.threshold + rho
        first = np.where(above.any(axis=1), above.argmax(axis=1), q.shape[1])
        index = np.arange(q.shape[1])
        out = np.where(index < first[:, None], 0, -1)
        out[index == first[:, None]] = 1
        return out.astype(np.int64)


# ----------------------------------------------------------------------------- queries


@attrs.frozen
class Release:
    """What a catalog query returns: the released value (as the built-in results do)."""

    value: Any


def _present(data: Any) -> NDArray[Any]:
    """The records that are not missing (None or NaN), total over any 1-D column."""
    column = np.asarray(data, dtype=object)
    return np.array([v for v in column.tolist() if v is not None and v == v], dtype=object)


def _numbers(data: Any) -> NDArray[np.float64]:
    values = [v for v in _present(data).tolist() if isinstance(v, (int, float))]
    return np.asarray(values, dtype=np.float64)


@attrs.frozen
class CountQuery(_Pure):
    """The number of records + Laplace(Δ/ε) with Δ = ``sensitivity`` (1 is right under
    add/remove one record; ½ is the bug, true 2ε)."""

    name: ClassVar[str] = "cat_count"
    epsilon: float = _epsilon()
    sensitivity: float = dpkit.plugin.parameter(POSITIVE, doc="Δ used (1 is right)", default=1.0)

    def run(self, data: Any, /, *, rng: np.random.Generator) -> Release:
        count = len(_present(data))
        return Release(count + rng.laplace(0.0, self.sensitivity / self.epsilon))


@attrs.frozen
class SumQuery(_Pure):
    """Σ clamp(x, L, U) + Laplace(Δ/ε). Right: Δ = max(|L|, |U|) (one record adds or removes
    its clamped value). Bugs: ``mistake="upper"`` uses Δ = U (wrong when |L| > |U|: with
    [−10, 5], true 2ε), ``mistake="no_clamp"`` forgets to clamp (true ε grows with the data;
    2.1ε on the auditor's record of magnitude 2·10 + 1)."""

    name: ClassVar[str] = "cat_sum"
    epsilon: float = _epsilon()
    lower: float = dpkit.plugin.parameter(REAL, doc="lower bound", default=-10.0)
    upper: float = dpkit.plugin.parameter(REAL, doc="upper bound", default=5.0)
    mistake: str = dpkit.plugin.parameter(
        dpkit.plugin.Choice(("none", "upper", "no_clamp")), doc="the bug", default="none"
    )

    def run(self, data: Any, /, *, rng: np.random.Generator) -> float:
        values = _numbers(data)
        if self.mistake != "no_clamp":
            values = np.clip(values, self.lower, self.upper)
        delta = self.upper if self.mistake == "upper" else max(abs(self.lower), abs(self.upper))
        return float(values.sum() + rng.laplace(0.0, delta / self.epsilon))


@attrs.frozen
class NoisySumOverCount(_Pure):
    """The bug: mean = (Σ clamp(x, L, U) + Laplace((U − L)/ε)) / n with the *exact* n. The
    noisy sum is private, but n is not under add/remove one record: the output's noise scale
    (U − L)/(nε) changes with n, so the tails of [U] against [U, U] (scales 2 : 1) have an
    unbounded log-ratio |t|/b − ln 2 — about 1.3 at |t| = 2b, whatever the claimed ε."""

    name: ClassVar[str] = "cat_mean"
    epsilon: float = _epsilon()
    lower: float = dpkit.plugin.parameter(REAL, doc="lower bound", default=0.0)
    upper: float = dpkit.plugin.parameter(REAL, doc="upper bound", default=10.0)

    def run(self, data: Any, /, *, rng: np.random.Generator) -> Release:
        values = np.clip(_numbers(data), self.lower, self.upper)
        noisy_sum = values.sum() + rng.laplace(0.0, (self.upper - self.lower) / self.epsilon)
        return Release(noisy_sum / max(len(values), 1))


@attrs.frozen
class HistogramQuery(_Pure):
    """Counts of the records in each declared category + Laplace noise of scale ε instead of
    1/ε (StatDP's histogram_eps; Ding et al. 2018): true ε = 1/ε (2 at ε = ½)."""

    name: ClassVar[str] = "cat_histogram"
    epsilon: float = _epsilon(0.5)
    categories: tuple[Any, ...] = dpkit.plugin.parameter(
        dpkit.plugin.Labels(min_length=1), doc="categories", default=("a", "b", "c")
    )

    def run(self, data: Any, /, *, rng: np.random.Generator) -> Release:
        records = _present(data).tolist()
        counts = np.array([sum(1 for r in records if r == c) for c in self.categories], float)
        return Release(counts + rng.laplace(0.0, self.epsilon, size=counts.shape))


MECHANISMS: tuple[type[dpkit.plugin.Mechanism], ...] = (
    RandomizedResponse,
    KaryRR,
    UnaryEncoding,
    Duchi,
    Piecewise,
    SquareWave,
    IntervalLaplace,
    IntervalGaussian,
    BoxLaplace,
    Laplace,
    Geometric,
    Gaussian,
    ReplaceOneHistogram,
    NoisyMax,
    ExponentialMechanism,
    SparseVector,
)
QUERIES: tuple[type[Any], ...] = (CountQuery, SumQuery, NoisySumOverCount, HistogramQuery)


class CatalogPlugin:
    """The catalog as a third-party dpkit plugin (the public hooks, nothing else)."""

    @dpkit.plugin.hookimpl
    def dpkit_register_mechanisms(
        self, register: Callable[[type[dpkit.plugin.Mechanism]], None]
    ) -> None:
        for cls in MECHANISMS:
            register(cls)

    @dpkit.plugin.hookimpl
    def dpkit_register_queries(self, register: Callable[[type[Any]], None]) -> None:
        for cls in QUERIES:
            register(cls)


def catalog_registry() -> dpkit.registry.Registry:
    """The installed plugins (for the built-in queries) plus the catalog plugin."""
    return dpkit.load_registry(plugins=[("audit_catalog", CatalogPlugin())])


# ----------------------------------------------------------------------------- the cases


@attrs.frozen
class Case:
    """One catalog entry: what to build, its true privacy, the verdict the auditor must give."""

    label: str
    name: str
    params: dict[str, Any]
    expected: Literal["pass", "violation"]
    truth: str
    query: bool = False
    caught_by: Literal["statistical", "exact", "any"] = "statistical"
    #: A larger sample budget for a leak that lives in the tails (None: the default budget).
    budget: dict[str, Any] | None = None

    def build(self, registry: dpkit.registry.Registry) -> Any:
        if self.query:
            return registry.query(self.name, **self.params)
        return registry.mechanism(self.name, **self.params)


def _mechanism(label: str, name: str, params: dict[str, Any], truth: str, **kw: Any) -> Case:
    expected = "violation" if kw.pop("bug", False) else "pass"
    return Case(label, name, params, expected, truth, **kw)


def _query(label: str, name: str, params: dict[str, Any], truth: str, **kw: Any) -> Case:
    expected = "violation" if kw.pop("bug", False) else "pass"
    return Case(label, name, params, expected, truth, query=True, **kw)


E1 = {"epsilon": 1.0}
CASES: tuple[Case, ...] = (
    # local, categorical
    _mechanism("rr", "cat_rr", E1, "ε"),
    _mechanism("rr_double", "cat_rr", {**E1, "factor": 2.0}, "2ε", bug=True),
    _mechanism("krr", "cat_krr", E1, "ε"),
    _mechanism(
        "krr_pmf_sums_1.0000028",
        "cat_krr",
        {**E1, "excess": 2.8e-6},
        "ε (declaration sums to 1.0000028)",
        bug=True,
        caught_by="exact",
    ),
    _mechanism("sue", "cat_unary", E1, "ε"),
    _mechanism("oue", "cat_unary", {**E1, "variant": "oue"}, "ε"),
    _mechanism("sue_not_halved", "cat_unary", {**E1, "variant": "sue_not_halved"}, "2ε", bug=True),
    _mechanism(
        "sue_or_bug", "cat_unary", {**E1, "variant": "sue_or"}, "ln(e^ε+e^{ε/2}+1) = 1.68", bug=True
    ),
    _mechanism(
        "oue_or_bug", "cat_unary", {**E1, "variant": "oue_or"}, "ln(e^ε+2) = 1.55", bug=True
    ),
    # local, interval and box inputs
    _mechanism("duchi", "cat_duchi", E1, "ε"),
    _mechanism("duchi_leak_1.5x", "cat_duchi", {**E1, "factor": 1.5}, "1.5ε", bug=True),
    _mechanism("piecewise", "cat_piecewise", E1, "ε"),
    _mechanism(
        "piecewise_centre_unhalved",
        "cat_piecewise",
        {**E1, "centre_unhalved": True},
        "1.5ε",
        bug=True,
    ),
    _mechanism("square_wave", "cat_square_wave", E1, "ε"),
    _mechanism("square_wave_double", "cat_square_wave", {**E1, "factor": 2.0}, "2ε", bug=True),
    _mechanism("interval_laplace", "cat_interval_laplace", E1, "ε"),
    _mechanism(
        "interval_laplace_half_width",
        "cat_interval_laplace",
        {**E1, "factor": 0.5},
        "2ε",
        bug=True,
    ),
    _mechanism("interval_gaussian", "cat_interval_gaussian", {"epsilon": 0.5}, "(0.5, 1e-5)"),
    _mechanism(
        "interval_gaussian_classic_eps10",
        "cat_interval_gaussian",
        {"epsilon": 10.0},
        "δ(10) = 2.27e-5 > 1e-5",
        bug=True,
        caught_by="exact",
    ),
    _mechanism("box_laplace", "cat_box_laplace", E1, "ε"),
    _mechanism("box_laplace_no_split", "cat_box_laplace", {**E1, "split": False}, "3ε", bug=True),
    # central, scalar answers
    _mechanism("laplace", "cat_laplace", E1, "ε"),
    _mechanism("laplace_half_scale", "cat_laplace", {**E1, "factor": 0.5}, "2ε", bug=True),
    _mechanism("geometric", "cat_geometric", E1, "ε"),
    _mechanism("geometric_double", "cat_geometric", {**E1, "factor": 2.0}, "2ε", bug=True),
    _mechanism("gaussian", "cat_gaussian", {"epsilon": 0.5}, "(0.5, 1e-5)"),
    _mechanism(
        "gaussian_classic_eps10",
        "cat_gaussian",
        {"epsilon": 10.0},
        "δ(10) = 2.27e-5 > 1e-5",
        bug=True,
        caught_by="exact",
    ),
    # vector outputs
    _mechanism("replace_one_histogram", "cat_replace_one_histogram", E1, "ε"),
    _mechanism(
        "replace_one_histogram_sensitivity_1",
        "cat_replace_one_histogram",
        {**E1, "sensitivity": 1.0},
        "2ε (needs two coordinates at once)",
        bug=True,
    ),
    # vector inputs
    _mechanism("noisy_max", "cat_noisy_max", E1, "≤ ε"),
    _mechanism(
        "noisy_max_releases_value", "cat_noisy_max", {**E1, "release_value": True}, "4ε", bug=True
    ),
    _mechanism("exponential", "cat_exponential", E1, "≤ ε"),
    _mechanism(
        "exponential_no_factor_2", "cat_exponential", {**E1, "factor": 1.0}, "1.72ε", bug=True
    ),
    _mechanism("sparse_vector", "cat_sparse_vector", E1, "≤ ε"),
    _mechanism(
        "sparse_vector_no_query_noise",
        "cat_sparse_vector",
        {**E1, "query_noise": False},
        "∞",
        bug=True,
    ),
    # whole queries on neighbouring datasets (add/remove one record)
    _query("count_builtin", "count", E1, "ε"),
    _query("sum_builtin", "sum", {**E1, "lower": -10.0, "upper": 5.0}, "ε"),
    _query("mean_builtin", "mean", {**E1, "lower": 0.0, "upper": 10.0}, "≤ ε"),
    _query(
        "histogram_builtin",
        "histogram",
        {**E1, "categories": ["a", "b", "c"], "noise": "laplace"},
        "ε",
    ),
    _query("quantile_builtin", "quantile", {**E1, "q": 0.5, "lower": 0.0, "upper": 10.0}, "≤ ε"),
    _query("count", "cat_count", E1, "ε"),
    _query("count_half_sensitivity", "cat_count", {**E1, "sensitivity": 0.5}, "2ε", bug=True),
    _query("sum", "cat_sum", E1, "ε"),
    _query("sum_upper_as_sensitivity", "cat_sum", {**E1, "mistake": "upper"}, "2ε", bug=True),
    _query("sum_unclamped", "cat_sum", {**E1, "mistake": "no_clamp"}, "2.1ε", bug=True),
    _query(
        "mean_over_exact_count",
        "cat_mean",
        {"epsilon": 0.25},
        "unbounded (the noise scale depends on n; ε_lb ≈ 1 at 6,000 samples)",
        bug=True,
        budget={"samples": 6_000, "selection_samples": 2_000, "random_pairs": 0},
    ),
    _query("histogram_scale_epsilon", "cat_histogram", {"epsilon": 0.5}, "1/ε = 4ε", bug=True),
)

#: Per-case sample budgets of the CI run (the benchmark uses larger ones).
MECHANISM_BUDGET = {"samples": 20_000}
QUERY_BUDGET = {"samples": 3_000, "selection_samples": 500, "random_pairs": 2}


def run_case(
    case: Case,
    registry: dpkit.registry.Registry,
    *,
    seed: int,
    alpha: float,
    budget: dict[str, Any] | None = None,
) -> AuditReport:
    """Audit one case through the registry with ``budget`` (default: the case's own, or the CI
    budget of its kind)."""
    target = case.build(registry)
    if case.query:
        chosen = budget or case.budget or QUERY_BUDGET
        return audit_query(target, alpha=alpha, seed=seed, **chosen)
    return audit(target, alpha=alpha, seed=seed, **(budget or case.budget or MECHANISM_BUDGET))
