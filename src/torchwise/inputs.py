"""Input specs: ``"ids=i64[batch=2,seq=128]<50257"`` -> the arguments of ``forward``.

A spec describes one argument: a tensor (dtype, dims, value bound), a dict, a
tuple or list of specs, or a plain value such as ``use_cache=False``. The grammar
is in :func:`parse_input_spec` and docs/targets.md; :func:`make_inputs` turns
specs into ``(args, kwargs)``. Re-exported by :mod:`torchwise.target`, which most
callers import from.
"""

from __future__ import annotations

import ast
import dataclasses
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from torchwise.errors import TorchwiseError

if TYPE_CHECKING:
    import torch

_DTYPE_ALIASES: dict[str, str] = {
    "f16": "f16", "float16": "f16", "half": "f16",
    "bf16": "bf16", "bfloat16": "bf16",
    "f32": "f32", "float32": "f32", "float": "f32",
    "f64": "f64", "float64": "f64", "double": "f64",
    "i8": "i8", "int8": "i8", "u8": "u8", "uint8": "u8",
    "i16": "i16", "int16": "i16", "short": "i16",
    "i32": "i32", "int32": "i32", "int": "i32",
    "i64": "i64", "int64": "i64", "long": "i64",
    "bool": "bool", "c64": "c64", "complex64": "c64", "c128": "c128", "complex128": "c128",
}  # fmt: skip
#: Every word that names a dtype: the spec spellings, torch's names and aliases.
DTYPE_WORDS = frozenset(_DTYPE_ALIASES)
#: The one dtype table: an input spec's dtype -> torch's name for it.
TORCH_DTYPE_NAMES: dict[str, str] = {
    "f16": "float16", "bf16": "bfloat16", "f32": "float32", "f64": "float64",
    "i8": "int8", "u8": "uint8", "i16": "int16", "i32": "int32", "i64": "int64",
    "bool": "bool", "c64": "complex64", "c128": "complex128",
}  # fmt: skip
FLOAT_DTYPES = frozenset({"f16", "bf16", "f32", "f64"})
INT_DTYPES = frozenset({"i8", "u8", "i16", "i32", "i64"})
COMPLEX_DTYPES = frozenset({"c64", "c128"})
#: Integer inputs without an explicit ``<N`` bound are drawn from [0, 2): safe for
#: any index (embedding, token type, class label), if not very realistic.
DEFAULT_INT_BOUND = 2


@dataclass(frozen=True)
class Dim:
    """One dimension of a spec: a size, optionally named (``seq=128``)."""

    size: int
    name: str | None = None

    def __str__(self) -> str:
        return str(self.size) if self.name is None else f"{self.name}={self.size}"


@dataclass(frozen=True)
class InputSpec:
    """One forward argument (or one part of one): exactly one of four forms.

    - a **tensor**: ``dtype`` and ``dims`` are set; ``high`` is the exclusive upper
      bound of an integer tensor (``<50257``);
    - a **dict**: ``children`` maps keys to specs (``{image: f32[2,3,32,32]}``);
    - a **tuple or list**: ``items`` holds the specs in order and ``is_list`` tells
      which (``(f32[2,20,200], f32[2,20,200])`` is an LSTM's ``(h, c)``);
    - a plain **value**: ``literal`` is its Python source text (``None``, ``False``,
      ``3``, ``0.5``, ``'mean'``), e.g. the keyword ``use_cache=False``.

    ``name`` set means the argument is passed by keyword (only on top-level specs).
    """

    name: str | None = None
    dtype: str | None = None
    dims: tuple[Dim, ...] = ()
    high: int | None = None
    children: dict[str, InputSpec] | None = None
    items: tuple[InputSpec, ...] | None = None
    is_list: bool = False
    literal: str | None = None

    @property
    def kind(self) -> str:
        """``"tensor"``, ``"dict"``, ``"tuple"``, ``"list"`` or ``"value"``."""
        if self.children is not None:
            return "dict"
        if self.items is not None:
            return "list" if self.is_list else "tuple"
        if self.literal is not None:
            return "value"
        return "tensor"

    @property
    def is_dict(self) -> bool:
        return self.children is not None

    @property
    def value(self) -> Any:
        """The Python value of a ``value`` spec."""
        assert self.literal is not None
        return ast.literal_eval(self.literal)

    def parts(self) -> list[InputSpec]:
        """The nested specs of a dict, tuple or list (empty for tensors and values)."""
        if self.children is not None:
            return list(self.children.values())
        return list(self.items or ())

    def tensors(self) -> list[InputSpec]:
        """Every tensor spec inside this one, depth first, in order."""
        if self.kind == "tensor":
            return [self]
        return [leaf for part in self.parts() for leaf in part.tensors()]

    def shape(self, sizes: Mapping[str, int] | None = None) -> tuple[int, ...]:
        """The concrete shape of a tensor spec, with named dims overridden by ``sizes``."""
        sizes = sizes or {}
        return tuple(sizes.get(d.name, d.size) if d.name else d.size for d in self.dims)

    def dim_names(self) -> list[str]:
        """Named dims, including those of nested specs, in order of appearance."""
        names = [d.name for d in self.dims if d.name]
        for child in self.parts():
            names += [n for n in child.dim_names() if n not in names]
        return names

    def torch_dtype(self) -> torch.dtype:
        import torch

        assert self.dtype is not None
        dtype: torch.dtype = getattr(torch, TORCH_DTYPE_NAMES[self.dtype])
        return dtype

    def body(self) -> str:
        """The spec without its keyword name."""
        if self.children is not None:
            keys = {k: k if _IDENT.fullmatch(k) else repr(k) for k in self.children}
            return "{" + ", ".join(f"{keys[k]}: {v.body()}" for k, v in self.children.items()) + "}"
        if self.items is not None:
            inner = ", ".join(item.body() for item in self.items)
            if self.is_list:
                return f"[{inner}]"
            return f"({inner},)" if len(self.items) == 1 else f"({inner})"
        if self.literal is not None:
            return self.literal
        bound = "" if self.high is None else f"<{self.high}"
        return f"{self.dtype}[{','.join(str(d) for d in self.dims)}]{bound}"

    def __str__(self) -> str:
        return self.body() if self.name is None else f"{self.name}={self.body()}"


