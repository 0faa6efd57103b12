"""Measure the model, decide what its test file says, and render it.

The steps read top to bottom:

1. resolve the target (the model is built the way every command builds it) and
   read the project's style;
2. measure the shape contract with ``torchwise doc``;
3. render the helpers (imports, ``build_model``, ``make_inputs``), import them as
   pytest will, and run a forward at the tests' sizes;
4. render every candidate test, import that module, and run each test and each
   doctor check the way the file will: what passes is kept, what does not is
   left out with the reason;
5. render the final module, which must compile.

Nothing here writes files (:mod:`torchwise.testgen.api` does, on request).
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import io
import os
import re
import sys
import time
import tokenize
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from torchwise.errors import TorchwiseError, UserCodeError
from torchwise.target import TargetRequest
from torchwise.testgen import checks as doctor_choice
from torchwise.testgen.contract import build_contract, measure
from torchwise.testgen.inputs_code import inputs_code
from torchwise.testgen.outputs import output_leaves
from torchwise.testgen.render import Names, Plan, render
from torchwise.testgen.result import GeneratedTests, TestInfo
from torchwise.testgen.session import TMP_PATH, Session, sandbox
from torchwise.testgen.style import ProjectStyle, detect_style, find_root

if TYPE_CHECKING:
    from torchwise.target import ResolvedTarget

#: Names the generated module defines or imports at module level.
MODULE_NAMES = frozenset(
    {
        "annotations",
        "sys",
        "copy",
        "Path",
        "Any",
        "pytest",
        "torch",
        "assert_healthy",
        "DOCTOR_OPTIONS",
    }
)
#: Above this many parameters the tests (which build the model about 20 times) get slow.
LARGE_MODEL = 20_000_000


@dataclass(frozen=True)
class Request:
    """What to generate tests for: the model as every front end names it, plus options."""

    model: TargetRequest
    checks: tuple[str, ...] | None = None
    causal_dim: int | None = None
    loss: str = "auto"


@dataclass
class _Found:
    """What the runs established, gathered while deciding."""

    tests: list[TestInfo] = field(default_factory=list)
    left_out: list[TestInfo] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    seconds: float = 0.0


def generate(
    request: Request,
    output: Path | None = None,
    *,
    on_start: Callable[[str], None] | None = None,
) -> GeneratedTests:
    """The test module for ``request``'s model, meant to live at ``output`` (default:
    ``<tests dir>/test_<model>.py``). Writes nothing. ``on_start`` hears what the work
    is once the target is built and the options fit its inputs."""
    from torchwise.doctor import Options, validate_options

    rt = request.model.resolve(device="cpu")
    if rt.build is None:
        raise TorchwiseError(f"torchwise does not know how to rebuild {rt.name} in a test file")
    if request.causal_dim is not None:  # the one doctor option that needs the inputs' rank
        causal = Options(loss=request.loss, causal_dim=request.causal_dim, batch_dim=None)
        validate_options(causal, rt.args, rt.kwargs)
    if on_start is not None:
        on_start(
            f"measuring {request.model.target} and running its tests once before writing them..."
        )
    title = (rt.cls or type(rt.model)).__name__
    root = _project_root(request, rt, output)
    path = output.resolve() if output is not None else None
    style = detect_style(root, exclude=path)
    if path is None:
        path = (style.tests_dir / f"test_{_snake(rt.config_name or title)}.py").resolve()
    found = _Found(notes=[*rt.notes, style.describe()])
    parameters = sum(p.numel() for p in rt.model.parameters())
    if parameters > LARGE_MODEL:
        found.warnings.append(
            f"{title} has {parameters:,} parameters and the tests build it about 20 times; "
            "give a small configuration (--init-kwargs or --build) so they run in seconds"
        )
    shapes, input_names, shape_note = measure(request.model.target, rt)
    if shape_note:
        found.notes.append(shape_note + "; the shape test checks the measured size only")
    names, build, import_line = _names(rt)
    contract = build_contract(rt, shapes, frozenset(rt.build_names) | MODULE_NAMES)
    found.notes += contract.notes
    if not input_names:
        input_names = _forward_names(rt)
    code = inputs_code(rt.input_specs, input_names, contract, width=style.line_length)
    path_entry, path_comment, user_dirs = _import_path(rt, path, style)
    plan = Plan(
        title=title,
        style=style,
        commands=_commands(request, root, path),
        model_import=import_line,
        path_entry=path_entry,
        path_comment=path_comment,
        build=build,
        build_kind=_build_kind(rt),
        contract=contract,
        inputs=code,
        names=names,
        third_party_model=rt.origin in ("hf", "timm", "zoo")
        or (rt.origin == "module" and not user_dirs),
    )
    modules = {rt.module.split(".")[0]} if rt.origin == "file" and rt.module else set()
    with sandbox(user_dirs, modules, style.import_roots):
        session = Session(render(plan), path, import_line=import_line)
        _shrink_defaults(session, plan)
        out = _baseline(session, plan, title)
        plan.outputs = output_leaves(out, contract, plan, found.notes)
        _choose_standard_tests(plan, found)
        session = Session(render(plan), path, import_line=import_line)
        _verify_standard_tests(session, plan, found)
        choices = doctor_choice.choose(session, plan, rt, request, found)
    text = render(plan)
    compile(text, str(path), "exec")  # a module that does not compile is never handed out
    return GeneratedTests(
        text=text,
        path=path,
        target=request.model.target,
        title=title,
        command=plan.commands[0][1] if plan.commands else "",
        tests=found.tests,
        left_out=found.left_out,
        checks=choices,
        doctor_options=dict(plan.doctor_options),
        notes=found.notes,
        warnings=found.warnings,
        verified_seconds=round(found.seconds, 2),
    )


# -- where the file lives and how it imports the model ------------------------------


def _project_root(request: Request, rt: ResolvedTarget, output: Path | None) -> Path:
    if output is not None:
        return find_root(_existing(output.resolve().parent))
    if rt.config_name is not None:
        from torchwise.config import find_pyproject

        found = find_pyproject(request.model.config_start or Path.cwd())
        if found is not None:
            return found.parent
    if rt.module_file is not None:
        return find_root(rt.module_file)
    return find_root(Path.cwd())


def _existing(path: Path) -> Path:
    while not path.exists() and path.parent != path:
        path = path.parent
    return path


def _snake(name: str) -> str:
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name)
    return re.sub(r"\W+", "_", spaced).strip("_").lower() or "model"


def _names(rt: ResolvedTarget) -> tuple[Names, str, str | None]:
    """Helper names that avoid the user's, the build expression and the model's import."""
    assert rt.build is not None
    taken = set(rt.build_names)
    names = Names()
    for attr in ("build_model", "make_inputs", "output_tensors", "runs_on"):
        name = getattr(names, attr)
        if name in taken:
            setattr(names, attr, f"{name}_under_test")
    aliases = {
        n: f"{rt.module.split('.')[-1] if rt.module else 'user'}_{n}"
        for n in rt.build_names
        if n in MODULE_NAMES and n != "torch"
    }
    imported = [n for n in rt.build_names if n != "torch"]
    build = _normalized(rt.build, aliases)
    if not imported or not rt.module:
        return names, build, None
    parts = [f"{n} as {aliases[n]}" if n in aliases else n for n in sorted(imported, key=_isort)]
    return names, build, f"from {rt.module} import {', '.join(parts)}"


def _isort(name: str) -> tuple[int, str]:
    """isort's order-by-type: CONSTANTS, then Classes, then functions and variables."""
    kind = 0 if name.isupper() and len(name) > 1 else 1 if name[:1].isupper() else 2
    return kind, name


