"""Which array library a caller's values come from, and the way between it and numpy.

dpkit's mechanisms accept the arrays of any library that implements the Python array API
standard (torch, CuPy, JAX, ``array-api-strict``, numpy) and return the caller's type on the
caller's device. :func:`array_library` tells the two cases apart before any value is read:

* an array in host memory (a numpy array, a torch CPU tensor, a CPU JAX or array-api-strict
  array) is computed by dpkit's numpy path on a zero-copy view (DLPack), so it keeps the laws,
  the secure samplers and the speed of that path; the result is handed back as the caller's type;
* an array on an accelerator (CUDA torch, CuPy) is computed there (:mod:`dpkit.tensors.bits`),
  never copied to the host.

A library without 64-bit types (JAX unless ``jax_enable_x64`` is set) is refused from its
configuration alone: dpkit's results are float64 and int64, which it would round or wrap.

Lists, tuples, scalars and numpy arrays are not "libraries" here: :func:`array_library` returns
``None`` for them and the caller's numpy path runs unchanged. The array libraries are imported
only when such an array is passed (``array-api-compat`` is the ``tensors`` extra).
"""

from __future__ import annotations

import sys
from typing import Any

import attrs
import numpy as np
from numpy.typing import NDArray

from dpkit.errors import InvalidData

__all__ = [
    "ArrayLibrary",
    "StandardUnits",
    "array_library",
    "clamped_float64",
    "detached",
    "reals_within",
]

#: The top-level modules whose arrays dpkit accepts through the array API (array-api-compat).
#: Dask collections are not among them: dpkit aggregates those partition by partition itself
#: (docs/scaling.md).
SUPPORTED = ("torch", "cupy", "jax", "jaxlib", "array_api_strict")
_SUPPORTED_WORDS = "numpy arrays, torch tensors (CPU or CUDA), CuPy and JAX arrays, or Python lists"


@attrs.frozen
class ArrayLibrary:
    """The array library of one input: its array-API namespace, its name and its device."""

    xp: Any = attrs.field(repr=False)
    name: str
    device: Any
    on_host: bool

    def host_view(self, values: Any) -> NDArray[Any]:
        """``values`` as a numpy array sharing their memory (DLPack; host arrays only).

        A torch tensor is read without its autograd graph (:func:`detached`), and a bfloat16
        array (torch's, JAX's), which numpy's DLPack cannot take, as float32 (a copy; every
        bfloat16 is a float32 exactly).
        """
        values = detached(values)
        if str(values.dtype).endswith("bfloat16"):  # decided by the dtype alone
            values = self.xp.astype(values, self.xp.float32)
        return np.from_dlpack(values)

    def small_to_host(self, array: Any) -> NDArray[Any]:
        """A small result computed on the device (counts, sums) copied to a numpy array: the
        one transfer a device estimator makes."""
        if self.name == "torch":
            return np.asarray(array.cpu().numpy())
        if self.name == "cupy":
            return np.asarray(array.get())
        if self.on_host:
            return np.asarray(np.from_dlpack(array))
        return np.asarray(array)  # JAX copies a device array to the host

    def from_host(self, array: NDArray[Any]) -> Any:
        """A numpy result as this library's array, of its shape (a 0-d result stays 0-d;
        zero-copy where the library allows)."""
        contiguous = np.require(array, requirements="C")  # ascontiguousarray makes 0-d 1-d
        try:
            return self.xp.from_dlpack(contiguous)
        except (AttributeError, BufferError, TypeError, RuntimeError):
            return self.xp.asarray(contiguous)


def _module_of(values: Any) -> str:
    return type(values).__module__.partition(".")[0]


def detached(values: Any) -> Any:
    """A torch tensor without its autograd graph (``tensor.detach()``: the same memory); any
    other value as it is. A release computed from a tensor that requires grad would carry a
    graph back to it, and so the private values themselves (the graph's leaf, and the inputs
    its steps save): every array method reads its arrays through this."""
    if _module_of(values) == "torch" and bool(getattr(values, "requires_grad", False)):
        return values.detach()
    return values


def _refuse_unreadable(values: Any, *, owner: str, field: str) -> None:
    """Refuse a torch tensor whose values no array operation reads as a dense array: a sparse
    layout, or the meta device (shapes without values). Decided from the type alone."""
    layout = str(getattr(values, "layout", "torch.strided"))
    if layout != "torch.strided":
        raise InvalidData(
            f"{owner}: {field} is a torch tensor of layout {layout}; give a dense tensor "
            "(tensor.to_dense())",
            field=field,
        )
    if str(getattr(values, "device", "")) == "meta":
        raise InvalidData(
            f"{owner}: {field} is a torch tensor on the meta device, which holds no values",
            field=field,
        )


