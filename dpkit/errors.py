"""The errors dpkit raises: one root class, one subclass per kind of mistake.

Every message names what was wrong (the parameter, field or plugin), the value that was given,
and what is allowed, so that a command-line user never needs a traceback to fix their input.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import Any

__all__ = [
    "BudgetExceeded",
    "DPKitError",
    "InvalidData",
    "InvalidParameter",
    "PluginConflict",
    "PluginError",
    "ReleaseFailed",
    "SpecError",
    "UnknownMechanism",
]


class DPKitError(Exception):
    """Root of every error dpkit raises on purpose."""

    #: A short machine-readable code, used in JSON error reports.
    code: str = "dpkit_error"


class InvalidParameter(DPKitError, ValueError):
    """A mechanism or function parameter is outside its allowed domain.

    Attributes:
        parameter: the parameter's name.
        value: the value that was given.
        allowed: a human description of the allowed values.
        owner: what the parameter belongs to (a mechanism name or a function), if known.
    """

    code = "invalid_parameter"

    def __init__(self, parameter: str, value: Any, allowed: str, *, owner: str | None = None):
        self.parameter = parameter
        self.value = value
        self.allowed = allowed
        self.owner = owner
        where = f"{owner}: " if owner else ""
        super().__init__(
            f"{where}{parameter}={value!r} is not allowed; {parameter} must be {allowed}"
        )


class InvalidData(DPKitError, ValueError):
    """Input data (values, reports, counts) that a mechanism or estimator cannot accept."""

    code = "invalid_data"

    def __init__(self, message: str, *, field: str = "values"):
        self.field = field
        super().__init__(message)


class UnknownMechanism(DPKitError, KeyError):
    """No registered plugin provides a mechanism of this name."""

    code = "unknown_mechanism"

    def __init__(self, name: str, known: Iterable[str], *, kind: str = "mechanism"):
        self.name = name
        self.kind = kind
        self.known = sorted(known)
        self.suggestions = difflib.get_close_matches(name, self.known, n=3, cutoff=0.5)
        hint = (
            f"; did you mean {' or '.join(map(repr, self.suggestions))}?"
            if self.suggestions
            else "."
        )
        listing = ", ".join(self.known) if self.known else "none (no plugin is loaded)"
        super().__init__(f"unknown {kind} {name!r}{hint} Known {kind}s: {listing}")

    def __str__(self) -> str:  # KeyError would otherwise quote the whole message
        return str(self.args[0])


class BudgetExceeded(DPKitError):
    """A release would spend more privacy budget than remains. Nothing was spent or released."""

    code = "budget_exceeded"

    def __init__(self, requested: Any, remaining: Any, *, detail: str = ""):
        self.requested = requested
        self.remaining = remaining
        extra = f" ({detail})" if detail else ""
        super().__init__(
            f"budget exceeded: requested {requested}, remaining {remaining}{extra}; "
            "nothing was spent or released"
        )


class SpecError(DPKitError):
    """A JSON spec is invalid. ``pointer`` is the JSON Pointer of the offending field."""

    code = "invalid_spec"

    def __init__(self, message: str, *, pointer: str = "", rule: str = ""):
        self.pointer = pointer
        self.rule = rule
        super().__init__(f"{pointer or '/'}: {message}")


class PluginError(DPKitError):
    """A plugin could not be loaded or registered something invalid."""

    code = "plugin_error"

    def __init__(self, message: str, *, plugin: str | None = None):
        self.plugin = plugin
        super().__init__(message)


class PluginConflict(PluginError):
    """Two plugins registered the same name. Names are never silently renamed."""

    code = "plugin_conflict"

    def __init__(self, kind: str, name: str, first: str, second: str):
        self.kind = kind
        self.name = name
        self.plugins = (first, second)
        super().__init__(
            f"{kind} {name!r} is registered by both plugin {first!r} and plugin {second!r}; "
            f"disable one with DPKIT_DISABLE_PLUGINS={second}",
            plugin=second,
        )


class ReleaseFailed(DPKitError):
    """A release failed in its private phase, after its budget was durably spent.

    The spend is kept (a spend is never given back once private data were read), and the
    message never contains the failing code's own message or exception type, which may depend
    on the data. Built-in mechanisms and queries are total over their declared domains and never
    cause this; a third-party plugin that raises on some data does.
    """

    code = "release_failed"
    exit_code = 1

    def __init__(self, target: str, release_id: str):
        self.target = target
        self.release_id = release_id
        super().__init__(
            f"{target} failed after its budget was spent (release {release_id}); the spend is "
            "kept, and the failure's details are withheld because they may depend on the "
            "private data. Built-in mechanisms never fail here: report it to the plugin's author"
        )
