"""Shared helpers for command output."""

from __future__ import annotations

import sys

from dpkit._enclosure import rounded
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
    widths = [max(len(str(c)) for c in column) for column in zip(headers, *rows, strict=False)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=False)).rstrip()]
    lines.append("  ".join("-" * w for w in widths))
    lines += [
        "  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=False)).rstrip()
        for row in rows
    ]
    return "\n".join(lines)
