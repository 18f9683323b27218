"""Shared helpers for command output."""

from __future__ import annotations

import sys

from dpkit._enclosure import rounded
from dpkit._summary import text_table
from dpkit.registry import Registry

__all__ = ["rounded", "table", "warn_plugin_failures"]


def warn_plugin_failures(registry: Registry) -> None:
    """Print one warning line per plugin that failed to load (the others still work)."""
    for failure in registry.failures:
        source = f" (distribution {failure.distribution})" if failure.distribution else ""
        print(
            f"dpkit: warning: plugin {failure.plugin!r}{source} failed to load: {failure.error}",
            file=sys.stderr,
        )


def table(rows: list[list[str]], headers: list[str]) -> str:
    """A plain aligned text table."""
    return text_table(rows, headers)
