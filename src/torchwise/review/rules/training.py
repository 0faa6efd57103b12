"""Training-loop rules: the optimizer step, autograd graphs and no-op statements.

They reason about the loop (or function) that calls ``backward()`` and
``optimizer.step()``; the shared machinery is in :mod:`._loops`.
"""

from __future__ import annotations

import ast
import re

from torchwise.review import facts as F
from torchwise.review.context import Context
from torchwise.review.findings import Applicability, Edit, Fix, Severity
from torchwise.review.registry import Rule, rule
from torchwise.review.rules._loops import (
    Effects,
    enclosing_loops,
    innermost_loop,
    innermost_loop_is,
    is_backward,
    is_optimizer_step,
    is_scheduler_step,
    is_tensor_backward,
    is_zero_grad,
    local_callee,
    position,
    regions,
)


@rule
class MissingZeroGrad(Rule):
    """## What it does
    Flags a training loop that calls `backward()` and `optimizer.step()` but
    never clears the gradients (`optimizer.zero_grad()`, `model.zero_grad()` or
    setting `param.grad = None`).

    ## Why is this bad?
    `backward()` *adds* to `.grad`. Without zeroing, every step uses the sum of
    all gradients so far: the effective learning rate grows with the step count
    and training diverges or stalls, usually without an error.

    ## Example
    ```python
    for x, y in loader:
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
    ```

    ## Use instead
    ```python
    for x, y in loader:
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
    ```
    Gradient accumulation is fine: zero the gradients after the step that
    consumes them, inside the loop.
    """

    code = "TW101"
    name = "missing-zero-grad"
    family = "training"
    severity = Severity.ERROR
    message = "gradients are never zeroed in this training loop: `.grad` accumulates across steps"

    def __init__(self) -> None:
        self.grad_resets: list[ast.AST] = []  # `p.grad = None` statements

    def visit_Assign(self, node: ast.Assign, ctx: Context) -> None:
        if any(isinstance(t, ast.Attribute) and t.attr == "grad" for t in node.targets):
            self.grad_resets.append(node)

    def leave_module(self, module: F.ModuleFacts, ctx: Context) -> None:
        effects = Effects(module)
        for function, loops in regions(module):
            calls = function.calls if function else [c for c in module.calls if c.loop_depth]
            for backward in (c for c in calls if is_tensor_backward(c)):
                if backward.loop_depth == 0 or (function and backward not in _loop_calls(loops)):
                    self._check_loopless(backward, function, module, effects, ctx)
                    continue
                step_loop = next(
                    (
                        loop
                        for loop in enclosing_loops(innermost_loop(loops, backward))
                        if effects.region_does(loop.calls, "step")
                    ),
                    None,
                )
                if step_loop is not None and not self._zeroes(
                    step_loop.calls, step_loop.node, effects
                ):
                    ctx.report(self, backward.node)

    def _check_loopless(
        self,
        backward: F.CallEvent,
        function: F.FunctionFacts | None,
        module: F.ModuleFacts,
        effects: Effects,
        ctx: Context,
    ) -> None:
        """A ``train_step`` function: fine if it or every loop calling it zeroes."""
        if function is None or not effects.region_does(function.calls, "step"):
            return
        if self._zeroes(function.calls, function.node, effects):
            return
        callers = [
            loop
            for _, loops in regions(module)
            for loop in loops
            if any(local_callee(call) == function.name for call in loop.calls)
        ]
        if callers and not any(self._zeroes(loop.calls, loop.node, effects) for loop in callers):
            ctx.report(self, backward.node)

    def _zeroes(self, calls: list[F.CallEvent], region: ast.AST, effects: Effects) -> bool:
        if effects.region_does(calls, "zero_grad"):
            return True
        first, last = region.lineno, region.end_lineno or region.lineno  # type: ignore[attr-defined]
        return any(first <= node.lineno <= last for node in self.grad_resets)  # type: ignore[attr-defined]


def _loop_calls(loops: list[F.LoopFacts]) -> set[F.CallEvent]:
    return {call for loop in loops for call in loop.calls}


@rule
class ZeroGradBeforeStep(Rule):
    """## What it does
    Flags `zero_grad()` called after `backward()` and before the
    `optimizer.step()` that should use those gradients.

    ## Why is this bad?
    The step then sees zero gradients: the model never learns (with weight
    decay or momentum it even drifts). Nothing errors.

    ## Example
    ```python
    for x, y in loader:
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.zero_grad()
        optimizer.step()
    ```

    ## Use instead
    ```python
    for x, y in loader:
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    ```
    """

    code = "TW102"
    name = "zero-grad-before-step"
    family = "training"
    severity = Severity.ERROR
    message = "`zero_grad()` between `backward()` and `{step}`: the step sees zero gradients"

    def leave_function(self, function: F.FunctionFacts, ctx: Context) -> None:
        self._check(function.calls, function.loops, ctx)

    def leave_module(self, module: F.ModuleFacts, ctx: Context) -> None:
        self._check([c for c in module.calls if c.loop_depth], module.loops, ctx)

    def _check(self, calls: list[F.CallEvent], loops: list[F.LoopFacts], ctx: Context) -> None:
        relevant = sorted(
            (c for c in calls if is_tensor_backward(c) or is_zero_grad(c) or is_optimizer_step(c)),
            key=lambda c: position(c.node),
        )
        for index, zero in enumerate(relevant):
            if not is_zero_grad(zero):
                continue
            region = innermost_loop(loops, zero)
            same = [c for c in relevant if innermost_loop(loops, c) is region]
            before = [c for c in relevant[:index] if c in same]
            after = [c for c in relevant[index + 1 :] if c in same]
            # the last thing before it is a backward, the next is a matching step
            if not before or not is_tensor_backward(before[-1]):
                continue
            step = next((c for c in after if not is_zero_grad(c)), None)
            if step is None or not is_optimizer_step(step):
                continue
            if not _same_optimizer(zero, step):
                continue
            ctx.report(self, zero.node, step=f"{step.receiver or 'optimizer'}.step()")


