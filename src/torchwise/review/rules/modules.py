"""nn.Module definitions (TW12x-TW14x): how a module is built.

The family spans four files: this one (what a module's methods assign and
register: submodules that never reach ``parameters()``, tensors that ``.to()``
leaves behind, a missing ``super().__init__()``), :mod:`.layers` (how layers
are combined and created), :mod:`.forward` (what ``forward`` computes) and
:mod:`.tensor_ops` (tensor operations that break autograd or raise).
"""

from __future__ import annotations

import ast
import re

from torchwise.review.context import Context
from torchwise.review.findings import Applicability, Severity
from torchwise.review.registry import Rule, rule
from torchwise.review.rules._tensors import (
    produces_tensor,
)
from torchwise.review.rules._util import (
    is_false,
    keyword,
    replace_fix,
)

_NN_CLASS = re.compile(r"torch\.nn\.[A-Z]\w*$")
_NOT_MODULES = {"torch.nn.Parameter", "torch.nn.Buffer", "torch.nn.UninitializedParameter"}
_PARAMETERS = {"torch.nn.Parameter", "torch.nn.parameter.Parameter"}
_MODULE_BASES = {
    "torch.nn.module.Module",
    "pytorch_lightning.LightningModule",
    "lightning.LightningModule",
    "lightning.pytorch.LightningModule",
}


def is_module_class(ctx: Context, node: ast.ClassDef) -> bool:
    """``node`` subclasses ``nn.Module`` (or a layer, or a local module class).

    Stricter than the engine's test: ``torch.nn.utils.prune.BasePruningMethod``
    is under ``torch.nn`` but is not a module.
    """
    for base in node.bases:
        qualname = ctx.qualname(base)
        if qualname is None:
            continue
        if qualname in _MODULE_BASES:
            return True
        if _NN_CLASS.match(qualname) and qualname not in _NOT_MODULES:
            return True
        if qualname.startswith("<local>.") and ctx.is_module_base(base):
            return True
    return False


def module_method(ctx: Context) -> ast.ClassDef | None:
    """The nn.Module class whose method we are directly inside, else None."""
    if not ctx.in_module_class or not ctx.classes:
        return None
    node = ctx.classes[-1][0]
    return node if is_module_class(ctx, node) else None


def creates_module(ctx: Context, expr: ast.expr) -> str | None:
    """ "submodule" for ``nn.Linear(...)``/``LocalBlock(...)``, "parameter" for
    ``nn.Parameter(...)``, None for anything else."""
    if not isinstance(expr, ast.Call):
        return None
    qualname = ctx.call_name(expr)
    if qualname is None:
        return None
    if qualname in _PARAMETERS:
        return "parameter"
    if _NN_CLASS.match(qualname) and qualname not in _NOT_MODULES:
        return "submodule"
    if qualname.startswith("<local>.") and ctx.kind_of_call(expr) == "module":
        return "submodule"
    return None


def self_attribute(target: ast.AST) -> str | None:
    """``"layers"`` for the target ``self.layers``."""
    if (
        isinstance(target, ast.Attribute)
        and isinstance(target.value, ast.Name)
        and target.value.id == "self"
    ):
        return target.attr
    return None


def _all_modules(ctx: Context, elements: list[ast.expr] | None) -> str | None:
    """ "submodule"/"parameter" when every element creates one of those."""
    kinds = {creates_module(ctx, element) for element in elements or ()}
    return kinds.pop() if len(kinds) == 1 and None not in kinds else None


def _container_elements(value: ast.expr) -> list[ast.expr] | None:
    if isinstance(value, (ast.List, ast.Tuple)):
        return list(value.elts)
    if isinstance(value, ast.Dict):
        return None if any(key is None for key in value.keys) else list(value.values)
    if isinstance(value, (ast.ListComp, ast.GeneratorExp)):
        return [value.elt]
    if isinstance(value, ast.DictComp):
        return [value.value]
    if isinstance(value, ast.BinOp) and isinstance(value.op, ast.Mult):  # [nn.Linear(4, 4)] * 3
        for side in (value.left, value.right):
            if isinstance(side, ast.List):
                return list(side.elts)
    return None


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
        self.pending.pop(key, None)  # `self.layers = nn.ModuleList(self.layers)`
        self.empty.pop(key, None)
        value = node.value
        elements = _container_elements(value)
        if isinstance(value, (ast.List, ast.Dict)) and not elements:
            self.empty[key] = node  # filled later, perhaps with modules
            return
        kind = _all_modules(ctx, elements)
        if kind is not None:
            self.pending[key] = (node, kind)

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
        elements = _container_elements(item) if func.attr == "extend" else [item]
        kind = _all_modules(ctx, elements)
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


