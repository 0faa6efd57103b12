"""Running the user's code for a target: importing its module, evaluating its build.

Model files are often scripts: they parse ``sys.argv`` at import, print, or
train when run. A target's module is imported with a clean ``sys.argv`` (just
the file), its output is sent to stderr so it cannot corrupt a report on
stdout, and a ``SystemExit`` (argparse's reaction to missing arguments) becomes
one clear line naming the user's file and line. Every error names the user's
own ``file:line``, never a frame inside torchwise or torch.
"""

from __future__ import annotations

import ast
import contextlib
import difflib
import importlib
import importlib.util
import io
import json
import re
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

from torchwise.errors import (
    TorchwiseError,
    UserCodeError,
    display_path,
    user_frame,
)


def user_location(exc: BaseException) -> str | None:
    """``file:line`` of the innermost frame of ``exc`` in the user's code, if any."""
    if isinstance(exc, SyntaxError) and exc.filename and exc.lineno:
        return f"{display_path(exc.filename)}:{exc.lineno}"
    frame = user_frame(exc)
    return None if frame is None else f"{display_path(frame.filename)}:{frame.lineno}"


@contextlib.contextmanager
def _script_guard(path: Path | None, captured: io.StringIO) -> Iterator[None]:
    """A clean ``sys.argv``, the file's directory on ``sys.path``, output captured."""
    saved_argv = sys.argv
    sys.argv = [str(path) if path else "torchwise"]
    entry = str(path.parent) if path else str(Path.cwd())
    sys.path.insert(0, entry)
    try:
        with contextlib.redirect_stdout(captured), contextlib.redirect_stderr(captured):
            yield
    finally:
        sys.argv = saved_argv
        with contextlib.suppress(ValueError):
            sys.path.remove(entry)


def _exited(where: str, exc: SystemExit, output: str) -> TorchwiseError:
    said = [line for line in output.strip().splitlines() if line.strip()]
    why = f": {said[-1].strip()}" if said else ""
    at = user_location(exc)
    return TorchwiseError(
        f"importing {where} exited with status {exc.code!r}{f' at {at}' if at else ''}{why}",
        hint="the file runs a script at import (argparse, training); put that part under "
        "`if __name__ == '__main__':` or move the model into a module of its own",
    )


@contextlib.contextmanager
def silenced() -> Iterator[None]:
    """Drop everything written to stdout and stderr inside the block."""
    sink = io.StringIO()
    with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
        yield


@contextlib.contextmanager
def run_user_code(where: str, doing: str, path: Path | None = None) -> Iterator[None]:
    """Run user code (an import, a constructor, a build expression) as a script would.

    ``sys.argv`` is just the file, the file's directory is on ``sys.path``, and
    what the code prints goes to stderr, off the report on stdout. A
    ``SystemExit`` or an exception becomes one :class:`TorchwiseError` naming the
    user's ``file:line``; ``KeyboardInterrupt`` and torchwise's own errors pass.
    """
    captured = io.StringIO()
    try:
        with _script_guard(path, captured):
            yield
    except SystemExit as exc:
        raise _exited(where, exc, captured.getvalue()) from None
    except TorchwiseError:
        sys.stderr.write(captured.getvalue())
        raise
    except Exception as exc:
        sys.stderr.write(captured.getvalue())
        raise UserCodeError.from_exception(exc, doing=doing) from None
    sys.stderr.write(captured.getvalue())


def load_module(module_ref: str) -> tuple[ModuleType, Path | None]:
    """Import ``path/to/file.py`` or ``package.module``; (module, its file)."""
    if module_ref.endswith(".py") or "/" in module_ref or "\\" in module_ref:
        return _load_file(module_ref)
    try:
        with run_user_code(module_ref, f"importing {module_ref}"):
            module = importlib.import_module(module_ref)
    except TorchwiseError as err:
        if "ModuleNotFoundError" in err.message and f"'{module_ref.split('.')[0]}" in err.message:
            raise TorchwiseError(
                f"no module named {module_ref!r}",
                hint="use path/to/file.py:Name for a file, or install the package",
            ) from None
        raise
    source = getattr(module, "__file__", None)
    return module, Path(source) if source else None


