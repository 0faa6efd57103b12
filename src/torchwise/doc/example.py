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

import ast
import contextlib
import doctest
import importlib
import importlib.machinery
import io
import os
import sys
import tokenize
from collections.abc import Iterator
from dataclasses import dataclass, field
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
    """How a user gets the model: the build expression and what it needs.

    ``expression`` runs in the model class's module (as a doctest there does);
    ``example_imports`` are what the docstring needs on top (names the class's
    module does not have); ``imports`` set up the standalone usage script.
    ``printed`` is what building the model writes to stdout (nanoGPT prints its
    parameter count), so the Example can expect it.
    """

    imports: list[str]
    expression: str
    script_expression: str
    example_imports: list[str] = field(default_factory=list)
    printed: str = ""


def _call_target(build: str, returns_example: bool) -> str:
    """The expression for the model alone: ``make()[0]`` for a factory's (model, inputs)."""
    if not returns_example:
        return build
    try:
        node = ast.parse(build, mode="eval").body
    except SyntaxError:
        node = None
    simple = isinstance(node, ast.Call | ast.Name | ast.Attribute | ast.Subscript)
    return f"{build}[0]" if simple else f"({build})[0]"


def recipe(rt: ResolvedTarget) -> Recipe:
    """The expressions that rebuild ``rt.model`` the way the user asked for it."""
    cls = rt.cls or type(rt.model)
    build = rt.build or f"{cls.__qualname__}()"
    call = _call_target(build, rt.returns_example)
    module = sys.modules.get(cls.__module__)
    namespace = vars(module) if module is not None else {}
    missing = [name for name in rt.build_names if name not in namespace]
    example_imports = _imports_for(missing, rt) if missing else []
    imports = _import_lines(rt)
    return Recipe(imports, call, call, example_imports, _printed_by(call, rt, namespace))


def _target_namespace(rt: ResolvedTarget) -> dict[str, Any]:
    """The namespace the build expression was evaluated in (the user's loaded file)."""
    for module in list(sys.modules.values()):
        source = getattr(module, "__file__", None)
        if rt.module_file is not None and source and Path(source) == rt.module_file:
            return dict(vars(module))
    named = sys.modules.get(rt.module or "")
    return dict(vars(named)) if named is not None else {}


def _imports_for(names: list[str], rt: ResolvedTarget) -> list[str]:
    """Import lines for the names a build expression takes from its module, each from where
    it really lives: ``from torch import nn`` for torch's, ``from model import Block`` for
    the user's (a ``--build "nn.Sequential(Block(4), nn.ReLU())"`` documents torch's
    Sequential, whose module has neither)."""
    import types

    namespace = _target_namespace(rt)
    lines: list[str] = []
    own: list[str] = []
    for name in names:
        obj = namespace.get(name)
        home = getattr(obj, "__module__", None)
        if isinstance(obj, types.ModuleType):
            parent, _, leaf = obj.__name__.rpartition(".")
            if obj.__name__ == name:
                lines.append(f"import {name}")
            elif leaf == name:
                lines.append(f"from {parent} import {name}")
            else:
                lines.append(f"import {obj.__name__} as {name}")
        elif (
            home
            and home != rt.module
            and _importable(home)
            and (getattr(sys.modules.get(home), name, None) is obj)
        ):
            lines.append(f"from {home} import {name}")
        else:
            own.append(name)
    if own and rt.module:
        lines.append(f"from {rt.module} import {', '.join(own)}")
    return lines


def _printed_by(call: str, rt: ResolvedTarget, namespace: dict[str, Any]) -> str:
    """What building the model prints (run on meta: no memory, same prints)."""
    import torch

    if not namespace or rt.origin == "zoo":
        return ""
    globs = dict(namespace)
    # the names the build takes from the user's file, as objects: importing the file by
    # name here could find another module of that name on sys.path and leave it cached
    target = _target_namespace(rt)
    globs.update({name: target[name] for name in rt.build_names if name in target})
    buffer = io.StringIO()
    try:
        with contextlib.redirect_stdout(buffer), torch.device("meta"):
            eval(call, globs)
    except Exception:
        return ""  # the Example run reports a build that fails; here only prints matter
    return buffer.getvalue()


def _import_lines(rt: ResolvedTarget) -> list[str]:
    """Script imports: a sys.path entry for a file target, then ``from module import ...``."""
    line = rt.import_line()
    if line is None:
        return []
    if rt.module_file is None or _importable(rt.module or ""):
        return [line]
    path = rt.module_file.resolve()
    try:
        directory = os.path.relpath(path.parent, Path.cwd())
    except ValueError:  # another drive on Windows
        directory = str(path.parent)
    return [
        "import sys",
        f"sys.path.insert(0, {Path(directory).as_posix()!r})  # run from the project root",
        line,
    ]


def _importable(module_name: str) -> bool:
    """Can a plain ``import`` find this module (not one torchwise loaded from a path)?"""
    # PathFinder looks at sys.path only, not at sys.modules where torchwise put it.
    if not module_name:
        return False
    return importlib.machinery.PathFinder.find_spec(module_name.split(".")[0]) is not None


