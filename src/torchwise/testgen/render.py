"""A :class:`Plan` -> the text of the pytest module, in the project's style.

Rendering is a pure function of the plan: the same plan gives the same bytes,
which is what ``--check`` compares. The module reads top to bottom: docstring,
imports, the model's import, the doctor options, the three helpers
(``build_model``, ``make_inputs``, ``output_tensors``) and then one test per
property. Every line is laid out the way black and ruff format would lay it
out, at the project's line length, so a formatter leaves the file alone.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field

from torchwise.doctor import CHECKS
from torchwise.testgen.contract import Contract, Symbol
from torchwise.testgen.inputs_code import InputsCode
from torchwise.testgen.layout import INDENT, bracketed, comment_block, docstring, expression
from torchwise.testgen.style import ProjectStyle

#: What each doctor check guards against, for the comment beside its id (doctor's registry).
GUARDS = {entry.id: entry.guards for entry in CHECKS}

#: The standard tests, in the order the module lists them.
STANDARD_TESTS = ("shape", "determinism", "round_trip", "float64", "bfloat16", "devices")


@dataclass(frozen=True)
class OutputLeaf:
    """One tensor of forward's output: how to reach it from ``out`` and its contract."""

    accessor: str  # "" for a plain tensor output, ".logits", "[0]", '["key"]'
    dims: tuple[str | None, ...]  # Python expressions over the symbols; None: not checked
    sizes: tuple[int, ...]  # at the default sizes of make_inputs()
    floating: bool


@dataclass
class Names:
    """Module-level names the generated file defines (chosen to avoid the user's)."""

    build_model: str = "build_model"
    make_inputs: str = "make_inputs"
    output_tensors: str = "output_tensors"
    runs_on: str = "assert_runs_on"


@dataclass
class Plan:
    """Everything the generated module says, decided before it is rendered."""

    title: str  # the model's class name, for docstrings
    style: ProjectStyle
    commands: list[tuple[str, str]]  # (what it does, shell command) for the docstring
    model_import: str | None  # "from model import CifarNet"
    path_entry: str | None  # an expression for the directory to put on sys.path
    path_comment: str
    build: str  # the expression that builds the model
    build_kind: str  # "call", "example" (returns (model, inputs)) or "instance"
    contract: Contract
    inputs: InputsCode
    names: Names = field(default_factory=Names)
    outputs: list[OutputLeaf] = field(default_factory=list)
    shape_cases: list[tuple[int, ...]] = field(default_factory=list)
    tests: list[str] = field(default_factory=list)  # from STANDARD_TESTS
    checks: list[str] = field(default_factory=list)  # doctor check ids in the file
    left_out: list[tuple[str, str]] = field(default_factory=list)  # (check id, short reason)
    doctor_options: dict[str, object] = field(default_factory=dict)
    #: the model comes from an installed package (transformers, timm): its import joins
    #: the third-party block; a project's own module gets a block of its own
    third_party_model: bool = False


def render(plan: Plan) -> str:
    """The module text."""
    width = plan.style.line_length
    tests = _tests(plan)
    # The head: statements one blank line apart, as isort and the formatters want them.
    head = [_imports(plan, "\n".join(tests))]
    if plan.model_import is not None and plan.path_entry is not None:
        head.append([f"# {plan.path_comment}", *_sys_path(plan.path_entry, width),
                     f"{plan.model_import}  # noqa: E402"])  # fmt: skip
    elif plan.model_import is not None and not plan.third_party_model:
        head.append([plan.model_import])
    if plan.doctor_options and plan.checks:
        head.append(_doctor_options(plan, width))
    # The body: functions and classes two blank lines apart.
    body = [_build_model(plan), _make_inputs(plan)]
    if plan.outputs and not _single(plan):
        body.append(_output_tensors(plan))
    if "devices" in plan.tests:
        body.append(_runs_on(plan))
    if tests:
        body.append(tests)
    lines = [*_module_docstring(plan), "", *_joined(head, 1), "", "", *_joined(body, 2)]
    return "\n".join(lines).rstrip() + "\n"


# -- the module's head -----------------------------------------------------------


def _module_docstring(plan: Plan) -> list[str]:
    width = plan.style.line_length
    lines = [f'"""Tests for {plan.title}, written by `torchwise tests` from measurements of it.']
    if plan.contract.text and plan.shape_cases and "shape" in plan.tests:
        lines += ["", "Shape contract, measured by torchwise doc:", INDENT + plan.contract.text]
    facts = ["Doctor checks run with budgets in steps, never seconds."] if plan.checks else []
    if "devices" in plan.tests:
        facts.append("The CUDA and MPS tests run where those devices exist.")
    if facts:
        lines += ["", *_wrap(" ".join(facts), width)]
    for what, command in plan.commands:
        lines += ["", f"{what}:", *_shell(command, width)]
    if any(line.endswith("\\") for line in lines):
        lines[0] = "r" + lines[0]  # the commands' line continuations stay backslashes
    return [*lines, '"""']


