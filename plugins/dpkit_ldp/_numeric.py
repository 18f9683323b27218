"""What the numeric local mechanisms share: bounds, scaling, and the privacy-boundary hooks.

A numeric mechanism protects one value of ``[lower, upper]`` (an :class:`~dpkit.plugin.Interval`) or
one vector of ``[lower, upper]^d`` (a :class:`~dpkit.plugin.Box`). The papers define the mechanisms on
a standard interval; a value x is mapped to it affinely,

    t = (x − centre)/scale,     centre = (lower + upper)/2,  scale = (upper − lower)/2,

(t ∈ [−1, 1]; the square wave uses [0, 1] instead), and a report y in standard units is
released on the data's scale as centre + scale·y — a fixed map, so privacy is unchanged and a
report unbiased for t is unbiased for x.

The session hooks (``docs/security.md``, "The privacy boundary"):

``check_input`` (public phase, structure only)
    a 1-D array of records (an ``Interval`` mechanism) or a 2-D array with d columns (a ``Box``
    mechanism), whose dtype is a number, a boolean or a Python object; text, bytes and dates are
    refused from the dtype alone.
``coerce`` (private phase, total)
    each coordinate on its own: anything that is not a real number (NaN, None, text in an
    object array) becomes the midpoint of its interval, and every value is clamped into
    ``[lower, upper]`` (±inf to the ends). A fixed input replaces each bad record, so every
    report is still the mechanism applied to a value of the domain (ε-LDP), and no record is
    dropped (the number of reports does not reveal how many were bad).

``randomize`` called directly (by the holder of the data) refuses NaN and out-of-range values
with :class:`~dpkit.InvalidData` instead.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import attrs
import numpy as np
from numpy.typing import NDArray

from dpkit.plugin import (
    BOUND,
    EPSILON,
    ArrayLibrary,
    Box,
    Integer,
    Interval,
    InvalidData,
    InvalidParameter,
    Mechanism,
    PureDP,
    SecureRandom,
    StandardUnits,
    array_library,
    as_array,
    describe_dtype,
    device_operands,
    parameter,
    plain,
    resolve_rng,
    total_floats,
)

__all__ = [
    "NumericMechanism",
    "VectorMechanism",
    "check_scalar",
    "check_vector",
    "lower_parameter",
    "real_reports",
    "upper_parameter",
]

#: dtype kinds a numeric input may have (numbers, booleans, Python objects converted per record).
_NUMERIC_KINDS = "biufO"


def lower_parameter(default: float) -> Any:
    return parameter(BOUND, doc="lower end of each value's range", default=default)


def upper_parameter(default: float) -> Any:
    return parameter(BOUND, doc="upper end of each value's range (> lower)", default=default)


def real_reports(reports: Any, owner: str) -> NDArray[np.float64]:
    """An estimator's reports as floats, or :class:`~dpkit.InvalidData` if they are not numbers."""
    array = as_array(reports, owner=owner, field="reports")
    if array.size and array.dtype.kind not in "iuf":
        raise InvalidData(
            f"{owner}: reports must be real numbers, got an array of {describe_dtype(array)}",
            field="reports",
        )
    return array.astype(np.float64)


def check_scalar(name: str, dimension: int) -> None:
    """Refuse ``dimension`` > 1 for a mechanism of one value (in its ``mean_variance``)."""
    if dimension != 1:
        raise InvalidParameter(
            "dimension",
            dimension,
            f"1 ({name} protects one value; use {name}_multi for vectors)",
            owner=name,
        )


def check_vector(name: str, dimension: int, scalar: str | None = None) -> None:
    """Refuse ``dimension`` 1 for a vector mechanism (in its ``mean_variance``): for one value
    the one-dimensional mechanism ``scalar`` (by default ``name`` without ``_multi``) is the
    same and is advised under its own name."""
    if dimension < 2:
        scalar = scalar or name.removesuffix("_multi")
        raise InvalidParameter(
            "dimension", dimension, f">= 2 (for one value use {scalar})", owner=name
        )