_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_NUMBER = re.compile(r"-?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?")
_STRING = re.compile(r"'[^'\\]*'|\"[^\"\\]*\"")
_CONSTANTS = {"None": "None", "True": "True", "False": "False", "true": "True", "false": "False"}


class _SpecParser:
    """Recursive descent over the grammar in :func:`parse_input_spec`."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def fail(self, what: str) -> TorchwiseError:
        pointer = " " * self.pos + "^"
        return TorchwiseError(
            f"bad input spec {self.text!r}: {what}\n  {self.text}\n  {pointer}",
            hint="examples: 'f32[8,3,224,224]', 'ids=i64[batch=2,seq=128]<50257', "
            "'{image: f32[2,3,32,32], mask: bool[2,32,32]}', "
            "'f32[35,20], (f32[2,20,200], f32[2,20,200])' (see docs/targets.md)",
        )

    def skip_space(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos].isspace():
            self.pos += 1

    def peek(self) -> str:
        self.skip_space()
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def expect(self, char: str) -> None:
        if self.peek() != char:
            found = repr(self.peek()) if self.peek() else "end of text"
            raise self.fail(f"expected {char!r}, found {found}")
        self.pos += 1

    def match(self, pattern: re.Pattern[str]) -> str | None:
        self.skip_space()
        found = pattern.match(self.text, self.pos)
        if found is None:
            return None
        self.pos = found.end()
        return found.group()

    def integer(self, what: str) -> int:
        self.skip_space()
        found = re.compile(r"[0-9]+").match(self.text, self.pos)
        if found is None:
            raise self.fail(f"expected {what} (a non-negative integer)")
        self.pos = found.end()
        return int(found.group())

    def parse_args(self) -> list[InputSpec]:
        """``arg ("," arg)*`` to the end of the text: one or more forward arguments."""
        specs = [self.parse_arg()]
        while self.peek() == ",":
            self.pos += 1
            specs.append(self.parse_arg())
        if self.peek():
            raise self.fail("unexpected text after the spec")
        return specs

    def parse_arg(self) -> InputSpec:
        start = self.pos
        name = self.match(_IDENT)
        if name is not None and self.peek() == "=":
            self.pos += 1
        else:  # no keyword: rewind, the identifier was the dtype or a constant
            name, self.pos = None, start
        spec = self.parse_value()
        return spec if name is None else dataclasses.replace(spec, name=name)

    def parse_value(self) -> InputSpec:
        char = self.peek()
        if char == "{":
            return self.parse_dict()
        if char in ("(", "["):
            return self.parse_sequence(is_list=char == "[")
        literal = self.match(_NUMBER) or self.match(_STRING)
        if literal is not None:
            return InputSpec(literal=literal)
        dtype_pos = self.pos
        word = self.match(_IDENT)
        if word is None:
            raise self.fail(
                "expected a dtype (f32, bf16, i64, bool, ...), '{', '(', '[' or a value"
            )
        if word in _CONSTANTS:
            return InputSpec(literal=_CONSTANTS[word])
        dtype = _DTYPE_ALIASES.get(word.lower())
        if dtype is None:
            self.pos = dtype_pos
            raise self.fail(f"unknown dtype {word!r}; use one of {sorted(set(_DTYPE_ALIASES))}")
        return self.parse_tensor(dtype)

    def parse_tensor(self, dtype: str) -> InputSpec:
        self.expect("[")
        dims: list[Dim] = []
        if self.peek() != "]":
            while True:
                dims.append(self.parse_dim())
                if self.peek() != ",":
                    break
                self.pos += 1
        self.expect("]")
        high = None
        if self.peek() == "<":
            self.pos += 1
            if dtype not in INT_DTYPES:
                raise self.fail(f"a '<N' bound only applies to integer dtypes, not {dtype}")
            high = self.integer("the exclusive upper bound")
            if high < 1:
                raise self.fail("the upper bound must be at least 1")
        return InputSpec(dtype=dtype, dims=tuple(dims), high=high)

    def parse_dim(self) -> Dim:
        if self.peek().isdigit():
            return Dim(self.integer("a dimension size"))
        dim_name = self.match(_IDENT)
        if dim_name is None:
            raise self.fail("expected a dimension size or 'name=size'")
        if self.peek() != "=":
            raise self.fail(f"named dimension {dim_name!r} needs a size: {dim_name}=N")
        self.pos += 1
        return Dim(self.integer(f"the size of {dim_name!r}"), dim_name)

    def parse_sequence(self, *, is_list: bool) -> InputSpec:
        close = "]" if is_list else ")"
        self.pos += 1
        items: list[InputSpec] = []
        while self.peek() != close:
            items.append(self.parse_value())
            if self.peek() != ",":
                break
            self.pos += 1
        self.expect(close)
        return InputSpec(items=tuple(items), is_list=is_list)

    def parse_dict(self) -> InputSpec:
        self.expect("{")
        children: dict[str, InputSpec] = {}
        while self.peek() != "}":
            key = self.match(_IDENT) or self.match(_STRING)
            if key is None:
                raise self.fail("expected a dict key")
            key = key.strip("'\"")
            if key in children:
                raise self.fail(f"duplicate dict key {key!r}")
            self.expect(":")
            children[key] = self.parse_value()
            if self.peek() != ",":
                break
            self.pos += 1
        self.expect("}")
        if not children:
            raise self.fail("an input dict needs at least one entry")
        return InputSpec(children=children)


def parse_input_specs(text: str) -> list[InputSpec]:
    """Parse one ``--input`` string holding one or more comma-separated arguments.

    ``"f32[35,20], (f32[2,20,200], f32[2,20,200])"`` is two positional arguments,
    an input and an LSTM's ``(h, c)`` tuple. The grammar is in :func:`parse_input_spec`.
    """
    if not text.strip():
        raise TorchwiseError("empty input spec", hint="example: --input 'f32[8,3,224,224]'")
    return _SpecParser(text).parse_args()


def parse_input_spec(text: str) -> InputSpec:
    """Parse exactly one forward argument.

    Grammar (whitespace ignored; :func:`parse_input_specs` accepts ``arg ("," arg)*``)::

        arg    := [NAME "="] value
        value  := DTYPE "[" [dim ("," dim)*] "]" ["<" INT]     a tensor
                | "{" KEY ":" value ("," KEY ":" value)* "}"   a dict
                | "(" [value ("," value)* [","]] ")"          a tuple
                | "[" [value ("," value)*] "]"                a list
                | None | True | False | NUMBER | 'STRING'      a plain value
        dim    := INT | NAME "=" INT

    ``f32[8,3,224,224]`` is a positional float tensor; ``ids=i64[2,128]<50257`` a
    keyword int tensor in [0, 50257); ``i64[batch=2,seq=128]`` names its dims so
    ``sizes={"seq": 512}`` can resize them (and a dim named ``batch`` marks the
    batch dim); ``{image: f32[2,3,32,32], y: i64[2]<10}`` is a dict argument;
    ``(f32[2,20,200], f32[2,20,200])`` a tuple; ``use_cache=False`` a keyword
    value. Containers nest. Errors point at the offending column.
    """
    specs = parse_input_specs(text)
    if len(specs) > 1:
        raise TorchwiseError(
            f"bad input spec {text!r}: it holds {len(specs)} arguments, expected one",
            hint="use parse_input_specs() (or one --input per argument)",
        )
    return specs[0]


def batch_dim_of(specs: Sequence[InputSpec]) -> int | None:
    """The position of the dim named ``batch`` in the tensor inputs; None if unnamed.

    ``f32[seq=35,batch=20]`` says the batch is dim 1. Tensors that name no
    ``batch`` dim are ignored; tensors that put it at different positions make the
    answer ambiguous, which is an error (pass ``--batch-dim``).
    """
    found = {
        i for spec in specs for leaf in spec.tensors() for i, d in enumerate(leaf.dims)
        if d.name == "batch"
    }  # fmt: skip
    if len(found) > 1:
        raise TorchwiseError(
            f"the inputs name 'batch' at different dims ({sorted(found)})",
            hint="name the batch dim at the same position everywhere, or pass --batch-dim N",
        )
    return found.pop() if found else None


def spec_from_value(value: Any, name: str | None = None) -> InputSpec:
    """The spec describing an example input (tensors, dicts, tuples, lists, plain values)."""
    import torch

    if isinstance(value, Mapping):
        children = {str(k): spec_from_value(v) for k, v in value.items()}
        return InputSpec(name=name, children=children)
    if isinstance(value, (tuple, list)):
        items = tuple(spec_from_value(v) for v in value)
        return InputSpec(name=name, items=items, is_list=isinstance(value, list))
    if value is None or isinstance(value, (bool, int, float, str)):
        return InputSpec(name=name, literal=repr(value))
    if not isinstance(value, torch.Tensor):
        raise TorchwiseError(
            f"example input of type {type(value).__name__} is not a tensor, a container of "
            "tensors or a plain value"
        )
    dtype = spec_dtype(value.dtype)
    if dtype not in TORCH_DTYPE_NAMES:
        raise TorchwiseError(f"example input of dtype {dtype} has no input-spec spelling")
    high = None
    if dtype in INT_DTYPES and value.numel() and value.device.type != "meta":
        high = int(value.max()) + 1
    return InputSpec(name=name, dtype=dtype, dims=tuple(Dim(s) for s in value.shape), high=high)


def _materialise(
    spec: InputSpec, device: torch.device, sizes: Mapping[str, int], gen: torch.Generator
) -> Any:
    import torch

    if spec.children is not None:
        return {k: _materialise(v, device, sizes, gen) for k, v in spec.children.items()}
    if spec.items is not None:
        items = [_materialise(v, device, sizes, gen) for v in spec.items]
        return items if spec.is_list else tuple(items)
    if spec.literal is not None:
        return spec.value
    shape = spec.shape(sizes)
    dtype = spec.torch_dtype()
    if device.type == "meta":
        return torch.empty(shape, dtype=dtype, device=device)
    if spec.dtype in INT_DTYPES:
        high = spec.high if spec.high is not None else DEFAULT_INT_BOUND
        tensor = torch.randint(0, high, shape, generator=gen, dtype=dtype)
    elif spec.dtype == "bool":
        tensor = torch.randint(0, 2, shape, generator=gen).bool()
    else:
        tensor = torch.randn(shape, generator=gen, dtype=torch.float32).to(dtype)
    return tensor.to(device)


def check_dim_names(specs: Sequence[InputSpec], names: Iterable[str]) -> None:
    """Raise when one of ``names`` is a dim no spec names: resizing it would do nothing,
    so a typo must not pass silently."""
    known = {n for s in specs for n in s.dim_names()}
    unknown = sorted(set(names) - known)
    if unknown:
        raise TorchwiseError(
            f"no input has a dimension named {', '.join(unknown)}",
            hint=f"named dims: {', '.join(sorted(known)) or 'none'}; name them in the spec, "
            "e.g. 'i64[batch=2,seq=128]'",
        )


def make_inputs(
    specs: Sequence[InputSpec],
    *,
    device: str | torch.device = "cpu",
    sizes: Mapping[str, int] | None = None,
    seed: int = 0,
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """Materialise specs into ``(args, kwargs)`` for ``model(*args, **kwargs)``.

    Float inputs are standard normal, integers uniform in ``[0, high)`` (``high``
    defaults to :data:`DEFAULT_INT_BOUND`), bools fair coins, all from a generator
    seeded with ``seed`` so reruns see the same data; tuples, lists and dicts keep
    their structure and plain values are passed as they are. On ``meta`` nothing
    is allocated. ``sizes`` overrides named dims (``{"seq": 512}``); naming a dim
    that no spec has is an error, so a typo cannot pass silently.
    """
    import torch

    sizes = dict(sizes or {})
    check_dim_names(specs, sizes)
    dev = torch.device(device)
    gen = torch.Generator().manual_seed(seed)
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    for spec in specs:
        value = _materialise(spec, dev, sizes, gen)
        if spec.name is None:
            if kwargs:
                raise TorchwiseError(f"positional input {spec} follows a keyword input")
            args.append(value)
        else:
            kwargs[spec.name] = value
    return tuple(args), kwargs


def spec_dtype(dtype: torch.dtype) -> str:
    """The input-spec spelling of a torch dtype (``torch.float32`` -> ``"f32"``); torch's
    own name for one the specs do not spell."""
    name = str(dtype).removeprefix("torch.")
    spellings = (spec for spec, torch_name in TORCH_DTYPE_NAMES.items() if torch_name == name)
    return next(spellings, name)
