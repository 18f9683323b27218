"""Where a ledger lives: a file path, ``sqlite:///PATH``, ``":memory:"``, or a PostgreSQL URL."""

from __future__ import annotations

import os
import urllib.parse
from typing import Literal

from dpkit.errors import InvalidParameter

__all__ = ["ALLOWED", "Kind", "parse_location", "require_persistent"]

Kind = Literal["sqlite", "postgresql"]

#: What ``ledger=`` / ``--ledger`` accept, as error messages say it.
ALLOWED = "a file path, a sqlite:///PATH URL or a postgresql://HOST/DATABASE?ledger=NAME URL"
_POSTGRESQL_SCHEMES = ("postgresql://", "postgres://")
_MEMORY_ALLOWED = (
    "a file path, a sqlite:///PATH URL or a postgresql:// URL of a persistent ledger "
    "(':memory:' starts with a full budget every run)"
)


def _strip_url(text: str) -> str:
    """``sqlite:///PATH`` → ``PATH`` (``sqlite:////abs`` keeps its leading slashes)."""
    rest = text[len("sqlite://") :]
    return rest[1:] if rest.startswith("/") and not rest.startswith("//") else rest


def parse_location(ledger: str | os.PathLike[str]) -> tuple[Kind, str]:
    """``("sqlite", path)`` for a path or ``sqlite://`` URL (``":memory:"`` included), or
    ``("postgresql", url)``; :class:`~dpkit.errors.InvalidParameter` for anything else."""
    try:
        text = os.fspath(ledger)
    except TypeError:
        raise InvalidParameter("ledger", ledger, ALLOWED) from None
    if text.lower().startswith(_POSTGRESQL_SCHEMES):
        return "postgresql", text
    if "://" in text:
        if not text.startswith("sqlite://"):
            raise InvalidParameter(
                "ledger", _shown(text), f"{ALLOWED} (no other store is built in)"
            )
        text = _strip_url(text)
    if not text:
        raise InvalidParameter("ledger", ledger, ALLOWED)
    return "sqlite", text


def _shown(text: str) -> str:
    """A URL of an unknown scheme as an error may quote it: its scheme only. Where such a URL
    keeps a password (``user:pw@``, ``?password=``, a driver's own parameter) is unknown, and
    it may not even parse, so nothing after the scheme is shown."""
    return text.partition("://")[0] + "://..."


def _in_memory(target: str) -> bool:
    if target in ("", ":memory:"):
        return True
    if not target.startswith("file:"):
        return False
    body, _, query = target[len("file:") :].partition("?")
    if body.partition("#")[0] == ":memory:":
        return True
    modes = urllib.parse.parse_qs(query.partition("#")[0]).get("mode", [])
    return any(mode.lower() == "memory" for mode in modes)


def require_persistent(location: str | os.PathLike[str]) -> None:
    """Refuse a ledger location that does not persist (an in-memory database).

    A command-line run with an in-memory ledger would start with a full budget every time, so
    ``dpkit run`` and ``dpkit budget`` require a file or a database. Raises
    :class:`~dpkit.errors.InvalidParameter` for ``":memory:"``, ``""``, ``"sqlite:///:memory:"``,
    ``"file::memory:"`` and SQLite URIs with ``mode=memory``.
    """
    try:
        text = os.fspath(location)
    except TypeError:
        raise InvalidParameter("ledger", location, _MEMORY_ALLOWED) from None
    if text.lower().startswith(_POSTGRESQL_SCHEMES):
        return
    target = _strip_url(text) if text.startswith("sqlite://") else text
    if _in_memory(target):
        raise InvalidParameter("ledger", location, _MEMORY_ALLOWED)
