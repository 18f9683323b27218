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
    "MissingDependency",
    "PluginConflict",
    "PluginError",
    "ReleaseFailed",
    "SpecError",
    "SqlError",
    "UnknownMechanism",
    "UnsupportedRandomness",
]


_SHOWN_ITEMS = 10


class _Abridged(str):
    """The text of a long array, shown as is (its repr is the text itself)."""

    def __repr__(self) -> str:
        return str(self)


def plain_value(value: Any) -> Any:
    """``value`` with numpy scalars and arrays turned into plain Python values (``7``, not
    ``np.int64(7)``; a list, not ``array([...])``), also inside lists, tuples and dicts, so that
    a message quotes what the user would have typed. Anything else is returned unchanged."""
    if isinstance(value, type) and value.__module__.split(".")[0] == "numpy":
        return _Abridged(value.__name__)  # a scalar type such as numpy.int64: its name
    module = type(value).__module__.split(".")[0]
    if module == "numpy" and not hasattr(value, "tolist"):
        return _Abridged(str(getattr(value, "name", value)))  # a dtype: "int64", not a repr
    if module == "numpy":
        size = getattr(value, "size", 1)
        if getattr(value, "ndim", 0) and size > _SHOWN_ITEMS:
            head = value.reshape(-1)[:_SHOWN_ITEMS].tolist()
            return _Abridged(f"[{', '.join(map(repr, head))}, ...] ({size} values)")
        return value.tolist()
    if isinstance(value, (list, tuple)):
        items = [plain_value(item) for item in value]
        return items if isinstance(value, list) else tuple(items)
    if isinstance(value, dict):
        return {plain_value(k): plain_value(v) for k, v in value.items()}
    return value


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
        path: where the parameter sits in a query's JSON form, as field names
            (``("privacy_unit", "max_rows")``), where it has one there; ``()`` otherwise.
    """

    code = "invalid_parameter"

    def __init__(
        self,
        parameter: str,
        value: Any,
        allowed: str,
        *,
        owner: str | None = None,
        path: tuple[str, ...] = (),
    ):
        self.parameter = parameter
        self.value = value
        self.allowed = allowed
        self.owner = owner
        self.path = path
        where = f"{owner}: " if owner else ""
        super().__init__(
            f"{where}{parameter}={plain_value(value)!r} is not allowed; "
            f"{parameter} must be {allowed}"
        )


class InvalidData(DPKitError, ValueError):
    """Input data (values, reports, counts) that a mechanism or estimator cannot accept."""

    code = "invalid_data"

    def __init__(self, message: str, *, field: str = "values"):
        self.field = field
        super().__init__(message)


class MissingDependency(DPKitError, ImportError):
    """An optional dependency is not installed; the message names the extra that installs it:
    ``dpkit audit needs scipy: pip install 'dpkit[audit]'``.

    Attributes:
        package: the missing import (``"scipy"``).
        extra: the dpkit extra that installs it (``"audit"``).
        needed_by: what needs it (a command such as ``"dpkit audit"``, or a feature;
            ``plural=True`` for a plural one such as ``"table inputs"``).
    """

    code = "missing_dependency"

    def __init__(
        self, package: str, extra: str, *, needed_by: str = "this feature", plural: bool = False
    ):
        self.package = package
        self.extra = extra
        self.needed_by = needed_by
        verb = "need" if plural else "needs"  # "CSV and Parquet inputs need pyarrow"
        super().__init__(f"{needed_by} {verb} {package}: pip install 'dpkit[{extra}]'")


class UnknownMechanism(DPKitError, KeyError):
    """No registered plugin provides a mechanism of this name."""

    code = "unknown_mechanism"

    def __init__(
        self,
        name: str,
        known: Iterable[str],
        *,
        kind: str = "mechanism",
        failed: Iterable[str] = (),
    ):
        self.name = name
        self.kind = kind
        self.known = sorted(known)
        #: The plugins that failed to load, each with why: the name may be one of theirs.
        self.failed = list(failed)
        self.suggestions = difflib.get_close_matches(name, self.known, n=3, cutoff=0.5)
        hint = (
            f"; did you mean {' or '.join(map(repr, self.suggestions))}?"
            if self.suggestions
            else "."
        )
        listing = ", ".join(self.known) if self.known else "none (no plugin is loaded)"
        broken = (
            f". Plugins that failed to load (it may be one of theirs): {'; '.join(self.failed)}"
            if self.failed
            else ""
        )
        super().__init__(f"unknown {kind} {name!r}{hint} Known {kind}s: {listing}{broken}")

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
    """A JSON spec (or another JSON document a user gives) is invalid. ``pointer`` is the JSON
    Pointer of the offending field and ``reason`` what is wrong with it."""

    code = "invalid_spec"

    def __init__(self, message: str, *, pointer: str = "", rule: str = ""):
        self.pointer = pointer
        self.rule = rule
        self.reason = message
        super().__init__(f"{pointer or '/'}: {message}")


class SqlError(DPKitError):
    """A SQL statement dpkit cannot release: a syntax error, an unknown table, column or
    option, or a clause whose sensitivity cannot be derived (a join of private tables, a
    subquery that aggregates, a window function, ...). Raised before any row is read.

    Attributes:
        clause: the clause or construct refused (``"WHERE"``, ``"window function"``, ...).
        line, column: where it starts in the statement (1-based; 0 when not known).
        reason: what is wrong and what is allowed.
    """

    code = "invalid_sql"

    def __init__(self, reason: str, *, clause: str, line: int = 0, column: int = 0):
        self.clause = clause
        self.line = line
        self.column = column
        self.reason = reason
        where = f" at line {line}, column {column}" if line else ""
        super().__init__(f"SQL {clause}{where}: {reason}")


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


class UnsupportedRandomness(DPKitError, AttributeError):
    """A random generator lacks the sampler a mechanism asked for.

    A :class:`~dpkit.randomness.SecureRandom` has no float samplers (``laplace``, ``normal``,
    ...): their outputs leak through their low bits. A mechanism that calls one cannot run in
    secure mode, and this error says so; it is also an ``AttributeError``, so ``hasattr`` on
    a generator keeps working. The auditor reports such a mode as refused.
    """

    code = "unsupported_randomness"


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
