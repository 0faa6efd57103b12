"""Symbolic shapes by experiment: which output dims follow which input dims.

The model runs (on the meta device when it can, so nothing is computed or
allocated) at the example size and again with one input dimension scaled to 2x
and 3x. A dimension that can change without the forward failing is a *symbol*
(``batch``, ``seq_len``, ``height``...); every output dimension is then fitted
as ``a * symbol + b`` (or a product of symbols) across the runs, and a fit that
does not hold at the third size is reported as opaque rather than guessed.
Dims that must change together (``ids`` and ``mask`` sharing a sequence length)
are found by scaling equal-sized dims jointly when scaling one alone fails.
"""

from __future__ import annotations

import dataclasses
import inspect
import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from torchwise.errors import TorchwiseError, exception_line
from torchwise.inputs import FLOAT_DTYPES
from torchwise.target import Dim, InputSpec, make_inputs

if TYPE_CHECKING:
    import torch

    from torchwise.console import ProgressHandle

#: (spec index, path inside a dict/tuple spec: keys and positions) -> a leaf tensor spec.
LeafKey = tuple[int, tuple[str | int, ...]]
DimKey = tuple[LeafKey, int]


@dataclass
class Leaf:
    """One tensor in or out of ``forward``: where it is, its dims, its dtype."""

    path: str
    dims: list[str]
    sizes: list[int]
    dtype: str

    def shape_text(self) -> str:
        return "(" + ", ".join(self.dims) + ("," if len(self.dims) == 1 else "") + ")"


@dataclass
class SymbolicShapes:
    inputs: list[Leaf]
    outputs: list[Leaf]
    #: symbol -> its size in the example inputs
    symbols: dict[str, int] = field(default_factory=dict)
    #: how each symbol was varied, for FLOP scaling: symbol -> dims scaled together
    groups: dict[str, list[DimKey]] = field(default_factory=dict)
    #: symbol -> the other sizes the forward accepted (2x and 3x, or 1/2 and 1/4)
    sizes_run: dict[str, list[int]] = field(default_factory=dict)
    device: str = "meta"
    notes: list[str] = field(default_factory=list)
    #: the output's structure, tensors by path and None kept (see :func:`skeleton`)
    output_tree: Any = None


def leaf_specs(specs: Sequence[InputSpec]) -> Iterator[tuple[LeafKey, InputSpec]]:
    """Every tensor spec inside ``specs`` with where it sits (plain values are skipped)."""

    def walk(index: int, spec: InputSpec, path: tuple[str | int, ...]) -> Iterator[Any]:
        if spec.children is not None:
            for key, child in spec.children.items():
                yield from walk(index, child, (*path, key))
        elif spec.items is not None:
            for position, item in enumerate(spec.items):
                yield from walk(index, item, (*path, position))
        elif spec.kind == "tensor":
            yield (index, path), spec

    for index, spec in enumerate(specs):
        yield from walk(index, spec, ())


def resize(specs: Sequence[InputSpec], new: dict[DimKey, int]) -> list[InputSpec]:
    """``specs`` with the given leaf dims set to new sizes."""

    def rebuild(index: int, spec: InputSpec, path: tuple[str | int, ...]) -> InputSpec:
        if spec.children is not None:
            kids = {k: rebuild(index, c, (*path, k)) for k, c in spec.children.items()}
            return dataclasses.replace(spec, children=kids)
        if spec.items is not None:
            items = tuple(rebuild(index, c, (*path, i)) for i, c in enumerate(spec.items))
            return dataclasses.replace(spec, items=items)
        if spec.kind != "tensor":
            return spec
        dims = tuple(
            Dim(new.get(((index, path), d), dim.size), dim.name) for d, dim in enumerate(spec.dims)
        )
        return dataclasses.replace(spec, dims=dims)

    return [rebuild(i, s, ()) for i, s in enumerate(specs)]


def flatten_output(value: Any, path: str = "") -> Iterator[tuple[str, torch.Tensor]]:
    import torch

    if isinstance(value, torch.Tensor):
        yield path, value
    elif isinstance(value, tuple) and hasattr(value, "_fields"):
        for name in value._fields:
            yield from flatten_output(getattr(value, name), f"{path}.{name}")
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            yield from flatten_output(item, f"{path}[{i}]")
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from flatten_output(item, f"{path}[{key!r}]")
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for fld in dataclasses.fields(value):
            yield from flatten_output(getattr(value, fld.name), f"{path}.{fld.name}")


