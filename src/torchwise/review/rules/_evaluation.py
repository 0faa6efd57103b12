"""What evaluation code is, for TW104 and TW114: which functions evaluate,
which model they run, and whether that model behaves differently in training
mode (dropout, batch norm), resolved across files where the index can.
"""

from __future__ import annotations

import re

from torchwise.review.engine import effects as E
from torchwise.review.engine import facts as F
from torchwise.review.engine.context import Context
from torchwise.review.index.project import (
    BATCHNORM,
    DROPOUT,
    DROPOUT_INSIDE,
    TORCHVISION_BN,
    TORCHVISION_DROPOUT,
)
from torchwise.review.rules._loops import (
    Effects,
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
#: `test()` evaluates in tutorials and scripts; in a test suite it is a unit test,
#: so these count only when they loop over data.
_TEST_NAME = re.compile(
    r"^_?(test|testing|run_test|test_(model|epoch|loop|all|dataset|loader|net))$"
)
#: Generation of samples for inspection (images, text) from a trained model.
_SAMPLE_NAME = re.compile(r"^_?(sample|sample_\w+|generate|generate_\w+|sampling)$")
#: Wrappers that hide which model they run.
_WRAPPERS = re.compile(
    r"^torch\.nn\.(DataParallel|parallel\.\w+|utils\.\w+)$|DistributedDataParallel|FullyShardedDataParallel"
)

HAS, NONE, UNKNOWN = "has", "none", "unknown"


def evaluation_kind(function: F.FunctionFacts) -> str | None:
    """ "evaluate", "test" or "sample" when the function's name says it evaluates."""
    name = function.name
    if name.endswith("_step"):
        return None  # Lightning's validation_step/test_step run under no_grad already
    if _EVAL_NAME.match(name):
        return "evaluate"
    if _TEST_NAME.match(name):
        return "test"
    if _SAMPLE_NAME.match(name):
        return "sample"
    return None


def is_evaluation_function(function: F.FunctionFacts) -> bool:
    kind = evaluation_kind(function)
    if kind == "test":
        return any(_model_call_in_loop(loop) for loop in function.loops)
    return kind is not None


def _model_call_in_loop(loop: F.LoopFacts) -> bool:
    return any(E.is_model_call(call) for call in loop.calls)


def model_calls(function: F.FunctionFacts) -> list[F.CallEvent]:
    return [call for call in function.calls if E.is_model_call(call)]


def train_eval_difference(model: F.Value | None, ctx: Context) -> str:
    """Whether the model behaves differently in training mode: HAS (dropout or
    batch norm), NONE (known to have neither), or UNKNOWN."""
    if model is None or "guessed" in model.flags or model.kind != F.MODULE:
        return UNKNOWN
    if "dropout" in model.flags or "batchnorm" in model.flags:
        return HAS
    origin = model.origin
    if origin is None or "opaque" in model.flags or _WRAPPERS.search(origin):
        return UNKNOWN
    klass = ctx.project.klass(origin)
    if klass is not None:
        if klass.dropout or klass.batchnorm:
            return HAS
        return UNKNOWN if klass.unknown else NONE
    if DROPOUT.match(origin) or BATCHNORM.match(origin) or origin in DROPOUT_INSIDE:
        return HAS
    if TORCHVISION_BN.match(origin) or TORCHVISION_DROPOUT.match(origin):
        return HAS
    if origin.startswith("torch.nn.") and origin.rsplit(".", 1)[-1][:1].isupper():
        if origin.rsplit(".", 1)[-1] in {"LSTM", "GRU", "RNN"}:
            return UNKNOWN  # dropout= between layers, when given
        return NONE  # a single layer: Linear, Conv2d, Embedding, ...
    return UNKNOWN


def models_differ(calls: list[F.CallEvent], ctx: Context) -> bool:
    """Whether any model these calls run may behave differently in training mode."""
    verdicts = {
        train_eval_difference(call.callee_value or call.receiver_value, ctx) for call in calls
    }
    return bool(verdicts & {HAS, UNKNOWN})


def functions_called_after_eval(module: F.ModuleFacts, ctx: Context) -> set[str]:
    """Names of this file's functions that some caller runs after `.eval()`: in
    this file, or (through the index) anywhere in the project."""
    names: set[str] = set()
    effects = Effects(module, ctx)
    scopes: list[list[F.CallEvent]] = [f.calls for f in module.functions]
    scopes.append(top_level_calls(module))
    for calls in scopes:
        evals = [c for c in calls if is_eval(c) or effects.call_does(c, "eval")]
        for call in calls:
            name = local_callee(call)
            if name is None:
                continue
            if any(
                position(e.node) < position(call.node) and not F.exclusive(e.branch, call.branch)
                for e in evals
            ):
                names.add(name)
    for function in module.functions:
        if function.target is not None and any(
            site.after_eval for site in ctx.project.callers(function.target)
        ):
            names.add(function.name)
    return names
