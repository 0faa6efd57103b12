"""Google-style docstrings as data: parse, merge torchwise's sections in, render.

A docstring is a summary paragraph followed by *blocks*: untitled prose, or a
section (``Args:``, ``Shape:``, ``Note:`` ...) whose body is indented under its
title. torchwise owns a fixed set of sections and nothing else:

- *Entry sections* (``Args``, ``Attributes``, ``Returns``): each entry is
  ``name (TYPE): description``. torchwise owns ``TYPE`` (measured shapes, dtypes,
  defaults, parameter counts) and writes one entry per real argument/attribute;
  the description, including continuation lines, is the author's and is kept.
- *Owned sections* (``Shape``, ``Complexity``, ``Train and eval``, ``Example``):
  regenerated whole on every run.

Every other block (the summary, prose, ``Note:``, ``Examples:``, ``References:``...)
is the author's and is kept verbatim, in place. Merging is a fixpoint: merging
the same facts into an already merged docstring changes nothing, which is what
makes ``torchwise doc --write`` idempotent and ``--check`` meaningful.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

#: Section titles Google style (napoleon) recognises, plus PyTorch's ``Shape``
#: and torchwise's own; a ``Title:`` line with another title is prose.
KNOWN_SECTIONS = frozenset(
    {
        "args", "arguments", "parameters", "params", "keyword args", "keyword arguments",
        "other parameters", "attributes", "returns", "return", "yields", "yield", "raises",
        "example", "examples", "note", "notes", "warning", "warnings", "see also",
        "references", "todo", "methods", "shape", "complexity", "train and eval",
    }
)  # fmt: skip
_ALIASES = {"arguments": "Args", "parameters": "Args", "params": "Args", "return": "Returns"}
ENTRY_SECTIONS = ("Args", "Attributes", "Returns")
_HEADER = re.compile(r"^([A-Za-z][A-Za-z ]*?)\s*::?\s*$")
_ENTRY_NAME = re.compile(r"^(\*{0,2}[A-Za-z_][\w.]*)\s*")
INDENT = "    "


@dataclass
class Block:
    """A section (``title`` set) or an untitled prose block; ``lines`` are dedented."""

    title: str | None
    lines: list[str]
    header: str = ""

    def render(self) -> list[str]:
        if self.title is None:
            return list(self.lines)
        body = [INDENT + line if line else "" for line in self.lines]
        return [self.header or f"{self.title}:", *body]


@dataclass
class Docstring:
    summary: list[str]
    blocks: list[Block] = field(default_factory=list)

    def render(self) -> str:
        out = list(self.summary)
        for block in self.blocks:
            if out:
                out.append("")
            out.extend(block.render())
        return "\n".join(line.rstrip() for line in out).strip("\n")


@dataclass
class Entry:
    """``name (type): description`` plus indented continuation lines."""

    name: str
    type: str | None
    description: str
    more: list[str] = field(default_factory=list)

    def render(self) -> list[str]:
        head = self.name if self.type is None else f"{self.name} ({self.type})"
        if self.description:
            head += f": {self.description}"
        elif self.more:
            head += ":"
        return [head, *self.more]


def _canonical(title: str) -> str | None:
    low = title.strip().lower()
    if low not in KNOWN_SECTIONS:
        return None
    return _ALIASES.get(
        low, " ".join(w.capitalize() if i == 0 else w for i, w in enumerate(low.split()))
    )


def _indent_of(line: str) -> int:
    return len(line) - len(line.lstrip())


def _dedent(lines: list[str]) -> list[str]:
    while lines and not lines[-1].strip():
        lines.pop()
    while lines and not lines[0].strip():
        lines.pop(0)
    width = min((_indent_of(x) for x in lines if x.strip()), default=0)
    return [x[width:].rstrip() if x.strip() else "" for x in lines]


def parse(text: str) -> Docstring:
    """Split a cleaned docstring (``inspect.cleandoc``) into summary and blocks."""
    lines = text.expandtabs().splitlines()
    i = 0
    summary: list[str] = []
    while i < len(lines) and lines[i].strip():
        summary.append(lines[i].rstrip())
        i += 1
    blocks: list[Block] = []
    prose: list[str] = []

    def flush() -> None:
        body = _dedent(prose[:])
        prose.clear()
        if body:
            blocks.append(Block(None, body))

    while i < len(lines):
        line = lines[i]
        match = _HEADER.match(line) if _indent_of(line) == 0 else None
        title = _canonical(match.group(1)) if match else None
        if title is None:
            prose.append(line)
            i += 1
            continue
        flush()
        i += 1
        body: list[str] = []
        while i < len(lines) and (not lines[i].strip() or _indent_of(lines[i]) > 0):
            body.append(lines[i])
            i += 1
        header = line.strip() if title not in ENTRY_SECTIONS else ""
        blocks.append(Block(title, _dedent(body), header))
    flush()
    return Docstring(summary, blocks)


def _split_type(text: str) -> tuple[str | None, str] | None:
    """``(TYPE) rest`` with balanced brackets -> (TYPE, rest); None if unbalanced."""
    if not text.startswith("("):
        return None, text
    depth = 0
    for pos, char in enumerate(text):
        depth += char in "([{"
        depth -= char in ")]}"
        if depth == 0:
            return text[1:pos], text[pos + 1 :].lstrip()
    return None


def parse_entries(lines: Sequence[str], *, returns: bool = False) -> tuple[list[str], list[Entry]]:
    """An entry section's body -> (lines before the first entry, entries)."""
    preamble: list[str] = []
    entries: list[Entry] = []
    for line in lines:
        if line and _indent_of(line) == 0:
            entry = _parse_returns_head(line) if returns else _parse_entry_head(line)
            if entry is not None:
                entries.append(entry)
                continue
        if entries:
            entries[-1].more.append(line)
        else:
            preamble.append(line)
    for entry in entries:
        entry.more = _trim_tail(entry.more)
    return preamble, entries