def _tensor_expr(spec: InputSpec) -> str:
    """Python source that builds an input like ``spec``: tensors, dicts, tuples, values."""
    if spec.children is not None:
        items = ", ".join(f"{k!r}: {_tensor_expr(v)}" for k, v in spec.children.items())
        return "{" + items + "}"
    if spec.items is not None:
        parts = [_tensor_expr(item) for item in spec.items]
        if spec.is_list:
            return "[" + ", ".join(parts) + "]"
        return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"
    if spec.literal is not None:
        return spec.literal
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


def _expected_print(printed: str) -> tuple[str, list[str]]:
    """A doctest directive and the expected lines for what building the model prints.

    The first line is kept as printed and the rest matched by an ellipsis, so a
    parameter count printed by the constructor is shown, and more lines still match.
    """
    lines = [line.rstrip() for line in printed.strip("\n").splitlines()]
    if not lines or not lines[0].strip():
        return "", []
    if len(lines) == 1:
        return "", lines
    return "  # doctest: +ELLIPSIS", [lines[0], "..."]


#: Example lines longer than this are continued after a comma (doctest's ``...`` prompt).
EXAMPLE_WIDTH = 88


def split_code(code: str, width: int = EXAMPLE_WIDTH) -> list[str]:
    """``code`` as lines of at most ``width`` characters where it can be: broken after
    commas inside brackets (never inside a string), continuations indented 4 spaces."""
    if len(code) <= width:
        return [code]
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(code).readline))
    except (tokenize.TokenError, SyntaxError):
        return [code]
    breaks, depth = [], 0
    for token in tokens:
        if token.type == tokenize.OP and token.string in "([{":
            depth += 1
        elif token.type == tokenize.OP and token.string in ")]}":
            depth -= 1
        elif token.type == tokenize.OP and token.string == "," and depth > 0:
            breaks.append(token.end[1])  # one line of code: columns are offsets
    lines: list[str] = []
    start = last = 0
    for cut in [*breaks, len(code)]:
        indent = 0 if not lines else 4
        if cut - start + indent > width and last > start:
            lines.append(code[start:last].strip())
            start = last
        last = cut
    lines.append(code[start:].strip())
    return [lines[0], *("    " + line for line in lines[1:])]


def _prompted(code: str) -> list[str]:
    first, *rest = split_code(code)
    return [f">>> {first}", *(f"... {line}" for line in rest)]


def doctest_lines(
    recipe_: Recipe, rt: ResolvedTarget, names: list[str], shapes: SymbolicShapes
) -> list[str]:
    lines = [">>> import torch", *(f">>> {line}" for line in recipe_.example_imports)]
    directive, printed = _expected_print(recipe_.printed)
    if printed and printed[0].lstrip().startswith(("...", ">>>")):
        # doctest would read such output as code: build with the output swallowed instead
        lines += [
            ">>> import contextlib, io",
            ">>> with contextlib.redirect_stdout(io.StringIO()):",
            f"...     model = {recipe_.expression}.eval()",
        ]
    else:
        lines += _prompted(f"model = {recipe_.expression}.eval(){directive}")
        lines += printed
    lines += [f">>> {line}" for line in call_lines(rt, names, shapes)]
    for check, value in output_checks(shapes):
        lines += [f">>> {check}", value]
    return lines


def script_lines(
    recipe_: Recipe, rt: ResolvedTarget, names: list[str], shapes: SymbolicShapes
) -> list[str]:
    stdlib = [line for line in recipe_.imports if line == "import sys"]
    rest = [line for line in recipe_.imports if line != "import sys"]
    lines = [
        *stdlib,
        "import torch",
        *rest,
        "",
        *split_code(f"model = {recipe_.script_expression}"),
    ]
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
    # the Example imports the user's own file as a user running it from its directory would
    directory = str(rt.module_file.parent) if rt.module_file is not None else None
    saved_path, saved_modules = list(sys.path), set(sys.modules)
    # a module of the same name imported from elsewhere must not answer the Example's import
    shadowed = sys.modules.pop(rt.module, None) if directory and rt.module else None
    if directory is not None:
        sys.path.insert(0, directory)
    try:
        with _device_for(rt, flops) as device:
            result = runner.run(test, out=report.write, clear_globs=True)
    finally:
        sys.path[:] = saved_path
        for name in set(sys.modules) - saved_modules:
            if name == rt.module or _is_project_module(sys.modules[name], saved_path):
                del sys.modules[name]
        if shadowed is not None and rt.module:
            sys.modules[rt.module] = shadowed
    if result.failed:
        raise TorchwiseError(
            f"the generated Example for {cls.__qualname__} does not run:\n{report.getvalue()}",
            hint="check --init-kwargs and --input; the example rebuilds the model from them",
        )
    return device


def run_script(lines: list[str], recipe_: Recipe, rt: ResolvedTarget, flops: int) -> str:
    """Execute the usage snippet as a fresh script would (cwd-relative imports); models
    too big to run for real are built and run under ``torch.device("meta")``."""
    code = "\n".join(lines) + "\n"
    namespace: dict[str, Any] = {"__name__": "__torchwise_usage__"}
    saved_path, saved_modules = list(sys.path), dict(sys.modules)
    importlib.invalidate_caches()  # a relative sys.path entry ('.') may name a new directory
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
