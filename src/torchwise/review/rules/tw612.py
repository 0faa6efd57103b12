"""TW612 local-rank-argument (checkpoints).

The class docstring is its user documentation (`torchwise rules TW612`).
"""

from __future__ import annotations

import ast
import re

from torchwise.findings import Severity
from torchwise.review.engine.context import Context
from torchwise.review.registry import Rule, rule


@rule
class LocalRankArgument(Rule):
    """## What it does
    Flags a command-line option `--local_rank` declared without its dashed
    spelling `--local-rank`, in a file that reads the parsed value
    (`args.local_rank`) and never the `LOCAL_RANK` environment variable.

    ## Why is this bad?
    Since PyTorch 2.0, `python -m torch.distributed.launch` passes
    `--local-rank=N` (dashed): a parser that knows only `--local_rank` exits
    with "unrecognized arguments". `torchrun` passes no such option at all
    and sets `LOCAL_RANK` instead, so `args.local_rank` keeps its default and
    every process picks the same GPU.

    ## Example
    ```python
    import argparse

    import torch

    parser = argparse.ArgumentParser()
    parser.add_argument("--local_rank", type=int, default=0)
    args = parser.parse_args()
    torch.cuda.set_device(args.local_rank)
    ```

    ## Use instead
    ```python
    import argparse
    import os

    import torch

    parser = argparse.ArgumentParser()
    parser.add_argument("--local-rank", "--local_rank", type=int,
                        default=int(os.environ.get("LOCAL_RANK", 0)))
    args = parser.parse_args()
    torch.cuda.set_device(args.local_rank)
    ```
    """

    code = "TW612"
    name = "local-rank-argument"
    family = "checkpoints"
    severity = Severity.WARNING
    impact = "crash"
    message = (
        "`--local_rank` only: `torch.distributed.launch` passes `--local-rank` since "
        "PyTorch 2.0 (argparse exits) and `torchrun` passes none (set `LOCAL_RANK`); "
        "accept both spellings and default to `os.environ['LOCAL_RANK']`"
    )
    call_methods = frozenset({"add_argument"})
    needs_text = ("local_rank",)

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        func = node.func
        if not isinstance(func, ast.Attribute) or func.attr != "add_argument":
            return
        names = {arg.value for arg in node.args if isinstance(arg, ast.Constant)}
        if "--local_rank" not in names or "--local-rank" in names:
            return
        if _READS_ENVIRONMENT.search(ctx.source):
            return  # the environment is read too
        required = any(
            item.arg == "required" and isinstance(item.value, ast.Constant) and item.value.value
            for item in node.keywords
        )
        if ".local_rank" not in ctx.source and not required:
            return  # never read nor required: torchrun, which passes nothing, runs it
        ctx.report(self, node)


#: ``os.environ["LOCAL_RANK"]``, ``os.getenv("LOCAL_RANK")``: what torchrun sets.
_READS_ENVIRONMENT = re.compile(r"environ[^\n]{0,40}LOCAL_RANK|getenv\(\s*['\"]LOCAL_RANK")
