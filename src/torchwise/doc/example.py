"""The ``Example:`` block and the usage snippet, and running them to prove they work.

The docstring example lives in the model's module, so (as under ``doctest``)
it may use the class or factory by its bare name. The Markdown usage snippet is
a standalone script: it imports the model the way a user would from the
directory torchwise was run in. Both are executed before they are shown;
models too large to build for real (over :data:`REAL_RUN_LIMIT` bytes of
parameters) run under ``torch.device("meta")``, which still checks every
shape.
"""

from __future__ import annotations

import contextlib
import doctest
import importlib.machinery
import io
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from torchwise.doc.shapes import SymbolicShapes
from torchwise.errors import TorchwiseError
from torchwise.target import InputSpec, ResolvedTarget

#: Examples above either limit run on the meta device: same code, same shapes,
#: no weights to build and no compute (a GPT-2 forward at 1024 tokens is ~250 GFLOPs).
REAL_RUN_BYTES = 1 << 30
REAL_RUN_FLOPS = 20 * 10**9


@dataclass
class Recipe:
    """How a user gets the model: an import line (scripts only) and an expression."""

    imports: list[str]
    expression: str  # in the model's module namespace
    script_expression: str  # after ``imports``
    #: the same on the meta device, for checking examples too big to run for real
    meta_expression: str | None = None


def _kwargs_text(kwargs: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in kwargs.items())


def recipe(target: str, rt: ResolvedTarget, config_start: Path | None = None) -> Recipe:
    """The expressions that rebuild ``rt.model`` the way ``target`` built it."""
    from torchwise import zoo

    cls = rt.cls or type(rt.model)
    kwargs = _kwargs_text(rt.init_kwargs)
    ref = _configured_ref(target, config_start)
    if ref.startswith("zoo:"):
        entry = zoo.get(ref[4:])
        builder = entry.builder
        options = _kwargs_text({**entry.options, **rt.init_kwargs})
        in_module = builder.__module__ == cls.__module__
        expression = f"{builder.__name__}({options})" if in_module else f"{cls.__name__}()"
        overrides = f"{_kwargs_text(rt.init_kwargs)}" if rt.init_kwargs else ""
        script = f"zoo.get({entry.name!r}).build({overrides})"
        meta_args = ", ".join(["device='meta'", *([overrides] if overrides else [])])
        on_meta = f"zoo.get({entry.name!r}).build({meta_args})"
        return Recipe(["from torchwise import zoo"], expression, script, on_meta)
    attr = ref.rpartition(":")[2]
    obj: Any = sys.modules.get(cls.__module__)
    for part in attr.split("."):
        obj = getattr(obj, part, None)
    if obj is cls or obj is None:
        name, call = cls.__qualname__, f"{cls.__qualname__}({kwargs})"
    elif isinstance(obj, type) or not callable(obj) or hasattr(obj, "forward"):
        name, call = attr, attr  # a module instance defined at module level
    else:
        name, call = attr, f"{attr}({kwargs})"
        if isinstance(obj(**rt.init_kwargs), tuple):
            call += "[0]"  # the factory returns (model, example_inputs)
    return Recipe(_import_lines(cls, rt, name.split(".")[0]), call, call)


def _configured_ref(target: str, config_start: Path | None) -> str:
    """``file.py:Name``/``zoo:NAME`` behind a ``[tool.torchwise.models]`` name."""
    if ":" in target:
        return target
    from torchwise.config import load_config

    entry = (load_config(config_start).get("models", {}) or {}).get(target, {})
    ref = entry.get("target", target) if isinstance(entry, dict) else target
    return ref if isinstance(ref, str) else target


def _import_lines(cls: type, rt: ResolvedTarget, name: str) -> list[str]:
    """``from pkg.mod import Name``, or a sys.path entry for a file loaded by path."""
    if rt.source_file is None or _importable(cls.__module__):
        return [f"from {cls.__module__} import {name}"]
    path = rt.source_file.resolve()
    try:
        directory = os.path.relpath(path.parent, Path.cwd())
    except ValueError:  # another drive on Windows
        directory = str(path.parent)
    return [
        "import sys",
        f"sys.path.insert(0, {Path(directory).as_posix()!r})  # run from the project root",
        f"from {path.stem} import {name}",
    ]


def _importable(module_name: str) -> bool:
    """Can a plain ``import`` find this module (not one torchwise loaded from a path)?"""
    # PathFinder looks at sys.path only, not at sys.modules where torchwise put it.
    return importlib.machinery.PathFinder.find_spec(module_name.split(".")[0]) is not None


def _tensor_expr(spec: InputSpec) -> str:
    if spec.children is not None:
        items = ", ".join(f"{k!r}: {_tensor_expr(v)}" for k, v in spec.children.items())
        return "{" + items + "}"
    sizes = [str(d.size) for d in spec.dims]
    dtype = spec.torch_dtype()
    dtype_arg = f", dtype={dtype}"
    if spec.dtype == "bool":
        return f"torch.ones({', '.join(sizes)}{dtype_arg})"
    if spec.dtype in ("i8", "u8", "i16", "i32", "i64"):
        high = spec.high if spec.high is not None else 2
        shape = "(" + ", ".join(sizes) + ("," if len(sizes) == 1 else "") + ")"
        return f"torch.randint(0, {high}, {shape}{'' if spec.dtype == 'i64' else dtype_arg})"
    return f"torch.randn({', '.join(sizes)}{'' if spec.dtype == 'f32' else dtype_arg})"


