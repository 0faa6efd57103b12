"""The rule registry: complete whatever is imported first, one module per rule."""

from __future__ import annotations

import subprocess
import sys

import pytest

from torchwise.review.registry import all_rules, module_name


@pytest.mark.parametrize("first", ["tw124", "tw301", "tw000"])
def test_importing_one_rule_module_first_still_registers_every_rule(first: str) -> None:
    # A fresh interpreter: in this one every rule module is already imported.
    script = (
        f"import torchwise.review.rules.{first}\n"
        "from torchwise.review.registry import all_rules\n"
        "print(len(all_rules()), 'TW301' in all_rules())\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [str(len(all_rules())), "True"]


def test_a_rules_module_is_named_after_its_code() -> None:
    for code, info in all_rules().items():
        assert info.cls.__module__ == module_name(code) == f"torchwise.review.rules.{code.lower()}"