def _same_optimizer(zero: F.CallEvent, step: F.CallEvent) -> bool:
    if zero.receiver_kind == F.MODULE or zero.receiver is None or step.receiver is None:
        return True
    if step.receiver_kind == F.SCALER:  # scaler.step(optimizer)
        args = step.node.args
        return not args or Context.dotted(args[0]) in (None, zero.receiver)
    return zero.receiver == step.receiver


@rule
class SchedulerBeforeOptimizer(Rule):
    """## What it does
    Flags `scheduler.step()` called before `optimizer.step()` in the same
    iteration of a loop.

    ## Why is this bad?
    Since PyTorch 1.1 the scheduler must step *after* the optimizer. Stepping it
    first skips the first value of the learning-rate schedule (warm-up starts
    one step late, step decays happen one epoch early) and PyTorch warns.

    ## Example
    ```python
    for epoch in range(10):
        scheduler.step()
        for x, y in loader:
            optimizer.zero_grad()
            criterion(model(x), y).backward()
            optimizer.step()
    ```

    ## Use instead
    ```python
    for epoch in range(10):
        for x, y in loader:
            optimizer.zero_grad()
            criterion(model(x), y).backward()
            optimizer.step()
        scheduler.step()
    ```
    """

    code = "TW103"
    name = "scheduler-step-before-optimizer"
    family = "training"
    severity = Severity.WARNING
    message = "`{scheduler}.step()` runs before `optimizer.step()` in the same iteration"

    def leave_loop(self, loop: F.LoopFacts, ctx: Context) -> None:
        direct = [c for c in loop.calls if innermost_loop_is(loop, c)]
        scheduler = next((c for c in direct if is_scheduler_step(c)), None)
        if scheduler is None:
            return
        steps = [c for c in loop.calls if is_optimizer_step(c)]
        if steps and min(position(c.node) for c in steps) > position(scheduler.node):
            ctx.report(self, scheduler.node, scheduler=scheduler.receiver or "scheduler")


@rule
class LossAccumulatedWithGraph(Rule):
    """## What it does
    Flags a loss or model output accumulated across the iterations of a
    training loop (one that calls `backward()` or steps an optimizer) with its
    autograd graph attached: `total += loss`, `losses.append(loss)`,
    `outputs.append(model(x))` (outside `torch.no_grad()`).

    ## Why is this bad?
    Each iteration's graph (every activation saved for backward) stays alive
    through the accumulator. Memory grows every step until the process runs
    out of memory, typically hours into training.

    ## Example
    ```python
    total = 0.0
    for x, y in loader:
        loss = criterion(model(x), y)
        loss.backward()
        total += loss
    ```

    ## Use instead
    ```python
    total = 0.0
    for x, y in loader:
        loss = criterion(model(x), y)
        loss.backward()
        total += loss.item()  # or loss.detach()
    ```
    Accumulating on purpose to call `backward()` on the total once is fine,
    and is not flagged.
    """

    code = "TW106"
    name = "loss-accumulated-with-graph"
    family = "training"
    severity = Severity.WARNING
    message = (
        "`{target}` accumulates `{value}` with its autograd graph across iterations; "
        "use `.item()` or `.detach()`"
    )

    def __init__(self) -> None:
        # (function node or None, name) -> loop depth of its last plain assignment
        self.assigned_at: dict[tuple[int, str], int] = {}
        # (statement, target, value text, function id, the loop it runs in)
        self.candidates: list[tuple[ast.AST, str, str, int, F.LoopFacts]] = []

    def _key(self, ctx: Context, name: str) -> tuple[int, str]:
        return (id(ctx.function) if ctx.function else 0, name)

    def visit_Assign(self, node: ast.Assign, ctx: Context) -> None:
        for target in node.targets:
            name = ctx.dotted(target)
            if name is not None:
                self.assigned_at[self._key(ctx, name)] = len(ctx.loops)

    def visit_AugAssign(self, node: ast.AugAssign, ctx: Context) -> None:
        if isinstance(node.op, ast.Add):
            self._candidate(node, node.target, node.value, ctx)

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        func = node.func
        if not (isinstance(func, ast.Attribute) and func.attr == "append"):
            return
        if len(node.args) == 1 and isinstance(ctx.parent, ast.Expr):
            self._candidate(node, func.value, node.args[0], ctx)

    def _candidate(self, node: ast.AST, target: ast.expr, value: ast.expr, ctx: Context) -> None:
        if not ctx.loops or ctx.in_no_grad:
            return
        name = ctx.dotted(target)
        if name is None or ctx.kind_of(value) not in (F.LOSS, F.OUTPUT):
            return
        if re.search(rf"\b{re.escape(name)}\b", ctx.text(value)):
            return  # `total += total / n` rescales the accumulator: no new graph joins it
        depth = self.assigned_at.get(self._key(ctx, name))
        if depth is not None and depth >= len(ctx.loops):
            return  # reset inside this iteration: a per-step sum, not an accumulator
        function_id = id(ctx.function) if ctx.function else 0
        self.candidates.append((node, name, ctx.text(value), function_id, ctx.loops[-1]))

    def leave_function(self, function: F.FunctionFacts, ctx: Context) -> None:
        self._judge(function.calls, id(function), ctx)

    def leave_module(self, module: F.ModuleFacts, ctx: Context) -> None:
        self._judge(module.calls, 0, ctx)

    def _judge(self, calls: list[F.CallEvent], function_id: int, ctx: Context) -> None:
        backward_texts = [ctx.text(c.node) for c in calls if is_backward(c)]
        for node, target, value, owner, loop in self.candidates:
            if owner != function_id:
                continue
            if not any(is_tensor_backward(c) or is_optimizer_step(c) for c in loop.calls):
                continue  # not a training loop: e.g. terms summed inside a loss function
            if any(re.search(rf"\b{re.escape(target)}\b", text) for text in backward_texts):
                continue  # accumulated to backward through the total: intended
            ctx.report(self, node, target=target, value=value)


