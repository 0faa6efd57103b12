"""Deprecated APIs (TW412-TW415): functions and modules PyTorch moved elsewhere.

Registered through :mod:`torchwise.review.rules.deprecated` (same family).
"""

from __future__ import annotations

import ast

from torchwise.review.context import Context
from torchwise.review.findings import Applicability, Fix, Severity
from torchwise.review.registry import Rule, rule
from torchwise.review.rules._util import (
    add_keyword,
    has_kwargs_splat,
    in_compat_code,
    rename_attribute,
    replace_fix,
    torch_is_imported,
)

# old -> (new name, keywords the new call needs to behave the same)
_UPSAMPLE = {
    "torch.nn.functional.upsample": ("interpolate", ""),
    "torch.nn.functional.upsample_nearest": ("interpolate", 'mode="nearest"'),
    "torch.nn.functional.upsample_bilinear": ("interpolate", 'mode="bilinear", align_corners=True'),
    "torch.nn.UpsamplingNearest2d": ("Upsample", 'mode="nearest"'),
    "torch.nn.UpsamplingBilinear2d": ("Upsample", 'mode="bilinear", align_corners=True'),
}


@rule
class DeprecatedUpsample(Rule):
    """## What it does
    Flags `F.upsample`, `F.upsample_nearest`, `F.upsample_bilinear`,
    `nn.UpsamplingNearest2d` and `nn.UpsamplingBilinear2d`.

    ## Why is this bad?
    They are deprecated wrappers of `F.interpolate` / `nn.Upsample` (the
    functions warn on every call). The bilinear ones also hard-code
    `align_corners=True`, which differs from `interpolate`'s default and is a
    common source of off-by-half-a-pixel mismatches when code is ported.

    ## Example
    ```python
    import torch.nn.functional as F

    y = F.upsample_bilinear(x, scale_factor=2)
    ```

    ## Use instead
    ```python
    import torch.nn.functional as F

    y = F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=True)
    ```

    ## Fix safety
    Safe: the fix spells out the `mode=` and `align_corners=` the wrapper
    passes, with the arguments in the same order (the modules are subclasses
    of `nn.Upsample` that do exactly this). Offered when the old name is
    written with a module prefix (`F.`, `nn.`).
    """

    code = "TW412"
    name = "deprecated-upsample"
    family = "deprecated"
    severity = Severity.WARNING
    message = "`{old}` is deprecated; use `{new}`"
    fix = Applicability.SAFE

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        qualname = ctx.call_name(node) or ""
        if qualname not in _UPSAMPLE:
            return
        new, extra = _UPSAMPLE[qualname]
        fix = None
        arguments_fit = len(node.args) <= (2 if extra else 5) and not has_kwargs_splat(node)
        starred = any(isinstance(arg, ast.Starred) for arg in node.args)
        if isinstance(node.func, ast.Attribute) and arguments_fit and not starred:
            edits = [rename_attribute(ctx, node.func, new)]
            if extra:
                edits.append(add_keyword(ctx, node, extra))
            fix = Fix(f"Use `{new}`", tuple(edits), Applicability.SAFE)
        old = qualname.replace("torch.nn.functional.", "F.").replace("torch.nn.", "nn.")
        shown = f"F.{new}" if old.startswith("F.") else f"nn.{new}"
        if in_compat_code(ctx):
            return  # deliberate compatibility code for older torch
        ctx.report(self, node, fix=fix, old=old, new=f"{shown}({extra})" if extra else shown)


_WEIGHT_NORM = {
    "torch.nn.utils.weight_norm": "torch.nn.utils.parametrizations.weight_norm",
    "torch.nn.utils.weight_norm.weight_norm": "torch.nn.utils.parametrizations.weight_norm",
    "torch.nn.utils.remove_weight_norm": "torch.nn.utils.parametrize.remove_parametrizations",
}


@rule
class DeprecatedWeightNorm(Rule):
    """## What it does
    Flags `torch.nn.utils.weight_norm` and `remove_weight_norm`.

    ## Why is this bad?
    The hook-based implementation is deprecated (it warns) in favour of
    `torch.nn.utils.parametrizations.weight_norm`, which works with
    `torch.compile`, `deepcopy` and `state_dict` round trips.

    ## Example
    ```python
    from torch import nn

    conv = nn.utils.weight_norm(nn.Conv1d(16, 16, 3))
    ```

    ## Use instead
    ```python
    from torch import nn

    conv = nn.utils.parametrizations.weight_norm(nn.Conv1d(16, 16, 3))
    ```
    """

    code = "TW413"
    name = "deprecated-weight-norm"
    family = "deprecated"
    severity = Severity.WARNING
    message = (
        "`{old}` is deprecated; use `{new}` (state_dict keys change: "
        "`weight_g`/`weight_v` become `parametrizations.weight.original0/1`)"
    )

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        qualname = ctx.call_name(node) or ""
        if qualname in _WEIGHT_NORM:
            if in_compat_code(ctx):
                return  # deliberate compatibility code for older torch
            ctx.report(self, node, old=qualname, new=_WEIGHT_NORM[qualname])