def float64_constants(xp: Any, device: Any, *values: float) -> tuple[Any, ...]:
    """``values`` as float64 scalars of the namespace ``xp`` on ``device``: numpy's own (its
    ``asarray`` takes no device before numpy 2), or 0-d arrays of an accelerator's library."""
    if xp is np:
        return tuple(np.float64(value) for value in values)
    return tuple(xp.asarray(value, dtype=xp.float64, device=device) for value in values)


def row_sum(values: Any) -> Any:
    """The sum over the last axis of an array of any array namespace, left to right:
    ``((a₀ + a₁) + a₂) + …``, so the same IEEE 754 additions in the same order on the host
    and on a device (numpy's own order for rows of up to 7 values; its pairwise summation
    regroups longer rows, differently by layout, and a device's reduction is its own)."""
    total = values[..., 0]
    for j in range(1, values.shape[-1]):
        total = total + values[..., j]
    return total


@attrs.frozen
class NumericMechanism(Mechanism):
    """Base of the local mechanisms on one value of ``[lower, upper]``: bounds, scaling, the
    session hooks, and ``randomize`` around a sampler in standard units (``_sample``)."""

    kind: ClassVar[Literal["local", "central"]] = "local"
    #: Standard interval of the paper: (−1, 1), or (0, 1) for the square wave.
    standard: ClassVar[tuple[float, float]] = (-1.0, 1.0)

    epsilon: float = parameter(EPSILON, doc="privacy loss ε per user", typical=(0.05, 6.0))
    lower: float = lower_parameter(-1.0)
    upper: float = upper_parameter(1.0)

    def __attrs_post_init__(self) -> None:
        self._check_bounds()

    @property
    def privacy(self) -> PureDP:
        return PureDP(epsilon=self.epsilon)

    def _sample(self, t: NDArray[np.float64], generator: Any) -> NDArray[np.float64]:
        """Reports in standard units for the rows of ``t`` (standard units)."""
        raise NotImplementedError

    def _standard_variance(self, t: NDArray[np.float64]) -> NDArray[np.float64]:
        """Var[report | t] in standard units."""
        raise NotImplementedError

    def _rows(self, values: Any) -> NDArray[np.float64]:
        """``values`` checked, in standard units (the shape a sampler takes)."""
        return self.standardize(self.checked_values(values))

    def randomize(
        self, values: Any, /, *, rng: np.random.Generator | SecureRandom | None = None
    ) -> Any:
        """One report per value (per row of d values for a vector mechanism), on the data's
        scale, float64; ``rng`` is None (secure mode), a :class:`dpkit.SecureRandom`, or a
        numpy ``Generator`` (fast mode), for torch tensors also a ``torch.Generator``. A class
        naming ``randomize`` in ``device_methods`` randomizes an accelerator's array there
        (:meth:`_device_reports`)."""
        library = array_library(values, owner=self.name)
        if library is not None:  # an accelerator's array (host arrays arrive as numpy views)
            return self._device_reports(library, values, rng)
        generator, _ = resolve_rng(rng, owner=self.name)
        t = self._rows(values)
        shape = np.shape(values) if np.ndim(values) else t.shape
        return self.to_data(self._sample(t, generator)).reshape(shape)

    @property
    def units(self) -> StandardUnits:
        """[lower, upper] and the standard units (centre, scale), for the device paths."""
        return StandardUnits(self.lower, self.upper, self.centre, self.scale)

    def _device_reports(self, library: ArrayLibrary, values: Any, rng: Any) -> Any:
        """The reports of an accelerator's ``values`` there (the subclass's device module);
        reached only by classes that name ``randomize`` in ``device_methods``."""
        raise NotImplementedError(f"{self.name} has no device path")

    def variance_at(self, values: Any) -> NDArray[np.float64]:
        """Var[report | x] on the data's scale for each value (each coordinate of each row)."""
        variance: NDArray[np.float64] = self.scale**2 * self._standard_variance(self._rows(values))
        return variance

    def _check_bounds(self) -> None:
        if not self.lower < self.upper:
            raise InvalidParameter(
                "upper", self.upper, f"greater than lower={plain(self.lower)!r}", owner=self.name
            )
        if not np.isfinite(self.upper - self.lower):
            raise InvalidParameter(
                "upper", self.upper, "within a finite distance of lower", owner=self.name
            )

    @property
    def domain(self) -> Interval | Box:
        return Interval(self.lower, self.upper)

    @property
    def centre(self) -> float:
        """The data value at standard 0: the midpoint, or ``lower`` for a [0, 1] standard."""
        low, high = self.standard
        return float(self.lower - low * (self.upper - self.lower) / (high - low))

    @property
    def scale(self) -> float:
        """Data units per standard unit."""
        low, high = self.standard
        return float((self.upper - self.lower) / (high - low))

    @property
    def midpoint(self) -> float:
        return 0.5 * self.lower + 0.5 * self.upper

    def standardize(self, values: NDArray[np.float64]) -> NDArray[np.float64]:
        """Values of the domain in standard units, clamped into the standard interval (the
        division can overshoot the end by a rounding error)."""
        low, high = self.standard
        result: NDArray[np.float64] = np.clip((values - self.centre) / self.scale, low, high)
        return result

    def standard_operands(self, xp: Any, outputs: Any, inputs: Any) -> tuple[Any, Any]:
        """(``from_data(outputs)``, ``standardize(inputs)``) of float64 arrays of the namespace
        ``xp`` (numpy's on the host, an accelerator's for ``log_probability`` there): the same
        IEEE 754 operations in the same order, so the same numbers on either."""
        low, high = self.standard
        y = (outputs - self.centre) / self.scale
        return y, xp.clip((inputs - self.centre) / self.scale, low, high)

    def to_data(self, standard: NDArray[np.float64]) -> NDArray[np.float64]:
        """Reports in standard units → the data's scale."""
        result: NDArray[np.float64] = self.centre + self.scale * standard
        return result

    @property
    def report_slack(self) -> float:
        """How far (in standard units) rounding on the data's scale can move a report: a few
        ulps of the larger bound, relative to the scale (reports are checked against the
        mechanism's range with this slack)."""
        largest = max(abs(self.lower), abs(self.upper), abs(self.centre))
        return float(8.0 * np.finfo(np.float64).eps * largest / self.scale)

    def from_data(self, reports: NDArray[np.float64]) -> NDArray[np.float64]:
        """Reports on the data's scale → standard units (no clamping: reports range wider)."""
        result: NDArray[np.float64] = (reports - self.centre) / self.scale
        return result

    # -- validation for direct calls -----------------------------------------------------------

    def checked_values(self, values: Any, *, field: str = "values") -> NDArray[np.float64]:
        """``values`` as floats of the domain, or :class:`~dpkit.InvalidData` saying what is wrong
        (for ``randomize`` called directly by the holder of the data)."""
        array = as_array(values, owner=self.name, field=field)
        if array.size and (array.dtype.kind not in "biuf"):
            raise InvalidData(
                f"{self.name}: {field} must be real numbers, got an array of "
                f"{describe_dtype(array)}",
                field=field,
            )
        x = array.astype(np.float64)
        bad = ~((x >= self.lower) & (x <= self.upper))  # NaN fails both comparisons
        if bad.any():
            first = plain(x.flat[int(np.flatnonzero(bad.ravel())[0])])
            raise InvalidData(
                f"{self.name}: {field} contain {first!r}, outside [{self.lower:g}, "
                f"{self.upper:g}] ({int(np.count_nonzero(bad))} value(s) NaN or out of range); "
                "clip them, or release through a Session, which clamps them",
                field=field,
            )
        return x

    # -- session hooks -------------------------------------------------------------------------

    def _check_structure(self, array: NDArray[Any]) -> None:
        if array.ndim != 1:
            raise InvalidData(
                f"{self.name}: values must be a 1-D array, one number per user, got shape "
                f"{array.shape}",
                field="values",
            )

    def check_input(self, values: Any, /) -> None:
        """Public phase: the array's shape and dtype kind only (see the module docstring)."""
        array = as_array(values, owner=self.name)
        self._check_structure(array)
        if array.dtype.kind not in _NUMERIC_KINDS:
            raise InvalidData(
                f"{self.name}: values must be real numbers, got an array of "
                f"{describe_dtype(array)}",
                field="values",
            )

    def coerce(self, values: Any, /, *, rng: Any = None) -> NDArray[np.float64]:
        """Private phase: non-numbers → the midpoint, everything clamped into the bounds."""
        floats = total_floats(values)
        floats[np.isnan(floats)] = self.midpoint
        clamped: NDArray[np.float64] = np.clip(floats, self.lower, self.upper)
        return clamped


