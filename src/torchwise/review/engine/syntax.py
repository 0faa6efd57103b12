"""Reading Python syntax: the small questions every rule asks of a node."""

from __future__ import annotations

import ast
import functools
import re

_NOT_CONSTANT = object()


def keyword(call: ast.Call, name: str) -> ast.keyword | None:
    for item in call.keywords:
        if item.arg == name:
            return item
    return None


def has_kwargs_splat(call: ast.Call) -> bool:
    """``f(**options)`` may pass anything: rules about missing keywords stay quiet."""
    return any(item.arg is None for item in call.keywords)


def constant(node: ast.AST | None) -> object:
    """The value of a literal (``True``, ``0.5``, ``"x"``), else a sentinel."""
    if isinstance(node, ast.Constant):
        return node.value
    return _NOT_CONSTANT


def is_true(node: ast.AST | None) -> bool:
    return constant(node) is True


def is_false(node: ast.AST | None) -> bool:
    return constant(node) is False


def last_name(qualname: str | None) -> str:
    return "" if qualname is None else qualname.rsplit(".", 1)[-1]


#: (line, column, whether it binds the name) of each use of a dotted name.
NameUses = dict[str, list[tuple[int, int, bool]]]


def name_uses(scope: ast.AST) -> NameUses:
    """Every read and write of a name or attribute chain (``x``, ``self.q``) in
    ``scope`` (a function, or a module's own statements), nested functions and
    classes left out. For rules that ask, once a rare pattern is found, whether
    a name is read again later."""
    uses: NameUses = {}
    pending = list(ast.iter_child_nodes(scope))
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        if isinstance(node, (ast.Name, ast.Attribute)):
            name = _dotted(node)
            if name is not None:
                store = isinstance(node.ctx, (ast.Store, ast.Del))
                uses.setdefault(name, []).append((node.lineno, node.col_offset, store))
        pending.extend(ast.iter_child_nodes(node))
    return uses


def _dotted(node: ast.AST) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


def file_name(expr: ast.AST | None) -> str | None:
    """The file name a path expression ends in, when the code writes it out:
    ``"ckpt.pt"``, ``os.path.join(args.out, "ckpt.pt")``, ``f"{out}/ckpt.pt"``,
    ``out + "/ckpt.pt"``, ``Path(out) / "ckpt.pt"``."""
    if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
        name = expr.value.replace("\\", "/").rsplit("/", 1)[-1]
        return name or None
    if isinstance(expr, ast.JoinedStr) and expr.values:
        last = expr.values[-1]
        if isinstance(last, ast.Constant) and isinstance(last.value, str) and "/" in last.value:
            return file_name(last)
        return None
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, (ast.Add, ast.Div)):
        return file_name(expr.right)
    if isinstance(expr, ast.Call) and expr.args:
        func = expr.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if name in {"join", "joinpath"}:
            return file_name(expr.args[-1])
    return None


def file_template(path: ast.AST) -> str | None:
    """The file name a path expression builds, its formatted parts as ``{}``
    (``f"./model/{env}_actor{step}.pth"`` -> ``{}_actor{}.pth``), when it
    names the file by more than its extension."""
    whole = path_template(path)
    if whole is None:
        return None
    name = whole.replace("\\", "/").rsplit("/", 1)[-1]
    stem = name.rsplit(".", 1)[0].replace("{}", "")
    return name if any(character.isalpha() for character in stem) else None


@functools.lru_cache(maxsize=4096)
def text_file_template(text: str) -> str | None:
    """file_template of an expression's source text (a SaveFact's ``path_text``)."""
    try:
        expression = ast.parse(text, mode="eval").body
    except (SyntaxError, ValueError):
        return None
    return file_template(expression)


def path_template(node: ast.AST) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        parts = []
        for value in node.values:
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                parts.append(value.value)
            else:
                parts.append("{}")
        return "".join(parts)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = path_template(node.left), path_template(node.right)
        return (left if left is not None else "{}") + (right if right is not None else "{}")
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
        left = path_template(node.left)
        return None if left is None else re.sub(r"%[-#0 +]*\d*(?:\.\d+)?[a-zA-Z]", "{}", left)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        if node.func.attr == "format":
            base = path_template(node.func.value)
            return None if base is None else re.sub(r"\{[^{}]*\}", "{}", base)
        if node.func.attr in ("join", "joinpath") and node.args:
            last = path_template(node.args[-1])
            return last if last is not None else "{}"
    return None


def tests_cuda_availability(test_text: str) -> bool:
    """Whether an ``if`` test chooses by whether CUDA is there
    (``torch.cuda.is_available()``, ``args.no_cuda``, ``args.cuda``): the code
    has a CPU path. ``x.is_cuda`` follows a tensor's device, and
    ``hasattr(torch.cuda.amp, "autocast")`` or a version test asks what the
    installed torch offers: neither is a fallback."""
    text = test_text.lower()
    if "cuda" not in text or "is_cuda" in text:
        return False
    return not any(word in text for word in ("hasattr", "getattr", "version"))


def unconditional_cuda_call(node: ast.Call, parents: list[ast.AST]) -> bool:
    """Whether ``node`` is ``x.cuda()`` on no branch at all (no ``if``,
    conditional expression or ``try`` above it, nor inside a method that moves
    things itself: ``cuda``, ``to``, ``_apply``, ``*gpu*``): code with such a
    call needs CUDA whatever it tests elsewhere."""
    func = node.func
    if not (isinstance(func, ast.Attribute) and func.attr == "cuda"):
        return False
    if node.args or node.keywords:
        return False
    for parent in parents:
        if isinstance(parent, (ast.If, ast.IfExp, ast.Try)):
            return False
        if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef)) and (
            parent.name in {"cuda", "to", "_apply"} or "gpu" in parent.name.lower()
        ):
            return False
    return True
