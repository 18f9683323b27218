"""The ZetaSQL differential-privacy syntax, taken out of a statement before it is parsed.

sqlglot parses standard SQL; the two additions of the ZetaSQL/BigQuery syntax are read here,
on sqlglot's own tokens:

* ``SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (name = value, ...)``: the options of the query;
* ``AGG(x, contribution_bounds_per_group => (lower, upper))``: an aggregate's clamping bounds.

Both are *blanked* out of the text (replaced by spaces, line breaks kept), so the statement
sqlglot parses has every remaining token at its original line and column: an error found
later names the place the user wrote. The bounds are recorded by the offset of the aggregate's
name, which sqlglot keeps in the function node's ``meta``.
"""

from __future__ import annotations

from typing import Any

import attrs

from dpkit.errors import SqlError

__all__ = ["Extracted", "Option", "extract"]

#: The one named argument an aggregate takes.
BOUNDS = "contribution_bounds_per_group"


@attrs.frozen
class Option:
    """One option of the ``OPTIONS (...)`` clause: its value and where its name is."""

    value: Any
    line: int
    column: int


@attrs.frozen
class Extracted:
    """A statement with the DP syntax blanked out, and what that syntax said."""

    text: str
    differential_privacy: bool
    options: dict[str, Option]
    bounds: dict[int, tuple[float, float]]


def _tokens(text: str, dialect: str) -> list[Any]:
    from sqlglot import tokenize
    from sqlglot.errors import TokenError

    try:
        return list(tokenize(text, dialect=dialect))
    except TokenError as error:
        raise SqlError(
            f"the statement cannot be read ({_first_line(error)})", clause="syntax"
        ) from None


def _column(token: Any) -> int:
    """The column a token starts at (sqlglot records the column of its last character)."""
    return max(1, int(token.col) - (int(token.end) - int(token.start)))


def _first_line(error: Exception) -> str:
    return str(error).splitlines()[0][:200] if str(error) else type(error).__name__


def _blank(chars: list[str], start: int, end: int) -> None:
    for i in range(start, end + 1):
        if chars[i] not in "\r\n":
            chars[i] = " "


def _closing(tokens: list[Any], at: int) -> int:
    """The index of the token closing the parenthesis opened at ``at``."""
    from sqlglot.tokenizer_core import TokenType

    depth = 0
    for i in range(at, len(tokens)):
        kind = tokens[i].token_type
        if kind == TokenType.L_PAREN:
            depth += 1
        elif kind == TokenType.R_PAREN:
            depth -= 1
            if depth == 0:
                return i
    token = tokens[at]
    raise SqlError(
        "a parenthesis is never closed", clause="syntax", line=token.line, column=_column(token)
    )


def _value(tokens: list[Any], where: Any) -> Any:
    """A literal option or argument value: a number, a string, a name, TRUE/FALSE/NULL, or a
    parenthesised tuple of those."""
    from sqlglot.tokenizer_core import TokenType

    def fail() -> SqlError:
        return SqlError(
            "an option's value must be a number, a string, a name or a tuple of numbers",
            clause="OPTIONS",
            line=where.line,
            column=_column(where),
        )

    if not tokens:
        raise fail()
    if tokens[0].token_type == TokenType.L_PAREN and tokens[-1].token_type == TokenType.R_PAREN:
        inner, items, current = tokens[1:-1], [], list[Any]()
        for token in inner:
            if token.token_type == TokenType.COMMA:
                items.append(_value(current, where))
                current = []
            else:
                current.append(token)
        items.append(_value(current, where))
        return tuple(items)
    sign = 1
    if tokens[0].token_type in (TokenType.DASH, TokenType.PLUS) and len(tokens) == 2:
        sign = -1 if tokens[0].token_type == TokenType.DASH else 1
        tokens = tokens[1:]
    if (
        len(tokens) == 2
        and tokens[0].token_type == TokenType.DOT
        and tokens[1].token_type == TokenType.NUMBER
        and tokens[0].end + 1 == tokens[1].start
    ):  # ".01": the tokenizer splits a number that starts with its point
        try:
            return sign * float("." + tokens[1].text)
        except ValueError:
            raise fail() from None
    if len(tokens) != 1:
        raise fail()
    token = tokens[0]
    if token.token_type == TokenType.NUMBER:
        try:
            number = float(token.text)
        except ValueError:
            raise fail() from None
        whole = number.is_integer() and not any(c in token.text for c in ".eE")
        return sign * (int(token.text) if whole else number)
    if sign != 1:
        raise fail()
    if token.token_type == TokenType.STRING:
        return token.text
    if token.token_type == TokenType.TRUE:
        return True
    if token.token_type == TokenType.FALSE:
        return False
    if token.token_type == TokenType.NULL:
        return None
    if token.token_type in (TokenType.VAR, TokenType.IDENTIFIER) or token.text.isidentifier():
        return token.text
    raise fail()


