"""TW414 distributed-launch (deprecated).

The class docstring is its user documentation (`torchwise rules TW414`).
"""

from __future__ import annotations

import ast

from torchwise.findings import Severity
from torchwise.review.engine.context import Context
from torchwise.review.registry import Rule, rule
from torchwise.review.rules._deprecated_moved import LAUNCH
from torchwise.review.rules._util import in_compat_code


@rule
class DistributedLaunch(Rule):
    """## What it does
    Flags uses of `torch.distributed.launch`: importing it, and launching it
    as a module (`"-m", "torch.distributed.launch"` in a command).

    ## Why is this bad?
    The launcher is deprecated in favour of `torchrun`
    (`torch.distributed.run`), which handles failures and elastic restarts
    and passes the local rank in the `LOCAL_RANK` environment variable
    instead of a `--local-rank` argument the script must parse.

    ## Example
    ```python
    import subprocess
    import sys

    subprocess.run([sys.executable, "-m", "torch.distributed.launch", "train.py"])
    ```

    ## Use instead
    ```python
    import subprocess

    subprocess.run(["torchrun", "--nproc-per-node", "2", "train.py"])
    ```
    """

    code = "TW414"
    name = "distributed-launch"
    family = "deprecated"
    severity = Severity.INFO
    message = "`torch.distributed.launch` is deprecated; use `torchrun` (`torch.distributed.run`)"
    needs_text = ("launch",)  # in the import or the command line that names the launcher

    def visit_Import(self, node: ast.Import, ctx: Context) -> None:
        if any(alias.name == LAUNCH or alias.name.startswith(LAUNCH + ".") for alias in node.names):
            if in_compat_code(ctx):
                return  # deliberate compatibility code for older torch
            ctx.report(self, node)

    def visit_ImportFrom(self, node: ast.ImportFrom, ctx: Context) -> None:
        module = node.module or ""
        if node.level:
            return
        launcher = module == LAUNCH or module.startswith(LAUNCH + ".")
        from_package = module == "torch.distributed" and any(a.name == "launch" for a in node.names)
        if launcher or from_package:
            if in_compat_code(ctx):
                return  # deliberate compatibility code for older torch
            ctx.report(self, node)

    def visit_Constant(self, node: ast.Constant, ctx: Context) -> None:
        value = node.value
        if not isinstance(value, str) or LAUNCH not in value:
            return
        parent = ctx.parent
        if value == LAUNCH:
            # an argv element or runpy.run_module's argument; not a message text
            launched = isinstance(parent, (ast.List, ast.Tuple, ast.Call))
        else:
            # a shell command line handed to subprocess/os.system
            callee = ctx.call_name(parent) if isinstance(parent, ast.Call) else None
            shell = callee is not None and (
                callee.startswith("subprocess.") or callee in {"os.system", "os.popen"}
            )
            launched = shell and f"-m {LAUNCH}" in value
        if launched and not in_compat_code(ctx):
            ctx.report(self, node)
