"""Spec problems, each pointing at the field it is about."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs

from dpkit.errors import DPKitError, SpecError

__all__ = ["SpecInvalid", "SpecIssue", "pointer"]

EXIT_INVALID = 2
EXIT_BUDGET = 3


def pointer(*parts: Any) -> str:
    """An RFC 6901 JSON Pointer from path parts (``pointer("queries", 2, "budget")``)."""
    escaped = (str(p).replace("~", "~0").replace("/", "~1") for p in parts)
    return "".join("/" + p for p in escaped)


@attrs.frozen
class SpecIssue:
    """One problem: where (JSON Pointer), which rule, what is wrong, and a stable code."""

    pointer: str
    code: str
    message: str
    rule: str = ""
    detail: dict[str, Any] = attrs.field(factory=dict)

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"pointer": self.pointer, "code": self.code, "message": self.message}
        if self.rule:
            out["rule"] = self.rule
        out.update(self.detail)
        return out


class SpecInvalid(SpecError):
    """A spec (or its data, or its cost) was refused; nothing was spent and nothing released.

    ``issues`` lists every problem found; ``exit_code`` is 3 when the only problem is the
    budget, else 2. As a :class:`~dpkit.errors.SpecError`, its ``pointer`` and ``rule`` are
    the first issue's.
    """

    code = "invalid_spec"

    def __init__(self, issues: Sequence[SpecIssue]):
        self.issues = list(issues)
        budget_only = all(issue.code == "budget_exceeded" for issue in self.issues)
        self.exit_code = EXIT_BUDGET if budget_only else EXIT_INVALID
        if budget_only:
            self.code = "budget_exceeded"
        # One line: the first problem, and how many more the JSON document lists.
        first = self.issues[0] if self.issues else SpecIssue("", "invalid_spec", "refused")
        self.pointer, self.rule, self.reason = first.pointer, first.rule, first.message
        more = len(self.issues) - 1
        extra = f" (and {more} more problem{'s' if more > 1 else ''})" if more > 0 else ""
        message = " ".join(f"{first.pointer or '/'}: {first.message} [{first.code}]".split())
        DPKitError.__init__(self, f"{message}{extra}; nothing was spent")

    def as_dict(self) -> dict[str, Any]:
        return {"errors": [issue.as_dict() for issue in self.issues], "spent": False}
