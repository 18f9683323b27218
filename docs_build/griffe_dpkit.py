"""A griffe extension for the API reference (mkdocs.yml: mkdocstrings' ``extensions``).

dpkit's docstrings are written for readers of the source (reST-flavoured: ``:class:`X```
roles, ``>>>`` doctests, ``::`` before a literal block); mkdocstrings renders docstrings as
Markdown, where those would show as stray colons and nested block quotes. The extension rewrites
them as they are loaded, leaving the source alone: a role becomes inline code, a doctest a
``pycon`` code block, ``::`` a colon.

``dpkit.mechanism`` is both a submodule (``dpkit/mechanism.py``) and, at run time, the function
defined in ``dpkit/__init__.py`` (which replaces the submodule attribute once the package is
imported). griffe's static model keeps the submodule under that name, so the function would be
missing from the reference. This extension keeps the function as a second member of ``dpkit``
(still named, and rendered as, ``dpkit.mechanism``), while the submodule stays reachable for the
aliases that point into it (``dpkit.Mechanism`` is ``dpkit.mechanism.Mechanism``).
"""

from __future__ import annotations

import re
from typing import Any

import griffe

#: ``:class:`dpkit.Mechanism``` (or ``:func:`~dpkit.estimate```): a Sphinx cross-reference role.
ROLE = re.compile(r":(?:py:)?(?:class|func|meth|mod|attr|data|exc|obj|const|ref):`(~?)([^`]+)`")
LITERAL_BLOCK_MARKER = re.compile(r"(\S)\s*::$", re.M)

#: (package, name): functions of a package's ``__init__`` shadowed by a submodule of that name.
SHADOWED = {("dpkit", "mechanism")}


def _role(match: re.Match[str]) -> str:
    target = match[2].strip()
    if match[1]:  # ~a.b.C shows C
        target = target.rsplit(".", 1)[-1]
    return f"`{target}`"


def _doctests(text: str) -> str:
    """Fences every run of ``>>>`` lines (with their continuation and output lines)."""
    lines, out, i = text.split("\n"), [], 0
    while i < len(lines):
        line = lines[i]
        if not line.lstrip().startswith(">>>"):
            out.append(line)
            i += 1
            continue
        indent = line[: len(line) - len(line.lstrip())]
        block = []
        while i < len(lines) and lines[i].strip() and lines[i].startswith(indent):
            block.append(lines[i][len(indent) :])
            i += 1
        if out and out[-1].strip():
            out.append("")
        out += [f"{indent}```pycon", *(indent + b for b in block), f"{indent}```"]
        if i < len(lines) and lines[i].strip():
            out.append("")
    return "\n".join(out)


def markdown_docstring(text: str) -> str:
    """A reST-flavoured docstring as Markdown (see the module docstring)."""
    text = ROLE.sub(_role, text)
    text = _doctests(text)
    return LITERAL_BLOCK_MARKER.sub(r"\1:", text)


class DocstringsAsMarkdown(griffe.Extension):
    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = markdown_docstring(obj.docstring.value)


class OneAttributeLabel(griffe.Extension):
    """An attrs field (``x: int = 0``, or ``= attrs.field(...)``) is written in the class body,
    so griffe labels it both ``class-attribute`` and ``instance-attribute``: two badges on
    every field of every value class. It is an instance's attribute (attrs makes ``__init__``
    set it; a class-level default is not one to use), so only that label is kept; a ``ClassVar``
    keeps its single ``class-attribute``."""

    def on_class_members(self, *, cls: griffe.Class, **kwargs: Any) -> None:
        for member in cls.members.values():
            if member.is_alias or not member.is_attribute:
                continue
            if {"class-attribute", "instance-attribute"} <= member.labels:
                member.labels.discard("class-attribute")


class ShadowedFunctions(griffe.Extension):
    def __init__(self) -> None:
        super().__init__()
        self._functions: dict[tuple[str, str], griffe.Function] = {}

    def on_function_instance(self, *, func: griffe.Function, **kwargs: Any) -> None:
        parent = func.parent
        if parent is not None and (parent.path, func.name) in SHADOWED:
            self._functions[(parent.path, func.name)] = func

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        for (package, name), func in self._functions.items():
            if package == pkg.path and pkg.members.get(name) is not func:
                pkg.members[f"{name} (function)"] = func