def skeleton(value: Any, path: str = "") -> Any:
    """The output's structure with the same paths as :func:`flatten_output`:
    ``("tensor", path)``, ``("none",)``, ``("tuple"|"list", [parts])``,
    ``("named", type name, [(field, part)])`` for namedtuples, dataclasses and dict
    subclasses (Hugging Face's ModelOutput), ``("dict", [(key, part)])``, or
    ``("other", type name)``."""
    import torch

    if isinstance(value, torch.Tensor):
        return ("tensor", path or "output")
    if value is None:
        return ("none",)
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        fields = [(n, skeleton(getattr(value, n), f"{path}.{n}")) for n in value._fields]
        return ("named", type(value).__name__, fields)
    if isinstance(value, list | tuple):
        parts = [skeleton(item, f"{path}[{i}]") for i, item in enumerate(value)]
        return ("list" if isinstance(value, list) else "tuple", parts)
    if isinstance(value, dict):
        items = [(str(k), skeleton(v, f"{path}[{k!r}]")) for k, v in value.items()]
        return ("dict", items) if type(value) is dict else ("named", type(value).__name__, items)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = [
            (f.name, skeleton(getattr(value, f.name), f"{path}.{f.name}"))
            for f in dataclasses.fields(value)
        ]
        return ("named", type(value).__name__, fields)
    return ("other", type(value).__name__)


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


class Runner:
    """Runs a private copy of the model on inputs built from specs."""

    def __init__(
        self,
        model: torch.nn.Module,
        specs: Sequence[InputSpec],
        progress: ProgressHandle | None = None,
    ) -> None:
        import torch

        from torchwise.model import private_copy

        self.original = model
        self.specs = list(specs)
        self.progress = progress
        self.error = ""
        self.exception: BaseException | None = None
        self.last_output: Any = None
        self.device = "meta"
        tensors = itertools.chain(model.parameters(), model.buffers())
        on_meta = all(t.device.type == "meta" for t in tensors)
        self.model = private_copy(model, torch.device("meta")).eval()
        if self.run(self.specs) is not None:
            return
        meta_error = self.error
        if on_meta:
            raise TorchwiseError(f"the model does not run on the meta device: {meta_error}")
        # Data-dependent control flow (``.item()``, ``nonzero``) cannot run on meta:
        # fall back to real tensors on a CPU copy, never the caller's model.
        self.model, self.device = private_copy(model, torch.device("cpu")).eval(), "cpu"
        if self.run(self.specs) is None:
            from torchwise.errors import UserCodeError

            assert self.exception is not None
            raise UserCodeError.from_exception(
                self.exception,
                doing=f"forward of {type(model).__name__}",
                hint=f"it failed on meta too ({meta_error}); check that --input describes "
                "forward's arguments",
            )

    def run(self, specs: Sequence[InputSpec]) -> list[tuple[str, torch.Tensor]] | None:
        import torch

        from torchwise.model import ReferenceLeak, Untouched

        if self.progress is not None:
            self.progress.advance()
        try:
            args, kwargs = make_inputs(specs, device=self.device)
            with torch.no_grad(), Untouched(self.original):
                out = self.model(*args, **kwargs)
        except ReferenceLeak:
            raise
        except Exception as exc:
            self.error = exception_line(exc)
            self.exception = exc
            return None
        self.last_output = out
        return list(flatten_output(out))


