"""Synthetic numeric data for experiments: values in [lower, upper] with a known distribution.

Distributions on [lower, upper] (each coordinate independently when ``dimension`` is given),
written for the standard interval [0, 1] and mapped affinely (u ↦ lower + (upper − lower)·u):

``uniform``
    density 1.
``gaussian``
    a normal with ``mean`` (default 0.5) and ``std`` (default 1/6) truncated to [0, 1]
    (drawn by rejection).
``exponential``
    density ∝ e^{−u/scale} on [0, 1] (default scale 0.25), drawn by inverting its CDF.
``bimodal``
    an equal mixture of two truncated normals at 0.25 and 0.75 with std 0.08.

:func:`synthetic_numbers` returns the values, the exact population mean (closed forms with
``math.erf``) and the exact probability of each of ``bins`` equal buckets
(:meth:`NumericData.bucket_probabilities`), so that mean protocols (duchi, pm, hm) and
distribution protocols (sw) can be scored against the truth.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import attrs
import numpy as np
from numpy.typing import NDArray

from dpkit.plugin import Integer, InvalidParameter, Real
from dpkit_ldp.datasets import check_shape, convert, require_generator

__all__ = ["NUMERIC_DISTRIBUTIONS", "NumericData", "synthetic_numbers"]

NUMERIC_DISTRIBUTIONS: tuple[str, ...] = ("uniform", "gaussian", "exponential", "bimodal")

_SHAPES: dict[str, tuple[str, ...]] = {
    "uniform": (),
    "gaussian": ("mean", "std"),
    "exponential": ("scale",),
    "bimodal": (),
}
_OWNER = "synthetic_numbers"


def _convert(name: str, value: Any, domain: Any) -> Any:
    return convert(name, value, domain, _OWNER)


def _normal_cdf(x: NDArray[np.float64], mean: float, std: float) -> NDArray[np.float64]:
    z = (np.asarray(x, dtype=np.float64) - mean) / (std * math.sqrt(2.0))
    erf = np.fromiter((math.erf(v) for v in z.reshape(-1)), dtype=np.float64, count=z.size)
    return 0.5 * (1.0 + erf.reshape(z.shape))


def _truncated_normal_mean(mean: float, std: float) -> float:
    """E[U] for a normal (mean, std) truncated to [0, 1]: mean + std(φ(α) − φ(β))/(Φ(β) − Φ(α))."""
    a, b = (0.0 - mean) / std, (1.0 - mean) / std

    def pdf(z: float) -> float:
        return math.exp(-z * z / 2.0) / math.sqrt(2.0 * math.pi)

    def cdf(z: float) -> float:
        return 0.5 * (1.0 + math.erf(z / math.sqrt(2.0)))

    return mean + std * (pdf(a) - pdf(b)) / (cdf(b) - cdf(a))


def _truncated_normals(
    rng: np.random.Generator, size: int, mean: float, std: float
) -> NDArray[np.float64]:
    out = np.empty(size)
    filled = 0
    while filled < size:
        draw = rng.normal(mean, std, size=2 * (size - filled) + 16)
        kept = draw[(draw >= 0.0) & (draw <= 1.0)][: size - filled]
        out[filled : filled + kept.size] = kept
        filled += kept.size
    return out


@attrs.frozen
class _Law:
    """A distribution on [0, 1]: a sampler, its CDF and its mean."""

    sample: Callable[[np.random.Generator, int], NDArray[np.float64]]
    cdf: Callable[[NDArray[np.float64]], NDArray[np.float64]]
    mean: float


def _law(distribution: str, shape: dict[str, float]) -> _Law:
    check_shape(distribution, shape, _SHAPES, _OWNER)
    if distribution == "uniform":
        return _Law(lambda rng, n: rng.random(n), lambda x: np.clip(x, 0.0, 1.0), 0.5)
    if distribution == "exponential":
        scale = _convert("scale", shape.get("scale", 0.25), Real(low=0.0, low_open=True))
        mass = -math.expm1(-1.0 / scale)
        mean = scale - math.exp(-1.0 / scale) / mass
        return _Law(
            lambda rng, n: -scale * np.log1p(-mass * rng.random(n)),
            lambda x: -np.expm1(-np.clip(x, 0.0, 1.0) / scale) / mass,
            mean,
        )
    if distribution == "gaussian":
        centre = _convert("mean", shape.get("mean", 0.5), Real())
        std = _convert("std", shape.get("std", 1.0 / 6.0), Real(low=0.0, low_open=True))
        low, high = _normal_cdf(np.array([0.0, 1.0]), centre, std)
        return _Law(
            lambda rng, n: _truncated_normals(rng, n, centre, std),
            lambda x: (_normal_cdf(np.clip(x, 0.0, 1.0), centre, std) - low) / (high - low),
            _truncated_normal_mean(centre, std),
        )
    parts = (
        _law("gaussian", {"mean": 0.25, "std": 0.08}),
        _law("gaussian", {"mean": 0.75, "std": 0.08}),
    )

    def sample(rng: np.random.Generator, n: int) -> NDArray[np.float64]:
        first = rng.random(n) < 0.5
        out = parts[1].sample(rng, n)
        out[first] = parts[0].sample(rng, int(first.sum()))
        return out

    return _Law(
        sample,
        lambda x: (parts[0].cdf(x) + parts[1].cdf(x)) / 2.0,
        (parts[0].mean + parts[1].mean) / 2.0,
    )


@attrs.frozen(eq=False)
class NumericData:
    """Values on [lower, upper] (shape (n,) or (n, d)) and their generating distribution."""

    distribution: str
    values: NDArray[np.float64]
    lower: float
    upper: float
    population_mean: float
    _law: _Law = attrs.field(alias="law", repr=False)

    @property
    def n(self) -> int:
        return int(self.values.shape[0])

    @property
    def sample_mean(self) -> NDArray[np.float64]:
        """The mean of the values drawn (per coordinate)."""
        mean: NDArray[np.float64] = np.atleast_1d(self.values.mean(axis=0))
        return mean

    def bucket_probabilities(self, bins: int) -> NDArray[np.float64]:
        """The population probability of each of ``bins`` equal buckets of [lower, upper]."""
        count = _convert("bins", bins, Integer(low=1))
        cdf = self._law.cdf(np.linspace(0.0, 1.0, count + 1))
        probabilities: NDArray[np.float64] = np.diff(cdf)
        return probabilities


def synthetic_numbers(
    distribution: str,
    /,
    *,
    n: int,
    rng: np.random.Generator,
    lower: float = 0.0,
    upper: float = 1.0,
    dimension: int | None = None,
    **shape: float,
) -> NumericData:
    """n values (rows of ``dimension`` values) on [lower, upper] from ``distribution``.

    >>> import numpy as np
    >>> data = synthetic_numbers("uniform", n=1000, lower=18, upper=90, rng=np.random.default_rng(0))
    >>> data.population_mean, bool(data.values.min() >= 18 and data.values.max() <= 90)
    (54.0, True)
    """
    require_generator(rng, _OWNER)  # experiments: fast, seedable mode only
    count = _convert("n", n, Integer(low=0))
    lo = _convert("lower", lower, Real(low=-1e100, high=1e100))
    hi = _convert("upper", upper, Real(low=-1e100, high=1e100))
    if not lo < hi:
        raise InvalidParameter("upper", upper, f"greater than lower={lower!r}", owner=_OWNER)
    d = 1 if dimension is None else _convert("dimension", dimension, Integer(low=1, high=1 << 12))
    law = _law(distribution, shape)
    standard = law.sample(rng, count * d)
    values = lo + (hi - lo) * standard
    values = np.clip(values, lo, hi).reshape((count,) if dimension is None else (count, d))
    values.setflags(write=False)
    return NumericData(distribution, values, lo, hi, lo + (hi - lo) * law.mean, law)