def _wrap(text: str, width: int) -> list[str]:
    return [line.removeprefix("# ") for line in comment_block(text, width=width + 2)]


def _shell(command: str, width: int) -> list[str]:
    """A shell command indented by four, continued with `` \\`` between words (never inside
    a quoted argument) where it is too long."""
    lines, current = [], ""
    for word in (shlex.quote(token) for token in shlex.split(command)):
        if current and len(current) + 1 + len(word) + 2 > width:
            lines.append(current + " \\")
            current = INDENT * 2 + word
        else:
            current = f"{current} {word}" if current else f"{INDENT}{word}"
    return [*lines, current]


def _sys_path(entry: str, width: int) -> list[str]:
    """``sys.path.insert(0, str(DIR))``, through a named directory when that is too long."""
    line = f"sys.path.insert(0, str({entry}))"
    if len(line) <= width:
        return [line]
    assignment = f"MODEL_DIR = {entry}"
    if len(assignment) <= width:
        lines = [assignment]
    else:  # the formatters wrap a long right-hand side in parentheses
        lines = ["MODEL_DIR = (", INDENT + entry, ")"]
    return [*lines, "sys.path.insert(0, str(MODEL_DIR))"]


def _imports(plan: Plan, tests: str) -> list[str]:
    stdlib = []
    if plan.build_kind == "instance":
        stdlib.append("import copy")
    if plan.path_entry is not None and plan.model_import is not None:
        stdlib.append("import sys")
    if (plan.path_entry is not None and plan.model_import is not None) or (
        "round_trip" in plan.tests and plan.style.typed
    ):
        stdlib.append("from pathlib import Path")
    if plan.style.typed:
        stdlib.append("from typing import Any")
    third = []
    if "@pytest." in tests:
        third.append("import pytest")
    third.append("import torch")
    froms = ["from torchwise.doctor import assert_healthy"] if plan.checks else []
    if plan.model_import is not None and plan.third_party_model:
        froms.append(plan.model_import)
    third += sorted(froms, key=lambda line: line.split()[1])  # isort: by module
    head = ["from __future__ import annotations", ""] if plan.style.future_annotations else []
    return [*head, *stdlib, *([""] if stdlib else []), *third]


def _doctor_options(plan: Plan, width: int) -> list[str]:
    items = [f'"{k}": {v!r}' for k, v in plan.doctor_options.items()]
    lhs = "DOCTOR_OPTIONS: dict[str, Any] = " if plan.style.typed else "DOCTOR_OPTIONS = "
    text = (
        "The doctor options for this model: budgets are steps, so a verdict never depends "
        "on the machine's speed or load."
    )
    if any(key.endswith("_budget_s") for key in plan.doctor_options):
        text += " This doctor also stops checks after some seconds: set to a day, out of reach."
    comment = comment_block(text, width=width)
    return [*comment, *bracketed(lhs, items, width=width, brackets="{}", collection=True)]


# -- helpers ---------------------------------------------------------------------


def _def(plan: Plan, name: str, params: list[str], returns: str, indent: str = "") -> list[str]:
    tail = f" -> {returns}:" if plan.style.typed else ":"
    return bracketed(f"def {name}", params, tail, indent=indent, width=plan.style.line_length)


def _build_model(plan: Plan) -> list[str]:
    width = plan.style.line_length
    lines = _def(plan, plan.names.build_model, [], "torch.nn.Module")
    if plan.build_kind == "instance":
        lines += docstring(
            f"A copy of the module-level {plan.build}, so tests cannot share its state.",
            indent=INDENT,
            width=width,
        )
        return [
            *lines,
            *expression("return copy.deepcopy(", plan.build, ")", indent=INDENT, width=width),
        ]
    lines += docstring(
        f"{plan.title} with its weights drawn from a fixed seed.", indent=INDENT, width=width
    )
    lines.append(f"{INDENT}torch.manual_seed(0)")
    if plan.build_kind == "example":  # the factory returns (model, example inputs)
        lines += expression("model, _ = ", plan.build, indent=INDENT, width=width)
        return [*lines, f"{INDENT}return model"]
    return [*lines, *expression("return ", plan.build, indent=INDENT, width=width)]


