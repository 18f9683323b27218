"""``log_probability(outputs, inputs)`` on an accelerator's arrays: the two operands on one
device, and the comparisons and conversions numpy makes, there.

A mechanism whose log P[y | x] is a closed form (randomized response's two values, a density)
names ``log_probability`` in ``device_methods`` and computes that form with the array's own
namespace, on its device, in float64: no transfer to the host and back. This module gathers the
operands:

* when neither is an accelerator's array, :func:`device_operands` returns ``None`` and the
  mechanism's numpy path runs (host arrays of torch, JAX or array-api-strict arrive there as
  numpy views, :mod:`dpkit.tensors.methods`);
* a numpy array, a Python list or a scalar beside an accelerator's array is **copied to that
  device**: it is the caller's public data (the outputs to score, or inputs chosen to score
  them against), never a private value leaving the device;
* an array of another library, or of the same library on another device (a CPU tensor beside
  a CUDA one), is refused with :class:`~dpkit.errors.InvalidData` naming its field — dpkit
  does not choose a device for the caller;
* a library without 64-bit types (JAX without x64) is refused, log-probabilities being
  float64, before any value is read.

The result is the accelerator's array type on its device, float64, of the operands'
broadcast shape (numpy's rule, the same error for shapes that do not broadcast).

A mechanism whose log P[y | x] is the logarithm of a value that depends on the input (``duchi``,
``duchi_multi``, ``one_bit_mean``; ``multibit`` sums such logarithms, below) computes that value with the host's IEEE 754 operations in
the host's order, so the host's double, and takes the device's ``log`` (or ``log1p``) of it.
IEEE 754 does not fix how a logarithm rounds, so the result is the host's up to that one
rounding: within **two ulps** of the host's (at most two representable doubles apart), and
exactly the host's where that is −inf, NaN or 0 (log 0 = −inf and log 1 = +0, IEEE
754-2019's special values in §9.2, and NaN in, NaN out). One ulp for each side: CUDA's double ``log`` and ``log1p`` are within
1 ulp of the correctly rounded result (CUDA C++ Programming Guide, Mathematical Functions
appendix, double-precision table; found by extensive, not exhaustive, tests), and numpy's were
measured within 1 ulp of it (against 60-digit mpmath); nothing but a selection follows the
logarithm. Measured: torch's CPU float64 ``log`` and ``log1p`` are one ulp from numpy's on
0.33 % and 3.1 % of uniform arguments in (0, 1), never more (6·10⁷ arguments);
array-api-strict's are numpy's (docs/tensors.md).

``multibit`` sums m such logarithms (its m drawn features' log P[±B | t_j; ε/m], the d
features' terms added left to right on both, 0 for one not drawn), then subtracts the constant
c = log C(d, m). With u = 2⁻⁵³, A = Σ_j |log P_j| and γ = (m − 1)u/(1 − (m − 1)u): each device
logarithm is within η|log P_j| of the host's, η = 4u/(1 − 4u) (two doubles apart, a gap being at
most 2u times the larger magnitude); a left-to-right sum of m terms of one sign is within γ of
the exact one relative to A (Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed.,
§4.2), on each side; and − c rounds once on each side. So the device's value is within

    (η + γ(2 + η))·A + u·((1 + γ)(2 + η)·A + 2c)  ≈  (m + 2)·2⁻⁵²·A + 2⁻⁵²·c

of the host's (a few ulps of it), and the host's where that is −inf, NaN or 0.
``pm_multi``'s terms are constants selected by comparisons, summed in the same order: the
host's numbers, as are ``pem``'s and ``treehist``'s (:mod:`dpkit.tensors.prefixes`,
:mod:`dpkit.tensors.prefix_tree`). ``rappor`` sums k terms logaddexp(a_i, b_i) of the same
doubles a_i, b_i on both sides, by one formula for both (the plugin's
``Rappor._bit_log_probability``), each ``logaddexp`` m + log1p(exp(−d)) with the device's
``exp`` and ``log1p``, and the sum in the namespace's own order: its contract is the absolute
bound 2[E_S(1 + u) + u(A + c)], E_S = (1 + γ)(1 + u)kβ + (u + γ(1 + u))A, β = 6u, γ = γ_{k−1}
(≈ 12k·u + (2k + 2)u·A + 2u·c), derived step by step in ``tests/support/device_reference.py``
(``sum_of_logaddexp_bound``) and stated in docs/tensors.md.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs
import numpy as np

from dpkit.arrays import as_array
from dpkit.errors import InvalidData
from dpkit.tensors.device_random import require_64_bit
from dpkit.tensors.libraries import ArrayLibrary, array_library

__all__ = [
    "DeviceOperands",
    "density_log_probability",
    "device_operands",
    "equal_values",
    "index_inputs",
    "real_values",
    "where_equal",
]

_FIELDS = ("outputs", "inputs")


@attrs.frozen
class DeviceOperands:
    """``outputs`` and ``inputs`` as arrays of ``library`` on its device (their own dtypes)."""

    library: ArrayLibrary
    outputs: Any
    inputs: Any

    @property
    def shape(self) -> tuple[int, ...]:
        """The broadcast shape of the two (numpy's ``ValueError`` if they do not broadcast)."""
        return tuple(np.broadcast_shapes(tuple(self.outputs.shape), tuple(self.inputs.shape)))

    def reals(self, *, owner: str) -> tuple[Any, Any]:
        """(outputs, inputs) as float64 (:func:`real_values`), after numpy's broadcast check:
        the operands of a density, decided before any value is read."""
        _ = self.shape
        return (
            real_values(self.library, self.outputs, owner=owner, field="outputs"),
            real_values(self.library, self.inputs, owner=owner, field="inputs"),
        )


def device_operands(outputs: Any, inputs: Any, /, *, owner: str) -> DeviceOperands | None:
    """The two operands of ``log_probability`` on one accelerator, or ``None`` when neither is
    an accelerator's array (the numpy path). Decided from types, devices and dtypes alone."""
    values = (outputs, inputs)
    libraries = [
        array_library(value, owner=owner, field=field)
        for value, field in zip(values, _FIELDS, strict=True)
    ]
    on_device = [
        (library, field)
        for library, field in zip(libraries, _FIELDS, strict=True)
        if library is not None and not library.on_host
    ]
    if not on_device:
        return None
    library, device_field = on_device[0]
    for other, field in zip(libraries, _FIELDS, strict=True):
        if other is not None and (other.name != library.name or other.device != library.device):
            raise InvalidData(
                f"{owner}: {field} is a {other.name} array on {other.device}, and "
                f"{device_field} a {library.name} array on {library.device}; give both on one "
                "device (or the public one as a numpy array, which is copied there)",
                field=field,
            )
    require_64_bit(library, owner=owner, field=device_field, needs="log-probabilities are float64")
    operands = [
        value if found is not None else _to_device(library, value, owner=owner, field=field)
        for value, found, field in zip(values, libraries, _FIELDS, strict=True)
    ]
    return DeviceOperands(library=library, outputs=operands[0], inputs=operands[1])


def _to_device(library: ArrayLibrary, value: Any, *, owner: str, field: str) -> Any:
    """A numpy array, list or scalar (public data) copied to ``library``'s device."""
    array = as_array(value, owner=owner, field=field)
    if array.dtype.kind not in "biuf":
        raise InvalidData(
            f"{owner}: {field} must be numbers to be scored on the device, got an array of "
            f"{array.dtype}",
            field=field,
        )
    return library.xp.asarray(np.ascontiguousarray(array), device=library.device)


def equal_values(library: ArrayLibrary, a: Any, b: Any) -> Any:
    """``a == b`` elementwise (broadcasting) with numpy's outcome: the same dtype compared as
    it is, integers and booleans as int64 (uint64 excepted), anything else as float64 (numpy
    compares an integer and a float in a float type that holds both exactly, or in float64)."""
    xp = library.xp
    if a.dtype != b.dtype:
        integral = ("bool", "integral")
        if (
            xp.isdtype(a.dtype, integral)
            and xp.isdtype(b.dtype, integral)
            and xp.uint64 not in (a.dtype, b.dtype)
        ):
            a, b = xp.astype(a, xp.int64), xp.astype(b, xp.int64)
        else:
            a, b = xp.astype(a, xp.float64), xp.astype(b, xp.float64)
    return a == b


def where_equal(operands: DeviceOperands, *, equal: float, other: float) -> Any:
    """``equal`` where the output equals the input, ``other`` elsewhere: float64 of the
    broadcast shape (randomized response's log-probabilities)."""
    library = operands.library
    xp, device = library.xp, library.device
    _ = operands.shape  # numpy's error for shapes that do not broadcast, before any value
    same = equal_values(library, operands.outputs, operands.inputs)
    return xp.where(
        same,
        xp.asarray(equal, dtype=xp.float64, device=device),
        xp.asarray(other, dtype=xp.float64, device=device),
    )


def index_inputs(library: ArrayLibrary, indices: Any, *, k: int, owner: str) -> bool:
    """Whether the category ``indices`` scored against are empty, after the CPU's dtype rule
    (decided by the dtype alone): integers, or booleans for k = 2, unless empty (an empty
    array of any dtype is accepted); :class:`~dpkit.errors.InvalidData` naming ``inputs``
    otherwise."""
    xp = library.xp
    empty = 0 in tuple(indices.shape)
    if not empty and not (
        xp.isdtype(indices.dtype, "integral") or (indices.dtype == xp.bool and k == 2)
    ):
        raise InvalidData(
            f"{owner}: inputs must be integer category indices 0..{k - 1}, got a "
            f"{library.name} array of {indices.dtype}",
            field="inputs",
        )
    return empty


def real_values(library: ArrayLibrary, values: Any, *, owner: str, field: str) -> Any:
    """``values`` as float64 on their device (as ``numpy.asarray(values, dtype=float64)``),
    refused unless their dtype is boolean, integral or real floating (decided by the dtype)."""
    xp = library.xp
    if not xp.isdtype(values.dtype, ("bool", "integral", "real floating")):
        raise InvalidData(
            f"{owner}: {field} must be real numbers, got a {library.name} array of {values.dtype}",
            field=field,
        )
    return xp.astype(values, xp.float64)


def density_log_probability(
    outputs: Any, inputs: Any, log_density: Callable[[Any, Any, Any], Any], /, *, owner: str
) -> Any:
    """``log_probability`` of a mechanism whose log P[y | x] is ``log_density(xp, y, x)`` over
    float64 arrays of the namespace ``xp``: on the device of an accelerator's operand (both as
    float64 there, :meth:`DeviceOperands.reals`), else numpy's float64 on the host — one
    formula for both, so the same float64 numbers."""
    operands = device_operands(outputs, inputs, owner=owner)
    if operands is not None:
        y, x = operands.reals(owner=owner)
        return log_density(operands.library.xp, y, x)
    y = np.asarray(outputs, dtype=np.float64)
    x = np.asarray(inputs, dtype=np.float64)
    return np.asarray(log_density(np, y, x), dtype=np.float64)
