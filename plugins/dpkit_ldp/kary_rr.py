"""k-ary randomized response (``krr``, a.k.a. generalized RR / direct encoding) and its estimator."""

from __future__ import annotations

import math
from typing import Any, ClassVar, Literal

import attrs
import numpy as np
from numpy.typing import NDArray

from dpkit.plugin import (
    EPSILON,
    CategoricalDomain,
    Estimate,
    Estimator,
    FrequencyCounts,
    Integer,
    InvalidData,
    InvalidParameter,
    Labels,
    Mechanism,
    RandomizedResponseDP,
    SecureRandom,
    array_library,
    category_counts,
    device_operands,
    kary_response,
    lie_threshold,
    parameter,
    plain,
    resolve_rng,
    where_equal,
)
from dpkit_ldp import _frequency, _oracle, postprocess
from dpkit_ldp._arrays import CategoricalInput, as_category_indices

__all__ = ["KaryRandomizedResponse", "KaryRandomizedResponseEstimator"]

_CHUNK = 1 << 16  # values per chunk: keeps the temporaries in cache
_LOW = 16  # secure mode, one word per value: 48 bits decide the lie, 16 choose the other value
_LOW_MASK = np.uint64((1 << _LOW) - 1)


def _one_word(threshold: int, k: int) -> bool:
    """Whether one word per value suffices: k − 1 ≤ 2¹⁶, a lie probability ≥ 2⁻³² (where
    rounding it up to the 2⁻⁴⁸ grid moves it by a relative 2⁻¹⁶ at most), and that rounding
    keeps it at or below (k − 1)/k.

    The last condition is the other side of the ratio. Rounding λ up bounds p′/q′ =
    (1 − λ′)(k − 1)/λ′ by e^ε, but past λ′ = (k − 1)/k the truth becomes the *least* likely
    output and the ratio q′/p′ = λ′/((k − 1)(1 − λ′)) exceeds 1; at small ε, where
    λ = (k − 1)/k − O(ε/k) lies within 2⁻⁴⁸ of (k − 1)/k, it exceeded e^ε (k = 20000,
    ε = 1.3·10⁻¹²: a realised ε of 3.8·10⁻¹¹). Those values take the 2⁻⁶⁴ grid instead.
    """
    if not (k - 1 <= 1 << _LOW and threshold >= 1 << 32):
        return False
    return -(-threshold >> _LOW) * k <= (k - 1) << (64 - _LOW)


def _lie_and_other(
    generator: SecureRandom, threshold: int, others: int, n: int
) -> tuple[NDArray[np.bool_], NDArray[np.uint64]]:
    """(lie, other) from one uniform 64-bit word per value.

    lie: the top 48 bits as U < ⌈T/2¹⁶⌉/2⁴⁸ ≥ T/2⁶⁴ ≥ λ (rounded up again, so the realised ε
    stays at or below the declared one). other: uniform on [0, k − 1) from the low 16 bits by
    Lemire's multiply-shift (Lemire 2019, "Fast Random Integer Generation in an Interval",
    ACM TOMACS 29(1), Algorithm 5): x = b·(k − 1) for the 16-bit b, other = x >> 16, rejecting
    when x mod 2¹⁶ < 2¹⁶ mod (k − 1) (then each value has exactly ⌊2¹⁶/(k − 1)⌋ preimages).
    A rejected value (probability below (k − 1)/2¹⁶) is redrawn from a fresh word; the
    top 48 bits are independent of the low 16, so lie and other are independent.
    """
    w = generator.words(n)
    lie = (w >> np.uint64(_LOW)) < np.uint64(-(-threshold >> _LOW))
    k1 = np.uint64(others)
    x = (w & _LOW_MASK) * k1
    other = x >> np.uint64(_LOW)
    limit = np.uint64((1 << _LOW) % others)
    if limit:
        bad = np.flatnonzero((x & _LOW_MASK) < limit)
        while bad.size:
            x = (generator.words(bad.size) & _LOW_MASK) * k1
            other[bad] = x >> np.uint64(_LOW)
            bad = bad[(x & _LOW_MASK) < limit]
    return lie, other


