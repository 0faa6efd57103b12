"""The shape contract of a model, as the generated tests state it.

``torchwise doc`` measures which input dims are free to change (*symbols* such as
``batch``, ``seq_len``, ``height``) and fits every output dim as a formula of them
(``(batch, seq_len, 768)``, ``2*seq_len - 1``). This module turns that
measurement into what a test file needs: one Python variable per symbol, the
symbolic dims of each tensor input, and each output dim as a Python expression
over those variables (``/`` becomes ``//``: the fits are exact integers). A dim
the doc could not fit stays unchecked rather than guessed.
"""

from __future__ import annotations

import ast
import keyword
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from torchwise.errors import TorchwiseError, exception_line

if TYPE_CHECKING:
    from torchwise.doc import SymbolicShapes
    from torchwise.target import InputSpec, ResolvedTarget

#: Names the generated functions use for their own locals; a symbol never takes one.
LOCAL_NAMES = frozenset(
    {
        "model",
        "args",
        "kwargs",
        "out",
        "expected",
        "first",
        "second",
        "restored",
        "param",
        "gen",
        "dtype",
        "device",
        "tmp_path",
        "check_id",
        "self",
        "torch",
        "pytest",
        "sys",
        "copy",
        "Path",
        "Any",
    }
)
#: doctor needs two samples or more (batch-independence); four keeps every check cheap.
DOCTOR_BATCH = 4


@dataclass(frozen=True)
class Symbol:
    """One free input dimension, as a parameter of the generated ``make_inputs``."""

    var: str  # the Python name in the generated file
    label: str  # the doc's name for it
    example: int  # its size in the measured example
    others: tuple[int, ...]  # other sizes the doc ran the model at
    is_batch: bool
    #: the size the tests use unless they say otherwise (make_inputs' default)
    default: int = 0

    def __post_init__(self) -> None:
        if not self.default:
            object.__setattr__(self, "default", DOCTOR_BATCH if self.is_batch else self.example)


@dataclass(frozen=True)
class OutputDims:
    """One output tensor's dims as Python expressions (None: not fitted, not checked)."""

    dims: tuple[str | None, ...]
    sizes: tuple[int, ...]  # at the example sizes


@dataclass
class Contract:
    symbols: list[Symbol] = field(default_factory=list)
    #: per tensor leaf of the inputs (depth first): a symbol's var or a literal size
    input_dims: list[tuple[str, ...]] = field(default_factory=list)
    outputs: list[OutputDims] = field(default_factory=list)
    #: ``images (batch, 3, height, width) -> (batch, 10)``
    text: str = ""
    notes: list[str] = field(default_factory=list)

    def var_of(self, label: str) -> str | None:
        return next((s.var for s in self.symbols if s.label == label), None)


def measure(target: str, rt: ResolvedTarget) -> tuple[SymbolicShapes | None, list[str], str]:
    """Symbolic shapes from ``torchwise doc`` (its public ``document``), the forward's input
    names, and a note when the measurement failed (the contract then has no symbols)."""
    from torchwise.doc import document

    try:
        doc = document(target, rt, run_example=False)
    except TorchwiseError as exc:
        return None, [], f"torchwise doc could not measure symbolic shapes: {exc.message}"
    except Exception as exc:  # a model the doc machinery cannot handle: degrade, say so
        return None, [], f"torchwise doc could not measure symbolic shapes: {exception_line(exc)}"
    return doc.shapes, list(doc.input_names), ""