def _load_file(module_ref: str) -> tuple[ModuleType, Path]:
    path = Path(module_ref).resolve()
    if not path.is_file():
        raise TorchwiseError(f"model file not found: {module_ref}")
    stem = re.sub(r"\W", "_", path.stem)
    mod_name = f"_torchwise_target_{stem}_{abs(hash(str(path))):x}"
    if mod_name in sys.modules:
        return sys.modules[mod_name], path
    spec = importlib.util.spec_from_file_location(mod_name, path)
    if spec is None or spec.loader is None:
        raise TorchwiseError(f"cannot import {module_ref}: not a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = module  # dataclasses and pickling look modules up here
    try:
        with run_user_code(module_ref, f"importing {module_ref}", path):
            spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[mod_name]
        raise
    return module, path


def model_names(module: ModuleType) -> list[str]:
    """Public names in ``module`` that are nn.Module classes defined there or instances."""
    import torch

    names = []
    for attr, value in vars(module).items():
        if attr.startswith("_"):
            continue
        is_cls = isinstance(value, type) and issubclass(value, torch.nn.Module)
        if is_cls and value.__module__ != module.__name__:
            continue  # imported, e.g. nn.Linear via ``from torch.nn import Linear``
        if is_cls or isinstance(value, torch.nn.Module):
            names.append(attr)
    return names


def lookup(module: ModuleType, module_ref: str, attr: str) -> Any:
    """``module.attr`` for a dotted ``attr``, or an error listing the models it defines."""
    obj: Any = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            found = model_names(module)
            raise TorchwiseError(
                f"{module_ref} has no attribute {attr!r}",
                hint=f"models it defines: {', '.join(found)}" if found else "it defines no models",
            )
        obj = getattr(obj, part)
    return obj


def parse_init_kwargs(text: str | Mapping[str, Any] | None) -> dict[str, Any]:
    """``--init-kwargs`` JSON (or a config table) -> a dict of constructor arguments."""
    if text is None:
        return {}
    if isinstance(text, Mapping):
        return dict(text)
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise TorchwiseError(
            f"--init-kwargs is not valid JSON: {exc.msg} at column {exc.colno}",
            hint='example: --init-kwargs \'{"dim": 256, "depth": 4}\'',
        ) from None
    if not isinstance(value, dict):
        raise TorchwiseError("--init-kwargs must be a JSON object, e.g. '{\"dim\": 256}'")
    return value


def call_expression(callee: str, kwargs: Mapping[str, Any], *positional: str) -> str:
    """``Net(dim=8)``: the Python source of a call with literal keyword arguments."""
    parts = [*positional, *(f"{k}={v!r}" for k, v in kwargs.items())]
    return f"{callee}({', '.join(parts)})"


def compile_build(expression: str) -> ast.Expression:
    """Parse a ``--build`` expression, pointing at the column of a syntax error."""
    try:
        return ast.parse(expression.strip(), mode="eval")
    except SyntaxError as exc:
        column = max((exc.offset or 1) - 1, 0)
        raise TorchwiseError(
            f"--build is not a Python expression: {exc.msg}\n  {expression.strip()}\n"
            f"  {' ' * column}^",
            hint='example: --build "GPT(GPTConfig(n_layer=2, n_embd=128))"',
        ) from None


def _used_names(tree: ast.Expression) -> list[str]:
    """Names the expression reads from outside itself, in order of first use."""
    bound = {
        a.arg for node in ast.walk(tree) if isinstance(node, ast.Lambda) for a in node.args.args
    }
    for node in ast.walk(tree):
        if isinstance(node, ast.comprehension):
            bound |= {t.id for t in ast.walk(node.target) if isinstance(t, ast.Name)}
    loads = sorted(
        (n for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)),
        key=lambda n: (n.lineno, n.col_offset),
    )
    names: list[str] = []
    for node in loads:
        if node.id not in bound and node.id not in names:
            names.append(node.id)
    return names


def free_names(expression: str, namespace: Mapping[str, Any]) -> tuple[str, ...]:
    """The names ``expression`` takes from ``namespace``, in order of first use."""
    return tuple(n for n in _used_names(compile_build(expression)) if n in namespace)


def evaluate_build(expression: str, module: ModuleType, where: str, path: Path | None) -> Any:
    """Evaluate ``expression`` in ``module``'s namespace (a copy: the module is not changed)."""
    import builtins

    tree = compile_build(expression)
    namespace = dict(vars(module))
    missing = [n for n in _used_names(tree) if n not in namespace and not hasattr(builtins, n)]
    if missing:
        defined = [k for k in vars(module) if not k.startswith("_")]
        close = difflib.get_close_matches(missing[0], defined, n=3)
        raise TorchwiseError(
            f"--build uses {missing[0]!r}, which {where} does not define or import",
            hint=f"did you mean {', '.join(close)}?"
            if close
            else f"models {where} defines: {', '.join(model_names(module)) or 'none'}",
        )
    code = compile(tree, f"<--build {expression.strip()}>", "eval")
    with run_user_code(where, f"building {expression.strip()}", path):
        return eval(code, namespace)  # the user's own expression, in their own module
