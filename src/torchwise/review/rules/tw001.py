"""TW001 undefined-name (syntax).

The class docstring is its user documentation (`torchwise rules TW001`).
"""

from __future__ import annotations

import ast
import builtins

from torchwise.findings import Severity
from torchwise.review.engine.context import Context
from torchwise.review.engine.dispatch import subtree
from torchwise.review.registry import Rule, rule

#: Names Python binds in every module (and ``__class__`` in methods).
_MODULE_NAMES = frozenset(
    {"__file__", "__name__", "__doc__", "__spec__", "__builtins__", "__path__", "__loader__",
     "__package__", "__annotations__", "__class__", "__debug__", "__dict__", "__module__",
     "__qualname__", "__cached__", "WindowsError"}
)  # fmt: skip
_BUILTINS = frozenset(dir(builtins)) | _MODULE_NAMES
#: Calls that bind names the source does not show.
_DYNAMIC = frozenset({"exec", "eval", "globals", "locals", "vars", "setattr", "__import__"})


@rule
class UndefinedName(Rule):
    """## What it does
    Flags a name that is read but bound nowhere in the file: not assigned,
    imported, defined, a parameter, a loop or `with` target, nor a builtin.
    Files that can bind names the source does not show (`from x import *`,
    `exec`, `globals()`, `setattr`) and notebooks (whose cells may rely on
    each other's runs) are skipped, and so are names only used where a
    `NameError` is caught, in annotations, or in a branch that cannot run
    (the `elif` after `if True:`).

    ## Why is this bad?
    The line raises `NameError` when it runs. Typos hide on the paths that
    run rarely (the CPU fallback, the resume branch, the last epoch), so the
    script works until the day it does not.

    ## Example
    ```python
    import torch
    from torch.autograd import Variable

    if torch.cuda.is_available():
        x = Variable(torch.ones(3)).cuda()
    else:
        x = Variabel(torch.ones(3))
    ```

    ## Use instead
    ```python
    import torch

    x = torch.ones(3)
    if torch.cuda.is_available():
        x = x.cuda()
    ```
    """

    code = "TW001"
    name = "undefined-name"
    family = "syntax"
    severity = Severity.ERROR
    impact = "crash"
    message = (
        "`{name}` is not defined anywhere in this file: this line raises NameError when it runs"
    )

    def leave_module(self, module: object, ctx: Context) -> None:
        if ctx.path.endswith(".ipynb"):
            return
        bound: set[str] = set(_BUILTINS)
        reads: list[ast.Name] = []
        tries: list[ast.Try] = []
        dead: list[ast.stmt] = []  # the branch an `if True:` / `if False:` never takes
        for node in ctx.module_nodes():
            if isinstance(node, ast.Name):  # most nodes: decided here, not by _bind's chain
                if isinstance(node.ctx, ast.Load):
                    reads.append(node)
                else:
                    bound.add(node.id)
                continue
            if isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names):
                return
            if isinstance(node, ast.Call) and _dynamic(node.func):
                return
            if isinstance(node, ast.Try) and _catches_name_error(node):
                tries.append(node)
            elif isinstance(node, ast.If) and isinstance(node.test, ast.Constant):
                dead.extend(node.orelse if node.test.value else node.body)  # never runs
            elif type(node) in _BINDERS:  # most nodes bind nothing: no call for them
                _bind(node, bound)
        unbound = [name for name in reads if name.id not in bound]
        if not unbound:  # nearly every file: nothing more to walk
            return
        # names inside `try: ... except NameError` and in annotations are excused
        excused = {id(n) for t in tries for s in t.body for n in subtree(s)}
        excused.update(id(n) for s in dead for n in subtree(s))
        annotations = {id(n) for a in _annotations(ctx.module_nodes()) for n in subtree(a)}
        reported: set[str] = set()
        for name in unbound:
            if name.id in reported or id(name) in excused or id(name) in annotations:
                continue
            reported.add(name.id)
            ctx.report(self, name, name=name.id)


#: The node types that bind a name (other than a stored ``ast.Name``).
_BINDERS = frozenset(
    {ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Import, ast.ImportFrom, ast.arg,
     ast.ExceptHandler, ast.Global, ast.Nonlocal, ast.MatchAs, ast.MatchStar, ast.MatchMapping}
)  # fmt: skip


def _dynamic(func: ast.expr) -> bool:
    return isinstance(func, ast.Name) and func.id in _DYNAMIC


def _bind(node: ast.AST, bound: set[str]) -> None:
    """Add the names ``node`` binds, wherever it is (scopes are not told apart)."""
    if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
        bound.add(node.id)
    elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        bound.add(node.name)
    elif isinstance(node, (ast.Import, ast.ImportFrom)):
        for alias in node.names:
            bound.add((alias.asname or alias.name).split(".")[0])
    elif isinstance(node, ast.arg):
        bound.add(node.arg)
    elif isinstance(node, ast.ExceptHandler) and node.name:
        bound.add(node.name)
    elif isinstance(node, (ast.Global, ast.Nonlocal)):
        bound.update(node.names)
    elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
        bound.add(node.name)
    elif isinstance(node, ast.MatchMapping) and node.rest:
        bound.add(node.rest)


def _catches_name_error(node: ast.Try) -> bool:
    for handler in node.handlers:
        if handler.type is None:
            return True
        names = {n.id for n in subtree(handler.type) if isinstance(n, ast.Name)}
        if names & {"NameError", "Exception", "BaseException", "ImportError"}:
            return True
    return False


def _annotations(nodes: list[ast.AST]) -> list[ast.expr]:
    found: list[ast.expr] = []
    for node in nodes:
        if isinstance(node, ast.AnnAssign):
            found.append(node.annotation)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if node.returns is not None:
                found.append(node.returns)
            args = node.args
            for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]:
                if arg is not None and arg.annotation is not None:
                    found.append(arg.annotation)
    return found
