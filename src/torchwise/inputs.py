"""Input specs: ``"ids=i64[batch=2,seq=128]<50257"`` -> tensors for ``forward``.

The grammar is in :func:`parse_input_spec` and docs/targets.md. Re-exported by
:mod:`torchwise.target`, which most callers import from.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
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
_TORCH_DTYPE_NAMES: dict[str, str] = {
    "f16": "float16", "bf16": "bfloat16", "f32": "float32", "f64": "float64",
    "i8": "int8", "u8": "uint8", "i16": "int16", "i32": "int32", "i64": "int64",
    "bool": "bool", "c64": "complex64", "c128": "complex128",
}  # fmt: skip
_INT_DTYPES = frozenset({"i8", "u8", "i16", "i32", "i64"})
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
    """One parsed ``--input``: a tensor spec, or a dict of specs (``children``).

    ``name`` set means the input is passed as a keyword argument; ``high`` is the
    exclusive upper bound of an integer input (``<50257``).
    """

    name: str | None = None
    dtype: str | None = None
    dims: tuple[Dim, ...] = ()
    high: int | None = None
    children: dict[str, InputSpec] | None = None

    @property
    def is_dict(self) -> bool:
        return self.children is not None

    def shape(self, sizes: Mapping[str, int] | None = None) -> tuple[int, ...]:
        """The concrete shape, with named dims overridden by ``sizes``."""
        sizes = sizes or {}
        return tuple(sizes.get(d.name, d.size) if d.name else d.size for d in self.dims)

    def dim_names(self) -> list[str]:
        """Named dims, including those of nested specs, in order of appearance."""
        names = [d.name for d in self.dims if d.name]
        for child in (self.children or {}).values():
            names += [n for n in child.dim_names() if n not in names]
        return names

    def torch_dtype(self) -> torch.dtype:
        import torch

        assert self.dtype is not None
        dtype: torch.dtype = getattr(torch, _TORCH_DTYPE_NAMES[self.dtype])
        return dtype

    def body(self) -> str:
        """The spec without its keyword name."""
        if self.children is not None:
            return "{" + ", ".join(f"{k}: {v.body()}" for k, v in self.children.items()) + "}"
        bound = "" if self.high is None else f"<{self.high}"
        return f"{self.dtype}[{','.join(str(d) for d in self.dims)}]{bound}"

    def __str__(self) -> str:
        return self.body() if self.name is None else f"{self.name}={self.body()}"


_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class _SpecParser:
    """Recursive descent over ``[name=](dtype[dims][<N] | {key: spec, ...})``."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def fail(self, what: str) -> TorchwiseError:
        pointer = " " * self.pos + "^"
        return TorchwiseError(
            f"bad input spec {self.text!r}: {what}\n  {self.text}\n  {pointer}",
            hint="examples: 'f32[8,3,224,224]', 'ids=i64[batch=2,seq=128]<50257', "
            "'{image: f32[2,3,32,32], mask: bool[2,32,32]}' (see docs/targets.md)",
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

    def ident(self) -> str | None:
        self.skip_space()
        match = _IDENT.match(self.text, self.pos)
        if match is None:
            return None
        self.pos = match.end()
        return match.group()

    def integer(self, what: str) -> int:
        self.skip_space()
        match = re.compile(r"[0-9]+").match(self.text, self.pos)
        if match is None:
            raise self.fail(f"expected {what} (a non-negative integer)")
        self.pos = match.end()
        return int(match.group())

    def parse_top(self) -> InputSpec:
        start = self.pos
        name = self.ident()
        if name is not None and self.peek() == "=":
            self.pos += 1
        else:  # no keyword: rewind, the identifier was the dtype
            name, self.pos = None, start
        spec = self.parse_value(name)
        if self.peek():
            raise self.fail("unexpected text after the spec")
        return spec

    def parse_value(self, name: str | None) -> InputSpec:
        if self.peek() == "{":
            return self.parse_dict(name)
        dtype_pos = self.pos
        word = self.ident()
        if word is None:
            raise self.fail("expected a dtype (f32, bf16, i64, bool, ...) or '{'")
        dtype = _DTYPE_ALIASES.get(word.lower())
        if dtype is None:
            self.pos = dtype_pos
            raise self.fail(f"unknown dtype {word!r}; use one of {sorted(set(_DTYPE_ALIASES))}")
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
            if dtype not in _INT_DTYPES:
                raise self.fail(f"a '<N' bound only applies to integer dtypes, not {dtype}")
            high = self.integer("the exclusive upper bound")
            if high < 1:
                raise self.fail("the upper bound must be at least 1")
        return InputSpec(name=name, dtype=dtype, dims=tuple(dims), high=high)

    def parse_dim(self) -> Dim:
        if self.peek().isdigit():
            return Dim(self.integer("a dimension size"))
        dim_name = self.ident()
        if dim_name is None:
            raise self.fail("expected a dimension size or 'name=size'")
        if self.peek() != "=":
            raise self.fail(f"named dimension {dim_name!r} needs a size: {dim_name}=N")
        self.pos += 1
        return Dim(self.integer(f"the size of {dim_name!r}"), dim_name)

    def parse_dict(self, name: str | None) -> InputSpec:
        self.expect("{")
        children: dict[str, InputSpec] = {}
        while self.peek() != "}":
            key = self.ident()
            if key is None:
                raise self.fail("expected a dict key")
            if key in children:
                raise self.fail(f"duplicate dict key {key!r}")
            self.expect(":")
            children[key] = self.parse_value(None)
            if self.peek() != ",":
                break
            self.pos += 1
        self.expect("}")
        if not children:
            raise self.fail("an input dict needs at least one entry")
        return InputSpec(name=name, children=children)


def parse_input_spec(text: str) -> InputSpec:
    """Parse one input spec.

    Grammar (whitespace ignored)::

        spec  := [NAME "="] value
        value := DTYPE "[" [dim ("," dim)*] "]" ["<" INT] | "{" KEY ":" value ("," ...)* "}"
        dim   := INT | NAME "=" INT

    ``f32[8,3,224,224]`` is a positional float tensor; ``ids=i64[2,128]<50257`` a
    keyword int tensor in [0, 50257); ``i64[batch=2,seq=128]`` names its dims so
    ``sizes={"seq": 512}`` can resize them; ``{image: f32[2,3,32,32], y: i64[2]<10}``
    is a dict argument (dicts nest).
    """
    if not text.strip():
        raise TorchwiseError("empty input spec", hint="example: --input 'f32[8,3,224,224]'")
    return _SpecParser(text).parse_top()


def spec_from_value(value: Any, name: str | None = None) -> InputSpec:
    """The spec describing an example input (a tensor or a dict of tensors)."""
    import torch

    if isinstance(value, Mapping):
        return InputSpec(name=name, children={str(k): spec_from_value(v) for k, v in value.items()})
    if not isinstance(value, torch.Tensor):
        raise TorchwiseError(f"example input of type {type(value).__name__} is not a tensor")
    dtype = next(k for k, v in _TORCH_DTYPE_NAMES.items() if getattr(torch, v) == value.dtype)
    high = None
    if dtype in _INT_DTYPES and value.numel() and value.device.type != "meta":
        high = int(value.max()) + 1
    return InputSpec(name=name, dtype=dtype, dims=tuple(Dim(s) for s in value.shape), high=high)


def _materialise(
    spec: InputSpec, device: torch.device, sizes: Mapping[str, int], gen: torch.Generator
) -> Any:
    import torch

    if spec.children is not None:
        return {k: _materialise(v, device, sizes, gen) for k, v in spec.children.items()}
    shape = spec.shape(sizes)
    dtype = spec.torch_dtype()
    if device.type == "meta":
        return torch.empty(shape, dtype=dtype, device=device)
    if spec.dtype in _INT_DTYPES:
        high = spec.high if spec.high is not None else DEFAULT_INT_BOUND
        tensor = torch.randint(0, high, shape, generator=gen, dtype=dtype)
    elif spec.dtype == "bool":
        tensor = torch.randint(0, 2, shape, generator=gen).bool()
    else:
        tensor = torch.randn(shape, generator=gen, dtype=torch.float32).to(dtype)
    return tensor.to(device)


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
    seeded with ``seed`` so reruns see the same data. On ``meta`` nothing is
    allocated. ``sizes`` overrides named dims (``{"seq": 512}``); naming a dim
    that no spec has is an error, so a typo cannot pass silently.
    """
    import torch

    sizes = dict(sizes or {})
    known = {n for s in specs for n in s.dim_names()}
    unknown = sorted(set(sizes) - known)
    if unknown:
        raise TorchwiseError(
            f"no input has a dimension named {', '.join(unknown)}",
            hint=f"named dims: {', '.join(sorted(known)) or 'none'}; name them in the spec, "
            "e.g. 'i64[batch=2,seq=128]'",
        )
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
