"""TW307 yaml-unsafe-load (security).

The class docstring is its user documentation (`torchwise rules TW307`).
"""

from __future__ import annotations

import ast

from torchwise.findings import Applicability, Fix, Severity
from torchwise.review.engine.context import Context
from torchwise.review.engine.syntax import has_kwargs_splat
from torchwise.review.registry import Rule, rule
from torchwise.review.rules._security import (
    YAML_LOADS,
    YAML_UNSAFE_CALLS,
    YAML_UNSAFE_LOADERS,
    argument,
    has_starred,
)
from torchwise.review.rules._util import rename_attribute


@rule
class YamlUnsafeLoad(Rule):
    """## What it does
    Flags `yaml.load` without a safe `Loader` (none, `yaml.Loader`,
    `yaml.UnsafeLoader`) and `yaml.unsafe_load`.

    ## Why is this bad?
    PyYAML's full loader builds arbitrary Python objects from tags such as
    `!!python/object/apply:os.system`: a config file becomes a program. Training
    configs are exactly the files people download and share. Without a
    `Loader` at all, `yaml.load(f)` raises `TypeError` on PyYAML 6 and later:
    code written for PyYAML 5 no longer starts.

    ## Example
    ```python
    import yaml

    with open("config.yaml") as f:
        config = yaml.load(f, Loader=yaml.Loader)
    ```

    ## Use instead
    ```python
    import yaml

    with open("config.yaml") as f:
        config = yaml.safe_load(f)
    ```

    ## Fix safety
    Offered only for `yaml.load(stream)` without a `Loader` (which PyYAML 6
    rejects, and older versions load unsafely): it becomes `yaml.safe_load`.
    Unsafe, because documents that use Python-specific tags no longer load.
    """

    code = "TW307"
    name = "yaml-unsafe-load"
    family = "security"
    severity = Severity.WARNING
    message = "`{callee}` can construct arbitrary Python objects; use `yaml.safe_load`"
    fix = Applicability.UNSAFE

    call_names = frozenset(YAML_UNSAFE_CALLS) | frozenset(YAML_LOADS)

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        qualname = ctx.call_name(node)
        if qualname in YAML_UNSAFE_CALLS:
            ctx.report(self, node, callee=qualname)
            return
        if qualname not in YAML_LOADS or has_kwargs_splat(node) or has_starred(node):
            return
        loader = argument(node, "Loader", YAML_LOADS[qualname])
        if loader is not None:
            if ctx.qualname(loader) in YAML_UNSAFE_LOADERS:
                ctx.report(self, node, callee=f"{qualname}(Loader={ctx.text(loader)})")
            return
        fix = None
        if isinstance(node.func, ast.Attribute) and len(node.args) == 1 and not node.keywords:
            safe = "safe_load" if qualname == "yaml.load" else "safe_load_all"
            edit = rename_attribute(ctx, node.func, safe)
            fix = Fix(f"Use `yaml.{safe}`", (edit,), Applicability.UNSAFE)
        ctx.report(
            self,
            node,
            fix=fix,
            message="`{callee}` raises TypeError on PyYAML >= 6 (the argument is required), "
            "and on older PyYAML constructs arbitrary Python objects; use `yaml.safe_load`",
            callee=f"{qualname}` without a `Loader",
        )
