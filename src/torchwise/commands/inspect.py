"""``torchwise inspect TARGET``: per-layer shapes, parameters, FLOPs and memory."""

from __future__ import annotations

import contextlib
import sys
from typing import TYPE_CHECKING

import click

from torchwise.commands._common import output_options
from torchwise.commands._target import target_options
from torchwise.target.request import TargetRequest

if TYPE_CHECKING:
    from torchwise.console import Console


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@target_options
@click.option(
    "--device", type=click.Choice(["meta", "cpu", "cuda"]), default="meta", show_default=True,
    help="meta runs no real compute and allocates nothing; cpu/cuda run the real forward.",
)  # fmt: skip
@click.option(
    "--mode", type=click.Choice(["eval", "train"]), default="eval", show_default=True,
    help="eval: inference under no_grad; train: training mode with autograd.",
)  # fmt: skip
@click.option(
    "--memory-for", type=click.Choice(["cuda", "cpu"]), default="cuda", show_default=True,
    help="On meta, the device whose attention kernels the memory figures model: "
    "scaled_dot_product_attention's fused kernels keep no seq x seq scores for backward "
    "(CUDA's nearly always; the CPU's only without attention dropout). cpu/cuda runs use "
    "their real kernels.",
)  # fmt: skip
@click.option("--depth", type=click.IntRange(min=0), help="Show layers down to this depth.")
@click.option(
    "--format", "fmt", type=click.Choice(["text", "json", "markdown", "csv"]), default="text",
    show_default=True,
)  # fmt: skip
@click.option(
    "--scaling", metavar="DIM=N1,N2,...",
    help="Measure FLOPs and activation memory at several sizes of a named input dim "
    "and fit the growth exponent, e.g. --scaling seq=128,256,512.",
)  # fmt: skip
@click.option(
    "--flops-convention", type=click.Choice(["full", "no-attention"]), default="full",
    show_default=True,
    help="full: every product, attention's QK^T and PV included; no-attention: without "
    "them, as fvcore, ptflops and timm's model cards count. The attention share is "
    "shown either way.",
)  # fmt: skip
@click.option(
    "--no-training", is_flag=True,
    help="Skip the training-mode pass (backward FLOPs and training memory).",
)  # fmt: skip
@output_options()
def inspect(
    target: TargetRequest,
    device: str,
    mode: str,
    memory_for: str,
    depth: int | None,
    fmt: str,
    scaling: str | None,
    flops_convention: str,
    no_training: bool,
    console: Console,
) -> None:
    """Measure a model: shapes, parameters, FLOPs and memory, layer by layer.

    \b
    TARGET is path/to/file.py:Name, package.module:Name, zoo:NAME, or a model
    named in [tool.torchwise.models.NAME] of the nearest pyproject.toml.
    \b
      torchwise inspect zoo:resnet50
      torchwise inspect model.py:Net --input 'f32[8,3,32,32]' --depth 2
      torchwise inspect zoo:gpt2 --input 'i64[batch=1,seq=128]<50257' --scaling seq=128,256,512
    """
    from torchwise.deps import require_device
    from torchwise.model.report import render, render_scaling
    from torchwise.model.scaling import check_scaling, parse_scaling
    from torchwise.model.scaling import scaling as run_scaling
    from torchwise.model.summary import summarize

    require_device(device)
    dimension = parse_scaling(scaling) if scaling else None
    # The model's own prints (a constructor announcing its size) go to stderr: stdout
    # carries only the report, so `--format json > file` stays JSON.
    with contextlib.redirect_stdout(sys.stderr):
        # Zoo models are built directly on the inspection device: meta costs no memory.
        resolved = target.resolve(device=device)
        if dimension is not None:
            check_scaling(resolved, dimension[0])
        for note in resolved.notes:
            console.note(f"note: {note}")
        if dimension is not None:
            result = run_scaling(
                resolved, dimension[0], dimension[1], device=device, mode=mode,
                flops_convention=flops_convention, memory_for=memory_for,
            )  # fmt: skip
            report = render_scaling(result, fmt)
        else:
            summary = summarize(
                resolved.model, resolved.args, resolved.kwargs, device=device, depth=depth,
                mode=mode, estimate_training=not no_training, name=resolved.name,
                flops_convention=flops_convention, memory_for=memory_for,
            )  # fmt: skip
            report = render(summary, fmt)
    console.emit(report)