@rule
class TensorAttribute(Rule):
    """## What it does
    Flags a tensor built in an `nn.Module`'s `__init__` and stored as a plain
    attribute (`self.mean = torch.tensor([...])`) instead of a buffer or a
    parameter.

    ## Why is this bad?
    Plain tensor attributes are not moved by `model.to(device)`/`.cuda()`/
    `.half()`, and are missing from `state_dict()`. The module works on the
    CPU and fails with a device-mismatch error (or silently computes in the
    wrong dtype) as soon as it is moved.

    ## Example
    ```python
    import torch
    from torch import nn

    class Normalize(nn.Module):
        def __init__(self):
            super().__init__()
            self.mean = torch.tensor([0.49, 0.48, 0.45]).view(1, 3, 1, 1)
    ```

    ## Use instead
    ```python
    import torch
    from torch import nn

    class Normalize(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("mean", torch.tensor([0.49, 0.48, 0.45]).view(1, 3, 1, 1))
    ```

    ## Fix safety
    Unsafe: the fix registers a non-persistent buffer
    (`persistent=False`, so `state_dict()` keys do not change), which makes the
    tensor follow `.to()`; code that later assigns a non-tensor to the same
    attribute would then raise, and a trainable value wants `nn.Parameter`.
    """

    code = "TW121"
    name = "tensor-attribute-not-buffer"
    family = "modules"
    severity = Severity.WARNING
    message = "tensor `self.{attr}` is not a buffer: `.to()` and `state_dict()` ignore it"
    fix = Applicability.UNSAFE

    def visit_Assign(self, node: ast.Assign, ctx: Context) -> None:
        function = ctx.function
        if function is None or function.name != "__init__" or len(node.targets) != 1:
            return
        attr = self_attribute(node.targets[0])
        if attr is None or module_method(ctx) is None or not produces_tensor(ctx, node.value):
            return
        text = f'self.register_buffer("{attr}", {ctx.text(node.value)}, persistent=False)'
        fix = replace_fix(
            ctx, node, text, "Register it as a non-persistent buffer", Applicability.UNSAFE
        )
        ctx.report(self, node, fix=fix, attr=attr)


def _trivial(body: list[ast.stmt]) -> bool:
    """A body that does nothing but document, pass or raise."""
    for statement in body:
        if isinstance(statement, (ast.Pass, ast.Raise)):
            continue
        if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant):
            continue
        return False
    return True


def header(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> ast.AST:
    """A node spanning just ``def name`` so findings do not cover the whole body."""
    keyword_length = {ast.FunctionDef: 4, ast.AsyncFunctionDef: 10, ast.ClassDef: 6}[type(node)]
    end = node.col_offset + keyword_length + len(node.name)
    return ast.Pass(
        lineno=node.lineno, col_offset=node.col_offset, end_lineno=node.lineno, end_col_offset=end
    )


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
    message = "`{cls}.__init__` never calls `super().__init__()`"

    def leave_function(self, function: object, ctx: Context) -> None:
        from torchwise.review.facts import FunctionFacts

        assert isinstance(function, FunctionFacts)
        node = function.node
        if function.name != "__init__" or not isinstance(node, ast.FunctionDef):
            return
        # leave_function runs after the scope is popped: we are back in the class.
        if not ctx.classes or ctx.classes[-1][0].name != function.class_name:
            return
        if not is_module_class(ctx, ctx.classes[-1][0]) or _trivial(node.body):
            return
        if any(call.method == "__init__" for call in function.calls):
            return
        ctx.report(self, header(node), cls=function.class_name or "")


@rule
class AssignTrainingFlag(Rule):
    """## What it does
    Flags `self.training = ...` in a method of an `nn.Module` (other than
    `__init__`, `train` and `eval`).

    ## Why is this bad?
    Assigning the flag changes only this module: its children keep their own
    `training` flags, so their dropout and batch norm stay in the old mode.
    `self.train(mode)` and `self.eval()` set the flag on every submodule.

    ## Example
    ```python
    from torch import nn

    class Model(nn.Module):
        def freeze(self):
            self.training = False
    ```

    ## Use instead
    ```python
    from torch import nn

    class Model(nn.Module):
        def freeze(self):
            self.eval()
    ```
    """

    code = "TW135"
    name = "assign-training-flag"
    family = "modules"
    severity = Severity.WARNING
    message = "assigning `self.training` skips the submodules: use `self.train({mode})`"

    def visit_Assign(self, node: ast.Assign, ctx: Context) -> None:
        function = ctx.function
        if function is None or function.name in {"__init__", "train", "eval", "__setstate__"}:
            return
        if any(self_attribute(t) == "training" for t in node.targets) and module_method(ctx):
            mode = "False" if is_false(node.value) else ctx.text(node.value)
            ctx.report(self, node, mode=mode)


@rule
class RegisterBufferNonTensor(Rule):
    """## What it does
    Flags `register_buffer(name, value)` whose value is a Python literal
    (a number, a string, a list, a tuple or a dict) instead of a tensor.

    ## Why is this bad?
    Buffers must be tensors (or `None`): the call raises `TypeError` when the
    module is built. A list of numbers wants `torch.tensor(...)`.

    ## Example
    ```python
    from torch import nn

    class Scale(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("scale", 0.5)
    ```

    ## Use instead
    ```python
    import torch
    from torch import nn

    class Scale(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("scale", torch.tensor(0.5))
    ```
    """

    code = "TW137"
    name = "register-buffer-non-tensor"
    family = "modules"
    severity = Severity.ERROR
    message = "`register_buffer` needs a tensor, not a {kind}"

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        func = node.func
        if not isinstance(func, ast.Attribute) or func.attr != "register_buffer":
            return
        value = node.args[1] if len(node.args) >= 2 else None
        tensor = keyword(node, "tensor")
        if tensor is not None:
            value = tensor.value
        if isinstance(value, ast.Constant) and value.value is not None:
            kind = type(value.value).__name__
        elif isinstance(value, (ast.List, ast.Tuple, ast.Dict)):
            kind = type(value).__name__.lower()
        else:
            return
        ctx.report(self, node, kind=kind)