_NO_OP_METHODS = {"eval", "train", "zero_grad", "backward", "step"}


@rule
class MethodNotCalled(Rule):
    """## What it does
    Flags `model.eval`, `model.train`, `optimizer.zero_grad`,
    `loss.backward` and `optimizer.step` written as statements without
    parentheses.

    ## Why is this bad?
    The statement only looks the method up and throws it away: nothing
    happens. The model stays in training mode, gradients are not computed or
    not applied, and Python says nothing.

    ## Example
    ```python
    model.eval
    optimizer.zero_grad
    ```

    ## Use instead
    ```python
    model.eval()
    optimizer.zero_grad()
    ```

    ## Fix safety
    Safe: a bare attribute statement has no effect, so calling the method is
    the only thing it can have meant.
    """

    code = "TW107"
    name = "method-not-called"
    family = "training"
    severity = Severity.ERROR
    message = "`{text}` without parentheses does nothing; call it: `{text}()`"
    fix = Applicability.SAFE

    def visit_Expr(self, node: ast.Expr, ctx: Context) -> None:
        value = node.value
        if not (isinstance(value, ast.Attribute) and value.attr in _NO_OP_METHODS):
            return
        if ctx.dotted(value.value) is None and not isinstance(value.value, ast.Call):
            return
        end = ctx.span(value)[1]
        fix = Fix(f"Call `{value.attr}()`", (Edit(end, end, "()"),), Applicability.SAFE)
        ctx.report(self, value, fix=fix, text=ctx.text(value))


@rule
class BackwardUnderNoGrad(Rule):
    """## What it does
    Flags `backward()` on a loss computed inside `torch.no_grad()` or
    `torch.inference_mode()` (including functions decorated with them).

    ## Why is this bad?
    Under `no_grad` no graph is recorded, so the loss does not require grad
    and `backward()` raises `element 0 of tensors does not require grad` — or,
    when part of the loss was computed outside, silently skips the rest.

    ## Example
    ```python
    import torch

    @torch.no_grad()
    def train_step(model, x, optimizer):
        loss = model(x).sum()
        loss.backward()
        optimizer.step()
    ```

    ## Use instead
    ```python
    import torch

    def train_step(model, x, optimizer):
        loss = model(x).sum()
        loss.backward()
        optimizer.step()
    ```
    """

    code = "TW108"
    name = "backward-under-no-grad"
    family = "training"
    severity = Severity.ERROR
    message = "`backward()` on a value computed under `{mode}`: no graph was recorded"

    def __init__(self) -> None:
        self.computed_without_grad: set[tuple[int, str]] = set()

    def visit_Assign(self, node: ast.Assign, ctx: Context) -> None:
        if not ctx.in_no_grad:
            return
        for target in node.targets:
            name = ctx.dotted(target)
            if name is not None:
                self.computed_without_grad.add((id(ctx.function), name))

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        func = node.func
        if not (isinstance(func, ast.Attribute) and func.attr == "backward") or not ctx.in_no_grad:
            return
        function = ctx.function
        decorated = function is not None and function.no_grad
        receiver = ctx.dotted(func.value)
        if decorated or (id(function), receiver) in self.computed_without_grad:
            ctx.report(self, node, mode="torch.no_grad()")
