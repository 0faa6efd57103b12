"""Static review of PyTorch code. Never imports torch.

Public API::

    from torchwise.review import review_paths, review_source, ReviewSettings
    report = review_paths(["src/"])                    # default settings: the default rules
    report = review_paths(["src/"], ReviewSettings(select=("TW1",)))
    for finding in report.findings:
        print(finding.location, finding.code, finding.message)

``review_paths`` indexes every file of the run (and the project files they
import) before the rules run; ``review_text`` reviews an editor's buffer as if
it were at a path (with a ``Workspace``, an editor session's summaries and
unsaved buffers carry over between calls); ``review_source`` reviews one
string on its own; ``project_imports`` lists the project files a file imports.
"""

from torchwise.findings import Applicability, Edit, Finding, Fix, Severity
from torchwise.review.registry import RuleInfo, all_rules, get_rule
from torchwise.review.runner import (
    FileReport,
    FixMode,
    ReviewReport,
    project_imports,
    review_paths,
    review_source,
    review_text,
)
from torchwise.review.settings import ReviewSettings, build_settings
from torchwise.review.workspace import Workspace

__all__ = [
    "Applicability",
    "Edit",
    "FileReport",
    "Finding",
    "Fix",
    "FixMode",
    "ReviewReport",
    "ReviewSettings",
    "RuleInfo",
    "Severity",
    "Workspace",
    "all_rules",
    "build_settings",
    "get_rule",
    "project_imports",
    "review_paths",
    "review_source",
    "review_text",
]
