"""Every mechanism and estimator method that takes arrays accepts the arrays of any array-API
library, and gives back the caller's type.

:class:`~dpkit.mechanism.Mechanism` and :class:`~dpkit.estimator.Estimator` wrap the methods a
subclass defines (``randomize``, ``randomize_graph``, ``log_probability``, ``accumulate``) with
:func:`array_method`, so a plugin author writes numpy code and gets the other libraries for
free:

* numpy arrays, lists and scalars go straight through;
* a host array of another library (a torch CPU tensor, a CPU JAX array, an array-api-strict
  array) is passed as a zero-copy numpy view, and an array result comes back as the caller's
  type (the same law and speed as numpy: the method does not know the difference);
* an array on an accelerator reaches the method itself only if its class names the method in
  ``device_methods`` (it computes there, e.g. with :func:`dpkit.tensors.bits.flip_bits`);
  otherwise it is an :class:`~dpkit.errors.InvalidData` that says so before anything is drawn —
  never a silent copy to the host and back.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from dpkit.errors import InvalidData
from dpkit.tensors.device_random import host_rng
from dpkit.tensors.libraries import ArrayLibrary, array_library, detached

__all__ = ["ARRAY_METHODS", "array_method"]

#: The methods taking arrays, with the names of their array arguments (positional-only).
ARRAY_METHODS: dict[str, tuple[str, ...]] = {
    "randomize": ("values",),
    "randomize_graph": ("adjacency",),
    "log_probability": ("outputs", "inputs"),
    "accumulate": ("reports",),
}
_WRAPPED = "__dpkit_array_method__"


def _owner(instance: Any) -> str:
    mechanism = getattr(instance, "mechanism", None)
    return str(
        getattr(instance, "name", None) or getattr(mechanism, "name", type(instance).__name__)
    )


def _back(library: ArrayLibrary, result: Any) -> Any:
    if isinstance(result, np.generic) and result.dtype != object:  # numpy's 0-d results
        return library.from_host(np.asarray(result))
    if isinstance(result, np.ndarray) and result.dtype != object:
        return library.from_host(result)
    if isinstance(result, tuple) and not hasattr(result, "_fields"):
        return tuple(_back(library, item) for item in result)
    return result


def array_method(method: Callable[..., Any], fields: tuple[str, ...]) -> Callable[..., Any]:
    """``method`` taking the arrays of any library in its leading positional ``fields``."""
    if getattr(method, _WRAPPED, False):
        return method

    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        arrays = args[: len(fields)]
        libraries = [
            array_library(value, owner=_owner(self), field=field)
            for value, field in zip(arrays, fields, strict=False)
        ]
        found = [library for library in libraries if library is not None]
        if not found:
            return method(self, *args, **kwargs)
        library = found[0]
        args = (*(detached(value) for value in arrays), *args[len(fields) :])
        if not all(item.on_host for item in found):
            if method.__name__ in getattr(self, "device_methods", ()):
                return method(self, *args, **kwargs)
            field = fields[libraries.index(next(item for item in found if not item.on_host))]
            raise InvalidData(
                f"{_owner(self)}: {field} is a {library.name} array on {library.device}, and "
                f"{_owner(self)}.{method.__name__} has no device path yet; pass a host array "
                "(e.g. tensor.cpu())",
                field=field,
            )
        views = [
            value if found_library is None else found_library.host_view(value)
            for value, found_library in zip(arrays, libraries, strict=True)
        ]
        if "rng" in kwargs:
            kwargs["rng"] = host_rng(kwargs["rng"], owner=_owner(self))
        return _back(library, method(self, *views, *args[len(fields) :], **kwargs))

    setattr(wrapper, _WRAPPED, True)
    return wrapper


def _rebind_class_cell(function: Callable[..., Any], cls: type) -> None:
    """Point a method's ``__class__`` cell (zero-argument ``super()``) at ``cls``.

    ``attrs`` builds a slotted class as a *new* class from the old one's dict and rebinds the
    ``__class__`` cells of the functions it finds there; a wrapped method's own function is not
    one of them, so its ``super()`` would still name the old class. The new class arrives here
    (``__init_subclass__``) with the same module and qualified name as the old one.
    """
    for cell in getattr(function, "__closure__", None) or ():
        try:
            contents = cell.cell_contents
        except ValueError:  # an empty cell
            continue
        if (
            isinstance(contents, type)
            and contents is not cls
            and contents.__qualname__ == cls.__qualname__
            and contents.__module__ == cls.__module__
        ):
            cell.cell_contents = cls


def wrap_array_methods(cls: type) -> None:
    """Wrap the array methods ``cls`` itself defines (called from ``__init_subclass__``)."""
    for name, fields in ARRAY_METHODS.items():
        method = cls.__dict__.get(name)
        if not callable(method):
            continue
        if getattr(method, _WRAPPED, False):  # attrs's slotted copy of a wrapped class
            _rebind_class_cell(method.__wrapped__, cls)
        else:
            setattr(cls, name, array_method(method, fields))
