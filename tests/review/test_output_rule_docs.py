"""docs/rules/ is generated from the rule docstrings and must be committed up to date."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from torchwise.review import all_rules

ROOT = Path(__file__).resolve().parents[2]


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "gen_rule_docs", ROOT / "scripts" / "gen_rule_docs.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("gen_rule_docs", module)
    spec.loader.exec_module(module)
    return module


def test_committed_rule_docs_match_the_registry() -> None:
    stale = _generator().stale_pages()
    assert not stale, f"stale rule docs (run `make docs`): {[str(p) for p in stale]}"


def test_every_rule_has_an_anchor_on_its_family_page() -> None:
    pages = _generator().render_docs()
    index = pages[ROOT / "docs" / "rules" / "README.md"]
    for code, info in all_rules().items():
        page = pages[ROOT / "docs" / "rules" / f"{info.family}.md"]
        assert f'<a id="{code.lower()}"></a>' in page
        assert f"## {code} `{info.name}`" in page
        assert f"({info.family}.md#{code.lower()})" in index
