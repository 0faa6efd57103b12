"""TW120 unregistered-submodules (modules).

The class docstring is its user documentation (`torchwise rules TW120`).
"""

from __future__ import annotations

import ast

from torchwise.findings import Severity
from torchwise.review.engine.context import Context
from torchwise.review.registry import Rule, rule
from torchwise.review.rules._modules import (
    all_modules,
    container_elements,
    module_method,
    self_attribute,
)


@rule
class UnregisteredSubmodules(Rule):
    """## What it does
    Flags an `nn.Module` attribute that holds submodules or parameters in a
    plain `list`, `tuple` or `dict`, built from `nn.*` layers, `nn.Parameter`s
    or the file's own module classes (literals, comprehensions, or an empty
    list later filled with `.append(...)`).

    ## Why is this bad?
    `nn.Module` registers only what is assigned to it directly or through
    `nn.ModuleList`/`nn.ModuleDict`/`nn.ParameterList`. Layers in a plain
    container are invisible to `parameters()` (so the optimizer never trains
    them), to `state_dict()` (so checkpoints silently lack them), and to
    `.to()`/`.cuda()` (so they stay on the CPU).

    ## Example
    ```python
    from torch import nn

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = [nn.Linear(64, 64) for _ in range(4)]
    ```

    ## Use instead
    ```python
    from torch import nn

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleList(nn.Linear(64, 64) for _ in range(4))
    ```
    """

    code = "TW120"
    name = "unregistered-submodules"
    family = "modules"
    severity = Severity.ERROR
    message = "{what}s in a plain {container} are not registered: use `nn.{wrapper}`"

    def __init__(self) -> None:
        self.empty: dict[tuple[str, str], ast.Assign] = {}  # (class, attr) -> `= []`
        # (class, attr) -> (assignment, "submodule"/"parameter"), reported when the
        # file ends unless the class re-wraps the attribute or calls add_module.
        self.pending: dict[tuple[str, str], tuple[ast.Assign, str]] = {}
        self.registers: set[str] = set()  # classes that call add_module & co.

    def visit_Assign(self, node: ast.Assign, ctx: Context) -> None:
        cls = module_method(ctx)
        if cls is None or len(node.targets) != 1:
            return
        attr = self_attribute(node.targets[0])
        if attr is None:
            return
        key = (cls.name, attr)
        value = node.value
        if (
            isinstance(value, ast.BinOp)
            and isinstance(value.op, ast.Add)
            and self_attribute(value.left) == attr
            and (key in self.empty or key in self.pending)
        ):
            self._grow(key, value.right, ctx)  # `self.layers = self.layers + [nn.Linear(...)]`
            return
        self.pending.pop(key, None)  # `self.layers = nn.ModuleList(self.layers)`
        self.empty.pop(key, None)
        elements = container_elements(value)
        if isinstance(value, (ast.List, ast.Dict)) and not elements:
            self.empty[key] = node  # filled later, perhaps with modules
            return
        kind = all_modules(ctx, elements)
        if kind is not None:
            self.pending[key] = (node, kind)

    def visit_AugAssign(self, node: ast.AugAssign, ctx: Context) -> None:
        cls = module_method(ctx)
        attr = self_attribute(node.target)
        if cls is None or attr is None or not isinstance(node.op, ast.Add):
            return
        key = (cls.name, attr)
        if key in self.empty or key in self.pending:
            self._grow(key, node.value, ctx)  # `self.layers += [nn.Linear(...)]`

    def _grow(self, key: tuple[str, str], added: ast.expr, ctx: Context) -> None:
        statement = self.empty.get(key) or (self.pending[key][0] if key in self.pending else None)
        kind = all_modules(ctx, container_elements(added))
        if statement is not None and kind is not None:
            self.pending[key] = (statement, kind)

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        func = node.func
        if not isinstance(func, ast.Attribute):
            return
        cls = module_method(ctx)
        if cls is None:
            return
        if func.attr in {"add_module", "register_module", "register_parameter"}:
            self.registers.add(cls.name)
            return
        attr = self_attribute(func.value)
        if func.attr not in {"append", "insert", "extend"} or attr is None or not node.args:
            return
        statement = self.empty.get((cls.name, attr))
        if statement is None:
            return
        item = node.args[-1]
        elements = container_elements(item) if func.attr == "extend" else [item]
        kind = all_modules(ctx, elements)
        if kind is not None:
            self.pending[(cls.name, attr)] = (statement, kind)

    def leave_module(self, module: object, ctx: Context) -> None:
        for (cls, _attr), (statement, kind) in self.pending.items():
            if cls not in self.registers:
                self._report(ctx, statement, kind, statement.value)

    def _report(self, ctx: Context, node: ast.stmt, what: str, value: ast.expr) -> None:
        is_dict = isinstance(value, (ast.Dict, ast.DictComp))
        container = "dict" if is_dict else ("tuple" if isinstance(value, ast.Tuple) else "list")
        prefix = "Module" if what == "submodule" else "Parameter"
        wrapper = prefix + ("Dict" if is_dict else "List")
        ctx.report(self, node, what=what, container=container, wrapper=wrapper)
