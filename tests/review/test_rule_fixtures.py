"""Every rule against its fixture: ``tests/review/fixtures/TWxxx.py``.

A fixture marks each line where the rule must fire with a trailing comment
naming the code (``# TW101``); every other line is a negative case. When a
``TWxxx.fixed.py`` sits beside it, applying the rule's fixes must produce that
file exactly, and fixing it again must change nothing.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from torchwise.review import Applicability, ReviewSettings, all_rules, review_source
from torchwise.review.fixes import fix_source
from torchwise.review.registry import FIX_HEADING, REQUIRED_HEADINGS, section

FIXTURES = Path(__file__).parent / "fixtures"
_MARKER = re.compile(r"#\s*(TW\d{3}(?:\s*,\s*TW\d{3})*)\s*$")
CODES = sorted(code for code in all_rules() if code != "TW000")


def _expected_lines(source: str, code: str) -> list[int]:
    lines = []
    for number, line in enumerate(source.splitlines(), start=1):
        match = _MARKER.search(line)
        if match and code in re.findall(r"TW\d{3}", match.group(1)):
            lines.append(number)
    return lines


def _findings(source: str, code: str, path: str = "fixture.py") -> list[int]:
    settings = ReviewSettings(select=(code,))
    return sorted(f.line for f in review_source(source, path, settings) if f.code == code)


@pytest.mark.parametrize("code", CODES)
def test_rule_fires_exactly_on_marked_lines(code: str) -> None:
    fixture = FIXTURES / f"{code}.py"
    assert fixture.exists(), f"{code} has no fixture at {fixture}"
    source = fixture.read_text()
    expected = _expected_lines(source, code)
    assert expected, f"{fixture.name} marks no positive case"
    assert _findings(source, code, str(fixture)) == expected


@pytest.mark.parametrize("code", CODES)
def test_rule_docs_have_ruff_headings_and_runnable_examples(code: str) -> None:
    info = all_rules()[code]
    for heading in REQUIRED_HEADINGS:
        assert section(info.doc, heading), f"{code} doc lacks {heading!r}"
    if info.fix is not None:
        assert section(info.doc, FIX_HEADING), f"{code} has a fix but no {FIX_HEADING!r}"
    example, better = info.example(), info.use_instead()
    ast.parse(example)
    ast.parse(better)
    assert _findings(example, code), f"{code}: its own Example does not trigger it"
    assert not _findings(better, code), f"{code}: its 'Use instead' still triggers it"


FIXED = sorted(path.name.removesuffix(".fixed.py") for path in FIXTURES.glob("*.fixed.py"))


@pytest.mark.parametrize("code", FIXED)
def test_fix_produces_expected_file_and_is_idempotent(code: str) -> None:
    source = (FIXTURES / f"{code}.py").read_text()
    expected = (FIXTURES / f"{code}.fixed.py").read_text()
    settings = ReviewSettings(select=(code,))

    def analyse(text: str) -> list:  # type: ignore[type-arg]
        return review_source(text, "fixture.py", settings)

    fixed, count = fix_source(source, analyse, Applicability.UNSAFE)
    assert count > 0
    assert fixed == expected
    again, more = fix_source(fixed, analyse, Applicability.UNSAFE)
    assert (again, more) == (fixed, 0)


def test_every_rule_with_a_fix_has_a_fixed_fixture() -> None:
    missing = [code for code in CODES if all_rules()[code].fix and code not in FIXED]
    assert not missing, f"rules with fixes but no .fixed.py fixture: {missing}"
