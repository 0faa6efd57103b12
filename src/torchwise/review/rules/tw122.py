"""TW122 missing-super-init (modules).

The class docstring is its user documentation (`torchwise rules TW122`).
"""

from __future__ import annotations

import ast

from torchwise.findings import Severity
from torchwise.review.engine.context import Context
from torchwise.review.registry import Rule, rule
from torchwise.review.rules._modules import header, is_module_class, trivial
from torchwise.review.rules._util import in_test_code


@rule
class MissingSuperInit(Rule):
    """## What it does
    Flags the `__init__` of an `nn.Module` subclass that never calls
    `super().__init__()` (or `nn.Module.__init__(self)`, or a parent's
    `__init__`).

    ## Why is this bad?
    `nn.Module.__init__` creates the dictionaries that hold parameters,
    buffers, submodules and hooks. Without it the first `self.layer = ...`
    raises `AttributeError: cannot assign module before Module.__init__()
    call`, and a module that assigns nothing fails when it is called.

    ## Example
    ```python
    from torch import nn

    class Head(nn.Module):
        def __init__(self, dim):
            self.proj = nn.Linear(dim, 10)
    ```

    ## Use instead
    ```python
    from torch import nn

    class Head(nn.Module):
        def __init__(self, dim):
            super().__init__()
            self.proj = nn.Linear(dim, 10)
    ```
    """

    code = "TW122"
    name = "missing-super-init"
    family = "modules"
    severity = Severity.ERROR
    impact = "crash"
    message = "`{cls}.__init__` never calls `super().__init__()`"

    def leave_function(self, function: object, ctx: Context) -> None:
        from torchwise.review.engine.facts import FunctionFacts

        assert isinstance(function, FunctionFacts)
        node = function.node
        if function.name != "__init__" or not isinstance(node, ast.FunctionDef):
            return
        # leave_function runs after the scope is popped: we are back in the class.
        if not ctx.classes or ctx.classes[-1][0].name != function.class_name:
            return
        if not is_module_class(ctx, ctx.classes[-1][0]) or trivial(node.body):
            return
        if in_test_code(ctx):
            return  # a test's stand-in that only needs attributes, on purpose
        if any(call.method == "__init__" for call in function.calls):
            return
        ctx.report(self, header(node), cls=function.class_name or "")