def _alternatives(size: int) -> list[tuple[int, int]]:
    """Sizes to try for a dim: (2x, 3x), else halves (a max length may cap it)."""
    options = [(2 * size, 3 * size)]
    if size % 4 == 0:
        options.append((size // 2, size // 4))
    return options


def _default_name(spec: InputSpec, d: int, varying: set[int], batch_dim: int = 0) -> str:
    """``batch`` for the batch dim; seq_len/length/height/width by rank and dtype; else dimN.

    With the batch first, token ids are ``(batch, seq_len)``, float sequences
    ``(batch, seq_len, features)`` or ``(batch, channels, length)``, images
    ``(batch, channels, height, width)``. With a time-first batch (``--batch-dim 1``),
    the dim before it is ``seq_len``: ``(seq_len, batch, features)``.
    """
    floating = spec.dtype in FLOAT_DTYPES
    rank = len(spec.dims)
    if d == batch_dim and d < rank:
        return "batch"
    if batch_dim != 0:
        return "seq_len" if d < batch_dim and d == 0 else f"dim{d}"
    if not floating and rank == 2:
        return "seq_len"
    if floating and rank == 3:
        return "seq_len" if d == 1 and 2 not in varying else "length" if d == 2 else f"dim{d}"
    if rank == 4 and d >= 1:
        return ("channels", "height", "width")[d - 1]
    if rank == 5 and d >= 1:
        return ("channels", "depth", "height", "width")[d - 1]
    return f"dim{d}"


def experiments(specs: Sequence[InputSpec]) -> int:
    """About how many forwards :func:`infer` runs: the base and two per tensor dim."""
    return 2 + 2 * sum(len(spec.dims) for _, spec in leaf_specs(specs))


def infer(
    model: torch.nn.Module,
    specs: Sequence[InputSpec],
    input_names: Sequence[str],
    *,
    batch_dim: int = 0,
    progress: ProgressHandle | None = None,
) -> SymbolicShapes:
    """Run ``model`` at several input sizes and name the dims that vary.

    ``batch_dim`` says which dim of the inputs is the batch (for naming);
    ``progress`` advances once per forward.
    """
    runner = Runner(model, specs, progress)
    base = runner.run(specs)
    assert base is not None
    tree = skeleton(runner.last_output)
    leaves = dict(leaf_specs(specs))
    dims: list[DimKey] = [(key, d) for key, spec in leaves.items() for d in range(len(spec.dims))]
    size = {dk: leaves[dk[0]].dims[dk[1]].size for dk in dims}
    groups: list[list[DimKey]] = []
    runs: list[dict[int, list[tuple[str, torch.Tensor]]]] = []  # per group: size -> outputs
    done: set[DimKey] = set()
    for dk in dims:
        if dk in done or size[dk] == 0:
            continue
        name = leaves[dk[0]].dims[dk[1]].name
        if name is not None:
            candidates = [[k for k in dims if leaves[k[0]].dims[k[1]].name == name]]
        else:
            same = [k for k in dims if k not in done and size[k] == size[dk] and k != dk]
            same = [k for k in same if leaves[k[0]].dims[k[1]].name is None]
            candidates = [[dk], [dk, *same]] if same else [[dk]]
        for group in candidates:
            found = _try_group(runner, specs, group, size[dk])
            if found is not None:
                groups.append(group)
                runs.append({size[dk]: base, **found})
                done.update(group)
                break
        else:
            done.update(candidates[-1])  # these must keep their example sizes
    result = _assemble(runner, leaves, base, groups, runs, input_names, batch_dim)
    result.output_tree = tree
    return result


def _try_group(
    runner: Runner, specs: Sequence[InputSpec], group: list[DimKey], size: int
) -> dict[int, list[tuple[str, torch.Tensor]]] | None:
    for alternatives in _alternatives(size):
        outs = {}
        for new in alternatives:
            out = runner.run(resize(specs, dict.fromkeys(group, new)))
            if out is None:
                break
            outs[new] = out
        if len(outs) == len(alternatives):
            return outs
    return None


def _assemble(
    runner: Runner,
    leaves: dict[LeafKey, InputSpec],
    base: list[tuple[str, torch.Tensor]],
    groups: list[list[DimKey]],
    runs: list[dict[int, list[tuple[str, torch.Tensor]]]],
    input_names: Sequence[str],
    batch_dim: int,
) -> SymbolicShapes:
    symbol_of: dict[DimKey, str] = {}
    result = SymbolicShapes([], [], device=runner.device)
    variable = {dk for g in groups for dk in g}
    for group in groups:
        key, d = group[0]
        spec = leaves[key]
        varying = {o for (k, o) in variable if k == key}
        name = spec.dims[d].name or _default_name(spec, d, varying, batch_dim)
        unique, n = name, 2
        while unique in result.symbols:
            unique, n = f"{name}_{n}", n + 1
        result.symbols[unique] = spec.dims[d].size
        result.groups[unique] = group
        result.sizes_run[unique] = sorted(set(runs[len(result.groups) - 1]) - {spec.dims[d].size})
        symbol_of.update(dict.fromkeys(group, unique))
    for key, spec in leaves.items():
        index, keys = key
        label = input_names[index] if index < len(input_names) else f"input{index}"
        label += "".join(f"[{p!r}]" if isinstance(p, str) else f"[{p}]" for p in keys)
        sizes = [dim.size for dim in spec.dims]
        names = [symbol_of.get((key, d), str(s)) for d, s in enumerate(sizes)]
        dtype = dtype_name(spec.torch_dtype()) if spec.dtype else "?"
        result.inputs.append(Leaf(label, names, sizes, dtype))
    for position, (path, tensor) in enumerate(base):
        sizes = list(tensor.shape)
        names = []
        for j, value in enumerate(sizes):
            series = []  # (symbol, {size: output dim})
            for symbol, group_runs in zip(result.groups, runs, strict=True):
                points = {s: _dim(out, position, j) for s, out in group_runs.items()}
                if len(set(points.values())) > 1:
                    series.append((symbol, points))
            names.append(_fit(value, series, result.symbols, result.notes, path or "output", j))
        dtype = dtype_name(tensor.dtype)
        result.outputs.append(Leaf(path or "output", names, sizes, dtype))
    return result


def _dim(out: list[tuple[str, torch.Tensor]], position: int, j: int) -> int | None:
    if position >= len(out) or j >= out[position][1].dim():
        return None
    return int(out[position][1].shape[j])


def _fit(
    value: int,
    series: list[tuple[str, dict[int, int | None]]],
    symbols: dict[str, int],
    notes: list[str],
    path: str,
    j: int,
) -> str:
    if not series:
        return str(value)
    if len(series) == 1:
        symbol, points = series[0]
        text = _affine(symbol, points)
        if text is not None:
            return text
    else:
        text = _product(value, series, symbols)
        if text is not None:
            return text
    depends = " and ".join(s for s, _ in series)
    name = f"{path.strip('.[]')}_dim{j}" if path != "output" else f"out_dim{j}"
    notes.append(f"{name} depends on {depends} ({value} in the example) but not linearly")
    return name


def _affine(symbol: str, points: dict[int, int | None]) -> str | None:
    if any(v is None for v in points.values()) or len(points) < 2:
        return None
    (x0, y0), (x1, y1), *more = sorted((k, v) for k, v in points.items() if v is not None)
    slope = Fraction(y1 - y0, x1 - x0)
    offset = y0 - slope * x0
    if any(slope * x + offset != y for x, y in more):
        return None
    term = symbol
    if slope.numerator != 1:
        term = f"{slope.numerator}*{term}"
    if slope.denominator != 1:
        term = f"{term}/{slope.denominator}"
    if offset == 0:
        return term
    sign = "+" if offset > 0 else "-"
    return f"{term} {sign} {abs(offset)}"


def _product(
    value: int, series: list[tuple[str, dict[int, int | None]]], symbols: dict[str, int]
) -> str | None:
    """``c * s1 * s2 ...`` when every run agrees (e.g. patches = height*width/256)."""
    base = 1
    for symbol, _ in series:
        base *= symbols[symbol]
    coeff = Fraction(value, base)
    for symbol, points in series:
        for x, y in points.items():
            if y is None or coeff * x * base / symbols[symbol] != y:
                return None
    names = "*".join(s for s, _ in series)
    if coeff == 1:
        return names
    if coeff.numerator == 1:
        return f"{names}/{coeff.denominator}"
    return f"{coeff.numerator}*{names}/{coeff.denominator}".removesuffix("/1")


def forward_input_names(model: torch.nn.Module, specs: Sequence[InputSpec]) -> list[str]:
    """The forward parameter each spec binds to (positional specs by position)."""
    try:
        params = [
            p.name
            for p in inspect.signature(model.forward).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
    except (TypeError, ValueError):
        params = []
    names = []
    for index, spec in enumerate(specs):
        if spec.name is not None:
            names.append(spec.name)
        else:
            names.append(params[index] if index < len(params) else f"input{index}")
    return names
