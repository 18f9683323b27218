"""Synthetic categorical data for experiments: values and their true histogram.

Distributions over the categories 0 .. k−1 (probabilities normalised to sum to 1):

``uniform``
    P(x) = 1/k.
``gaussian``
    a discretised Gaussian, P(x) ∝ exp(−(x − mean)²/(2·std²)); defaults mean = (k − 1)/2,
    std = k/6 (the seeds' "gauss" shape).
``geometric``
    the discrete exponential, P(x) ∝ exp(−x/scale); default scale = k/5. (``exponential`` is
    an alias.)
``zipf``
    the truncated Zipf law, P(x) ∝ (x + 1)^−s; default s = 1.1 (as in the peer benchmarks).

:func:`synthetic` draws n values i.i.d. from one of them with an explicit generator: the
histogram is Multinomial(n, P) and the values are that histogram in a random order, so
``values`` and ``histogram`` always agree exactly.
"""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np
from numpy.typing import NDArray

from dpkit.plugin import Integer, InvalidParameter, Real

__all__ = [
    "DISTRIBUTIONS",
    "SyntheticData",
    "check_shape",
    "convert",
    "distribution_probabilities",
    "require_generator",
    "synthetic",
]

DISTRIBUTIONS: tuple[str, ...] = ("uniform", "gaussian", "geometric", "exponential", "zipf")

_SHAPE_PARAMETERS: dict[str, tuple[str, ...]] = {
    "uniform": (),
    "gaussian": ("mean", "std"),
    "geometric": ("scale",),
    "exponential": ("scale",),
    "zipf": ("s",),
}


def convert(name: str, value: Any, domain: Any, owner: str) -> Any:
    """``domain.convert(value)``, or :class:`dpkit.InvalidParameter` naming ``name``."""
    try:
        return domain.convert(value)
    except (ValueError, TypeError, OverflowError):
        raise InvalidParameter(name, value, domain.describe(), owner=owner) from None


def check_shape(
    distribution: str, shape: dict[str, Any], known: dict[str, tuple[str, ...]], owner: str
) -> None:
    """``distribution`` is one of ``known``, and ``shape`` names only its parameters."""
    if distribution not in known:
        raise InvalidParameter(
            "distribution", distribution, "one of " + ", ".join(map(repr, known)), owner=owner
        )
    for key in shape:
        if key not in known[distribution]:
            allowed = ", ".join(known[distribution]) or "none"
            raise InvalidParameter(
                key,
                shape[key],
                f"a parameter of {distribution!r} (allowed: {allowed})",
                owner=owner,
            )


def require_generator(rng: Any, owner: str) -> None:
    """Experiments take a seeded numpy ``Generator`` (fast mode) only."""
    if not isinstance(rng, np.random.Generator):
        raise InvalidParameter(
            "rng", rng, "a numpy.random.Generator, e.g. numpy.random.default_rng(seed)", owner=owner
        )


def distribution_probabilities(distribution: str, k: int, **shape: float) -> NDArray[np.float64]:
    """P(0), …, P(k − 1) of a named distribution (see the module docstring)."""
    owner = "synthetic"
    check_shape(distribution, shape, _SHAPE_PARAMETERS, owner)
    k = convert("k", k, Integer(low=2), owner)
    x = np.arange(k, dtype=np.float64)
    if distribution == "uniform":
        weights = np.ones(k)
    elif distribution == "gaussian":
        mean = convert("mean", shape.get("mean", (k - 1) / 2.0), Real(), owner)
        std = convert("std", shape.get("std", k / 6.0), Real(low=0.0, low_open=True), owner)
        log_w = -((x - mean) ** 2) / (2.0 * std**2)
        weights = np.exp(log_w - log_w.max())
    elif distribution in ("geometric", "exponential"):
        scale = convert("scale", shape.get("scale", k / 5.0), Real(low=0.0, low_open=True), owner)
        weights = np.exp(-x / scale)
    else:
        s = convert("s", shape.get("s", 1.1), Real(low=0.0), owner)
        weights = np.exp(-s * np.log1p(x))
    result: NDArray[np.float64] = weights / weights.sum()
    return result


@attrs.frozen(eq=False)
class SyntheticData:
    """n values over k categories, their exact histogram, and the generating probabilities."""

    distribution: str
    values: NDArray[np.int64]
    histogram: NDArray[np.int64]
    probabilities: NDArray[np.float64]

    @property
    def n(self) -> int:
        return int(self.values.size)

    @property
    def k(self) -> int:
        return int(self.histogram.size)

    @property
    def frequencies(self) -> NDArray[np.float64]:
        """The empirical frequencies histogram / n."""
        return self.histogram / max(self.n, 1)


def synthetic(
    distribution: str, /, *, n: int, k: int, rng: np.random.Generator, **shape: float
) -> SyntheticData:
    """n i.i.d. values from ``distribution`` over k categories, in random order, with the histogram.

    >>> import numpy as np
    >>> data = synthetic("zipf", n=1000, k=8, rng=np.random.default_rng(0))
    >>> int(data.histogram.sum()), bool(np.all(np.bincount(data.values, minlength=8) == data.histogram))
    (1000, True)
    """
    require_generator(rng, "synthetic")  # experiments: fast, seedable mode only
    n = convert("n", n, Integer(low=0), "synthetic")
    probabilities = distribution_probabilities(distribution, k, **shape)
    histogram = rng.multinomial(n, probabilities).astype(np.int64)
    values = np.repeat(np.arange(probabilities.size, dtype=np.int64), histogram)
    rng.shuffle(values)
    for array in (values, histogram, probabilities):
        array.setflags(write=False)
    return SyntheticData(distribution, values, histogram, probabilities)
