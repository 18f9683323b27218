"""DP-SGD's noise step, in place and secure: :func:`add_gaussian_noise_`.

Noisy SGD (Abadi et al. 2016, "Deep Learning with Differential Privacy", Algorithm 1) clips each
example's gradient to L2 norm C, sums the clipped gradients of a batch, and adds N(0, σ²I) with
σ = z·C (z the noise multiplier) before the optimizer's step. That sum, over all of a model's
parameters at once, is one Gaussian release of L2 sensitivity C: dpkit's Gaussian mechanism,
here with σ given rather than calibrated, written back into the gradients themselves.

In secure mode (``rng=None``) the release is the Gaussian mechanism's lattice release
(:class:`~dpkit_central.gaussian.LatticeGaussian`): each coordinate rounded to a multiple of
g = 2^(⌈log₂ σ⌉ − 28), plus exact discrete Gaussian noise whose variance covers that rounding
over all d coordinates of the step (L2 sensitivity C + g·√d), drawn from ChaCha20 keyed by the
operating system — on the tensor's device for a CUDA tensor. So a step is exactly as private
as the event ``GaussianDP(noise_multiplier=σ/C)`` says, for any number of parameter tensors
given together, and composes as such (:func:`dpkit.account`, :func:`dpkit.calibrate` with a
training schedule). This is the step that Opacus's ``secure_mode`` takes from torchcsprng
(last released for torch 1.8); the floating-point normal draws of fast mode are not safe
against floating-point attacks (Mironov 2012), as in every fast mode.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from dpkit.plugin import InvalidData, InvalidParameter, array_library, host_rng
from dpkit_central.gaussian import gaussian_release

__all__ = ["add_gaussian_noise_"]

_OWNER = "add_gaussian_noise_"


def add_gaussian_noise_(tensors: Any, std: float, *, sensitivity: float, rng: Any = None) -> Any:
    """Add Gaussian noise of standard deviation ``std`` to ``tensors`` in place, and return them.

    ``tensors`` is one floating-point array (a torch tensor on any device, a CuPy array, a
    numpy array) or a sequence of them — a model's gradients, ``[p.grad for p in
    model.parameters()]`` — released together as one Gaussian release of L2 sensitivity
    ``sensitivity`` (the clipping norm C of DP-SGD) over all their coordinates: account it as
    ``GaussianDP(noise_multiplier=std / sensitivity)`` (module docstring). Each array keeps
    its dtype and device; the float64 release is rounded to the array's dtype (a
    post-processing). ``rng``: ``None`` (secure, the default), a ``SecureRandom`` (keyed for
    tests), or a numpy ``Generator`` or ``torch.Generator`` (fast mode, seedable).

    Everything is checked before any value is read: ``std`` and ``sensitivity`` positive
    and finite, each array writable in place (a JAX array is not: use
    ``dpkit.mechanism("gaussian", ...).randomize``, which returns a new one) and of a
    floating dtype. A value that is not finite (a diverged gradient) is refused with
    :class:`~dpkit.errors.InvalidData` before any array is written.
    """
    for name, value in (("std", std), ("sensitivity", sensitivity)):
        if not (isinstance(value, (int, float)) and not isinstance(value, bool)) or not (
            math.isfinite(value) and value > 0
        ):
            raise InvalidParameter(name, value, "a finite real number > 0", owner=_OWNER)
    arrays = list(tensors) if _is_sequence(tensors) else [tensors]
    for array in arrays:
        _check_writable(array)
    coordinates = sum(math.prod(int(d) for d in array.shape) for array in arrays)
    released = [
        _release(array, float(std), float(sensitivity), rng, coordinates) for array in arrays
    ]
    for array, values in zip(arrays, released, strict=True):
        _write(array, values)
    return tensors


def _is_sequence(tensors: Any) -> bool:
    return isinstance(tensors, Sequence) and not isinstance(tensors, (str, bytes))


def _check_writable(array: Any) -> None:
    """A floating array that can be written in place (from its type and dtype alone)."""
    library = array_library(array, owner=_OWNER, field="tensors")
    if library is None and not isinstance(array, np.ndarray):
        raise InvalidData(
            f"{_OWNER}: tensors must be arrays (torch, CuPy, numpy) or a sequence of them, got "
            f"{type(array).__name__}",
            field="tensors",
        )
    if library is not None and library.name in ("jax", "jaxlib"):
        raise InvalidData(
            f"{_OWNER}: a JAX array cannot be written in place; use "
            "dpkit.mechanism('gaussian', ...).randomize, which returns a new array",
            field="tensors",
        )
    floating = (
        bool(array.is_floating_point())
        if library is not None and library.name == "torch"
        else np.dtype(str(array.dtype)).kind == "f"
        if library is None or library.name == "cupy"
        else library.xp.isdtype(array.dtype, "real floating")
    )
    if not floating:
        raise InvalidData(
            f"{_OWNER}: tensors must be of a floating dtype (noise is added in place), got "
            f"{array.dtype}",
            field="tensors",
        )
    if isinstance(array, np.ndarray) and not array.flags.writeable:
        raise InvalidData(f"{_OWNER}: tensors must be writable arrays", field="tensors")


def _release(array: Any, std: float, sensitivity: float, rng: Any, coordinates: int) -> Any:
    """The Gaussian release of one array, calibrated for all the step's ``coordinates``."""
    library = array_library(array, owner=_OWNER, field="tensors")
    if library is not None and library.on_host:  # a torch CPU tensor: its numpy view
        view = library.host_view(array)
        rng = host_rng(rng, owner=_OWNER)
        return gaussian_release(
            view, sigma=std, sensitivity=sensitivity, rng=rng, owner=_OWNER, changed=coordinates
        )
    return gaussian_release(
        array, sigma=std, sensitivity=sensitivity, rng=rng, owner=_OWNER, changed=coordinates
    )


def _write(array: Any, values: Any) -> None:
    """``values`` (the float64 release: numpy, or the array's own library on a device) into
    ``array``, clamped to the finite range of its dtype (a post-processing: a float16 gradient
    near 65504 plus noise stays finite rather than rounding to inf)."""
    if isinstance(values, (np.ndarray, np.generic)):
        values = np.asarray(values)  # a 0-d array's release is a numpy scalar
    if type(array).__module__.partition(".")[0] == "torch":
        import torch

        source = torch.from_numpy(values) if isinstance(values, np.ndarray) else values
        largest = float(torch.finfo(array.dtype).max)
        with torch.no_grad():
            array.copy_(source.reshape(array.shape).clamp(-largest, largest))
        return
    largest = float(np.finfo(np.dtype(str(array.dtype))).max)
    array[...] = values.clip(-largest, largest)
