"""The spec schemas rendered as Markdown reference tables (the docs' spec page, ``dpkit schema --markdown``).

Generated from the composed schemas, so the reference cannot drift from what is validated: every
object gets a table of its fields (required or not, what is allowed, what it means), and every
statistic and frequency mechanism a table of its parameters.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import attrs

from dpkit.registry import Registry
from dpkit.spec.schema import (
    FREQUENCY,
    HEAVY_HITTERS,
    MEAN,
    budget_schema,
    compose_schema,
    local_mechanisms,
    params_schema,
)

__all__ = ["schema_reference"]

_BOUNDS = (
    ("minimum", "≥"),
    ("exclusiveMinimum", ">"),
    ("maximum", "≤"),
    ("exclusiveMaximum", "<"),
    ("minLength", "length ≥"),
    ("maxLength", "length ≤"),
    ("minItems", "items ≥"),
    ("maxItems", "items ≤"),
)


@attrs.frozen
class _Section:
    anchor: str
    title: str
    schema: dict[str, Any]


def _code(value: Any) -> str:
    return f"`{json.dumps(value, ensure_ascii=False)}`"


def _number(value: Any) -> str:
    """A bound as written in the schema: whole floats without ``.0``, others as their shortest
    decimal (``0.999999999``, not ``1``: a rounded bound would misstate what is allowed)."""
    if isinstance(value, float):
        if value.is_integer() and abs(value) < 1e6:
            return str(int(value))
        if value.is_integer() and abs(value) < 1e16:  # 1e12, not 1000000000000.0
            return str(Decimal(repr(value)).normalize()).lower()
        return repr(value)
    return str(value)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _forbidding_rule(schema: dict[str, Any]) -> str | None:
    """``if {x: const v} then {not: {required: [y]}}`` as a sentence (e.g. no seed in secure mode)."""
    condition = schema.get("if", {}).get("properties", {})
    forbidden = schema.get("then", {}).get("not", {}).get("required", [])
    if len(condition) != 1 or not forbidden:
        return None
    ((field, test),) = condition.items()
    if "const" not in test:
        return None
    names = ", ".join(f"`{name}`" for name in forbidden)
    return f"When `{field}` is {_code(test['const'])}, {names} must not be given."


class _Renderer:
    def __init__(self, prefix: str, defs: dict[str, Any]) -> None:
        self.prefix = prefix
        self.defs = defs
        self.queue: list[_Section] = []
        self.seen: set[str] = set()

    def resolve(self, schema: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
        ref = schema.get("$ref")
        if not isinstance(ref, str):
            return schema, None
        name = ref.rsplit("/", 1)[-1]
        return self.defs[name], name

    def link(self, name: str, schema: dict[str, Any]) -> str:
        anchor = f"{self.prefix}-{name}".replace("[]", "-item").replace("_", "-").replace(".", "-")
        if anchor not in self.seen:
            self.seen.add(anchor)
            self.queue.append(_Section(anchor, name, schema))
        return f"object, see [{name}](#{anchor})"

    def allowed(self, schema: dict[str, Any], path: str) -> str:
        resolved, ref = self.resolve(schema)
        kind = resolved.get("type", "object")
        if "properties" in resolved and (kind == "object" or kind == ["object", "null"]):
            nullable = " or null" if isinstance(kind, list) else ""
            return self.link(ref or path, resolved).replace("object,", f"object{nullable},", 1)
        parts: list[str] = []
        if "const" in resolved:
            parts.append(f"exactly {_code(resolved['const'])}")
        if "enum" in resolved:
            parts.append("one of " + ", ".join(_code(v) for v in resolved["enum"]))
        kind = resolved.get("type")
        if kind == "array":
            items = resolved.get("items", {})
            parts.append(f"array of {self.allowed(items, path + '[]')}")
        elif isinstance(kind, list):
            parts.append(" or ".join(kind))
        elif kind:
            parts.append(kind)
        parts.extend(f"{word} {_number(resolved[key])}" for key, word in _BOUNDS if key in resolved)
        if "pattern" in resolved:
            parts.append(f"matching `{resolved['pattern']}`")
        return ", ".join(parts) or "any JSON value"

    def table(self, schema: dict[str, Any], path: str) -> list[str]:
        required = set(schema.get("required", ()))
        lines = ["| field | required | allowed | meaning |", "|---|---|---|---|"]
        for name, prop in schema.get("properties", {}).items():
            resolved, _ = self.resolve(prop)
            meaning = prop.get("description") or resolved.get("description", "")
            allowed = self.allowed(prop, f"{path}.{name}" if path else name)
            lines.append(
                f"| `{name}` | {'yes' if name in required else 'no'} | {_cell(allowed)} | {_cell(meaning)} |"
            )
        rule = _forbidding_rule(schema)
        if rule:
            lines.extend(["", rule])
        if schema.get("additionalProperties") is False:
            lines.extend(["", "No other fields are allowed."])
        return lines

    def sections(self, title: str, anchor: str, schema: dict[str, Any]) -> Iterator[str]:
        yield f"## {title} {{#{anchor}}}"
        yield ""
        if schema.get("description"):
            yield schema["description"]
            yield ""
        yield from self.table(schema, "")
        while self.queue:
            section = self.queue.pop(0)
            yield ""
            yield f"### {section.title} {{#{section.anchor}}}"
            yield ""
            if section.schema.get("description"):
                yield section.schema["description"]
                yield ""
            yield from self.table(section.schema, section.title)


def _budget_line(cls: type[Any], params_at: tuple[str, ...]) -> str:
    """What ``budget`` may hold for a class (:func:`~dpkit.spec.schema.budget_schema`)."""
    rule = budget_schema(cls, params_at)
    renderer = _Renderer("", {})
    fields = rule["properties"]["budget"]["properties"]
    text = f"Budget: `epsilon` {renderer.allowed(fields['epsilon'], 'epsilon')}"
    if "if" in rule:
        ((other, test),) = rule["if"]["properties"][params_at[-1]]["properties"].items()
        delta = rule["then"]["properties"]["budget"]["properties"]["delta"]
        text += (
            f"; `delta` {renderer.allowed(delta, 'delta')}, required when `{other}` is "
            f"{_code(test['const'])} and otherwise 0 or absent."
        )
    elif "const" in fields["delta"]:
        text += "; no `delta` (0 or absent)."
    else:
        domain = fields["delta"]["anyOf"][1]
        text += f"; `delta` 0 or absent, or {renderer.allowed(domain, 'delta')}."
    return text


def _params_tables(
    heading: str, anchor: str, items: dict[str, type[Any]], params_at: tuple[str, ...]
) -> Iterator[str]:
    yield f"## {heading} {{#{anchor}}}"
    yield ""
    for name, cls in items.items():
        schema = params_schema(cls)
        yield f"### {name} {{#{anchor}-{name.replace('_', '-')}}}"
        yield ""
        if not schema["properties"]:
            yield "No parameters besides the budget."
        else:
            yield from _Renderer(anchor, {}).table(schema, "")
        for group in schema.get("allOf", []):  # alternatives: one of them must be given
            names = ", ".join(f"`{option['required'][0]}`" for option in group["anyOf"])
            yield ""
            yield f"Give one of {names}."
        yield ""
        yield _budget_line(cls, params_at)
        yield ""


def schema_reference(kind: str, registry: Registry) -> str:
    """Markdown tables for the ``kind`` ('query', 'session', 'result') spec.

    For ``query`` this includes the parameters of every statistic (query plugin) and every local
    mechanism of ``registry`` for statistic ``frequency``, for ``heavy_hitters`` and for a local
    ``mean`` (a session's queries take the same); ``epsilon`` and ``delta`` come from the
    query's ``budget``, whose allowed values each class's section states after its table.
    """
    schema = compose_schema(kind, registry)
    renderer = _Renderer(kind, schema.get("$defs", {}))
    lines = list(renderer.sections(schema.get("title", kind), kind, schema))
    if kind == "query":
        lines.append("")
        queries = {name: registry.queries[name].cls for name in sorted(registry.queries)}
        lines.extend(
            _params_tables(f"Statistics ({kind} spec)", f"{kind}-statistics", queries, ("params",))
        )
        for statistic in (FREQUENCY, MEAN, HEAVY_HITTERS):
            mechanisms = {
                name: registry.mechanisms[name].cls
                for name in local_mechanisms(registry, statistic)
            }
            if mechanisms:
                lines.extend(
                    _params_tables(
                        f"Local mechanisms of statistic `{statistic}` ({kind} spec)",
                        f"{kind}-{statistic}",
                        mechanisms,
                        ("mechanism", "params"),
                    )
                )
    return "\n".join(lines).rstrip() + "\n"