def _make_inputs(plan: Plan) -> list[str]:
    code = plan.inputs
    typed = plan.style.typed
    params = [
        f"{s.var}: int = {s.default}" if typed else f"{s.var}={s.default}"
        for s in plan.contract.symbols
    ]
    keyword = []
    if code.float_dtype is not None:
        default = f"torch.{code.float_dtype}"
        keyword.append(f"dtype: torch.dtype = {default}" if typed else f"dtype={default}")
    keyword.append('device: str = "cpu"' if typed else 'device="cpu"')
    lines = _def(
        plan,
        plan.names.make_inputs,
        [*params, "*", *keyword],
        "tuple[tuple[Any, ...], dict[str, Any]]",
    )
    lines += docstring(
        "Forward's arguments, args and kwargs, drawn from a fixed seed.",
        indent=INDENT,
        width=plan.style.line_length,
    )
    return lines + code.body


def _single(plan: Plan) -> bool:
    return len(plan.outputs) == 1 and plan.outputs[0].accessor == ""


def _output_tensors(plan: Plan) -> list[str]:
    width = plan.style.line_length
    lines = _def(
        plan,
        plan.names.output_tensors,
        ["out: Any" if plan.style.typed else "out"],
        "list[torch.Tensor]",
    )
    lines += docstring(
        "The tensors of forward's output that the tests compare, in order.",
        indent=INDENT,
        width=width,
    )
    items = [f"out{leaf.accessor}" for leaf in plan.outputs]
    return lines + bracketed(
        "return ", items, indent=INDENT, width=width, brackets="[]", collection=True
    )


def _tensors(plan: Plan, var: str) -> str:
    return var if _single(plan) else f"{plan.names.output_tensors}({var})"


def _runs_on(plan: Plan) -> list[str]:
    width = plan.style.line_length
    n = plan.names
    lines = _def(plan, n.runs_on, ["device: str" if plan.style.typed else "device"], "None")
    lines += docstring(
        "On ``device`` the model gives the CPU's outputs, within TF32's precision: every "
        "parameter, buffer and tensor made in forward follows the model.",
        indent=INDENT,
        width=width,
    )
    lines += [
        f"{INDENT}model = {n.build_model}().eval()",
        f"{INDENT}args, kwargs = {n.make_inputs}()",
        f"{INDENT}with torch.no_grad():",
        f"{INDENT * 2}expected = model(*args, **kwargs)",
        f"{INDENT * 2}model.to(device)",
        f"{INDENT * 2}args, kwargs = {n.make_inputs}(device=device)",
        f"{INDENT * 2}out = model(*args, **kwargs)",
    ]
    for leaf in plan.outputs:
        lines.append(f"{INDENT}assert out{leaf.accessor}.device.type == device")
    if _single(plan):
        got, want = "out.cpu()", "expected"
    else:
        got = f"[t.cpu() for t in {n.output_tensors}(out)]"
        want = f"{n.output_tensors}(expected)"
    return lines + bracketed(
        "torch.testing.assert_close",
        [got, want, "rtol=1e-2", "atol=1e-2"],
        indent=INDENT,
        width=width,
    )


# -- tests -----------------------------------------------------------------------


@dataclass
class _Test:
    name: str
    doc: str
    body: list[str]  # lines relative to the function body (no base indent)
    params: list[tuple[str, str]] = field(default_factory=list)  # (name, annotation)
    decorators: list[list[str]] = field(default_factory=list)  # each laid out already


def _tests(plan: Plan) -> list[str]:
    builders = {
        "shape": _shape_test,
        "determinism": _determinism_test,
        "round_trip": _round_trip_test,
        "float64": lambda p: _dtype_test(p, "float64"),
        "bfloat16": lambda p: _dtype_test(p, "bfloat16"),
        "devices": _device_tests,
    }
    found: list[_Test] = []
    for kind in STANDARD_TESTS:
        if kind in plan.tests:
            found += builders[kind](plan)
    if plan.checks:
        found.append(_doctor_test(plan))
    if not found:
        return []
    style = plan.style
    base = INDENT if style.test_classes else ""
    blocks = [_function(plan, test, base) for test in found]
    if not style.test_classes:
        return _joined(blocks, 2)
    head = [
        f"class Test{_class_name(plan.title)}:",
        *docstring(
            f"{plan.title}: shape contract, determinism, serialization, precision, devices and "
            "health.",
            indent=INDENT,
            width=style.line_length,
        ),
        "",
    ]
    return head + _joined(blocks, 1)


def _joined(blocks: list[list[str]], blank: int) -> list[str]:
    out: list[str] = []
    for block in blocks:
        if out:
            out += [""] * blank
        out += block
    return out