_LAUNCH = "torch.distributed.launch"


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
    severity = Severity.WARNING
    message = "`torch.distributed.launch` is deprecated; use `torchrun` (`torch.distributed.run`)"

    def visit_Import(self, node: ast.Import, ctx: Context) -> None:
        if any(
            alias.name == _LAUNCH or alias.name.startswith(_LAUNCH + ".") for alias in node.names
        ):
            if in_compat_code(ctx):
                return  # deliberate compatibility code for older torch
            ctx.report(self, node)

    def visit_ImportFrom(self, node: ast.ImportFrom, ctx: Context) -> None:
        module = node.module or ""
        if node.level:
            return
        launcher = module == _LAUNCH or module.startswith(_LAUNCH + ".")
        from_package = module == "torch.distributed" and any(a.name == "launch" for a in node.names)
        if launcher or from_package:
            if in_compat_code(ctx):
                return  # deliberate compatibility code for older torch
            ctx.report(self, node)

    def visit_Constant(self, node: ast.Constant, ctx: Context) -> None:
        value = node.value
        if not isinstance(value, str) or _LAUNCH not in value:
            return
        parent = ctx.parent
        if value == _LAUNCH:
            # an argv element or runpy.run_module's argument; not a message text
            launched = isinstance(parent, (ast.List, ast.Tuple, ast.Call))
        else:
            # a shell command line handed to subprocess/os.system
            callee = ctx.call_name(parent) if isinstance(parent, ast.Call) else None
            shell = callee is not None and (
                callee.startswith("subprocess.") or callee in {"os.system", "os.popen"}
            )
            launched = shell and f"-m {_LAUNCH}" in value
        if launched and not in_compat_code(ctx):
            ctx.report(self, node)


_FUNC_API = ("vmap", "grad", "grad_and_value", "vjp", "jvp", "jacrev", "jacfwd", "hessian")
_MOVED = {
    "torch.backends.cuda.sdp_kernel": "torch.nn.attention.sdpa_kernel",
    "torch.utils._pytree._register_pytree_node": "torch.utils._pytree.register_pytree_node",
    "functorch.functionalize": "torch.func.functionalize",
    **{f"functorch.{name}": f"torch.func.{name}" for name in _FUNC_API},
}


@rule
class MovedApi(Rule):
    """## What it does
    Flags APIs PyTorch moved and deprecated at the old place:
    `functorch.vmap`/`grad`/`jacrev`/... (now `torch.func`),
    `torch.backends.cuda.sdp_kernel` (now `torch.nn.attention.sdpa_kernel`)
    and `torch.utils._pytree._register_pytree_node`.

    ## Why is this bad?
    The old entry points warn on every call and are being removed; the
    `functorch` package in particular is a compatibility shim over `torch.func`.

    ## Example
    ```python
    import functorch

    per_sample = functorch.vmap(loss_fn)
    ```

    ## Use instead
    ```python
    import torch

    per_sample = torch.func.vmap(loss_fn)
    ```

    ## Fix safety
    Safe for `functorch.<name>` written with the module prefix and `torch`
    imported: the shim forwards every argument to `torch.func.<name>`.
    `sdpa_kernel` takes different arguments and `register_pytree_node`
    different keywords, so those get no fix.
    """

    code = "TW415"
    name = "moved-api"
    family = "deprecated"
    severity = Severity.WARNING
    message = "`{old}` is deprecated; use `{new}`"
    fix = Applicability.SAFE

    def __init__(self) -> None:
        # Names bound by `except ImportError: from functorch import vmap`: the
        # fallback; the name holds `torch.func.vmap` wherever torch is recent.
        self.fallbacks: set[str] = set()

    def visit_ImportFrom(self, node: ast.ImportFrom, ctx: Context) -> None:
        if (node.module or "").startswith("functorch") and in_compat_code(ctx):
            self.fallbacks |= {alias.asname or alias.name for alias in node.names}

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        qualname = ctx.call_name(node) or ""
        new = _MOVED.get(qualname)
        if new is None:
            return
        if isinstance(node.func, ast.Name) and node.func.id in self.fallbacks:
            return
        fix = None
        func = node.func
        prefixed = isinstance(func, ast.Attribute) and ctx.qualname(func.value) == "functorch"
        if new.startswith("torch.func.") and prefixed and torch_is_imported(ctx):
            fix = replace_fix(ctx, func, new, f"Use `{new}`")
        if in_compat_code(ctx):
            return  # deliberate compatibility code for older torch
        ctx.report(self, node, fix=fix, old=qualname, new=new)
