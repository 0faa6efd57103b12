"""TW145 learning-rate-never-used (training).

The class docstring is its user documentation (`torchwise rules TW145`).
"""

from __future__ import annotations

import ast
import re

from torchwise.findings import Severity
from torchwise.review.engine.context import Context
from torchwise.review.engine.syntax import constant, keyword
from torchwise.review.registry import Rule, rule
from torchwise.review.rules._contracts import (
    Range,
    declared_range,
    definitions_in_range,
    library_name,
)

#: Names and command-line options that hold a learning rate.
_LR_NAME = re.compile(r"^(lr|learning_rate|base_lr|init_lr)$", re.I)
_LR_OPTION = re.compile(r"^--?(lr|learning[-_]rate|base[-_]lr|init[-_]lr)$")


@rule
class LearningRateNeverUsed(Rule):
    """## What it does
    Flags an optimizer built without a learning rate (`torch.optim.Adam(params)`)
    in a file that sets one and never reads it: a variable such as
    `learning_rate = 2e-5` or a command-line option such as `--lr` that no line
    of the file uses.

    ## Why is this bad?
    The optimizer silently runs with its default learning rate (1e-3 for Adam,
    AdamW and SGD), not the one the script configures, prints and logs. A
    fine-tuning run meant for 2e-5 trains fifty times too fast; changing
    `--lr` changes nothing.

    ## Example
    ```python
    import torch

    learning_rate = 2e-5
    optimizer = torch.optim.Adam(model.parameters())
    ```

    ## Use instead
    ```python
    import torch

    learning_rate = 2e-5
    optimizer = torch.optim.Adam(model.parameters(), lr=learning_rate)
    ```
    """

    code = "TW145"
    name = "learning-rate-never-used"
    family = "training"
    severity = Severity.WARNING
    in_test_modules = False
    impact = "results"
    message = "the optimizer runs with its default learning rate: `{setting}` is set but never used"
    needs_text = ("lr", "learning")  # every name and option _LR_NAME/_LR_OPTION match

    def __init__(self) -> None:
        self.settings: dict[str, str] = {}  # name or option dest -> how it is shown
        self.values: dict[str, float] = {}  # name or option dest -> the rate it sets
        self.read: set[str] = set()  # names loaded, attributes read
        self.optimizers: list[ast.Call] = []

    def visit_Assign(self, node: ast.Assign, ctx: Context) -> None:
        value = constant(node.value)
        if not isinstance(value, float) or isinstance(value, bool):
            return
        for target in node.targets:
            if isinstance(target, ast.Name) and _LR_NAME.match(target.id):
                self.settings.setdefault(target.id, f"{target.id} = {value}")
                self.values.setdefault(target.id, value)

    def visit_Name(self, node: ast.Name, ctx: Context) -> None:
        if isinstance(node.ctx, ast.Load):
            self.read.add(node.id)

    def visit_Attribute(self, node: ast.Attribute, ctx: Context) -> None:
        if isinstance(node.ctx, ast.Load):
            self.read.add(node.attr)

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == "add_argument":
            self._option(node)
            return
        if isinstance(func, ast.Name) and func.id == "vars":
            self.read.add("*")  # the whole namespace is handed on: any option may be used
        for arg in node.args:  # getattr(args, "lr"), config["lr"]: read by name
            text = constant(arg)
            if isinstance(text, str):
                self.read.add(text)
        name = ctx.call_name(node) or ""
        if not name.startswith("torch.optim.") or name.rsplit(".", 1)[-1][:1].islower():
            return
        if len(node.args) >= 2 or keyword(node, "lr") is not None:
            return
        if any(item.arg is None for item in node.keywords) or any(
            isinstance(arg, ast.Starred) for arg in node.args
        ):
            return  # lr may be inside **kwargs
        self.optimizers.append(node)

    def visit_Subscript(self, node: ast.Subscript, ctx: Context) -> None:
        key = constant(node.slice)
        if isinstance(key, str):
            self.read.add(key)

    def _option(self, node: ast.Call) -> None:
        flags = [constant(arg) for arg in node.args]
        options = [f for f in flags if isinstance(f, str) and _LR_OPTION.match(f)]
        if not options:
            return
        dest = keyword(node, "dest")
        name = constant(dest.value) if dest is not None else None
        if not isinstance(name, str):
            name = options[0].lstrip("-").replace("-", "_")
        self.settings.setdefault(name, options[0])
        default = keyword(node, "default")
        value = constant(default.value) if default is not None else None
        if isinstance(value, float):
            self.values.setdefault(name, value)

    def leave_module(self, module: object, ctx: Context) -> None:
        if "*" in self.read:
            return
        unused = [shown for name, shown in self.settings.items() if name not in self.read]
        if not unused or len(unused) != len(self.settings):
            return  # some learning rate is read: it may reach the optimizer another way
        for node in self.optimizers:
            rates = {self.values.get(name) for name, _ in self.settings.items()}
            if rates == {default_rate(node, ctx)} and None not in rates:
                continue  # the optimizer's own default is the rate the setting names
            ctx.report(self, node, setting=unused[0])


def default_rate(call: ast.Call, ctx: Context) -> float | None:
    """The ``lr`` default of the optimizer class ``call`` builds, in the
    project's torch releases (from the contract tables); None if it varies.
    A project that declares only releases older than the tables (``torch==1.0``)
    is judged by every release they know: optimizer defaults have not moved."""
    name = ctx.call_name(call)
    library = library_name(name)
    span = None if library is None else declared_range(ctx, library)
    if name is None or span is None:
        return None
    if not span.mask:
        span = Range(span.library, span.releases, (1 << len(span.releases)) - 1, span.declared)
    defaults = set()
    for _, definition in definitions_in_range(name, span):
        for _, overloads in definition.signatures:
            for signature in overloads:
                for param in signature.params:
                    if param.name == "lr" and isinstance(param.default, list):
                        defaults.add(param.default[1] if param.default[0] == "const" else None)
    if len(defaults) != 1:
        return None
    value = defaults.pop()
    return float(value) if isinstance(value, (int, float)) else None
