"""``torchwise doc``: measured facts -> Google-style docstrings for a model class.

:func:`document` measures a resolved target (symbolic shapes from
:mod:`~torchwise.doc.shapes`, counts from :func:`~torchwise.model.summarize`,
FLOP scaling from summaries at 2x each size symbol), renders torchwise's
sections (see :mod:`~torchwise.doc.docstrings` for which ones it owns), merges
them into the docstrings found in the source file, and runs the ``Example:``
block it wrote. Nothing here writes files; :mod:`~torchwise.doc.source`
does, on request.
"""

from __future__ import annotations

import ast
import contextlib
import inspect
import math
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from torchwise.doc import example as docexample
from torchwise.doc import returns as docreturns
from torchwise.doc import shapes as docshapes
from torchwise.doc.docstrings import merge, parse
from torchwise.doc.entries import (
    attribute_entries,
    constructor_values,
    forward_entries,
    init_entries,
    returns_type,
)
from torchwise.doc.modes import mode_differences
from torchwise.doc.source import DocTarget, current_docstring, parse_source
from torchwise.errors import TorchwiseError
from torchwise.target import ResolvedTarget
from torchwise.units import count, exact, exponent, nbytes

if TYPE_CHECKING:
    import torch

    from torchwise.console import Console, ProgressHandle
    from torchwise.model import ModelSummary


@dataclass
class ModelDoc:
    """Everything ``torchwise doc`` measured and generated for one model class."""

    target: ResolvedTarget
    shapes: docshapes.SymbolicShapes
    summary: ModelSummary
    scaling: dict[str, float]
    input_names: list[str]
    recipe: docexample.Recipe
    example: list[str]
    source: Path | None
    docstrings: dict[DocTarget, str] = field(default_factory=dict)
    example_device: str = "cpu"
    #: what optional forward arguments change in the outputs
    effects: list[docreturns.OptionalEffect] = field(default_factory=list)
    #: what the user should hear that does not belong in a docstring (ops without a
    #: FLOP formula, fallbacks), shown on stderr
    notes: list[str] = field(default_factory=list)


def document(
    target: str,
    rt: ResolvedTarget,
    *,
    run_example: bool = True,
    config_start: Path | None = None,
    console: Console | None = None,
) -> ModelDoc:
    """Measure ``rt`` and build the docstrings of its class (and its ``forward``).

    The summary runs first, so a forward that raises is reported exactly as
    ``torchwise inspect`` reports it; ``console`` shows progress over the shape
    experiments (on a terminal).
    """
    from torchwise.model import summarize

    model = rt.model
    summary = summarize(model, rt.args, rt.kwargs)
    names = docshapes.forward_input_names(model, rt.input_specs)
    total = docshapes.experiments(rt.input_specs) + 4
    with _progress(console, total) as progress:
        shapes = docshapes.infer(
            model, rt.input_specs, names, batch_dim=rt.batch_dim, progress=progress
        )
        effects = docreturns.optional_effects(model, rt.input_specs, shapes.output_tree, progress)
    if shapes.device != "meta":
        summary = summarize(model, rt.args, rt.kwargs, device=shapes.device)
    scaling = flop_scaling(model, rt, shapes, summary.flops_forward)
    cls = rt.cls or type(model)
    recipe = docexample.recipe(rt)
    example = docexample.doctest_lines(recipe, rt, names, shapes)
    doc = ModelDoc(rt, shapes, summary, scaling, names, recipe, example, rt.source_file)
    doc.effects = effects
    doc.notes = [*summary.notes, *(f"{note}" for note in shapes.notes)]
    doc.docstrings = build_docstrings(doc, cls)
    if run_example:
        doc.example_device = docexample.run_doctest(example, cls, rt, summary.flops_forward)
    return doc


@contextlib.contextmanager
def _progress(console: Console | None, total: int) -> Iterator[ProgressHandle | None]:
    if console is None:
        yield None
        return
    with console.progress(total, "doc: shape experiments") as handle:
        yield handle


def flop_scaling(
    model: torch.nn.Module, rt: ResolvedTarget, shapes: docshapes.SymbolicShapes, base: int
) -> dict[str, float]:
    """FLOPs exponent per size symbol, from one more summary at another accepted size.

    ``log(FLOPs(n') / FLOPs(n)) / log(n' / n)`` with ``n'`` the first size the
    shape experiments ran (2x, or 1/2 when a maximum length forbids growing).
    """
    from torchwise.model import summarize
    from torchwise.target import make_inputs

    exponents: dict[str, float] = {}
    if base <= 0:
        return exponents
    for symbol, group in shapes.groups.items():
        size, run = shapes.symbols[symbol], shapes.sizes_run[symbol]
        other = 2 * size if 2 * size in run else run[-1]  # 2x, else the half
        if size == 0 or other == size:
            continue
        specs = docshapes.resize(rt.input_specs, dict.fromkeys(group, other))
        args, kwargs = make_inputs(specs, device=shapes.device)
        scaled = summarize(model, args, kwargs, device=shapes.device, estimate_training=False)
        ratio = max(scaled.flops_forward, 1) / base
        exponents[symbol] = math.log(ratio) / math.log(other / size)
    return exponents


