"""TW301 torch-load-without-weights-only (security).

The class docstring is its user documentation (`torchwise rules TW301`).
"""

from __future__ import annotations

import ast

from torchwise.findings import Applicability, Fix, Severity
from torchwise.review.engine import facts as F
from torchwise.review.engine.context import Context
from torchwise.review.engine.syntax import has_kwargs_splat, is_false
from torchwise.review.registry import Rule, rule
from torchwise.review.rules._contracts import minimum_torch
from torchwise.review.rules._loads import refused_content
from torchwise.review.rules._provenance import DOWNLOAD, OWN, Provenance, provenance
from torchwise.review.rules._security import (
    RETRY_ERRORS,
    TORCH_LOADERS,
    WEIGHTS_ONLY_DEFAULT,
    argument,
    has_starred,
)
from torchwise.review.rules._util import add_keyword, in_compat_code, in_test_code


@rule
class TorchLoadUnsafe(Rule):
    """## What it does
    Flags `torch.load` (and `torch.hub.load_state_dict_from_url`) called with
    `weights_only=False`, with a custom `pickle_module`, or without
    `weights_only` when the configured `min-torch-version` is below 2.6.

    ## Why is this bad?
    Without `weights_only=True`, `torch.load` is `pickle.load`: a checkpoint
    downloaded from the internet or shared by a colleague can run any code on
    your machine the moment it is loaded. PyTorch made `weights_only=True` the
    default in 2.6, so on older versions the argument must be written out. A
    custom `pickle_module` turns the safe loader off too.

    ## Example
    ```python
    import torch

    state = torch.load("checkpoint.pt", map_location="cpu")
    full = torch.load("checkpoint.pt", weights_only=False)
    ```

    ## Use instead
    ```python
    import torch

    state = torch.load("checkpoint.pt", map_location="cpu", weights_only=True)
    ```

    ## Fix safety
    Unsafe: adding `weights_only=True` makes loading fail for checkpoints that
    hold objects outside PyTorch's allowlist (an `argparse.Namespace`, a
    custom config class, ...), so a human must check what the file contains;
    `torch.serialization.add_safe_globals` allowlists the classes you trust.
    Calls that pass `weights_only=False` or a `pickle_module` get no fix: they
    asked for full unpickling on purpose. A load that the code or the project's
    own `torch.save` shows holds a pickled module, optimizer, `Namespace` or
    array is not reported here: `weights_only=True` would break it, and TW416
    reports it instead.

    A warning unless the project provably writes the file itself: the path
    is a URL or a download, comes from the command line (`args.resume`), a
    configuration (`cfg.MODEL.WEIGHTS`) or the environment, is a parameter
    whose callers pass one of those (or that nothing shows the origin of),
    or is a file name no `torch.save` of the project writes. The message says
    which. A hint (`info`) only where the loaded path ends in a file name the
    project's own `torch.save` writes (`os.path.join(args.out,
    "checkpoint.pth")` when a save writes `checkpoint.pth`), or is the very
    expression a save of the same file writes to. Not reported for a project
    pinned to torch below 1.13, which has no `weights_only`.

    The minimum torch version is `min-torch-version` when configured, else the
    one the project declares (`pyproject.toml`, `requirements*.txt`,
    `setup.cfg`, `setup.py`), else 2.4; from 2.6 on, `weights_only=True` is
    the default and a load without it is not reported.
    """

    code = "TW301"
    name = "torch-load-without-weights-only"
    family = "security"
    severity = Severity.WARNING
    message = "`{callee}` without `weights_only=True` can run arbitrary code from the file"
    fix = Applicability.UNSAFE

    call_names = frozenset(TORCH_LOADERS)

    def __init__(self) -> None:
        # Loads without weights_only: judged at the end of the file, once it is
        # known whether they load a pickled module (TW416 reports those).
        self.missing: list[tuple[ast.Call, str, Fix, Provenance]] = []

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        qualname = ctx.call_name(node)
        if qualname not in TORCH_LOADERS:
            return
        callee = qualname.replace("torch.serialization.load", "torch.load")
        if in_compat_code(ctx, catching=RETRY_ERRORS):
            return  # `except TypeError: torch.load(f)`: the retry for torch without weights_only
        if in_test_code(ctx):
            return  # a test loads the file it has just written
        weights_only = argument(node, "weights_only", TORCH_LOADERS[qualname])
        if weights_only is not None:
            if is_false(weights_only):
                message = "`{callee}(weights_only=False)` unpickles the file: it can run any code"
                ctx.report(self, node, message=message, callee=callee)
            return  # True, or a variable: the caller decided
        if has_kwargs_splat(node) or has_starred(node):
            return  # weights_only may be inside **kwargs
        pickle_position = 2 if callee == "torch.load" else None
        if argument(node, "pickle_module", pickle_position) is not None:
            message = (
                "`{callee}` with a custom `pickle_module` unpickles the file: it can run any code"
            )
            ctx.report(self, node, message=message, callee=callee)
            return
        if minimum_torch(ctx) >= WEIGHTS_ONLY_DEFAULT:
            return  # weights_only=True is already the default everywhere the code runs
        fix = Fix(
            "Pass `weights_only=True`",
            (add_keyword(ctx, node, "weights_only=True"),),
            Applicability.UNSAFE,
        )
        path = node.args[0] if node.args else argument(node, "f", None)
        origin = Provenance(DOWNLOAD, "a URL") if callee != "torch.load" else provenance(path, ctx)
        self.missing.append((node, callee, fix, origin))

    def leave_module(self, module: F.ModuleFacts, ctx: Context) -> None:
        if ctx.project.torch_range.below is not None and ctx.project.torch_range.below <= (1, 13):
            return  # pinned below 1.13: torch.load has no weights_only to pass
        for node, callee, fix, origin in self.missing:
            load = module.loads.get(node)
            if load is not None and refused_content(load, ctx) is not None:
                continue  # it loads a pickled object: TW416, and weights_only=True would break it
            if origin.kind == OWN:
                ctx.report(
                    self,
                    node,
                    fix=fix,
                    severity=Severity.INFO,
                    message=self.message + " (a file this project writes: {origin}; a risk only "
                    "when someone loads a file from elsewhere there)",
                    callee=callee,
                    origin=origin.evidence,
                )
                continue
            ctx.report(
                self,
                node,
                fix=fix,
                message=self.message + ": {origin}",
                callee=callee,
                origin=origin.describe(),
            )
