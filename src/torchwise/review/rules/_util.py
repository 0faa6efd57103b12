"""Small helpers shared by rules: reading calls and building fixes."""

from __future__ import annotations

import ast
import os
import re

from torchwise.findings import Applicability, Edit, Fix, Severity
from torchwise.review.engine.context import Context
from torchwise.review.engine.syntax import keyword, last_name
from torchwise.review.files import is_test_module


def replace(ctx: Context, node: ast.AST, text: str) -> Edit:
    start, end = ctx.span(node)
    return Edit(start, end, text)


def replace_fix(
    ctx: Context,
    node: ast.AST,
    text: str,
    title: str,
    applicability: Applicability = Applicability.SAFE,
) -> Fix:
    return Fix(title, (replace(ctx, node, text),), applicability)


def add_keyword(ctx: Context, call: ast.Call, text: str) -> Edit:
    """Insert ``text`` (``"weights_only=True"``) as the call's last argument."""
    arguments: list[ast.AST] = [*call.args, *call.keywords]
    if arguments:
        last = max(arguments, key=lambda node: ctx.span(node)[1])
        end = ctx.span(last)[1]
        return Edit(end, end, f", {text}")
    # No arguments: the closing parenthesis is the call's last character.
    end = ctx.span(call)[1] - 1
    return Edit(end, end, text)


def set_keyword(ctx: Context, call: ast.Call, name: str, value: str) -> Edit:
    """Set ``name=value``, replacing an existing value or adding the keyword."""
    existing = keyword(call, name)
    if existing is not None:
        return replace(ctx, existing.value, value)
    return add_keyword(ctx, call, f"{name}={value}")


def remove_keyword(ctx: Context, call: ast.Call, item: ast.keyword) -> Edit:
    """Delete one keyword argument and the comma that separated it."""
    start, end = ctx.span(item)
    source = ctx.source
    # Eat the preceding ", " when there is one, else the following one.
    before = source.rfind(",", 0, start)
    call_start = ctx.span(call)[0]
    if before > call_start and source[before + 1 : start].strip() == "":
        return Edit(before, end, "")
    after = end
    while after < len(source) and source[after] in " \t\n":
        after += 1
    if after < len(source) and source[after] == ",":
        after += 1
        while after < len(source) and source[after] in " \t":
            after += 1
    return Edit(start, after, "")


def rename_attribute(ctx: Context, func: ast.Attribute, new: str) -> Edit:
    """Replace the last name of ``a.b.old`` with ``new``, keeping the prefix's text."""
    end = ctx.span(func)[1]
    return Edit(end - len(func.attr), end, new)


def in_test_code(ctx: Context) -> bool:
    """The file is a test module (by pytest's naming): its training loops exercise
    code, on purpose with fixed data and order; they are not how the project trains.
    Judged by the file's name, not its folder: a checkout may itself live under tests/."""
    return is_test_module(ctx.path)


def torch_is_imported(ctx: Context) -> bool:
    """Whether the bare name ``torch`` refers to the torch package here."""
    return ctx.qualname(ast.Name("torch")) == "torch"


# An `if` test that selects code by library version or feature availability.
_COMPAT_TEST = re.compile(
    r"version|torch_(greater|less|geq|lt|ge)|TORCH_\w*\d|\b\w*_(MAJOR|MINOR)\b|\b(MAJOR|MINOR)_\w*|hasattr",
    re.I,
)


def in_compat_code(ctx: Context, catching: frozenset[str] | None = None) -> bool:
    """Whether the current node sits in deliberate compatibility code.

    That is a branch of an ``if``/``x if c else y`` whose test checks a
    version or ``hasattr`` (both branches: one is the old API on purpose), or
    an ``except`` handler (only handlers catching one of ``catching``, when
    given): ``except TypeError: torch.load(f)`` is the retry for a torch too
    old to know ``weights_only``. When ``catching`` is given, ``if`` tests are
    not considered.
    """
    for parent in ctx.parents:
        if isinstance(parent, ast.ExceptHandler):
            if catching is None or _handler_names(parent) & catching:
                return True
        elif (
            catching is None
            and isinstance(parent, (ast.If, ast.IfExp))
            and _COMPAT_TEST.search(ctx.text(parent.test))
        ):
            return True
    return False


def _handler_names(handler: ast.ExceptHandler) -> set[str]:
    types = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return {last_name(Context.dotted(item)) for item in types if item is not None}


_HALF_PRECISION = re.compile(r"float16|\.half\(\)|autocast|GradScaler|\bfp16\b|\bamp\b")


def underflow_severity(ctx: Context) -> Severity | None:
    """An underflow to -inf (``log`` of a softmax or a sigmoid) is likely where
    the file computes in float16 (logit gaps of about 17 suffice); in float32
    it takes gaps near 100, a robustness hint."""
    return None if _HALF_PRECISION.search(ctx.source) else Severity.INFO


def shown_path(path: str, ctx: Context) -> str:
    """Another project file as a finding names it: relative to the reviewed
    file's directory (``util/misc.py``, ``../engine.py``), else its name."""
    try:
        relative = os.path.relpath(path, os.path.dirname(ctx.path) or ".")
    except ValueError:  # another drive
        return os.path.basename(path)
    return relative if relative.count("..") <= 2 else os.path.basename(path)