def build_docstrings(doc: ModelDoc, cls: type) -> dict[DocTarget, str]:
    """The merged class and ``forward`` docstrings (author prose kept)."""
    qualname = cls.__qualname__
    tree = None
    if doc.source is not None and doc.source.suffix == ".py" and "<locals>" not in qualname:
        tree = parse_source(doc.source.read_bytes(), doc.source)
    cls_target = DocTarget(qualname)
    existing = current_docstring(tree, cls_target) if tree else inspect.getdoc(cls)
    sections = {
        "Shape": wrap(shape_section(doc.shapes)),
        "Complexity": wrap(complexity_section(doc)),
        "Train and eval": wrap(mode_differences(doc.target.model)),
        "Example": doc.example,
    }
    passed = constructor_values(doc.target, cls)
    merged = merge(
        parse(existing or ""),
        default_summary=default_summary(doc.target.model),
        entries={
            "Args": init_entries(cls, passed),
            "Attributes": attribute_entries(doc.target.model),
        },
        owned=sections,
    )
    out = {cls_target: merged.render()}
    fwd_target = DocTarget(qualname, "forward")
    if tree is not None and _defines(tree, fwd_target):
        fwd = merge(
            parse(current_docstring(tree, fwd_target) or ""),
            default_summary="Run the model.",
            entries={
                "Args": forward_entries(
                    doc.target.model,
                    doc.target.input_specs,
                    doc.input_names,
                    doc.shapes,
                    doc.effects,
                )
            },
            returns=returns_type(doc.shapes, doc.effects),
        )
        out[fwd_target] = fwd.render()
    return out


def wrap(lines: list[str], width: int = 88) -> list[str]:
    """Wrap prose lines; a bullet's continuation lines align under its text."""
    out = []
    for line in lines:
        indent = "  " if line.startswith("- ") else ""
        out += textwrap.wrap(line, width, subsequent_indent=indent, break_on_hyphens=False) or [""]
    return out


def _defines(tree: ast.Module, target: DocTarget) -> bool:
    from torchwise.doc.source import find_def

    return find_def(tree, target) is not None


def default_summary(model: torch.nn.Module) -> str:
    """A summary that states what kind of network this is (no counts: they go stale)."""
    types = {type(m).__name__ for m in model.modules()}
    if any("Attention" in t or t.startswith("Transformer") for t in types):
        kind = "transformer"
    elif any(t in ("LSTM", "GRU", "RNN") for t in types):
        kind = "recurrent network"
    elif any(t.startswith("Conv") for t in types):
        kind = "convolutional network"
    elif "Linear" in types:
        kind = "multilayer perceptron"
    else:
        kind = "neural network module"
    return f"A {kind}."


def shape_section(shapes: docshapes.SymbolicShapes) -> list[str]:
    """PyTorch's ``Shape:`` convention, with the measured symbolic dims."""
    lines = [f"- {leaf.path}: ``{leaf.shape_text()}``, {leaf.dtype}" for leaf in shapes.inputs]
    for leaf in shapes.outputs:
        label = "Output" if leaf.path == "output" else f"Output ``out{leaf.path}``"
        lines.append(f"- {label}: ``{leaf.shape_text()}``, {leaf.dtype}")
    if shapes.symbols:
        runs = shapes.sizes_run
        names = "; ".join(
            f"{s}={v} (also {', '.join(map(str, runs.get(s, [])))})"
            for s, v in shapes.symbols.items()
        )
        lines += ["", f"Named sizes may vary, numbers are fixed. Measured at {names}."]
    else:
        lines += ["", "Every size is fixed: other sizes fail in forward."]
    lines += [f"Note: {note}." for note in shapes.notes]
    return lines


def complexity_section(doc: ModelDoc) -> list[str]:
    """Parameters, FLOPs at the example size, how FLOPs scale, memory."""
    s = doc.summary
    sizes = ", ".join(f"{leaf.path} {tuple(leaf.sizes)}" for leaf in doc.shapes.inputs)
    frozen = s.total_params - s.trainable_params
    frozen_text = f" ({exact(frozen)} frozen)" if frozen else ""
    lines = [f"Parameters: {exact(s.total_params)}{frozen_text}, {nbytes(s.param_bytes)}."]
    for group in s.shared_params:
        lines.append(f"Shared (counted once): {' = '.join(group)}.")
    if s.buffer_count:
        lines.append(f"Buffers: {s.buffer_count} ({nbytes(s.buffer_bytes)}).")
    attention = ""
    if s.attention_flops_forward:
        share = 100 * s.attention_flops_forward / max(s.flops_forward_full, 1)
        attention = f", {share:.1f}% of it in attention's QK^T and PV"
    lines.append(
        f"Forward at {sizes or 'no inputs'}: {count(s.flops_forward, 'FLOPs')}"
        f" ({count(s.macs_forward, 'MACs')}){attention}."
    )
    if doc.scaling:
        terms = " * ".join(f"{k}^{exponent(v)}" for k, v in doc.scaling.items())
        lines.append(f"Scaling (measured at another size of each): FLOPs ~ {terms}.")
    lines.append(f"Peak forward activations: {nbytes(s.peak_activation_bytes)}.")
    if s.training is not None:
        lines.append(f"Training step with Adam: ~{nbytes(s.training.total('adam'))}.")
    return lines


def require_source(doc: ModelDoc) -> Path:
    """The file ``--write``/``--check`` edit, or a clear error."""
    cls = doc.target.cls or type(doc.target.model)
    if doc.source is None or doc.source.suffix != ".py" or not doc.source.is_file():
        raise TorchwiseError(f"cannot find the source file of {cls.__qualname__}")
    if "<locals>" in cls.__qualname__:
        raise TorchwiseError(f"{cls.__qualname__} is defined inside a function; cannot edit it")
    return doc.source
