"""Two warnings about library versions, silenced only where an engine emits them.

narwhals 2.29 warns (``FutureWarning``) that its Dask support is moving into a separate
``narwhals-dask`` package, each time it wraps a Dask frame (``nw.from_native``); PySpark 4 warns
that it does not fully support pandas 3, each time it converts to or from pandas. Both are
about the installed libraries, not about the data. :func:`quiet` ignores exactly those two
messages inside its block and gives the caller's warning filters back when the block ends
(:class:`warnings.catch_warnings`): opening or querying a table never changes them.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator

__all__ = ["VERSION_WARNINGS", "quiet"]

#: The beginnings of the two messages :func:`quiet` ignores.
VERSION_WARNINGS = (
    "Dask support is moving out of Narwhals",
    "PySpark does not yet fully support pandas",
)


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """A block in which the two version warnings (module docstring), and nothing else, are
    ignored; the warning filters are as before once it ends."""
    with warnings.catch_warnings():
        for message in VERSION_WARNINGS:
            warnings.filterwarnings("ignore", message=message, category=FutureWarning)
        yield
