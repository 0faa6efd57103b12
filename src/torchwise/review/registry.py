"""The one table of review rules.

A rule is a class in ``review/rules/<family>.py`` decorated with :func:`rule`.
Its docstring is its user documentation (``torchwise rules TW101`` prints it)
and must carry ruff's headings: ``## What it does``, ``## Why is this bad?``,
``## Example``, ``## Use instead``, and ``## Fix safety`` when it has a fix.

Handlers are methods named after what they subscribe to:

- ``visit_<NodeType>(node, ctx)``: called during the engine's single AST pass
  for each node of that type (``visit_Call``, ``visit_Assign``, ...);
- ``leave_loop(loop, ctx)``, ``leave_function(function, ctx)``,
  ``leave_module(module, ctx)``: called when the pass leaves a region, with the
  facts the engine collected inside it (see :mod:`torchwise.review.facts`).

Rules never walk the tree themselves.
"""

from __future__ import annotations

import importlib
import inspect
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import ClassVar

from torchwise.review.findings import Applicability, Severity

#: Rule families, by the hundreds digit of the code, in documentation order.
FAMILIES: dict[str, str] = {
    "syntax": "Files that cannot be analysed (TW000)",
    "training": "Training loops (TW1xx)",
    "modules": "nn.Module definitions (TW12x-TW14x)",
    "performance": "Performance (TW2xx)",
    "security": "Security (TW3xx)",
    "deprecated": "Deprecated APIs (TW4xx)",
    "numerics": "Numerics (TW5xx)",
    "checkpoints": "Checkpoints and reproducibility (TW6xx)",
}

REQUIRED_HEADINGS = ("## What it does", "## Why is this bad?", "## Example", "## Use instead")
FIX_HEADING = "## Fix safety"

EVENTS = ("leave_loop", "leave_function", "leave_module")


class Rule:
    """Base class of every rule; subclasses set the class attributes and handlers."""

    code: ClassVar[str]
    name: ClassVar[str]  # kebab-case, stable
    family: ClassVar[str]
    severity: ClassVar[Severity]
    message: ClassVar[str]  # what is wrong; may use {placeholders} filled at report time
    default_enabled: ClassVar[bool] = True
    fix: ClassVar[Applicability | None] = None  # the best fix this rule can offer


@dataclass(frozen=True)
class RuleInfo:
    """A registered rule's metadata and documentation."""

    cls: type[Rule]
    node_types: tuple[str, ...]  # "Call", "Assign", ...
    events: tuple[str, ...]  # "leave_loop", ...

    @property
    def code(self) -> str:
        return self.cls.code

    @property
    def name(self) -> str:
        return self.cls.name

    @property
    def severity(self) -> Severity:
        return self.cls.severity

    @property
    def default_enabled(self) -> bool:
        return self.cls.default_enabled

    @property
    def family(self) -> str:
        return self.cls.family

    @property
    def fix(self) -> Applicability | None:
        return self.cls.fix

    @property
    def doc(self) -> str:
        return inspect.cleandoc(self.cls.__doc__ or "")

    @property
    def summary(self) -> str:
        """The first sentence of "What it does"."""
        body = section(self.doc, "## What it does")
        first = re.split(r"(?<=\.)\s", " ".join(body.split()), maxsplit=1)[0]
        return first

    def example(self) -> str:
        """The code of the "## Example" section (what the rule flags)."""
        return code_block(section(self.doc, "## Example"))

    def use_instead(self) -> str:
        return code_block(section(self.doc, "## Use instead"))


_RULES: dict[str, RuleInfo] = {}

# Import order is documentation order.
_RULE_MODULES = (
    "torchwise.review.rules.syntax",
    "torchwise.review.rules.training",
    "torchwise.review.rules.evaluation",
    "torchwise.review.rules.amp",
    "torchwise.review.rules.loading",
    "torchwise.review.rules.modules",
    "torchwise.review.rules.forward",
    "torchwise.review.rules.layers",
    "torchwise.review.rules.tensor_ops",
    "torchwise.review.rules.performance",
    "torchwise.review.rules.security",
    "torchwise.review.rules.deprecated",
    "torchwise.review.rules.deprecated_tensor",
    "torchwise.review.rules.deprecated_moved",
    "torchwise.review.rules.numerics",
    "torchwise.review.rules.numerics_stable",
    "torchwise.review.rules.checkpoints",
)


def rule(cls: type[Rule]) -> type[Rule]:
    """Register a rule class (decorator)."""
    if not re.fullmatch(r"TW\d{3}", cls.code):
        raise ValueError(f"bad rule code {cls.code!r}")
    if cls.code in _RULES:
        raise ValueError(f"duplicate rule code {cls.code}")
    node_types = tuple(
        name.removeprefix("visit_") for name in dir(cls) if name.startswith("visit_")
    )
    events = tuple(name for name in EVENTS if hasattr(cls, name))
    _RULES[cls.code] = RuleInfo(cls=cls, node_types=node_types, events=events)
    return cls


def all_rules() -> dict[str, RuleInfo]:
    """Every registered rule, by code, in code order."""
    if not _RULES:
        for module in _RULE_MODULES:
            importlib.import_module(module)
    return dict(sorted(_RULES.items()))


def get_rule(code: str) -> RuleInfo | None:
    return all_rules().get(code.upper())


def select_rules(
    select: Iterable[str] | None = None,
    ignore: Iterable[str] = (),
    extend_select: Iterable[str] = (),
) -> frozenset[str]:
    """The codes enabled by ruff-style prefix selection.

    ``select`` replaces the default set (the rules that are on by default) and,
    being explicit, may name rules that are off by default; ``ALL`` selects
    every rule. ``extend_select`` adds to the base; ``ignore`` removes.
    """
    rules = all_rules()

    def matching(prefixes: Iterable[str]) -> set[str]:
        chosen: set[str] = set()
        for prefix in prefixes:
            prefix = prefix.strip().upper()
            chosen |= {code for code in rules if prefix == "ALL" or code.startswith(prefix)}
        return chosen

    base = (
        {code for code, info in rules.items() if info.default_enabled}
        if select is None
        else matching(select)
    )
    base |= matching(extend_select)
    base -= matching(ignore)
    base.add("TW000")  # a file that does not parse is always reported
    return frozenset(base)


def section(doc: str, heading: str) -> str:
    """The text under a ``## heading`` of a rule doc, up to the next heading."""
    match = re.search(rf"^{re.escape(heading)}\s*$(.*?)(?=^## |\Z)", doc, re.M | re.S)
    return match.group(1).strip() if match else ""


def code_block(text: str) -> str:
    """The first fenced code block in ``text``."""
    match = re.search(r"```(?:python|py)?\n(.*?)```", text, re.S)
    return match.group(1) if match else ""