def _normalized(expression: str, aliases: Mapping[str, str]) -> str:
    """``expression`` as a formatter writes it (spacing, double quotes), names aliased."""
    tree = ast.parse(expression.strip(), mode="eval")

    class Alias(ast.NodeTransformer):
        def visit_Name(self, node: ast.Name) -> ast.Name:
            return ast.Name(aliases.get(node.id, node.id), node.ctx)

    text = ast.unparse(Alias().visit(tree))
    out, last = [], 0
    lines = text.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type != tokenize.STRING:
            continue
        body = token.string
        plain = body.startswith("'") and not body.startswith("'''")
        if plain and '"' not in body and "\\" not in body:
            start = offsets[token.start[0] - 1] + token.start[1]
            end = offsets[token.end[0] - 1] + token.end[1]
            out += [text[last:start], f'"{body[1:-1]}"']
            last = end
    return "".join(out) + text[last:]


def _build_kind(rt: ResolvedTarget) -> str:
    assert rt.build is not None
    if rt.returns_example:
        return "example"
    return "instance" if rt.build.strip().isidentifier() else "call"


def _forward_names(rt: ResolvedTarget) -> list[str]:
    try:
        params = [
            p.name
            for p in inspect.signature(rt.model.forward).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
    except (TypeError, ValueError):
        params = []
    return [
        spec.name or (params[i] if i < len(params) else f"input{i}")
        for i, spec in enumerate(rt.input_specs)
    ]


def _import_path(
    rt: ResolvedTarget, path: Path, style: ProjectStyle
) -> tuple[str | None, str, list[Path]]:
    """The expression for the directory to put on ``sys.path`` (None: importable as is),
    the comment saying why, and the user's directories (for the sandbox)."""
    if rt.origin == "file" and rt.module_file is not None:
        directory, what = rt.module_file.resolve().parent, rt.module_file.name
    elif rt.origin == "module" and rt.module:
        module = sys.modules.get(rt.module)
        file = getattr(module, "__file__", None)
        if not file or _installed(file):
            return None, "", []
        depth = rt.module.count(".") + (1 if Path(file).name == "__init__.py" else 0)
        directory, what = Path(file).resolve().parents[depth], rt.module
    else:
        return None, "", []
    if directory in style.import_roots:
        return None, "", [directory]
    comment = f"{what} is imported from its directory, which pytest does not put on sys.path."
    return _relative(path.parent, directory), comment, [directory]


def _installed(file: str) -> bool:
    parts = Path(file).parts
    return "site-packages" in parts or "dist-packages" in parts


def _relative(test_dir: Path, directory: Path) -> str:
    """``Path(__file__).resolve().parents[1] / "src"``: ``directory`` from the test file."""
    try:
        rel = Path(os.path.relpath(directory, test_dir)).parts
    except ValueError:  # another drive: nothing relative exists
        return f'Path("{directory.as_posix()}")'
    ups = sum(1 for part in rel if part == "..")
    rest = "/".join(part for part in rel if part not in ("..", "."))
    base = "Path(__file__).resolve()." + ("parent" if ups == 0 else f"parents[{ups}]")
    return base + (f' / "{rest}"' if rest else "")


def _commands(request: Request, root: Path, path: Path) -> list[tuple[str, str]]:
    """The commands that regenerate and check the file, run from the project root."""
    words = ["torchwise", "tests", _rooted(request.model.target, root)]
    for spec in request.model.inputs:
        words += ["--input", spec]
    if request.model.init_kwargs is not None:
        kwargs = request.model.init_kwargs
        words += ["--init-kwargs", kwargs if isinstance(kwargs, str) else _json(kwargs)]
    if request.model.build is not None:
        words += ["--build", request.model.build]
    if request.model.batch_dim is not None:
        words += ["--batch-dim", str(request.model.batch_dim)]
    if request.model.config_start is not None and request.model.config_start.resolve() != root:
        words += ["--config", _relative_to(request.model.config_start.resolve(), root)]
    if request.checks is not None:
        words += ["--checks", ",".join(request.checks)]
    if request.causal_dim is not None:
        words += ["--causal", str(request.causal_dim)]
    if request.loss != "auto":
        words += ["--loss", request.loss]
    words += ["-o", _relative_to(path, root)]
    import shlex

    command = shlex.join(words)
    return [
        ("Regenerate from the project root", f"{command} --force"),
        ("Check in CI that this file is current", f"{command} --check"),
    ]


def _json(value: Mapping[str, Any]) -> str:
    import json

    return json.dumps(dict(value), separators=(",", ":"))


def _rooted(target: str, root: Path) -> str:
    module_ref, sep, attr = target.rpartition(":")
    if sep and (module_ref.endswith(".py") or "/" in module_ref):
        return f"{_relative_to(Path(module_ref).resolve(), root)}:{attr}"
    if target.endswith(".py"):
        return _relative_to(Path(target).resolve(), root)
    return target


def _relative_to(path: Path, root: Path) -> str:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return os.path.relpath(path, root) if path.anchor == root.anchor else str(path)


# -- running the helpers and the candidate tests -----------------------------------------


def _baseline(session: Session, plan: Plan, title: str) -> Any:
    """One forward of a fresh model on ``make_inputs()``: it must work for any test to."""
    import torch

    build, make = session.get(plan.names.build_model), session.get(plan.names.make_inputs)
    try:
        model = build()
    except Exception as exc:
        raise UserCodeError.from_exception(exc, doing=f"building {plan.build}") from None
    args, kwargs = make(**{s.var: s.default for s in plan.contract.symbols})
    sizes = ", ".join(f"{s.var}={s.default}" for s in plan.contract.symbols)
    try:
        with torch.no_grad():
            return model.eval()(*args, **kwargs)
    except Exception as exc:
        doing = f"forward of {title} at the tests' sizes" + (f" ({sizes})" if sizes else "")
        raise UserCodeError.from_exception(exc, doing=doing) from None


def _shrink_defaults(session: Session, plan: Plan) -> None:
    """Smaller default sizes for the non-batch symbols (an image's height and width, a
    sequence length), where the forward accepts them and the contract holds there: the
    tests run every check at these sizes, and a quarter of the pixels is a quarter of
    the time."""
    import torch

    symbols = plan.contract.symbols
    build, make = session.get(plan.names.build_model), session.get(plan.names.make_inputs)
    try:
        model = build().eval()
    except Exception as exc:
        raise UserCodeError.from_exception(exc, doing=f"building {plan.build}") from None
    for index, symbol in enumerate(symbols):
        if symbol.is_batch:
            continue
        for size in _smaller(symbol.example):
            trial = {s.var: s.default for s in symbols} | {symbol.var: size}
            args, kwargs = make(**trial)
            try:
                with torch.no_grad():
                    out = model(*args, **kwargs)
            except Exception:  # the model does not take this size: keep the example's
                continue
            if _contract_holds(out, plan, trial):
                symbols[index] = dataclasses.replace(symbol, default=size)
                break


def _smaller(example: int) -> list[int]:
    """A quarter and a half of ``example``, smallest first, none under 8."""
    return sorted({n for n in (example // 4, example // 2) if n >= 8 and n < example})


def _contract_holds(out: Any, plan: Plan, sizes: Mapping[str, int]) -> bool:
    from torchwise.testgen.contract import evaluate_dim
    from torchwise.testgen.outputs import tensors_of

    found = [t for _, t in tensors_of(out)]
    if len(found) != len(plan.contract.outputs):
        return False
    for tensor, dims in zip(found, plan.contract.outputs, strict=True):
        if len(dims.dims) != tensor.dim():
            return False
        for j, formula in enumerate(dims.dims):
            if formula is not None and evaluate_dim(formula, sizes) != tensor.shape[j]:
                return False
    return True


def _choose_standard_tests(plan: Plan, found: _Found) -> None:
    plan.tests = ["shape", "determinism", "round_trip"]
    if any(leaf.floating for leaf in plan.outputs):
        plan.tests += ["float64", "bfloat16", "devices"]
    else:
        found.left_out.append(
            TestInfo(
                "test_runs_in_float64",
                "precision moves",
                "the outputs have no floating-point tensor",
            )
        )
    plan.shape_cases = _shape_candidates(plan)


def _shape_candidates(plan: Plan) -> list[tuple[int, ...]]:
    """Sizes to try the contract at, none of them the measured or the default ones."""
    contract = plan.contract
    formulas = [d for leaf in plan.outputs for d in leaf.dims if d is not None]
    if not contract.symbols or not any(not d.isdigit() for d in formulas):
        return []
    cases: list[tuple[int, ...]] = []
    for batch, pick in ((1, 0), (3, 1), (2, None), (3, None)):
        case = []
        for s in contract.symbols:
            if s.is_batch:
                case.append(batch)
                continue
            options = _alternatives(s.example, s.others)
            if pick is None or not options:
                case.append(s.example)
            else:
                case.append(options[min(pick, len(options) - 1)])
        if tuple(case) not in cases:
            cases.append(tuple(case))
    return cases


def _alternatives(example: int, others: Sequence[int]) -> list[int]:
    """Other sizes for a non-batch symbol, smallest first (small tests run fast)."""
    smaller = sorted(x for x in others if x < example)
    half = [example // 2] if example >= 4 and example // 2 not in smaller else []
    larger = sorted(x for x in others if x > example)
    return [*smaller, *half, *larger]


def _verify_standard_tests(session: Session, plan: Plan, found: _Found) -> None:
    class_name = f"Test{_class_title(plan)}" if plan.style.test_classes else None
    start = time.perf_counter()
    passed_cases: list[tuple[int, ...]] = []
    for case in plan.shape_cases:
        if len(passed_cases) == 2:
            break
        if session.run_test("test_output_shape", *case, class_name=class_name) is None:
            passed_cases.append(case)
        elif case[0] == 1 and any(s.is_batch for s in plan.contract.symbols):
            found.warnings.append(
                "the shape contract does not hold at batch size 1 (a squeeze() that drops "
                "the batch dim?); the shape test uses other sizes"
            )
    if plan.shape_cases and not passed_cases:
        found.notes.append(
            "the measured shape contract did not hold at other sizes; the shape "
            "test checks the default sizes only"
        )
    plan.shape_cases = passed_cases
    shape_what = plan.contract.text or "forward's output shapes"
    found.tests.append(
        TestInfo(
            "test_output_shape",
            f"shape contract: {shape_what}",
            _cases_text(plan) or "at the default sizes",
        )
    )
    checks = {
        "determinism": ("test_eval_is_deterministic", (), "eval forwards agree bit for bit"),
        "round_trip": (
            "test_state_dict_round_trip",
            (TMP_PATH,),
            "state_dict save/load (weights_only=True) keeps every output",
        ),
        "float64": ("test_runs_in_float64", (), "model.to(float64) reaches everything"),
        "bfloat16": ("test_runs_in_bfloat16", (), "model.to(bfloat16) runs and stays finite"),
    }
    for kind, (name, args, what) in checks.items():
        if kind not in plan.tests:
            continue
        failure = session.run_test(name, *args, class_name=class_name)
        if failure is None:
            found.tests.append(TestInfo(name, what, "passed when generated"))
            continue
        plan.tests.remove(kind)
        found.left_out.append(TestInfo(name, what, f"fails on the model as it is: {failure}"))
        found.warnings.append(f"{name} would fail on the model as it is ({failure}); left out")
    if "devices" in plan.tests:
        for device in ("cuda", "mps"):
            found.tests.append(
                TestInfo(
                    f"test_runs_on_{device}",
                    f"the model runs on {device}",
                    f"skipped where no {device} device exists",
                )
            )
    found.seconds += time.perf_counter() - start


def _class_title(plan: Plan) -> str:
    from torchwise.testgen.render import _class_name

    return _class_name(plan.title)


def _cases_text(plan: Plan) -> str:
    names = [s.var for s in plan.contract.symbols]
    return "; ".join(
        ", ".join(f"{n}={v}" for n, v in zip(names, case, strict=True)) for case in plan.shape_cases
    )
