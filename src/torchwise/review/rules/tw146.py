"""TW146 setting-on-one-branch (training).

The class docstring is its user documentation (`torchwise rules TW146`).
"""

from __future__ import annotations

import ast

from torchwise.findings import Severity
from torchwise.review.engine import facts as F
from torchwise.review.engine.context import Context
from torchwise.review.registry import Rule, rule
from torchwise.review.rules._loops import Effects, is_optimizer_step, is_zero_grad, regions

_CLIPS = {"torch.nn.utils.clip_grad_norm_", "torch.nn.utils.clip_grad_value_"}


def _clips(call: F.CallEvent) -> bool:
    return call.qualname in _CLIPS or call.method in {"clip_grad_norm_", "clip_grad_value_"}


#: What a training step must do on every path, with how the message names it.
_STEP_DUTIES = (
    (_clips, "gradients are clipped"),
    (is_zero_grad, "gradients are zeroed"),
)


@rule
class SettingOnOneBranch(Rule):
    """## What it does
    Flags a training step done on both paths of an `if` (an optimizer steps
    in each branch) where gradient clipping or `zero_grad()` happens on one
    path only; and `sampler.set_epoch(epoch)` under a condition when the
    `DistributedSampler` is created on every path.

    ## Why is this bad?
    Configuration branches (`if use_amp:`, `if args.distributed:`) are tested
    on one setting and shipped with both. Training without AMP runs
    unclipped and may diverge; without the zeroing the gradients accumulate;
    and a sampler never given its epoch serves the same order every epoch.
    The difference is silent: the other path runs, only worse.

    ## Example
    ```python
    import torch

    def step(model, loss, optimizer, scaler, use_amp):
        if use_amp:
            scaler.scale(loss).backward()
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            scaler.step(optimizer)
            scaler.update()
        else:
            loss.backward()
            optimizer.step()
    ```

    ## Use instead
    ```python
    import torch

    def step(model, loss, optimizer, scaler, use_amp):
        if use_amp:
            scaler.scale(loss).backward()
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            scaler.step(optimizer)
            scaler.update()
        else:
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
    ```
    """

    code = "TW146"
    name = "setting-on-one-branch"
    family = "training"
    severity = Severity.WARNING
    message = "{what} only when `{condition}` is {polarity} (line {line}): {consequence}"
    reported: set[int]

    def __init__(self) -> None:
        self.reported = set()

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        func = node.func
        if not (isinstance(func, ast.Attribute) and func.attr == "set_epoch") or not ctx.branch:
            return
        sampler = ctx.value_of(func.value)
        if sampler is None or sampler.kind != F.SAMPLER or not isinstance(sampler.node, ast.Call):
            return
        created = next((c for c in ctx.module.calls if c.node is sampler.node), None)
        if created is None or any(
            item.arg == "shuffle" for item in sampler.node.keywords
        ):  # shuffle=False: no order to change
            return
        condition, polarity = ctx.branch[-1]
        if (condition, polarity) in ctx.guards:
            return  # past `if args.evaluate: ...; return`: the other path ends there
        if (condition, polarity) in created.branch or (condition, not polarity) in created.branch:
            return  # created under the same choice
        ctx.report(
            self,
            node,
            what="the sampler is given its epoch",
            condition=condition,
            polarity="true" if polarity else "false",
            line=str(node.lineno),
            consequence=(
                f"the `DistributedSampler` of line {created.line} exists on every path, and "
                "without `set_epoch` it shuffles the same way every epoch"
            ),
        )

    def leave_module(self, module: F.ModuleFacts, ctx: Context) -> None:
        effects = Effects(module, ctx)
        for function, loops in regions(module):
            for loop in loops:
                self._judge(loop.calls, len(loop.branch), effects, ctx)
            if function is not None:
                self._judge(function.calls, 0, effects, ctx)

    def _judge(self, calls: list[F.CallEvent], depth: int, effects: Effects, ctx: Context) -> None:
        """The calls of a loop or function, split at each condition below ``depth``."""
        conditions = {c.branch[depth] for c in calls if len(c.branch) > depth}
        for condition, _ in conditions:
            sides = {
                polarity: [
                    c
                    for c in calls
                    if len(c.branch) > depth and c.branch[depth] == (condition, polarity)
                ]
                for polarity in (True, False)
            }
            steps = {p: [c for c in calls if is_optimizer_step(c)] for p, calls in sides.items()}
            if not steps[True] or not steps[False]:
                continue
            outside = [c for c in calls if len(c.branch) <= depth]
            for duty, what in _STEP_DUTIES:
                if any(effects.call_does(c, "zero_grad") if duty is is_zero_grad else duty(c)
                       for c in outside):  # fmt: skip
                    continue
                done = {p: any(duty(c) for c in calls) for p, calls in sides.items()}
                if done[True] == done[False]:
                    continue
                missing = not done[True]
                step = steps[missing][0]
                if step.line in self.reported:
                    continue
                self.reported.add(step.line)
                where = next(c for c in sides[not missing] if duty(c))
                ctx.report(
                    self,
                    step.node,
                    what=what,
                    condition=condition,
                    polarity="true" if not missing else "false",
                    line=str(where.line),
                    consequence="this step runs without it on the other path",
                )
