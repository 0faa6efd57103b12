"""Evaluation-mode rules: `.eval()`/`.train()` and autograd during evaluation."""

from __future__ import annotations

import re

from torchwise.review import facts as F
from torchwise.review.rules._loops import (
    is_eval,
    local_callee,
    position,
    top_level_calls,
)

_EVAL_NAME = re.compile(
    r"^(_?)(evaluate|evaluation|eval|validate|validation|val|predict|inference|infer|"
    r"run_eval\w*|run_validation|compute_metrics)(_(model|epoch|loop|all|dataset|loader))?$"
    r"|_(evaluate|eval|validate|validation)$"
)


def is_evaluation_function(function: F.FunctionFacts) -> bool:
    return bool(_EVAL_NAME.match(function.name)) and not function.name.endswith("_step")


def _functions_called_after_eval(module: F.ModuleFacts) -> set[str]:
    """Names of local functions that some caller invokes after a `.eval()` call."""
    names: set[str] = set()
    scopes: list[list[F.CallEvent]] = [f.calls for f in module.functions]
    scopes.append(top_level_calls(module))
    for calls in scopes:
        evals = [position(c.node) for c in calls if is_eval(c)]
        if not evals:
            continue
        first_eval = min(evals)
        for call in calls:
            name = local_callee(call)
            if name is not None and position(call.node) > first_eval:
                names.add(name)
    return names