def _options(tokens: list[Any], start: int, end: int) -> dict[str, Option]:
    """``name = value`` pairs between the parentheses at ``start`` and ``end``."""
    from sqlglot.tokenizer_core import TokenType

    found: dict[str, Option] = {}
    segment: list[Any] = []
    depth = 0
    segments: list[list[Any]] = []
    for token in tokens[start + 1 : end]:
        if token.token_type == TokenType.L_PAREN:
            depth += 1
        elif token.token_type == TokenType.R_PAREN:
            depth -= 1
        if token.token_type == TokenType.COMMA and depth == 0:
            segments.append(segment)
            segment = []
        else:
            segment.append(token)
    if segment or segments:
        segments.append(segment)
    for part in segments:
        if len(part) < 3 or part[1].token_type not in (TokenType.EQ, TokenType.FARROW):
            at = part[0] if part else tokens[start]
            raise SqlError(
                "options are written name = value, separated by commas",
                clause="OPTIONS",
                line=at.line,
                column=_column(at),
            )
        name = part[0].text.lower()
        if name in found:
            raise SqlError(
                f"the option {name!r} is given twice",
                clause="OPTIONS",
                line=part[0].line,
                column=_column(part[0]),
            )
        found[name] = Option(_value(part[2:], part[0]), part[0].line, _column(part[0]))
    return found


def extract(text: str, dialect: str) -> Extracted:
    """Blank the DP syntax out of ``text`` (see the module docstring); a malformed clause is a
    :class:`~dpkit.errors.SqlError` naming it."""
    from sqlglot.tokenizer_core import TokenType

    tokens = _tokens(text, dialect)
    chars = list(text)
    options: dict[str, Option] = {}
    bounds: dict[int, tuple[float, float]] = {}
    private = False
    calls: list[Any] = []  # the name token of each open call (None for a bare parenthesis)
    i = 0
    while i < len(tokens):
        token = tokens[i]
        kind = token.token_type
        if (
            kind == TokenType.SELECT
            and i + 2 < len(tokens)
            and tokens[i + 1].token_type == TokenType.WITH
            and tokens[i + 2].text.upper() == "DIFFERENTIAL_PRIVACY"
        ):
            if private:
                raise SqlError(
                    "only one SELECT WITH DIFFERENTIAL_PRIVACY per statement",
                    clause="SELECT WITH DIFFERENTIAL_PRIVACY",
                    line=token.line,
                    column=_column(token),
                )
            private = True
            last = i + 2
            if last + 1 < len(tokens) and tokens[last + 1].text.upper() == "OPTIONS":
                if last + 2 >= len(tokens) or tokens[last + 2].token_type != TokenType.L_PAREN:
                    at = tokens[last + 1]
                    raise SqlError(
                        "OPTIONS must be followed by (name = value, ...)",
                        clause="OPTIONS",
                        line=at.line,
                        column=_column(at),
                    )
                close = _closing(tokens, last + 2)
                options = _options(tokens, last + 2, close)
                last = close
            _blank(chars, tokens[i + 1].start, tokens[last].end)
            i = last + 1
            continue
        if kind == TokenType.L_PAREN:
            before = tokens[i - 1] if i else None
            calls.append(before)
        elif kind == TokenType.R_PAREN:
            if calls:
                calls.pop()
        elif (
            kind == TokenType.FARROW
            and i >= 2
            and tokens[i - 2].token_type == TokenType.COMMA
            and calls
        ):
            name = tokens[i - 1]
            if name.text.lower() != BOUNDS:
                raise SqlError(
                    f"unknown named argument {name.text!r}; an aggregate takes {BOUNDS} => "
                    "(lower, upper)",
                    clause="named argument",
                    line=name.line,
                    column=_column(name),
                )
            if i + 1 >= len(tokens) or tokens[i + 1].token_type != TokenType.L_PAREN:
                raise SqlError(
                    f"{BOUNDS} must be a pair (lower, upper) of numbers",
                    clause=BOUNDS,
                    line=name.line,
                    column=_column(name),
                )
            close = _closing(tokens, i + 1)
            pair = _value(tokens[i + 1 : close + 1], name)
            if (
                not isinstance(pair, tuple)
                or len(pair) != 2
                or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in pair)
            ):
                raise SqlError(
                    f"{BOUNDS} must be a pair (lower, upper) of numbers",
                    clause=BOUNDS,
                    line=name.line,
                    column=_column(name),
                )
            owner = calls[-1]
            if owner is None:
                raise SqlError(
                    f"{BOUNDS} belongs inside an aggregate's parentheses",
                    clause=BOUNDS,
                    line=name.line,
                    column=_column(name),
                )
            bounds[owner.start] = (float(pair[0]), float(pair[1]))
            _blank(chars, tokens[i - 2].start, tokens[close].end)
            i = close + 1
            continue
        i += 1
    return Extracted("".join(chars), private, options, bounds)
