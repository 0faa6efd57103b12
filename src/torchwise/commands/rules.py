"""``torchwise rules``: list the review rules, or print one rule's documentation."""

from __future__ import annotations

import json

import click

from torchwise.commands._common import output_options
from torchwise.console import Console


@click.command()
@click.argument("code", required=False)
@click.option(
    "--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True
)
@output_options()
def rules(code: str | None, fmt: str, console: Console) -> None:
    """List every rule, explain CODE, or show a torch name's history.

    \b
      torchwise rules            the table of rules
      torchwise rules TW101      one rule's documentation
      torchwise rules torch.optim.lr_scheduler.ReduceLROnPlateau
                                 a torch/torchvision/torchaudio/torchtext name
                                 across releases: signatures, removals,
                                 deprecations, the checks on its arguments
    """
    text = _rules_text(code, fmt)
    if console.output is not None:
        console.emit(text)
        return
    for line in text.split("\n"):  # line by line: `torchwise rules | head -1` stops early
        console.emit(line)


def _rules_text(code: str | None, fmt: str) -> str:
    from torchwise.errors import TorchwiseError
    from torchwise.review.registry import all_rules, get_rule

    if code is not None and "." in code and not code.upper().startswith("TW"):
        return _history_text(code, fmt)
    if code is not None:
        info = get_rule(code)
        if info is None and code.strip().upper().startswith("TWR"):
            from torchwise.run.catalog import explain, get_check

            check = get_check(code)
            if check is not None:  # a `torchwise run` check: its documentation
                if fmt == "json":
                    return json.dumps(
                        {"code": check.code, "name": check.name, "family": check.family,
                         "severity": check.severity.value, "summary": check.summary,
                         "doc": check.doc},
                        indent=2,
                    )  # fmt: skip
                return explain(code)
        if info is None:
            raise TorchwiseError(f"no rule {code!r}", hint="`torchwise rules` lists every code")
        if fmt == "json":
            return json.dumps(_rule_dict(info), indent=2)
        fix = info.fix.value if info.fix else "none"
        state = "on" if info.default_enabled else "off"
        return (
            f"# {info.code} {info.name}\n\n"
            f"Severity: {info.severity.value}. On by default: {state}. Fix: {fix}.\n\n"
            f"{info.doc}"
        )
    table = all_rules()
    if fmt == "json":
        return json.dumps([_rule_dict(info) for info in table.values()], indent=2)
    lines = []
    for info in table.values():
        flags = ("*" if info.fix else " ") + (" " if info.default_enabled else "o")
        lines.append(f"{info.code} {flags} {info.severity.value:<7} {info.name:<36} {info.summary}")
    lines.append("\n* has an autofix   o off by default (enable with --extend-select CODE)")
    return "\n".join(lines)


def _history_text(name: str, fmt: str) -> str:
    from torchwise.errors import TorchwiseError
    from torchwise.review.contracts.history import history, render_history

    record = history(name)
    if record is None:
        raise TorchwiseError(
            f"{name!r} is not a torch, torchvision, torchaudio or torchtext name",
            hint="give a dotted name such as torch.nn.LSTM",
        )
    return json.dumps(record, indent=2) if fmt == "json" else render_history(record)


def _rule_dict(info: object) -> dict[str, object]:
    from torchwise.review.registry import RuleInfo

    assert isinstance(info, RuleInfo)
    return {
        "code": info.code,
        "name": info.name,
        "family": info.family,
        "severity": info.severity.value,
        "default_enabled": info.default_enabled,
        "fix": info.fix.value if info.fix else None,
        "summary": info.summary,
        "doc": info.doc,
    }