def _trim_tail(lines: list[str]) -> list[str]:
    while lines and not lines[-1].strip():
        lines.pop()
    return lines


def _parse_entry_head(line: str) -> Entry | None:
    match = _ENTRY_NAME.match(line)
    if match is None:
        return None
    split = _split_type(line[match.end() :])
    if split is None:
        return None
    type_, rest = split
    if rest.startswith(":"):
        return Entry(match.group(1), type_, rest[1:].strip())
    if rest:
        return None  # "See the paper." is prose, not an entry
    return Entry(match.group(1), type_, "")


def _parse_returns_head(line: str) -> Entry:
    """``TYPE: description`` where TYPE has no spaces outside brackets, else prose."""
    depth = 0
    for pos, char in enumerate(line):
        depth += char in "([{"
        depth -= char in ")]}"
        if depth or char not in ": ":
            continue
        if char == ":" and (pos + 1 == len(line) or line[pos + 1] == " "):
            return Entry("", line[:pos].strip(), line[pos + 1 :].strip())
        # a space outside brackets ends a type unless it pads "," or "|"
        if char == " " and line[pos - 1] not in ",|" and line[pos + 1 : pos + 2] != "|":
            break
    else:
        if depth == 0 and line.strip():  # a bare type, no description: "Tensor[f32, (n,)]"
            return Entry("", line.strip(), "")
    return Entry("", None, line.strip())


@dataclass(frozen=True)
class GenEntry:
    """A generated entry: the name and the TYPE torchwise owns."""

    name: str
    type: str | None


def merge_entries(
    generated: Sequence[GenEntry], existing: Block | None, *, keep_unknown: bool
) -> list[str]:
    """Entries for ``generated`` names with the author's descriptions carried over.

    Author entries for names torchwise does not generate are dropped for ``Args``
    (the signature is the truth) and kept after ours for ``Attributes``
    (``keep_unknown``), where authors document plain attributes too.
    """
    preamble: list[str] = []
    old: dict[str, Entry] = {}
    order: list[str] = []
    if existing is not None:
        preamble, entries = parse_entries(existing.lines)
        for entry in entries:
            key = entry.name.lstrip("*")
            old[key] = entry
            order.append(key)
    out = [*preamble, ""] if preamble else []
    for gen in generated:
        prior = old.pop(gen.name.lstrip("*"), None)
        desc, more = (prior.description, prior.more) if prior else ("", [])
        out.extend(Entry(gen.name, gen.type, desc, more).render())
    if keep_unknown:
        for key in order:
            if key in old:
                out.extend(old[key].render())
    return out


def merge_returns(type_: str, existing: Block | None) -> list[str]:
    """A ``Returns`` body: torchwise's TYPE, the author's description."""
    if existing is None or not existing.lines:
        return [type_]
    _, entries = parse_entries(existing.lines, returns=True)
    if not entries:
        return [type_]
    first = entries[0]
    head = f"{type_}: {first.description}" if first.description else type_
    rest = [line for e in entries[1:] for line in _render_returns(e)]
    return [head, *first.more, *rest]


def _render_returns(entry: Entry) -> list[str]:
    text = entry.description if entry.type is None else f"{entry.type}: {entry.description}"
    return [text.rstrip(": ").rstrip() if not entry.description else text, *entry.more]


def merge(
    doc: Docstring,
    *,
    default_summary: str,
    entries: dict[str, list[GenEntry]],
    returns: str | None = None,
    owned: dict[str, list[str]] | None = None,
) -> Docstring:
    """Replace torchwise's sections in ``doc`` and keep every other block in place.

    ``entries`` maps an entry section title to its generated entries; ``owned``
    maps an owned section title to its body. Sections with no content are left
    out. The generated sections go where the first of them was, or before the
    author's first known section (``Raises``, ``Note``...), or at the end.
    """
    owned = owned or {}
    ours = [*entries, *(["Returns"] if returns is not None else []), *owned]
    existing = {b.title: b for b in doc.blocks if b.title in ours}
    position = next((i for i, b in enumerate(doc.blocks) if b.title in ours), None)
    if position is None:
        position = next((i for i, b in enumerate(doc.blocks) if b.title), len(doc.blocks))
    kept = [b for b in doc.blocks if b.title not in ours]
    position = min(position, len(kept))
    generated: list[Block] = []
    for title, gen in entries.items():
        if gen:
            body = merge_entries(gen, existing.get(title), keep_unknown=title == "Attributes")
            generated.append(Block(title, body))
    if returns is not None:
        generated.append(Block("Returns", merge_returns(returns, existing.get("Returns"))))
    for title, body in owned.items():
        if body:
            generated.append(Block(title, list(body)))
    summary = doc.summary or [default_summary]
    return Docstring(summary, kept[:position] + generated + kept[position:])