@attrs.frozen
class VectorMechanism(NumericMechanism):
    """Base of the local mechanisms on one vector of ``[lower, upper]^d``: inputs (n, d)."""

    dimension: int = parameter(
        Integer(low=1, high=1 << 12), doc="number d of numeric attributes per user", default=4
    )

    @property
    def domain(self) -> Box:
        return Box.cube(self.lower, self.upper, self.dimension)

    def _check_structure(self, array: NDArray[Any]) -> None:
        if array.ndim != 2 or array.shape[1] != self.dimension:
            raise InvalidData(
                f"{self.name}: values must be a 2-D array of shape (users, {self.dimension}), "
                f"one row per user, got shape {array.shape}",
                field="values",
            )

    def _check_rows(self, shape: tuple[int, ...]) -> None:
        """``log_probability``'s operands must broadcast to rows of d values (decided from the
        shapes alone, before any value is read)."""
        if not shape or shape[-1] != self.dimension:
            raise ValueError(
                f"{self.name}: outputs and inputs must broadcast to rows of {self.dimension} "
                f"values, got shape {shape}"
            )

    def _scored(self, outputs: Any, inputs: Any) -> Any:
        """``log_probability`` by the subclass's ``_log_probability(xp, device, y, x)``: on the
        device of an accelerator's operand (the shapes, then the dtypes, checked before any
        value is read), else with numpy on the host — one formula for both."""
        operands = device_operands(outputs, inputs, owner=self.name)
        if operands is not None:
            self._check_rows(operands.shape)
            y, x = operands.reals(owner=self.name)
            with np.errstate(divide="ignore"):  # a numpy-backed namespace's warning for log 0
                return self._log_probability(operands.library.xp, operands.library.device, y, x)
        y = np.asarray(outputs, dtype=np.float64)
        x = np.asarray(inputs, dtype=np.float64)
        self._check_rows(np.broadcast_shapes(y.shape, x.shape))
        with np.errstate(divide="ignore"):
            return np.asarray(self._log_probability(np, None, y, x), dtype=np.float64)

    def _log_probability(self, xp: Any, device: Any, y: Any, x: Any) -> Any:
        """log P[y | x] of float64 arrays of the namespace ``xp`` on ``device`` (numpy's on
        the host): the subclass's formula, shared by both paths."""
        raise NotImplementedError

    def _rows(self, values: Any) -> NDArray[np.float64]:
        """Rows of d values of the domain (any leading shape), checked, in standard units."""
        x = self.checked_values(values)
        if x.ndim < 1 or x.shape[-1] != self.dimension:
            raise InvalidData(
                f"{self.name}: values must have {self.dimension} columns (one row per user), "
                f"got shape {x.shape}",
                field="values",
            )
        return self.standardize(x.reshape(-1, self.dimension))