def _class_name(title: str) -> str:
    name = "".join(part[:1].upper() + part[1:] for part in title.replace("-", "_").split("_"))
    return name if name.isidentifier() else "Model"


def _function(plan: Plan, test: _Test, base: str) -> list[str]:
    width = plan.style.line_length
    lines: list[str] = []
    for decorator in test.decorators:
        lines += [base + line for line in decorator]
    params = ["self"] if plan.style.test_classes else []
    params += [f"{n}: {a}" if plan.style.typed else n for n, a in test.params]
    lines += _def(plan, test.name, params, "None", indent=base)
    lines += docstring(test.doc, indent=base + INDENT, width=width)
    return lines + [base + INDENT + line if line else "" for line in test.body]


def _decorator(plan: Plan, head: str, items: list[str]) -> list[str]:
    indent_width = len(INDENT) if plan.style.test_classes else 0
    # lay out at the final indent, then strip it (the caller adds it back)
    lines = bracketed(head, items, indent=" " * indent_width, width=plan.style.line_length)
    return [line[indent_width:] for line in lines]


def _shape_test(plan: Plan) -> list[_Test]:
    n = plan.names
    symbols: list[Symbol] = plan.contract.symbols if plan.shape_cases else []
    call = f"{n.make_inputs}({', '.join(s.var for s in symbols)})"
    body = [
        f"model = {n.build_model}().eval()",
        f"args, kwargs = {call}",
        "with torch.no_grad():",
        f"{INDENT}out = model(*args, **kwargs)",
    ]
    for leaf in plan.outputs:
        dims = leaf.dims if symbols else tuple(str(size) for size in leaf.sizes)
        body += _shape_asserts(f"out{leaf.accessor}", dims)
    test = _Test("test_output_shape", "", body, [(s.var, "int") for s in symbols])
    if symbols:
        measured = ", ".join(f"{s.var}={s.example}" for s in symbols)
        test.doc = f"The shape contract holds at sizes other than the measured ones ({measured})."
        names = [f'"{s.var}"' for s in symbols]
        argnames = names[0] if len(names) == 1 else "(" + ", ".join(names) + ")"
        cases = [
            str(case[0]) if len(case) == 1 else "(" + ", ".join(map(str, case)) + ")"
            for case in plan.shape_cases
        ]
        values = "[" + ", ".join(cases) + "]"
        test.decorators.append(_decorator(plan, "@pytest.mark.parametrize", [argnames, values]))
    else:
        test.doc = "forward returns the measured output shapes."
    return [test]


def _shape_asserts(value: str, dims: tuple[str | None, ...]) -> list[str]:
    if all(d is not None for d in dims):
        shape = "(" + ", ".join(d or "" for d in dims) + ("," if len(dims) == 1 else "") + ")"
        return [f"assert {value}.shape == {shape}"]
    lines = [f"assert {value}.dim() == {len(dims)}"]
    lines += [f"assert {value}.shape[{i}] == {d}" for i, d in enumerate(dims) if d is not None]
    return lines


def _assert_close(plan: Plan, got: str, want: str, tolerance: str) -> list[str]:
    return bracketed(
        "torch.testing.assert_close",
        [got, want, f"rtol={tolerance}", f"atol={tolerance}"],
        indent="",
        width=plan.style.line_length - _body_indent(plan),
    )


def _body_indent(plan: Plan) -> int:
    return len(INDENT) * (2 if plan.style.test_classes else 1)


def _determinism_test(plan: Plan) -> list[_Test]:
    n = plan.names
    body = [
        f"model = {n.build_model}().eval()",
        f"args, kwargs = {n.make_inputs}()",
        "with torch.no_grad():",
        f"{INDENT}first = model(*args, **kwargs)",
        f"{INDENT}second = model(*args, **kwargs)",
        *_assert_close(plan, _tensors(plan, "second"), _tensors(plan, "first"), "0"),
    ]
    doc = (
        "Two forwards in eval mode agree bit for bit: no dropout or noise left on in eval, "
        "no state carried from one call to the next."
    )
    return [_Test("test_eval_is_deterministic", doc, body)]


