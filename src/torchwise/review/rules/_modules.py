"""nn.Module definitions (TW12x-TW14x): how a module is built.

Helpers shared by the module rules: is a class an ``nn.Module``, does an
expression build a submodule or a parameter, which ``self.`` attribute is
assigned. :mod:`._forward` follows tensor-valued names inside ``forward``.
"""

from __future__ import annotations

import ast
import re

from torchwise.review.engine.context import Context

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


class _ModuleClasses(dict[ast.ClassDef, bool]):
    """:func:`is_module_class` of each class of a file, worked out once: the module
    rules ask it of nearly every statement and call in a model file's methods."""


def module_method(ctx: Context) -> ast.ClassDef | None:
    """The nn.Module class whose method we are directly inside, else None."""
    if not ctx.in_module_class or not ctx.classes:
        return None
    node = ctx.classes[-1].node
    known = ctx.helper(_ModuleClasses)
    found = known.get(node)
    if found is None:
        found = known[node] = is_module_class(ctx, node)
    return node if found else None


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


_STATELESS = re.compile(
    r"torch\.nn\.(\w+Loss|ReLU\d*|LeakyReLU|GELU|SiLU|Mish|Tanh|Sigmoid|Softmax\d*d?|"
    r"LogSoftmax|Softplus|ELU|SELU|Hardswish|Hardtanh|Identity|Flatten|Unflatten)$"
)


def _stateless(ctx: Context, element: ast.expr) -> bool:
    """A module with no parameters, buffers or mode (a loss without class
    weights, an activation): leaving it unregistered loses nothing."""
    if not isinstance(element, ast.Call):
        return False
    name = ctx.call_name(element) or ""
    weighted = element.args if name.endswith("Loss") else []
    return (
        bool(_STATELESS.match(name))
        and not weighted
        and not any(k.arg in {"weight", "pos_weight"} for k in element.keywords)
    )


def all_modules(ctx: Context, elements: list[ast.expr] | None) -> str | None:
    """ "submodule"/"parameter" when every element creates one of those (and
    not all of them are stateless)."""
    kinds = {creates_module(ctx, element) for element in elements or ()}
    if elements and all(_stateless(ctx, element) for element in elements):
        return None
    return kinds.pop() if len(kinds) == 1 and None not in kinds else None


def container_elements(value: ast.expr) -> list[ast.expr] | None:
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


def trivial(body: list[ast.stmt]) -> bool:
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