@attrs.frozen
class KaryRandomizedResponse(CategoricalInput, Mechanism):
    """k-ary randomized response over the categories 0 .. k−1.

    Kairouz, Bonawitz & Ramage 2016, "Discrete Distribution Estimation under Local Privacy"
    (ICML), Section 2.2; Wang et al. 2017 (USENIX Security), Section 4.1 ("direct encoding"):

        P[y = x] = p = e^ε / (e^ε + k − 1),     P[y = v] = q = 1 / (e^ε + k − 1)  for each v ≠ x,

    so p + (k − 1) q = 1 and p / q = e^ε. The "other" value is drawn uniformly from the k − 1
    values different from x (an exactly uniform integer draw on [0, k − 2] shifted past x; in
    secure mode the draw is by rejection, never a biased ``word % (k − 1)``). The lie is drawn as
    ``u < (k − 1) q`` with u on the 2⁻⁵³ grid (fast mode, a numpy ``Generator``: the float
    (k − 1) q rounded up to that grid), or as ``w < T`` with w a uniform 64-bit word and
    T = :func:`dpkit.plugin.lie_threshold` (ε, k) (secure mode, ``rng=None`` or a
    :class:`dpkit.SecureRandom`): the exact λ = (k − 1)/(e^ε + k − 1), evaluated in high
    precision, rounded up to the 2⁻⁶⁴ grid. When k − 1 ≤ 2¹⁶ and λ ≥ 2⁻³², secure mode takes
    the lie and the other value from one word (:func:`_lie_and_other`; the lie rounded up once
    more, to the 2⁻⁴⁸ grid) unless that rounding would pass (k − 1)/k. With
    λ ≤ λ′ ≤ (k − 1)/k the realised ratios are p′/q′ = (1 − λ′)(k − 1)/λ′ ≤ e^ε and
    q′/p′ ≤ 1, so in secure mode the realised ε never exceeds the declared ε.

    Values are category indices, or labels when ``categories`` is given (then ``k`` defaults to
    its length); :meth:`encode` and :meth:`decode` map between the two.
    """

    name: ClassVar[str] = "krr"
    kind: ClassVar[Literal["local", "central"]] = "local"
    device_methods: ClassVar[frozenset[str]] = frozenset({"randomize", "log_probability"})
    parameter_alternatives: ClassVar[tuple[tuple[str, ...], ...]] = (("k", "categories"),)

    epsilon: float = parameter(EPSILON, doc="privacy loss ε per report", typical=(0.05, 6.0))
    k: int | None = parameter(
        Integer(low=2, high=1 << 24),  # the estimator holds k counts
        doc="number of categories",
        default=None,
        optional=True,
        typical=(2, 64),
    )
    categories: tuple[Any, ...] | None = parameter(
        Labels(min_length=2, uniform=True),
        doc="category labels, all strings or all integers (k defaults to their number)",
        default=None,
        optional=True,
    )

    def __attrs_post_init__(self) -> None:
        if self.categories is None:
            if self.k is None:
                raise InvalidParameter(
                    "k", None, "an integer >= 2 (or give categories=[...])", owner=self.name
                )
            return
        if self.k is not None and self.k != len(self.categories):
            raise InvalidParameter(
                "k",
                self.k,
                f"equal to the number of categories ({len(self.categories)})",
                owner=self.name,
            )
        object.__setattr__(self, "k", len(self.categories))

    @property
    def size(self) -> int:
        assert self.k is not None  # set in __attrs_post_init__
        return self.k

    @property
    def keep_probability(self) -> float:
        """p = e^ε / (e^ε + k − 1) = 1 / (1 + (k − 1) e^−ε)."""
        return 1.0 / (1.0 + (self.size - 1) * math.exp(-self.epsilon))

    @property
    def other_probability(self) -> float:
        """q = 1 / (e^ε + k − 1) = e^−ε / (1 + (k − 1) e^−ε), each other value."""
        t = math.exp(-self.epsilon)
        return t / (1.0 + (self.size - 1) * t)

    @property
    def lie_probability(self) -> float:
        """(k − 1) q: the probability of reporting some other value."""
        t = (self.size - 1) * math.exp(-self.epsilon)
        return t / (1.0 + t)

    @property
    def domain(self) -> CategoricalDomain:
        return CategoricalDomain(self.size)

    @property
    def privacy(self) -> RandomizedResponseDP:
        return RandomizedResponseDP(epsilon=self.epsilon, k=self.size)

    def encode(self, labels: Any, /, *, field: str = "values") -> NDArray[np.int64]:
        """Category labels → indices (a vectorised lookup; unknown labels are an error)."""
        if self.categories is None:
            return as_category_indices(labels, self.size, owner=self.name, field=field)
        array = np.asarray(labels)
        if array.size == 0:
            return np.zeros(array.shape, dtype=np.int64)
        table = np.asarray(self.categories)
        order = np.argsort(table, kind="stable")
        ordered = table[order]
        try:
            position = np.clip(np.searchsorted(ordered, array), 0, self.size - 1)
            found = ordered[position] == array
        except (TypeError, np.exceptions.DTypePromotionError):
            found = np.zeros(array.shape, dtype=bool)
            position = np.zeros(array.shape, dtype=np.intp)
        if not np.all(found):
            first = plain(array.flat[int(np.flatnonzero(~np.asarray(found).ravel())[0])])
            raise InvalidData(
                f"{self.name}: {field} contain {first!r}, which is not one of the categories "
                f"{plain(list(self.categories))!r}",
                field=field,
            )
        result: NDArray[np.int64] = order[position].astype(np.int64)
        return result

    def decode(self, indices: Any, /) -> NDArray[Any]:
        """Category indices → labels (identity when there are no labels)."""
        checked = as_category_indices(indices, self.size, owner=self.name, field="indices")
        if self.categories is None:
            return checked
        labels: NDArray[Any] = np.asarray(self.categories)[checked]
        return labels

    def randomize(
        self, values: Any, /, *, rng: np.random.Generator | SecureRandom | None = None
    ) -> Any:
        """Perturb each value (index or label, any shape) independently.

        ``rng``: None (secure mode, the default), a :class:`dpkit.SecureRandom`, or a numpy
        ``Generator`` (fast mode); for torch tensors also a ``torch.Generator``. An array on an
        accelerator (indices only) is perturbed there (:mod:`dpkit.tensors.categories`).
        Reports of indices keep their dtype where it holds k − 1, and are int64 otherwise
        (uint8 indices of k = 1000 categories: a report in the narrow dtype would wrap around).
        Works in cache-sized chunks with the narrowest unsigned dtype that holds k: the same
        draws per value, far less memory traffic (and peak memory) than whole-array passes.
        """
        threshold = lie_threshold(self.epsilon, self.size)
        library = array_library(values, owner=self.name)
        if library is not None:  # an accelerator's array (host arrays arrive as numpy views)
            if self.categories is not None:
                raise InvalidData(
                    f"{self.name}: labels are not mapped on the device; give category indices "
                    "(mechanism.encode on the host) or a host array",
                    field="values",
                )
            return kary_response(
                library, values, k=self.size, lie_threshold64=threshold, rng=rng, owner=self.name
            )
        generator, _ = resolve_rng(rng, owner=self.name)
        indices = self.encode(values)
        flat = indices.reshape(-1)
        holds = flat.dtype == np.bool_ or np.iinfo(flat.dtype).max >= self.size - 1
        noisy = np.empty(flat.shape, dtype=flat.dtype if holds else np.int64)  # never wraps
        narrow = np.min_scalar_type(self.size)
        one_word = isinstance(generator, SecureRandom) and _one_word(threshold, self.size)
        lie_probability = self.lie_probability
        for start in range(0, flat.size, _CHUNK):
            truth = flat[start : start + _CHUNK].astype(narrow)
            if one_word and isinstance(generator, SecureRandom):
                lie, other = _lie_and_other(generator, threshold, self.size - 1, truth.size)
                other = other.astype(narrow)
            else:
                if isinstance(generator, SecureRandom):
                    lie = generator.bernoulli_threshold(threshold, truth.size)
                else:
                    lie = generator.random(truth.size) < lie_probability
                other = generator.integers(0, self.size - 1, size=truth.size, dtype=narrow)
            other += other >= truth  # uniform over the k − 1 values that differ from the truth
            noisy[start : start + _CHUNK] = np.where(lie, other, truth)
        reports = noisy.reshape(indices.shape)
        return reports if self.categories is None else self.decode(reports)

    def log_probability(self, outputs: Any, inputs: Any, /) -> Any:
        """log P[y | x] over category indices: log p where y = x, log q elsewhere.

        An accelerator's array (either operand) is scored on its device, float64, in its type
        (:mod:`dpkit.tensors.log_probability`: a numpy or list operand beside it is copied
        there); y and x are compared as numpy compares them, so an output outside 0 … k − 1
        scores log q on both paths.
        """
        log_norm = math.log1p((self.size - 1) * math.exp(-self.epsilon))
        operands = device_operands(outputs, inputs, owner=self.name)
        if operands is not None:
            return where_equal(operands, equal=-log_norm, other=-self.epsilon - log_norm)
        same = np.asarray(outputs) == np.asarray(inputs)
        return np.where(same, -log_norm, -self.epsilon - log_norm)

    def output_space(self) -> NDArray[np.int64]:
        return np.arange(self.size, dtype=np.int64)

    @property
    def support_probabilities(self) -> tuple[float, float]:
        """(p*, q*) = (p, q): a report supports v when it equals v."""
        return self.keep_probability, self.other_probability

    @classmethod
    def frequency_variance(cls, *, k: int, epsilon: float, n: int = 1) -> float:
        """Var*[f̂_v] = (e^ε + k − 2)/(n (e^ε − 1)²) (Wang et al. 2017, Section 4.1)."""
        k, epsilon, n = _oracle.check_variance_arguments(k, epsilon, n, owner=cls.name)
        return (math.exp(epsilon) + k - 2) / (n * math.expm1(epsilon) ** 2)