def _round_trip_test(plan: Plan) -> list[_Test]:
    n = plan.names
    body = [
        f"model = {n.build_model}()",
        f"args, kwargs = {n.make_inputs}()",
        "model.train()",
        "with torch.no_grad():",
        f"{INDENT}model(*args, **kwargs)  # a training forward updates running statistics",
        f"{INDENT}for param in model.parameters():",
        f"{INDENT * 2}param.add_(0.01 * torch.randn_like(param))  # as an optimizer step would",
        'torch.save(model.state_dict(), tmp_path / "model.pt")',
        f"restored = {n.build_model}()",
        'restored.load_state_dict(torch.load(tmp_path / "model.pt", weights_only=True))',
        "model.eval()",
        "restored.eval()",
        "with torch.no_grad():",
        f"{INDENT}expected = model(*args, **kwargs)",
        f"{INDENT}out = restored(*args, **kwargs)",
        *_assert_close(plan, _tensors(plan, "out"), _tensors(plan, "expected"), "0"),
    ]
    doc = (
        "A fresh model loaded from the saved state_dict (weights_only=True) gives the same "
        "outputs after training changed the weights and buffers: no state lives outside "
        "the state_dict."
    )
    return [_Test("test_state_dict_round_trip", doc, body, [("tmp_path", "Path")])]


def _dtype_test(plan: Plan, dtype: str) -> list[_Test]:
    """float64: the outputs match float32's; bfloat16 (3 significant digits): finite."""
    n = plan.names
    moved = f"{n.make_inputs}(dtype=torch.{dtype})" if plan.inputs.float_dtype else None
    compare = dtype == "float64"
    body = [f"model = {n.build_model}().eval()"]
    if compare:
        body += [
            f"args, kwargs = {n.make_inputs}()",
            "with torch.no_grad():",
            f"{INDENT}expected = model(*args, **kwargs)",
            f"{INDENT}model.to(torch.{dtype})",
            *([f"{INDENT}args, kwargs = {moved}"] if moved else []),
            f"{INDENT}out = model(*args, **kwargs)",
        ]
    else:
        body += [
            f"args, kwargs = {moved or n.make_inputs + '()'}",
            f"model.to(torch.{dtype})",
            "with torch.no_grad():",
            f"{INDENT}out = model(*args, **kwargs)",
        ]
    for leaf in plan.outputs:
        if not leaf.floating:
            continue
        value = f"out{leaf.accessor}"
        body.append(f"assert {value}.dtype == torch.{dtype}")
        if compare:
            body += _assert_close(plan, f"{value}.float()", f"expected{leaf.accessor}", "1e-3")
        else:
            body.append(f"assert torch.isfinite({value}).all()")
    outcome = (
        "the outputs match float32's within its precision"
        if compare
        else ("the outputs stay finite")
    )
    doc = (
        f"In {dtype} every parameter, buffer and tensor made in forward follows "
        f"model.to(dtype), and {outcome}."
    )
    return [_Test(f"test_runs_in_{dtype}", doc, body)]


def _device_tests(plan: Plan) -> list[_Test]:
    tests = []
    for device, available, reason in (
        ("cuda", "torch.cuda.is_available()", "needs a CUDA device"),
        ("mps", "torch.backends.mps.is_available()", "needs an Apple MPS device"),
    ):
        decorator = _decorator(
            plan, "@pytest.mark.skipif", [f"not {available}", f'reason="{reason}"']
        )
        doc = f"The model runs on {device.upper()} with the CPU's outputs."
        body = [f'{plan.names.runs_on}("{device}")']
        tests.append(_Test(f"test_runs_on_{device}", doc, body, decorators=[decorator]))
    return tests


def _doctor_test(plan: Plan) -> _Test:
    width = plan.style.line_length
    outer = len(INDENT) if plan.style.test_classes else 0
    items = []
    for check in plan.checks:
        item = f'"{check}",'
        purpose = GUARDS.get(check)
        if purpose and outer + 2 * len(INDENT) + len(item) + 4 + len(purpose) <= width:
            item += f"  # {purpose}"
        items.append(item)
    decorator = ["@pytest.mark.parametrize(", f'{INDENT}"check_id",', f"{INDENT}["]
    decorator += [f"{INDENT * 2}{item}" for item in items]
    decorator += [f"{INDENT}],", ")"]
    if plan.left_out:
        reasons = ", ".join(f"{check} ({why})" for check, why in plan.left_out)
        decorator = comment_block(f"Left out: {reasons}.", width=width - outer) + decorator
    options = ["**DOCTOR_OPTIONS"] if plan.doctor_options else []
    n = plan.names
    body = [
        f"args, kwargs = {n.make_inputs}()",
        *bracketed(
            "assert_healthy",
            [
                f"{n.build_model}()",
                "args",
                "[check_id]",
                "kwargs=kwargs",
                "allow_warnings=False",
                *options,
            ],
            width=width - _body_indent(plan),
        ),
    ]
    doc = (
        "torchwise doctor's check passes on a seeded batch, as it did when this file was "
        "generated; a warning fails too."
    )
    return _Test("test_doctor", doc, body, [("check_id", "str")], [decorator])
