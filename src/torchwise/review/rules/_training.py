"""Training-loop rules: the optimizer step, autograd graphs and no-op statements.

They reason about the loop (or function) that calls ``backward()`` and
``optimizer.step()``; the shared machinery is in :mod:`._loops`.
"""

from __future__ import annotations

from torchwise.review.engine import facts as F
from torchwise.review.engine.context import Context


def loop_calls(loops: list[F.LoopFacts]) -> set[F.CallEvent]:
    return {call for loop in loops for call in loop.calls}


def same_optimizer(zero: F.CallEvent, step: F.CallEvent) -> bool:
    if zero.receiver_kind == F.MODULE or zero.receiver is None or step.receiver is None:
        return True
    if step.receiver_kind == F.SCALER:  # scaler.step(optimizer)
        args = step.node.args
        return not args or Context.dotted(args[0]) in (None, zero.receiver)
    return zero.receiver == step.receiver


NO_OP_METHODS = {"eval", "train", "zero_grad", "backward", "step"}