def build_contract(
    rt: ResolvedTarget, shapes: SymbolicShapes | None, taken: frozenset[str]
) -> Contract:
    """The contract for ``rt``'s inputs; ``taken`` are module-level names to avoid."""
    leaves = [leaf for spec in rt.input_specs for leaf in spec.tensors()]
    literal = [tuple(str(d.size) for d in leaf.dims) for leaf in leaves]
    if shapes is None:
        return Contract(input_dims=literal)
    doc_inputs = [leaf for leaf in shapes.inputs if leaf.dtype != "?"]
    if len(doc_inputs) != len(leaves) or any(
        list(d.sizes) != [dim.size for dim in leaf.dims]
        for d, leaf in zip(doc_inputs, leaves, strict=False)
    ):
        note = "the doc's measured inputs do not line up with the input specs"
        return Contract(input_dims=literal, notes=[note])
    used = set(LOCAL_NAMES | taken)
    var_of: dict[str, str] = {}
    for label in shapes.symbols:
        var_of[label] = _variable(label, used)
        used.add(var_of[label])
    batch_label = _batch_label(doc_inputs, set(shapes.symbols), rt.batch_dim)
    symbols = [
        Symbol(
            var_of[label],
            label,
            size,
            tuple(shapes.sizes_run.get(label, ())),
            is_batch=label == batch_label,
        )
        for label, size in shapes.symbols.items()
    ]
    input_dims = [tuple(var_of.get(d, d) for d in leaf.dims) for leaf in doc_inputs]
    outputs = [
        OutputDims(tuple(python_dim(d, var_of) for d in leaf.dims), tuple(leaf.sizes))
        for leaf in shapes.outputs
    ]
    outs = [f"{_label(leaf.path)} {leaf.shape_text()}".strip() for leaf in shapes.outputs]
    ins = ", ".join(f"{leaf.path} {leaf.shape_text()}" for leaf in doc_inputs)
    text = f"{ins} -> {', '.join(outs)}"
    return Contract(symbols, input_dims, outputs, text, list(shapes.notes))


def _label(path: str) -> str:
    """How the contract names an output: nothing for a plain tensor, ``logits`` for
    ``.logits`` or ``['logits']``, ``output[0]`` for a tuple's first tensor."""
    if path == "output":
        return ""
    named = re.fullmatch(r"\.(\w+)|\[['\"](\w+)['\"]\]", path)
    if named:
        return named.group(1) or named.group(2)
    return f"output{path}" if path.startswith("[") else path


def _batch_label(leaves: Sequence[object], symbols: set[str], batch_dim: int) -> str | None:
    """The symbol at the batch dim of the first input that has one."""
    for leaf in leaves:
        dims: list[str] = getattr(leaf, "dims", [])
        if len(dims) > batch_dim and dims[batch_dim] in symbols:
            return dims[batch_dim]
    return None


def _variable(label: str, used: set[str]) -> str:
    name = re.sub(r"\W", "_", label) or "size"
    if name[0].isdigit():
        name = f"size_{name}"
    if keyword.iskeyword(name) or name in used:
        name = f"{name}_size"
    base, n = name, 2
    while name in used:
        name, n = f"{base}_{n}", n + 1
    return name


_ALLOWED = (
    ast.Expression,
    ast.BinOp,
    ast.UnaryOp,
    ast.Name,
    ast.Constant,
    ast.Load,
    ast.Add,
    ast.Sub,
    ast.Mult,
    ast.Div,
    ast.FloorDiv,
    ast.USub,
)


def python_dim(text: str, var_of: Mapping[str, str]) -> str | None:
    """The doc's fitted dim (``"2*seq_len - 1"``, ``"height*width/256"``, ``"768"``) as a
    Python expression over the symbol variables, or None if it is not a fitted formula."""
    if text.isdigit():
        return text
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError:
        return None
    for node in ast.walk(tree):
        if not isinstance(node, _ALLOWED):
            return None
        if isinstance(node, ast.Name) and node.id not in var_of:
            return None  # an opaque dim the doc named (out_dim2): not a formula
        if isinstance(node, ast.Constant) and not isinstance(node.value, int):
            return None

    class Rewrite(ast.NodeTransformer):
        def visit_Name(self, node: ast.Name) -> ast.Name:
            return ast.Name(var_of[node.id], ast.Load())

        def visit_BinOp(self, node: ast.BinOp) -> ast.BinOp:
            self.generic_visit(node)
            if isinstance(node.op, ast.Div):  # the fits are exact: integer division
                node.op = ast.FloorDiv()
            return node

    return ast.unparse(Rewrite().visit(tree))


def evaluate_dim(expression: str, sizes: Mapping[str, int]) -> int:
    """The value of a :func:`python_dim` expression at the given symbol sizes."""
    tree = ast.parse(expression, mode="eval")
    value = eval(compile(tree, "<dim>", "eval"), {"__builtins__": {}}, dict(sizes))
    return int(value)


def leaf_specs(specs: Sequence[InputSpec]) -> list[InputSpec]:
    """The tensor specs inside ``specs``, depth first (the order of ``input_dims``)."""
    return [leaf for spec in specs for leaf in spec.tensors()]
