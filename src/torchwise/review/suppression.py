"""``# noqa`` comments: on a line (``# noqa: TW101``, ``# noqa``) and for a whole
file (``# torchwise: noqa`` on its own line, optionally with codes)."""

from __future__ import annotations

import re

from torchwise.findings import Finding

_NOQA = re.compile(r"#\s*noqa(?::\s*(?P<codes>TW\d{3}(?:[\s,]+TW\d{3})*))?", re.I)


_FILE_NOQA = re.compile(
    r"^\s*#\s*torchwise:\s*noqa(?::\s*(?P<codes>TW\d{3}(?:[\s,]+TW\d{3})*))?", re.I | re.M
)


def file_suppressions(source: str) -> frozenset[str] | None:
    """None: no file-level noqa; empty: the whole file; else the codes ignored."""
    if "torchwise" not in source:
        return None
    codes: set[str] = set()
    found = False
    for match in _FILE_NOQA.finditer(source):
        found = True
        if match.group("codes") is None:
            return frozenset()
        codes |= set(re.findall(r"TW\d{3}", match.group("codes").upper()))
    return frozenset(codes) if found else None


def line_suppressions(lines: list[str]) -> dict[int, frozenset[str] | None]:
    """line -> codes suppressed there (None: every code, a bare ``# noqa``)."""
    result: dict[int, frozenset[str] | None] = {}
    for number, line in enumerate(lines, start=1):
        if "noqa" not in line and "NOQA" not in line:
            continue
        match = _NOQA.search(line)
        if match is None:
            continue
        codes = match.group("codes")
        result[number] = None if codes is None else frozenset(re.findall(r"TW\d{3}", codes.upper()))
    return result


def suppressed(finding: Finding, noqa: dict[int, frozenset[str] | None]) -> bool:
    for line in {finding.line, finding.end_line}:
        if line in noqa:
            codes = noqa[line]
            if codes is None or finding.code in codes:
                return True
    return False
