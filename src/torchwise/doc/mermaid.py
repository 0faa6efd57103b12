"""A Mermaid flowchart of a model: its module tree and the data flowing through it.

Edges are measured, not read off the module tree: one forward runs on the meta
device with hooks on the modules shown ("units") and a ``TorchFunctionMode``
that tags every tensor with the units it was computed from. A unit's inputs
then say which units fed it, through any functional glue in between
(``F.relu``, ``flatten``, a residual ``+``), so skip connections appear as the
extra edges they are. Labels are escaped with Mermaid's entity codes so that
names, reprs and shapes render on GitHub.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from torchwise.hooks import ModuleCall, module_calls

if TYPE_CHECKING:
    import torch

#: More nodes than this and a diagram stops being readable; deeper modules are
#: collapsed into their ancestors until the graph fits.
MAX_NODES = 40
_ESCAPES = {"#": "#35;", '"': "#quot;", "<": "#60;", ">": "#62;", "&": "#38;", "`": "#96;"}


def escape(text: str) -> str:
    """A label safe inside ``id["..."]``: Mermaid entity codes for its specials."""
    out = "".join(_ESCAPES.get(char, char) for char in text)
    return out.replace("\n", "<br/>")


@dataclass
class Flow:
    """The measured graph: units called in order, and edges between them."""

    units: list[str] = field(default_factory=list)
    types: dict[str, str] = field(default_factory=dict)
    shapes: dict[str, str] = field(default_factory=dict)
    edges: list[tuple[str, str]] = field(default_factory=list)


def choose_units(model: torch.nn.Module, max_nodes: int = MAX_NODES) -> list[str]:
    """The deepest cut of the module tree with at most ``max_nodes`` modules."""
    names = [n for n, _ in model.named_modules() if n]
    children = {n: [c for c in names if c.startswith(n + ".")] for n in names}
    best: list[str] = []
    for depth in range(1, 1 + max((n.count(".") + 1 for n in names), default=0)):
        cut = [n for n in names if n.count(".") + 1 == depth or (
            n.count(".") + 1 < depth and not children[n])]  # fmt: skip
        if best and len(cut) > max_nodes:
            break
        best = cut
    return best


def _tensors(value: Any) -> Iterator[torch.Tensor]:
    from torchwise.tensortree import tensors_in  # torch is imported only once a model runs

    return iter(tensors_in(value))


def trace_flow(
    model: torch.nn.Module, args: Sequence[Any], kwargs: dict[str, Any], input_names: list[str]
) -> Flow:
    """Run ``model`` once (it must be a private copy) and record the data flow."""
    import torch
    from torch.overrides import TorchFunctionMode

    flow = Flow()
    units = choose_units(model)
    modules = dict(model.named_modules())
    origin: dict[int, tuple[torch.Tensor, frozenset[str]]] = {}

    def tag(value: Any, sources: frozenset[str]) -> None:
        for tensor in _tensors(value):
            origin[id(tensor)] = (tensor, sources)  # keeps the tensor alive: ids stay unique

    def sources_of(value: Any) -> frozenset[str]:
        found: frozenset[str] = frozenset()
        for tensor in _tensors(value):
            hit = origin.get(id(tensor))
            if hit is not None and hit[0] is tensor:
                found |= hit[1]
        return found

    class Propagate(TorchFunctionMode):
        def __torch_function__(
            self, func: Any, types: Any, args: Any = (), kwargs: Any = None
        ) -> Any:
            out = func(*args, **(kwargs or {}))
            sources = sources_of((args, kwargs or {}))
            if sources:
                tag(out, sources | sources_of(out))
            return out

    def entered(call: ModuleCall) -> None:
        name = call.name
        if name not in flow.units:
            flow.units.append(name)
            flow.types[name] = type(modules[name]).__name__
            parent = _parent(name)
            while parent:  # subgraph titles name the container's type
                flow.types.setdefault(parent, type(modules[parent]).__name__)
                parent = _parent(parent)
        for source in sorted(sources_of((call.args, call.kwargs))):
            if (source, name) not in flow.edges:
                flow.edges.append((source, name))

    def returned(call: ModuleCall, output: Any) -> None:
        first = next(_tensors(output), None)
        if first is not None:
            flow.shapes[call.name] = "[" + ", ".join(str(s) for s in first.shape) + "]"
        tag(output, frozenset({call.name}))

    with module_calls(model, on_enter=entered, on_exit=returned, only=set(units)):
        for name, value in zip(input_names, [*args, *kwargs.values()], strict=False):
            tag(value, frozenset({f"input:{name}"}))
        with torch.no_grad(), Propagate():
            out = model(*args, **kwargs)
        for source in sorted(sources_of(out)):
            flow.edges.append((source, "output"))
    return flow


def _node_id(name: str, used: dict[str, str]) -> str:
    if name in used:
        return used[name]
    base = "n_" + re.sub(r"\W", "_", name)
    ident, n = base, 2
    while ident in used.values():
        ident, n = f"{base}_{n}", n + 1
    used[name] = ident
    return ident


def render(flow: Flow, inputs: dict[str, str], output: str, *, direction: str = "TD") -> str:
    """Mermaid source: input nodes, units nested in subgraphs per parent, output node."""
    ids: dict[str, str] = {}
    lines = [f"flowchart {direction}"]
    for name, shape in inputs.items():
        label = escape(f"{name}\n{shape}")
        lines.append(f'    {_node_id("input:" + name, ids)}[/"{label}"/]')
    _emit(lines, "", flow, ids, 1)
    lines.append(f'    {_node_id("output", ids)}[/"{escape("output" + chr(10) + output)}"/]')
    for source, dest in flow.edges:
        if source in ids and dest in ids:
            lines.append(f"    {ids[source]} --> {ids[dest]}")
    return "\n".join(lines)


def _parent(name: str) -> str:
    return name.rpartition(".")[0]


def _emit(lines: list[str], prefix: str, flow: Flow, ids: dict[str, str], level: int) -> None:
    """Units directly under ``prefix``, then one subgraph per child module holding units."""
    pad = "    " * level
    for unit in flow.units:
        if _parent(unit) == prefix:
            label = escape(f"{unit}\n{flow.types[unit]}\n{flow.shapes.get(unit, '')}".strip())
            lines.append(f'{pad}{_node_id(unit, ids)}["{label}"]')
    groups: list[str] = []
    for unit in flow.units:
        node = unit
        while _parent(node) and _parent(node) != prefix:
            node = _parent(node)
        if _parent(node) == prefix and node != unit and node not in groups:
            groups.append(node)
    for group in groups:
        title = f"{group}: {flow.types[group]}" if group in flow.types else group
        ident = "sg_" + re.sub(r"\W", "_", group)
        lines.append(f'{pad}subgraph {ident}["{escape(title)}"]')
        _emit(lines, group, flow, ids, level + 1)
        lines.append(f"{pad}end")
