"""Vectorised checks of query answers and utilities: typed errors naming the problem."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpkit import InvalidData, InvalidParameter

__all__ = ["as_finite", "as_integers", "as_utilities", "lattice_steps", "require_generator"]


def require_generator(rng: Any, *, owner: str) -> np.random.Generator:
    """``rng`` if it is a numpy Generator: the floating-point samplers exist only there.

    dpkit's secure generator deliberately has no float Laplace/normal/exponential draws (their
    low bits leak the input; Mironov 2012), so a mechanism built on them refuses it with a
    typed error instead of an AttributeError.
    """
    if not isinstance(rng, np.random.Generator):
        raise InvalidParameter(
            "rng",
            rng,
            "a numpy.random.Generator (fast mode): this mechanism draws floating-point noise, "
            "which has no secure sampler yet; for secure releases use 'laplace' or 'gaussian' "
            "(on a lattice) or 'geometric'",
            owner=owner,
        )
    return rng


def lattice_steps(
    answers: NDArray[np.float64], step: float, *, owner: str, noise: str
) -> NDArray[np.float64]:
    """round(x/g) for the secure lattice releases: exact, since g is a power of two.

    Refuses answers beyond 2⁶¹ steps (the integer noise is added in int64); ``noise`` names the
    noise level in the message, e.g. ``"noise scale 0.5"``.
    """
    with np.errstate(over="ignore"):
        steps: NDArray[np.float64] = np.rint(answers / step)
    if steps.size and np.abs(steps).max() >= 2.0**61:
        raise InvalidData(
            f"{owner}: an answer of magnitude {np.abs(answers).max():.3g} is too large for "
            f"the secure lattice at {noise} (at most 2^61 steps of {step:.3g})",
            field="values",
        )
    return steps


def _numeric(values: Any, *, owner: str, field: str) -> NDArray[Any]:
    array = np.asarray(values)
    if array.dtype == np.bool_ or not (
        np.issubdtype(array.dtype, np.integer) or np.issubdtype(array.dtype, np.floating)
    ):
        raise InvalidData(
            f"{owner}: {field} must be real numbers, got an array of dtype {array.dtype}",
            field=field,
        )
    return array


def _first_bad(array: NDArray[Any], bad: NDArray[np.bool_]) -> Any:
    return array.flat[int(np.flatnonzero(bad.ravel())[0])]


def as_finite(values: Any, *, owner: str, field: str = "values") -> NDArray[np.float64]:
    """``values`` as a float64 array of finite numbers (NaN and ±inf are refused).

    One cheap pass first: the sum of finite numbers is finite unless it overflows, so the
    elementwise check only runs when the sum is not finite.
    """
    array = _numeric(values, owner=owner, field=field).astype(np.float64, copy=False)
    with np.errstate(over="ignore", invalid="ignore"):
        total = array.sum()
    if not np.isfinite(total):
        bad = ~np.isfinite(array)
        if bad.any():
            raise InvalidData(
                f"{owner}: {field} contain {_first_bad(array, bad)!r} "
                f"({int(np.count_nonzero(bad))} value(s) not finite); every answer must be a "
                "finite real number",
                field=field,
            )
    return array


def as_integers(values: Any, *, owner: str, field: str = "values") -> NDArray[np.int64]:
    """``values`` as an int64 array; floats are accepted only when they are whole numbers."""
    array = _numeric(values, owner=owner, field=field)
    if np.issubdtype(array.dtype, np.integer):
        return array.astype(np.int64, copy=False)
    with np.errstate(invalid="ignore"):
        bad = ~np.isfinite(array) | (array != np.round(array)) | (np.abs(array) > 2.0**62)
    if bad.any():
        raise InvalidData(
            f"{owner}: {field} must be integers, got {_first_bad(array, bad)!r} "
            f"({int(np.count_nonzero(bad))} value(s) not whole numbers)",
            field=field,
        )
    return array.astype(np.int64)


def as_utilities(utilities: Any, *, owner: str, field: str = "utilities") -> NDArray[np.float64]:
    """A utility array of shape (..., m), m >= 1 candidates along the last axis.

    Entries are finite or −inf (a candidate that is never chosen); NaN and +inf are refused,
    and every row must have at least one finite utility.
    """
    array = _numeric(utilities, owner=owner, field=field).astype(np.float64, copy=False)
    if array.ndim == 0 or array.shape[-1] == 0:
        raise InvalidData(
            f"{owner}: {field} must hold at least one candidate along the last axis, "
            f"got shape {array.shape}",
            field=field,
        )
    with np.errstate(invalid="ignore", over="ignore"):
        total = array.sum()
    if not np.isfinite(total):
        nan = np.isnan(array)
        if nan.any():
            raise InvalidData(
                f"{owner}: {field} contain NaN ({int(np.count_nonzero(nan))} value(s)); "
                "utilities must be finite, or -inf for a candidate that is never chosen",
                field=field,
            )
        if (array == np.inf).any():
            raise InvalidData(
                f"{owner}: {field} contain +inf; utilities must be finite, or -inf for a "
                "candidate that is never chosen",
                field=field,
            )
        empty = np.all(array == -np.inf, axis=-1)
        if empty.any():
            raise InvalidData(
                f"{owner}: every candidate of {int(np.count_nonzero(empty))} selection(s) has "
                "utility -inf, so there is nothing to choose; give at least one finite utility",
                field=field,
            )
    return array
