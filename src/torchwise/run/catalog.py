"""The one table of `torchwise run` checks: codes, names, severities, documentation.

A check is documented by a class in ``run/checks/<family>.py`` decorated with
:func:`check`; its docstring is its user documentation (``torchwise run
--explain TWR101`` and ``torchwise rules TWR101`` print it) with ruff's
headings: ``## What it does``, ``## Why is this bad?``, ``## Example`` and
``## Use instead``. The Example is a complete script that trips the check and
the Use instead one that does not; the test suite runs both.

Codes are ``TWR`` plus three digits; the hundreds digit is the family. They are
public contracts: a code never changes meaning. Nothing here imports torch.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable
from dataclasses import dataclass

from torchwise.findings import Severity
from torchwise.findings_output import CodeInfo
from torchwise.sarif import REPOSITORY

#: Families by the hundreds digit of the code, in documentation order.
FAMILIES: dict[str, str] = {
    "run": "The run itself (TWR0xx)",
    "training": "Training loop (TWR1xx)",
    "evaluation": "Evaluation (TWR2xx)",
    "data": "Data (TWR3xx)",
    "devices": "Devices, checked without a GPU (TWR4xx)",
    "reproducibility": "Reproducibility (TWR5xx)",
    "distributed": "Distributed training (TWR6xx)",
}
_FAMILY_BY_DIGIT = dict(zip("0123456", FAMILIES, strict=True))
_CHECK_MODULES = (
    "run",
    "training",
    "evaluation",
    "data",
    "devices",
    "reproducibility",
    "distributed",
)

REQUIRED_HEADINGS = ("## What it does", "## Why is this bad?", "## Example", "## Use instead")
DOCS_URL = f"{REPOSITORY}/blob/main/docs/run.md"
_CODE = re.compile(r"TWR\d{3}")


@dataclass(frozen=True)
class Check:
    """One documented check of ``torchwise run``."""

    code: str
    name: str
    severity: Severity  # the most serious level it reports at
    doc: str
    #: what must be passed for the check to run ("as_cuda", "nproc"), if anything
    needs: str = ""

    @property
    def family(self) -> str:
        return _FAMILY_BY_DIGIT[self.code[3]]

    @property
    def summary(self) -> str:
        """The first sentence of "What it does"."""
        body = section(self.doc, "## What it does")
        return re.split(r"(?<=\.)\s", " ".join(body.split()), maxsplit=1)[0]

    @property
    def url(self) -> str:
        return f"{DOCS_URL}#{self.code.lower()}-{self.name}"

    def example(self) -> str:
        """The script of the "## Example" section (it trips the check)."""
        return code_block(section(self.doc, "## Example"))

    def use_instead(self) -> str:
        """The script of the "## Use instead" section (it does not)."""
        return code_block(section(self.doc, "## Use instead"))

    def info(self) -> CodeInfo:
        return CodeInfo(
            code=self.code,
            name=self.name,
            family=self.family,
            severity=self.severity,
            summary=self.summary,
            doc=self.doc,
            url=self.url,
        )


_CHECKS: dict[str, Check] = {}


def check(code: str, name: str, severity: Severity, *, needs: str = "") -> Callable[[type], type]:
    """Register the decorated class's docstring as the documentation of ``code``."""
    if not _CODE.fullmatch(code):
        raise ValueError(f"{code!r} is not a run check code (TWR + three digits)")

    def register(cls: type) -> type:
        doc = _dedent(cls.__doc__ or "")
        if code in _CHECKS and _CHECKS[code].name != name:
            raise ValueError(f"{code} registered twice")
        _CHECKS[code] = Check(code, name, severity, doc, needs)
        return cls

    return register


def _dedent(doc: str) -> str:
    import inspect

    return inspect.cleandoc(doc)


def all_checks() -> dict[str, Check]:
    """Every check, in code order."""
    for module in _CHECK_MODULES:
        importlib.import_module(f"torchwise.run.checks.{module}")
    return dict(sorted(_CHECKS.items()))


def get_check(code: str) -> Check | None:
    return all_checks().get(code.strip().upper())


def describe(code: str) -> CodeInfo | None:
    """The report's view of ``code`` (for :mod:`torchwise.findings_output`)."""
    found = get_check(code)
    return found.info() if found is not None else None


#: other ways to get what an option gives a check
_OR = {"nproc": " or ranks started by `mp.spawn`"}


#: what a check needs that is not an option
_NOT_AN_OPTION = {"spawn": "a script that starts processes with `mp.spawn`"}


def _needs(found: Check) -> str:
    """What a check needs, in Markdown: "`--nproc` or ranks started by `mp.spawn`"."""
    if found.needs in _NOT_AN_OPTION:
        return _NOT_AN_OPTION[found.needs]
    return f"`--{found.needs.replace('_', '-')}`{_OR.get(found.needs, '')}"


def explain(code: str) -> str:
    """What ``torchwise run --explain CODE`` prints (Markdown)."""
    found = get_check(code)
    if found is None:
        from torchwise.errors import TorchwiseError

        raise TorchwiseError(
            f"no run check {code!r}", hint="`torchwise run --list-checks` lists every code"
        )
    needs = f" Needs: {_needs(found)}." if found.needs else ""
    return (
        f"# {found.code} {found.name}\n\n"
        f"Severity: {found.severity.value}. Family: {FAMILIES[found.family]}.{needs}\n\n"
        f"{found.doc}\n"
    )


def table() -> str:
    """One line per check: code, severity, name, summary."""
    lines = []
    for found in all_checks().values():
        needs = f" ({_needs(found)})".replace("`", "") if found.needs else ""
        lines.append(
            f"{found.code} {found.severity.value:<7} {found.name:<38} {found.summary}{needs}"
        )
    return "\n".join(lines)


def markdown_index() -> str:
    """The "Checks" reference of docs/run.md: one heading and summary per check, by family."""
    lines = [INDEX_START, ""]
    checks = all_checks().values()
    for family, title in FAMILIES.items():
        members = [c for c in checks if c.family == family]
        lines += [f"### {title}", ""]
        for found in members:
            needs = f" (needs {_needs(found)})" if found.needs else ""
            lines += [
                f"#### {found.code} {found.name}",
                "",
                f"**{found.severity.value}**{needs}. {found.summary} "
                f"`torchwise run --explain {found.code}` prints the whole documentation.",
                "",
            ]
    return "\n".join([*lines, INDEX_END])


INDEX_START = (
    "<!-- checks: generated from the check docstrings (run/checks/); a test keeps it current -->"
)
INDEX_END = "<!-- /checks -->"


def section(doc: str, heading: str) -> str:
    """The text under a ``## heading`` of a check's doc, up to the next heading."""
    match = re.search(rf"^{re.escape(heading)}\s*$(.*?)(?=^## |\Z)", doc, re.M | re.S)
    return match.group(1).strip() if match else ""


def code_block(text: str) -> str:
    """The first fenced code block in ``text``."""
    match = re.search(r"```(?:python|py)?\n(.*?)```", text, re.S)
    return match.group(1) if match else ""
