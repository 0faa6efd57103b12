"""``torchwise tune``: measured performance advice for a training step.

    >>> from torchwise.tune import tune
    >>> report = tune(model, torch.randn(32, 3, 32, 32), budget_s=30)
    >>> print(report.render("text"))

See :func:`torchwise.tune.api.tune` and docs/tune.md. The statistics
(:mod:`torchwise.tune.stats`) and the interleaved session
(:mod:`torchwise.tune.session`) are usable on their own for any A/B timing.
"""

from torchwise.tune.api import tune
from torchwise.tune.options import TuneOptions
from torchwise.tune.report import FORMATS, TuneReport
from torchwise.tune.session import Arm, SessionConfig, run_session
from torchwise.tune.stats import Comparison, Verdict, compare

__all__ = [
    "FORMATS",
    "Arm",
    "Comparison",
    "SessionConfig",
    "TuneOptions",
    "TuneReport",
    "Verdict",
    "compare",
    "run_session",
    "tune",
]
