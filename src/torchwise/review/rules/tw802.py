"""TW802 rank-dependent-exit-from-loop (distributed).

The class docstring is its user documentation (`torchwise rules TW802`).
"""

from __future__ import annotations

import ast
import re

from torchwise.findings import Severity
from torchwise.review.engine import effects as E
from torchwise.review.engine import facts as F
from torchwise.review.engine.context import Context
from torchwise.review.engine.dispatch import subtree
from torchwise.review.registry import Rule, rule
from torchwise.review.rules._distributed import DDP

#: A test that only some ranks pass: which rank this is.
_RANK_TEST = re.compile(
    r"\b(rank|local_rank|global_rank|get_rank\(\)|is_main_process\(\)|is_master|main_process|"
    r"is_rank_zero|rank_zero)\b"
)
#: Reductions that make a value the same on every rank.
_REDUCTIONS = re.compile(
    r"\b(all_reduce|all_gather\w*|reduce|broadcast\w*|gather\w*|reduce_dict)\("
)


@rule
class RankDependentExitFromLoop(Rule):
    """## What it does
    Flags a `break` or `return` out of a loop whose iterations run a
    collective (an explicit `all_reduce`/`barrier`/..., or the backward of a
    `DistributedDataParallel` model), under a test that ranks can answer
    differently: which rank this is (`if rank == 0: break`), or a value one
    rank computed from its own data and never reduced (`if loss.item() <
    target: break`, `if not math.isfinite(loss_value): return`).

    ## Why is this bad?
    A collective returns only when every rank of the group has called it.
    The ranks that leave the loop stop calling it; the others block in the
    next one, and the job hangs until the collective time-out (30 minutes
    by default with NCCL), holding every GPU, with no error pointing here.
    Decide on a value every rank shares: reduce it first
    (`dist.all_reduce(flag)`) or broadcast rank 0's decision.

    ## Example
    ```python
    from torch.nn.parallel import DistributedDataParallel as DDP

    def train(model, loader, optimizer, target):
        model = DDP(model)
        for x, y in loader:
            loss = model(x, y)
            loss.backward()
            optimizer.step()
            if loss.item() < target:
                break
    ```

    ## Use instead
    ```python
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    def train(model, loader, optimizer, target):
        model = DDP(model)
        for x, y in loader:
            loss = model(x, y)
            loss.backward()
            optimizer.step()
            done = torch.tensor(float(loss.item() < target))
            dist.all_reduce(done)
            if done.item() > 0:
                break
    ```
    """

    code = "TW802"
    name = "rank-dependent-exit-from-loop"
    family = "distributed"
    severity = Severity.WARNING
    in_test_modules = False
    message = (
        "`{exit}` under `{test}`, which ranks can answer differently ({why}), leaves a loop "
        "whose iterations run a collective ({collective}): the other ranks block in it until "
        "the time-out"
    )

    def leave_loop(self, loop: F.LoopFacts, ctx: Context) -> None:
        collective = _collective(loop, ctx)
        if collective is None:
            return
        local = _rank_local_names(loop.node, ctx)
        for exit_node, tests in _exits(loop.node):
            for test in tests:
                text = ctx.text(test)
                why = _why(text, test, local)
                if why is not None and not _REDUCTIONS.search(
                    ctx.text(loop.node)[: _offset(loop.node, exit_node, ctx)]
                ):
                    kind = "break" if isinstance(exit_node, ast.Break) else "return"
                    ctx.report(
                        self, exit_node, exit=kind, test=text[:80], why=why, collective=collective
                    )
                    return


def _offset(loop: ast.AST, node: ast.AST, ctx: Context) -> int:
    return ctx.span(node)[0] - ctx.span(loop)[0]


class _WrapsDdp:
    """Per file, asked once: whether it wraps a model in DistributedDataParallel."""

    def __init__(self) -> None:
        self._found: bool | None = None

    def found(self, ctx: Context) -> bool:
        if self._found is None:
            self._found = "DistributedDataParallel" in ctx.source and any(
                isinstance(node, ast.Call) and (ctx.call_name(node) or "") in DDP
                for node in ctx.module_nodes()
            )
        return self._found


def _collective(loop: F.LoopFacts, ctx: Context) -> str | None:
    for call in loop.calls:
        if E.needs_process_group(call) and not (call.qualname or "").endswith(
            ("get_rank", "get_world_size")
        ):
            return f"`{ctx.text(call.node.func)}` on line {call.line}"
    if ctx.helper(_WrapsDdp).found(ctx):
        for call in loop.calls:
            if E.is_tensor_backward(call):
                return f"the DDP gradient all-reduce in `backward()` on line {call.line}"
    return None


def _exits(loop: ast.AST) -> list[tuple[ast.stmt, list[ast.expr]]]:
    """``break`` (of this loop) and ``return`` statements, with the ``if`` tests above them."""
    found: list[tuple[ast.stmt, list[ast.expr]]] = []

    def walk(body: list[ast.stmt], tests: list[ast.expr], inner_loop: bool) -> None:
        for statement in body:
            leaves = isinstance(statement, ast.Return) or (
                isinstance(statement, ast.Break) and not inner_loop
            )
            if leaves and tests:
                found.append((statement, list(tests)))
            elif isinstance(statement, ast.If):
                walk(statement.body, [*tests, statement.test], inner_loop)
                walk(statement.orelse, [*tests, statement.test], inner_loop)
            elif isinstance(statement, (ast.For, ast.AsyncFor, ast.While)):
                walk(statement.body, tests, True)
            elif isinstance(statement, (ast.With, ast.AsyncWith, ast.Try)):
                walk(statement.body, tests, inner_loop)

    if isinstance(loop, (ast.For, ast.AsyncFor, ast.While)):
        walk(loop.body, [], False)
    return found


def _rank_local_names(loop: ast.AST, ctx: Context) -> set[str]:
    """Names the loop assigns from ``.item()`` of a tensor: each rank's own number."""
    names = set()
    for node in subtree(loop):
        if isinstance(node, ast.Assign) and ".item()" in ctx.text(node.value):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    names.add(target.id)
    return names


def _why(text: str, test: ast.expr, local: set[str]) -> str | None:
    if _RANK_TEST.search(text):
        return "it tests which rank this is"
    if ".item()" in text:
        return "it reads this rank's own tensor"
    read = {node.id for node in subtree(test) if isinstance(node, ast.Name)}
    shared = sorted(read & local)
    if shared:
        return f"`{shared[0]}` is this rank's own `.item()`"
    return None
