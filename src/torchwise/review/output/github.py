"""``--format github``: GitHub Actions workflow commands, one annotation per finding.

    ::error file=train.py,line=12,col=5,endLine=12,endColumn=20,title=TW101 missing-zero-grad::...

Escaping follows the Actions runner: in the message ``%``, ``\\r`` and ``\\n``
are percent-encoded; in properties ``:`` and ``,`` are too. A notebook finding
annotates the ``.ipynb`` file without a line (its JSON lines are not the
cell's) and names the cell in the message.
"""

from __future__ import annotations

from torchwise.findings import Finding, Severity
from torchwise.review.output import RenderOptions
from torchwise.review.registry import get_rule
from torchwise.review.runner import ReviewReport

COMMANDS = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "notice"}


def escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def annotation(finding: Finding) -> str:
    info = get_rule(finding.code)
    title = f"{finding.code} {info.name}" if info is not None else finding.code
    properties = [("file", finding.path)]
    message = finding.message
    if finding.cell is None:
        properties += [
            ("line", str(finding.line)),
            ("col", str(finding.column)),
            ("endLine", str(finding.end_line)),
            ("endColumn", str(finding.end_column)),
        ]
    else:
        message = f"cell {finding.cell}, line {finding.cell_line}: {message}"
    properties.append(("title", title))
    rendered = ",".join(f"{key}={escape_property(value)}" for key, value in properties)
    return f"::{COMMANDS[finding.severity]} {rendered}::{escape_data(message)}"


def render(report: ReviewReport, options: RenderOptions) -> str:
    return "\n".join(annotation(finding) for finding in report.findings)
