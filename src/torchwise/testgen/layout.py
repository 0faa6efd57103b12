"""Line layout for generated code, the way black and ruff format lay it out.

A generated file is kept only if it looks like the user wrote it, and a
formatter run over it must not rewrite it (that would make ``--check`` fight
the user's pre-commit hooks). The one construct whose length varies is a
bracketed list (a call's arguments, a def's parameters, a literal), and the
formatters lay it out in one of three ways, tried in order:

1. everything on one line, when it fits;
2. the bracket's contents on one indented line of their own, when they fit;
3. one item per line, each with a trailing comma.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence

INDENT = "    "


def bracketed(
    head: str,
    items: Sequence[str],
    tail: str = "",
    *,
    indent: str = "",
    width: int,
    brackets: str = "()",
    one_tuple: bool = False,
    collection: bool = False,
) -> list[str]:
    """``head(item, item)tail`` laid out within ``width`` columns.

    ``head`` ends just before the opening bracket (``"def f"``, ``"x = "``), ``tail``
    follows the closing one (``" -> int:"``). ``one_tuple`` marks a 1-tuple, whose
    comma stays even on one line. A ``collection`` (a list, tuple or dict display,
    not a call's arguments or a def's parameters) skips the second layout: the
    formatters always put its items one per line once it is split.
    """
    opening, closing = brackets[0], brackets[1]
    inner = ", ".join(items) + ("," if one_tuple and len(items) == 1 else "")
    flat = f"{indent}{head}{opening}{inner}{closing}{tail}"
    if len(flat) <= width or not items:
        return [flat]
    nested = indent + INDENT
    if len(nested + inner) <= width and not one_tuple and not collection:
        return [f"{indent}{head}{opening}", nested + inner, f"{indent}{closing}{tail}"]
    return [
        f"{indent}{head}{opening}",
        *(f"{nested}{item}," for item in items),
        f"{indent}{closing}{tail}",
    ]


def expression(
    head: str, source: str, tail: str = "", *, indent: str = "", width: int
) -> list[str]:
    """``head + source + tail`` where ``source`` is an expression: a call too long for one
    line is split at its brackets, recursively, as the formatters split it."""
    flat = f"{indent}{head}{source}{tail}"
    if len(flat) <= width:
        return [flat]
    try:
        node = ast.parse(source, mode="eval").body
    except SyntaxError:
        return [flat]
    if not isinstance(node, ast.Call) or not (node.args or node.keywords):
        return [flat]
    func = ast.get_source_segment(source, node.func) or ast.unparse(node.func)
    items = [ast.get_source_segment(source, a) or ast.unparse(a) for a in node.args]
    for kw in node.keywords:
        value = ast.get_source_segment(source, kw.value) or ast.unparse(kw.value)
        items.append(f"**{value}" if kw.arg is None else f"{kw.arg}={value}")
    nested = indent + INDENT
    inner = ", ".join(items)
    opening, closing = f"{indent}{head}{func}(", f"{indent}){tail}"
    if len(nested + inner) <= width:
        return [opening, nested + inner, closing]
    if len(items) == 1:
        return [opening, *expression("", items[0], indent=nested, width=width), closing]
    body: list[str] = []
    for item in items:
        name, sep, value = item.partition("=")
        if sep and name.isidentifier():
            body += expression(f"{name}=", value, ",", indent=nested, width=width)
        else:
            body += expression("", item, ",", indent=nested, width=width)
    return [opening, *body, closing]


def comment_block(text: str, *, indent: str = "", width: int) -> list[str]:
    """``text`` as ``# `` comment lines wrapped at ``width`` (words are never split)."""
    lines: list[str] = []
    current = ""
    for word in text.split():
        candidate = f"{current} {word}" if current else word
        if current and len(indent) + 2 + len(candidate) > width:
            lines.append(f"{indent}# {current}")
            current = word
        else:
            current = candidate
    if current:
        lines.append(f"{indent}# {current}")
    return lines


def docstring(text: str, *, indent: str = "", width: int) -> list[str]:
    """A one-paragraph docstring: one line when it fits, else wrapped with the closing
    quotes on their own line (always two lines of text or more: the formatters join a
    single line of text with its closing quotes)."""
    one = f'{indent}"""{text}"""'
    if len(one) <= width:
        return [one]
    words = text.split()
    lines = _fill(words, width - len(indent), first='"""')
    if len(lines) == 1:  # it fits with the opening quotes only: carry the last word over
        lines = [lines[0].rsplit(" ", 1)[0], words[-1]]
    return [indent + line for line in lines] + [f'{indent}"""']


def _fill(words: list[str], width: int, *, first: str = "") -> list[str]:
    lines: list[str] = []
    current = first
    for word in words:
        if current in ("", first):
            current += word
        elif len(current) + 1 + len(word) > width:
            lines.append(current)
            current = word
        else:
            current += " " + word
    return [*lines, current]