def array_library(values: Any, *, owner: str, field: str = "values") -> ArrayLibrary | None:
    """The :class:`ArrayLibrary` of an array of a non-numpy library, or ``None`` for numpy
    arrays, Python sequences and scalars (the numpy path).

    An object that looks like an array (``__array_namespace__``, or ``__dlpack__`` without
    ``__array__``) from a library dpkit does not support, or a supported library's array without ``array-api-compat``
    installed, is an :class:`~dpkit.errors.InvalidData` that names its type and what is
    supported — decided from the type alone, never from a value.
    """
    if isinstance(values, (np.ndarray, np.generic, list, tuple, int, float, bool, complex)):
        return None
    module = _module_of(values)
    # An array-API object, or a DLPack exporter numpy cannot read through ``__array__``
    # (pandas, Polars and PyArrow columns have ``__array__`` and keep the numpy path).
    # Asked of the type: an instance's ``__getattr__`` may run work (a Spark Connect frame
    # analyses its plan on the server) or read a value.
    kind = type(values)
    looks_like_array = hasattr(kind, "__array_namespace__") or (
        hasattr(kind, "__dlpack__") and not hasattr(kind, "__array__")
    )
    if module not in SUPPORTED or module not in sys.modules:
        if looks_like_array:
            raise InvalidData(
                f"{owner}: {field} is a {type(values).__module__}.{type(values).__qualname__}, "
                f"an array type dpkit does not support; give {_SUPPORTED_WORDS}",
                field=field,
            )
        return None
    try:
        import array_api_compat
    except ImportError:
        raise InvalidData(
            f"{owner}: {field} is a {module} array, which needs the array-api-compat package: "
            "pip install 'dpkit[tensors]'",
            field=field,
        ) from None
    if not array_api_compat.is_array_api_obj(values):
        return None
    if module == "torch":
        _refuse_unreadable(values, owner=owner, field=field)
    xp = array_api_compat.array_namespace(values)
    name = "jax" if module == "jaxlib" else module  # JAX's arrays are jaxlib's type
    if not _has_64_bit_types(xp):
        raise InvalidData(
            f"{owner}: {field} is a {name} array without 64-bit types, and dpkit's results "
            "are float64 and int64 (narrower ones would round or wrap them); enable them, "
            "e.g. jax.config.update('jax_enable_x64', True)",
            field=field,
        )
    device = array_api_compat.device(values)
    return ArrayLibrary(xp=xp, name=name, device=device, on_host=_on_host(values, module))


def _has_64_bit_types(xp: Any) -> bool:
    """Whether the namespace's default integer is int64 (JAX's is int32 unless x64 is enabled,
    and then it has no float64 either): decided by the library's configuration alone."""
    info = getattr(xp, "__array_namespace_info__", None)
    if info is None:
        return True
    try:
        return bool(info().default_dtypes()["integral"] == xp.int64)
    except (AttributeError, KeyError, TypeError):
        return True


def _on_host(values: Any, module: str) -> bool:
    if module == "torch":
        return bool(values.device.type == "cpu")
    if module == "cupy":
        return False
    if module in ("jax", "jaxlib"):
        return all(d.platform == "cpu" for d in values.devices())
    return True


#: 64-bit integers are clamped to ±2⁵³ before they are read as doubles (:func:`clamped_float64`).
_EXACT_LIMIT = float(1 << 53)


def clamped_float64(xp: Any, values: Any) -> Any:
    """A real array of the namespace ``xp`` as float64, its integers clamped to ±2⁵³ (the host's
    ``exact_floats`` map, which the central mechanisms' sensitivities are stated for).

    Rounding 64-bit integers to the nearest double would expand distances (2⁵³ + 2 and
    2⁵³ + 3, one apart, become 2⁵³ + 2 and 2⁵³ + 4). The clamp is applied to the doubles,
    which every library can compare (torch has no comparisons of uint64): rounding to nearest
    is monotone and exact up to 2⁵³, and 2⁵³ is a double, so clip(fl(n), ±2⁵³) equals the
    integer clamp(n, ±2⁵³) for every integer n, a 1-Lipschitz map. Floats are read as they are.
    """
    x = xp.astype(values, xp.float64)
    if xp.isdtype(values.dtype, "integral"):
        x = xp.clip(x, min=-_EXACT_LIMIT, max=_EXACT_LIMIT)
    return x


def reals_within(
    library: ArrayLibrary, values: Any, lower: float, upper: float, *, owner: str, field: str
) -> Any:
    """``values`` flattened to float64 on their device, refused (typed, naming ``field``) unless
    their dtype is real and every value lies in [lower, upper]: the numeric mechanisms' input
    check on the device path, made before any word is drawn."""
    xp = library.xp
    if not xp.isdtype(values.dtype, ("bool", "integral", "real floating")):
        raise InvalidData(
            f"{owner}: {field} must be real numbers, got a {library.name} array of {values.dtype}",
            field=field,
        )
    x = xp.reshape(xp.astype(values, xp.float64), (-1,))
    if not bool(xp.all((x >= lower) & (x <= upper))):  # NaN fails both comparisons
        raise InvalidData(
            f"{owner}: {field} contain NaN or values outside [{lower:g}, {upper:g}]; clip "
            "them first",
            field=field,
        )
    return x


@attrs.frozen
class StandardUnits:
    """A numeric mechanism's input interval [lower, upper] and its standard units
    t = (x − centre)/scale: what every numeric device path checks values against and maps them
    by, with the CPU's arithmetic (each operation an IEEE 754 one, rounded alike everywhere)."""

    lower: float
    upper: float
    centre: float
    scale: float