class KaryRandomizedResponseEstimator(Estimator):
    """Unbiased category counts from krr reports, with the exact variance.

    Wang et al. 2017, Section 4.1 / Theorem 2: ĉ_v = (C_v − n q) / (p − q) and
    Var[ĉ_v] = n q(1 − q)/(p − q)² + n_v (1 − p − q)/(p − q), where the second term is
    n_v (k − 2)/(e^ε − 1); the reported variance is its unbiased estimate (the unclipped ĉ_v
    plugged in, floored at 0), and the intervals are score intervals on that exact variance
    (:class:`dpkit.plugin.Estimate`). ``method`` is ``"unbiased"`` or a named post-processing of
    :mod:`dpkit_ldp.postprocess` (``"clip"``, ``"norm_sub"``, ``"simplex"``), for which the
    variance and the interval stay those of the unbiased estimate (interval clipped to [0, n]).
    """

    methods: ClassVar[tuple[str, ...]] = ("unbiased", *postprocess.METHODS)
    device_methods: ClassVar[frozenset[str]] = frozenset({"accumulate"})
    mechanism: KaryRandomizedResponse

    def accumulate(self, reports: Any, /) -> FrequencyCounts:
        library = array_library(reports, owner=self.mechanism.name, field="reports")
        if library is not None:  # counted on the accelerator
            counts = category_counts(
                library, reports, self.mechanism.size, owner=self.mechanism.name
            )
            return FrequencyCounts(self.mechanism.name, counts, int(counts.sum()))
        indices = self.mechanism.encode(reports, field="reports")
        counts = np.bincount(indices.ravel(), minlength=self.mechanism.size)
        return FrequencyCounts(self.mechanism.name, counts, indices.size)

    def estimate(self, statistics: FrequencyCounts, /, *, method: str = "unbiased") -> Estimate:
        self.check_method(method)
        self.check_statistics(statistics, self.mechanism.size)
        n = statistics.n
        p, q = self.mechanism.keep_probability, self.mechanism.other_probability
        counts = _frequency.debiased_counts(statistics.counts, n, p, q)
        variance = _frequency.unbiased_variance(counts, n, p, q)
        processed = postprocess.apply(method, counts, n)
        return Estimate(
            self.mechanism.name,
            method,
            n,
            processed,
            variance,
            categories=self.mechanism.categories,
            variance_model=_frequency.variance_model(n, p, q),
            unbiased_estimates=None if method == "unbiased" else counts,
            support_probabilities=(p, q),
        )
