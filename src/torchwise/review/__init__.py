"""Static review of PyTorch code. Never imports torch.

Public API::

    from torchwise.review import review_paths, review_source, ReviewSettings
    report = review_paths(["src/"], ReviewSettings())
    for finding in report.findings:
        print(finding.location, finding.code, finding.message)
"""

from torchwise.review.findings import Applicability, Edit, Finding, Fix, Severity
from torchwise.review.registry import RuleInfo, all_rules, get_rule
from torchwise.review.runner import FileReport, FixMode, ReviewReport, review_paths, review_source
from torchwise.review.settings import ReviewSettings, build_settings

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
    "all_rules",
    "build_settings",
    "get_rule",
    "review_paths",
    "review_source",
]
