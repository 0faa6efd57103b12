"""The one table of review rules.

A rule is a class in ``review/rules/tw<code>.py`` (``TW101`` lives in
``rules/tw101.py``, one rule per module) decorated with :func:`rule`; every such
module is found on disk and imported, in code order.
Its docstring is its user documentation (``torchwise rules TW101`` prints it)
and must carry ruff's headings: ``## What it does``, ``## Why is this bad?``,
``## Example``, ``## Use instead``, and ``## Fix safety`` when it has a fix.

Handlers are methods named after what they subscribe to:

- ``visit_<NodeType>(node, ctx)``: called during the engine's single AST pass
  for each node of that type (``visit_Call``, ``visit_Assign``, ...);
- ``leave_loop(loop, ctx)``, ``leave_function(function, ctx)``,
  ``leave_class(frame, ctx)``, ``leave_module(module, ctx)``: called when the
  pass leaves a region, with the facts the engine collected inside it (see
  :mod:`torchwise.review.engine.facts`).

Rules never walk the tree themselves.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import pkgutil
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import ClassVar

from torchwise.findings import Applicability, Severity
from torchwise.sarif import REPOSITORY

#: The rule pages, one per family (docs/rules/<family>.md).
DOCS_URL = f"{REPOSITORY}/blob/main/docs/rules"

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
    "tensors": "Tensor devices, shapes and storage (TW7xx)",
    "distributed": "Distributed training (TW8xx)",
}

#: What a real finding does to a project, most serious first: silently wrong
#: results outrank a crash (which at least announces itself).
IMPACTS: dict[str, str] = {
    "results": "changes training or evaluation results",
    "crash": "raises, or runs out of memory, on a reachable path",
    "security": "can run code from an untrusted file",
    "reproducibility": "makes runs unrepeatable",
    "performance": "wastes compute or memory",
    "maintenance": "deprecated or fragile: breaks on upgrade or refactor",
}
_FAMILY_IMPACT = {
    "syntax": "crash",
    "training": "results",
    "modules": "results",
    "numerics": "results",
    "security": "security",
    "performance": "performance",
    "deprecated": "maintenance",
    "checkpoints": "reproducibility",
    "tensors": "crash",
    "distributed": "crash",
}

REQUIRED_HEADINGS = ("## What it does", "## Why is this bad?", "## Example", "## Use instead")
FIX_HEADING = "## Fix safety"

EVENTS = ("leave_loop", "leave_function", "leave_class", "leave_module")


class Rule:
    """Base class of every rule; subclasses set the class attributes and handlers."""

    code: ClassVar[str]
    name: ClassVar[str]  # kebab-case, stable
    family: ClassVar[str]
    severity: ClassVar[Severity]
    message: ClassVar[str]  # what is wrong; may use {placeholders} filled at report time
    default_enabled: ClassVar[bool] = True
    #: False for rules about how a project trains: a test module's loops exercise
    #: code with fixed data on purpose (see ``files.is_test_module``).
    in_test_modules: ClassVar[bool] = True
    fix: ClassVar[Applicability | None] = None  # the best fix this rule can offer
    #: What goes wrong when the finding is real (see IMPACTS); None: the family's default.
    impact: ClassVar[str | None] = None
    #: When ``visit_Call`` acts only on some calls: the resolved names
    #: (``ctx.call_name``) and the method names (``x.backward()``) it acts on.
    #: The engine calls it for no other call (every call on timm's sources asked
    #: 45 handlers, most of them to return at once); both None: every call.
    call_names: ClassVar[frozenset[str] | None] = None
    call_methods: ClassVar[frozenset[str] | None] = None
    #: Lowercase text that every finding of the rule needs in the file's own
    #: source (any one of them): a file whose lowercased source holds none is
    #: not walked for the rule. Only for rules that never learn what they need
    #: from other files. () : every file. A rule that watches every name or
    #: constant makes the engine call it for each of them (a third of the nodes
    #: of timm's sources); most files cannot give it a finding.
    needs_text: ClassVar[tuple[str, ...]] = ()


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
    def impact(self) -> str:
        """A key of IMPACTS: the rule's own, else its family's (deprecations that
        raise on current versions are crashes)."""
        if self.cls.impact is not None:
            return self.cls.impact
        if self.family == "deprecated" and self.severity is Severity.ERROR:
            return "crash"
        return _FAMILY_IMPACT.get(self.family, "results")

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

    @property
    def url(self) -> str:
        """Where the rule's documentation lives (anchors written by scripts/gen_rule_docs.py)."""
        return f"{DOCS_URL}/{self.family}.md#{self.code.lower()}"


_RULES: dict[str, RuleInfo] = {}

RULES_PACKAGE = "torchwise.review.rules"
_RULE_MODULE = re.compile(r"tw\d{3}")


def module_name(code: str) -> str:
    """The module that defines rule ``code``: ``TW101`` -> ``torchwise.review.rules.tw101``."""
    return f"{RULES_PACKAGE}.{code.lower()}"


@functools.cache
def _rule_modules() -> tuple[str, ...]:
    """Every ``rules/tw###.py`` module, found on disk: a new rule needs no list entry."""
    package = importlib.import_module(RULES_PACKAGE)
    names = (info.name for info in pkgutil.iter_modules(package.__path__))
    return tuple(sorted(module_name(name) for name in names if _RULE_MODULE.fullmatch(name)))


def rule(cls: type[Rule]) -> type[Rule]:
    """Register a rule class (decorator)."""
    if not re.fullmatch(r"TW\d{3}", cls.code):
        raise ValueError(f"bad rule code {cls.code!r}")
    known = _RULES.get(cls.code)
    if known is not None and known.cls.__module__ != cls.__module__:
        raise ValueError(f"duplicate rule code {cls.code}")
    if cls.__module__ != module_name(cls.code):
        raise ValueError(f"{cls.code} must be defined in {module_name(cls.code)}")
    node_types = tuple(
        name.removeprefix("visit_") for name in dir(cls) if name.startswith("visit_")
    )
    events = tuple(name for name in EVENTS if hasattr(cls, name))
    _RULES[cls.code] = RuleInfo(cls=cls, node_types=node_types, events=events)
    return cls


def all_rules() -> dict[str, RuleInfo]:
    """Every registered rule, by code, in code order.

    Every rule module is imported each time it is asked (a no-op once imported),
    so importing one rule module first cannot leave the others unregistered.
    """
    _import_rule_modules()
    return dict(sorted(_RULES.items()))


@functools.cache
def _import_rule_modules() -> None:
    for module in _rule_modules():
        importlib.import_module(module)


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
