"""Optional dependencies of the commands, checked before a command starts any work.

``dpkit audit`` needs scipy (``pip install 'dpkit[audit]'``) and ``dpkit plot`` needs matplotlib
(``pip install 'dpkit[plot]'``). A command calls :func:`require` first, so a missing extra is a
one-line :class:`~dpkit.errors.MissingDependency` (exit code 2) rather than a failure half-way.
The check only looks the package up (``importlib.util.find_spec``); it never imports it, so
``dpkit --help`` and the other commands stay fast and work without the extras.
"""

from __future__ import annotations

import importlib.util

from dpkit.errors import MissingDependency

__all__ = ["AUDIT", "PLOT", "installed", "require"]

#: (package, extra) pairs.
AUDIT = ("scipy", "audit")
PLOT = ("matplotlib", "plot")


def installed(package: str) -> bool:
    """Whether ``package`` can be imported (found on the path), without importing it."""
    try:
        return importlib.util.find_spec(package) is not None
    except (ImportError, ValueError):  # ValueError: sys.modules[package] is None (blocked)
        return False


def require(command: str, *needs: tuple[str, str]) -> None:
    """Raise :class:`MissingDependency` for the first of ``needs`` that is not installed:
    ``dpkit audit needs scipy: pip install 'dpkit[audit]'``."""
    for package, extra in needs:
        if not installed(package):
            raise MissingDependency(package, extra, needed_by=command)
