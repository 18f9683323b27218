"""JAX arrays for the tensor tests, with 64-bit types enabled (dpkit refuses JAX without them).

JAX is a test dependency; where it is not installed the layouts that use it are left out (the
tests that need it directly skip with the reason). Enabling x64 is process-wide and only JAX
arrays made afterwards are 64-bit: the tensor tests are the only users of JAX, and the refusal
test that turns it off restores it (:func:`without_x64`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import numpy as np

try:
    import jax
    import jax.numpy as jnp
except ImportError:  # pragma: no cover - JAX is in the test extra
    jax = None
    jnp = None
else:
    jax.config.update("jax_enable_x64", True)

#: The property tests' layout name for a JAX array, when JAX is installed.
LAYOUTS: tuple[str, ...] = ("jax",) if jax is not None else ()


def asarray(values: Any) -> Any:
    """A JAX array (on JAX's default device, the CPU here) holding ``values``'s dtype."""
    assert jnp is not None
    return jnp.asarray(np.asarray(values))


def is_jax(values: Any) -> bool:
    return jax is not None and isinstance(values, jax.Array)


def to_numpy(values: Any) -> np.ndarray[Any, Any]:
    return np.asarray(values)


@contextlib.contextmanager
def without_x64() -> Iterator[None]:
    """JAX's default configuration (32-bit types) inside the block."""
    assert jax is not None
    jax.config.update("jax_enable_x64", False)
    try:
        yield
    finally:
        jax.config.update("jax_enable_x64", True)