def call_lines(rt: ResolvedTarget, names: list[str], shapes: SymbolicShapes) -> list[str]:
    """Statements that build the inputs, call the model and show the output shapes."""
    lines, args = [], []
    for spec, name in zip(rt.input_specs, names, strict=True):
        lines.append(f"{name} = {_tensor_expr(spec)}")
        args.append(name if spec.name is None else f"{spec.name}={name}")
    lines.append(f"out = model({', '.join(args)})")
    return lines


def output_checks(shapes: SymbolicShapes) -> list[tuple[str, str]]:
    """(expression, its printed value) for up to four output tensors."""
    checks = []
    for leaf in shapes.outputs[:4]:
        expression = "out" if leaf.path == "output" else f"out{leaf.path}"
        checks.append((f"{expression}.shape", f"torch.Size({leaf.sizes})"))
    return checks


def doctest_lines(
    expression: str, rt: ResolvedTarget, names: list[str], shapes: SymbolicShapes
) -> list[str]:
    lines = [">>> import torch", f">>> model = {expression}.eval()"]
    lines += [f">>> {line}" for line in call_lines(rt, names, shapes)]
    for check, value in output_checks(shapes):
        lines += [f">>> {check}", value]
    return lines


def script_lines(
    recipe_: Recipe, rt: ResolvedTarget, names: list[str], shapes: SymbolicShapes
) -> list[str]:
    stdlib = [line for line in recipe_.imports if line == "import sys"]
    rest = [line for line in recipe_.imports if line != "import sys"]
    lines = [*stdlib, "import torch", *rest, "", f"model = {recipe_.script_expression}"]
    lines += ["model.eval()", "with torch.no_grad():"]
    lines += [f"    {line}" for line in call_lines(rt, names, shapes)]
    lines += [f"print({check})  # {value}" for check, value in output_checks(shapes)]
    lines += [f"assert {check} == {value}" for check, value in output_checks(shapes)]
    return lines


def _heavy(rt: ResolvedTarget, flops: int) -> bool:
    size = sum(p.numel() * p.element_size() for p in rt.model.parameters())
    return size > REAL_RUN_BYTES or flops > REAL_RUN_FLOPS


@contextlib.contextmanager
def _device_for(rt: ResolvedTarget, flops: int) -> Iterator[str]:
    import torch

    if _heavy(rt, flops):
        with torch.device("meta"):
            yield "meta"
    else:
        yield "cpu"


def run_doctest(lines: list[str], cls: type, rt: ResolvedTarget, flops: int) -> str:
    """Run the example in the class's module namespace; the device it ran on."""
    module = sys.modules.get(cls.__module__)
    globs = dict(vars(module)) if module is not None else {}
    text = "\n".join(lines) + "\n"
    test = doctest.DocTestParser().get_doctest(text, globs, f"{cls.__qualname__} Example", None, 0)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    report = io.StringIO()
    with _device_for(rt, flops) as device:
        result = runner.run(test, out=report.write, clear_globs=True)
    if result.failed:
        raise TorchwiseError(
            f"the generated Example for {cls.__qualname__} does not run:\n{report.getvalue()}",
            hint="check --init-kwargs and --input; the example rebuilds the model from them",
        )
    return device


def run_script(lines: list[str], recipe_: Recipe, rt: ResolvedTarget, flops: int) -> str:
    """Execute the usage snippet as a fresh script would (cwd-relative imports).

    On meta, a zoo model is built with ``device="meta"`` (its builder picks the
    device explicitly, so the ambient default device would not reach it).
    """
    code = "\n".join(lines) + "\n"
    if _heavy(rt, flops) and recipe_.meta_expression:
        code = code.replace(recipe_.script_expression, recipe_.meta_expression, 1)
    namespace: dict[str, Any] = {"__name__": "__torchwise_usage__"}
    saved_path, saved_modules = list(sys.path), dict(sys.modules)
    for line in recipe_.imports:  # import the file afresh, as a new process would
        if line.startswith("from "):
            sys.modules.pop(line.split()[1], None)
    try:
        with _device_for(rt, flops) as device, contextlib.redirect_stdout(io.StringIO()):
            exec(compile(code, "<usage example>", "exec"), namespace)
    except Exception as exc:
        raise TorchwiseError(f"the generated usage example does not run: {exc!r}") from None
    finally:
        sys.path[:] = saved_path
        for name in set(sys.modules) - set(saved_modules):
            if _is_project_module(sys.modules[name], saved_path):
                del sys.modules[name]  # the user's file, imported by the script: not ours to keep
        for name, module in saved_modules.items():
            sys.modules.setdefault(name, module)
    return device


def _is_project_module(module: Any, known_path: list[str]) -> bool:
    """Imported from a directory the script put on sys.path (not torch, not stdlib)."""
    source = getattr(module, "__file__", None)
    if not source:
        return False
    roots = [Path(p).resolve() for p in known_path if p]
    return not any(Path(source).resolve().is_relative_to(root) for root in roots)
