"""The generated ``make_inputs``: forward's arguments as plain, seeded torch calls.

Each tensor leaf of the input specs becomes one line a reader can check against
the shape contract (``images = torch.randn(batch, 3, height, width, generator=gen)``);
dicts, tuples and lists are assembled from their leaves, and plain values
(``use_cache=False``) are passed as written. Every call draws from one seeded
generator, so the tests see the same batch on every run and every machine.
"""

from __future__ import annotations

import keyword
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from torchwise.inputs import (
    COMPLEX_DTYPES,
    DEFAULT_INT_BOUND,
    FLOAT_DTYPES,
    INT_DTYPES,
    TORCH_DTYPE_NAMES,
    InputSpec,
)
from torchwise.testgen.contract import Contract
from torchwise.testgen.layout import INDENT, bracketed

_FLOATS = {spec: TORCH_DTYPE_NAMES[spec] for spec in FLOAT_DTYPES}
_INTS = {spec: TORCH_DTYPE_NAMES[spec] for spec in INT_DTYPES}
_COMPLEX = {spec: TORCH_DTYPE_NAMES[spec] for spec in COMPLEX_DTYPES}


@dataclass
class InputsCode:
    """The body of ``make_inputs`` (its size parameters are the contract's symbols)."""

    body: list[str] = field(default_factory=list)  # lines at one indent
    #: the torch dtype name the ``dtype`` parameter defaults to; None: no such parameter
    float_dtype: str | None = None


def inputs_code(
    specs: Sequence[InputSpec], input_names: Sequence[str], contract: Contract, *, width: int
) -> InputsCode:
    """``make_inputs``' parameters and body for ``specs``, laid out within ``width``."""
    floats = {leaf.dtype for spec in specs for leaf in spec.tensors() if leaf.dtype in _FLOATS}
    float_dtype = _FLOATS[floats.pop()] if len(floats) == 1 else None
    code = InputsCode(float_dtype=float_dtype)
    writer = _Writer(contract, float_dtype, width)
    args: list[str] = []
    kwargs: list[str] = []
    for index, spec in enumerate(specs):
        label = spec.name or (input_names[index] if index < len(input_names) else f"input{index}")
        value = writer.value(spec, label)
        if spec.name is None:
            args.append(value)
        else:
            kwargs.append(f'"{spec.name}": {value}')
    body = [f"{INDENT}gen = torch.Generator().manual_seed(0)", *writer.lines]
    args_text = "(" + ", ".join(args) + ("," if len(args) == 1 else "") + ")"
    kwargs_text = "{" + ", ".join(kwargs) + "}"
    flat = f"{INDENT}return {args_text}, {kwargs_text}"
    if len(flat) <= width:
        body.append(flat)
    else:
        body += bracketed(
            "args = ", args, indent=INDENT, width=width, one_tuple=len(args) == 1, collection=True
        )
        body += bracketed(
            "kwargs = ", kwargs, indent=INDENT, width=width, brackets="{}", collection=True
        )
        body.append(f"{INDENT}return args, kwargs")
    code.body = body
    return code


class _Writer:
    """Emits one assignment per tensor leaf and per container, depth first."""

    def __init__(self, contract: Contract, float_dtype: str | None, width: int) -> None:
        self.contract = contract
        self.float_dtype = float_dtype
        self.width = width
        self.leaf = 0
        self.lines: list[str] = []
        self.used = {s.var for s in contract.symbols} | {
            "gen",
            "dtype",
            "device",
            "args",
            "kwargs",
            "torch",
        }

    def value(self, spec: InputSpec, label: str) -> str:
        """An expression for ``spec``: a variable for tensors and containers, else a literal."""
        kind = spec.kind
        if kind == "value":
            assert spec.literal is not None
            return _double_quoted(spec.literal)
        var = self._name(label)
        if kind == "tensor":
            self._tensor(var, spec)
        elif kind == "dict":
            assert spec.children is not None
            items = [
                f'"{key}": {self.value(child, f"{var}_{key}")}'
                for key, child in spec.children.items()
            ]
            self.lines += bracketed(
                f"{var} = ", items, indent=INDENT, width=self.width, brackets="{}", collection=True
            )
        else:
            parts = [self.value(item, f"{var}_{i}") for i, item in enumerate(spec.items or ())]
            brackets = "[]" if spec.is_list else "()"
            self.lines += bracketed(
                f"{var} = ",
                parts,
                indent=INDENT,
                width=self.width,
                brackets=brackets,
                one_tuple=not spec.is_list,
                collection=True,
            )
        return var

    def _name(self, label: str) -> str:
        name = re.sub(r"\W", "_", label).strip("_") or "x"
        if name[0].isdigit() or keyword.iskeyword(name):
            name = f"x_{name}"
        base, n = name, 2
        while name in self.used:
            name, n = f"{base}_{n}", n + 1
        self.used.add(name)
        return name

    def _tensor(self, var: str, spec: InputSpec) -> None:
        dims = list(self.contract.input_dims[self.leaf])
        self.leaf += 1
        dtype = spec.dtype or "f32"
        shape = "(" + ", ".join(dims) + ("," if len(dims) == 1 else "") + ")"
        sizes = dims or ["()"]
        tail = ""
        if dtype in _FLOATS:
            head, items = "torch.randn", [*sizes, "generator=gen"]
            target = "dtype" if self.float_dtype == _FLOATS[dtype] else f"torch.{_FLOATS[dtype]}"
            move = f".to(device, {target})"
        elif dtype in _INTS:
            high = spec.high if spec.high is not None else DEFAULT_INT_BOUND
            items = ["0", str(high), shape, "generator=gen"]
            if dtype != "i64":
                items.append(f"dtype=torch.{_INTS[dtype]}")
            head, move = "torch.randint", ".to(device)"
        elif dtype == "bool":
            head, items, tail, move = "torch.rand", [*sizes, "generator=gen"], " < 0.5", ""
        else:
            head, items = "torch.randn", [*sizes, "generator=gen", f"dtype=torch.{_COMPLEX[dtype]}"]
            move = ".to(device)"
        call = f"{head}({', '.join(items)}){tail}"
        if dtype == "bool":
            one_line = f"{INDENT}{var} = ({call}).to(device)"
        else:
            one_line = f"{INDENT}{var} = {call}{move}"
        if len(one_line) <= self.width:
            self.lines.append(one_line)
            return
        # Too long for one line: create, then move, as two statements a formatter keeps.
        self.lines += bracketed(f"{var} = {head}", items, tail, indent=INDENT, width=self.width)
        self.lines.append(f"{INDENT}{var} = {var}{move or '.to(device)'}")


def _double_quoted(literal: str) -> str:
    """``'mean'`` as ``"mean"`` (the formatters' quotes), when that needs no escaping."""
    quoted = len(literal) >= 2 and literal[0] == literal[-1] == "'"
    if quoted and '"' not in literal and "\\" not in literal:
        return f'"{literal[1:-1]}"'
    return literal
