"""``torchwise tune TARGET``: measured performance advice for a training step."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import click

from torchwise.commands._common import output_options
from torchwise.commands._target import target_options
from torchwise.console import Console
from torchwise.errors import OutputError
from torchwise.target.request import TargetRequest

_SIZE_UNITS = {"k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}


def _parse_size(text: str | None) -> int | None:
    """``8G``, ``512M``, ``1.5GiB`` or a byte count -> bytes."""
    if text is None:
        return None
    raw = text.strip().lower().removesuffix("ib").removesuffix("b")
    factor = _SIZE_UNITS.get(raw[-1:], 1)
    number = raw[:-1] if raw[-1:] in _SIZE_UNITS else raw
    try:
        value = float(number) * factor
    except ValueError:
        raise click.BadParameter(f"{text!r} is not a size like 8G or 512M") from None
    if value <= 0:
        raise click.BadParameter("must be positive")
    return int(value)


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@target_options
@click.option(
    "--loss",
    default="auto",
    show_default=True,
    metavar="auto|ce|mse|bce|module:fn",
    help="The loss of the step; auto picks from the output (and target) shape.",
)
@click.option(
    "--optimizer",
    default="adamw",
    show_default=True,
    metavar="NAME[:k=v,...]",
    help="A torch.optim class and its arguments, e.g. 'sgd:lr=0.1,momentum=0.9'.",
)
@click.option(
    "--loader",
    metavar="FILE.py:FUNCTION",
    help="A function returning your DataLoader: batches come from it and its "
    "num_workers/pin_memory/prefetch settings are tuned too.",
)
@click.option("--device", type=click.Choice(["cpu", "cuda"]), default="cpu", show_default=True)
@click.option(
    "--budget",
    type=click.FloatRange(min=1),
    default=60.0,
    show_default=True,
    metavar="SECONDS",
    help="Time for the timing sessions, the DataLoader scan's included (checks, profile and "
    "finders come on top).",
)
@click.option("--knobs", metavar="ID,ID", help="Try only these knobs (see --list-knobs).")
@click.option("--skip", metavar="ID,ID", help="Do not try these knobs.")
@click.option(
    "--list-knobs",
    is_flag=True,
    is_eager=True,
    expose_value=False,
    callback=lambda ctx, _param, value: _list_knobs(ctx) if value else None,
    help="List the knobs and the devices they apply to, then exit.",
)
@click.option(
    "--compile",
    "use_compile",
    is_flag=True,
    help="Also try torch.compile (needs a C++ compiler on CPU; a first compile can take minutes).",
)
@click.option("--compile-backend", default="inductor", show_default=True, metavar="NAME")
@click.option(
    "--compile-budget",
    type=click.FloatRange(min=1),
    default=300.0,
    show_default=True,
    metavar="SECONDS",
    help="Give up on torch.compile's first step after this long.",
)
@click.option("--find-batch-size", is_flag=True, help="Search the largest batch that fits.")
@click.option("--max-batch-size", type=click.IntRange(min=1), help="Cap of the batch-size search.")
@click.option(
    "--memory-budget",
    metavar="SIZE",
    help="Memory the batch-size search may use, e.g. 8G (default: free GPU memory; half of "
    "MemAvailable on CPU).",
)
@click.option(
    "--headroom",
    type=click.FloatRange(0, 0.9),
    default=0.2,
    show_default=True,
    help="Fraction of the memory budget the picked batch size must leave free.",
)
@click.option("--find-lr", is_flag=True, help="Run a learning-rate range test.")
@click.option(
    "--lr-range",
    nargs=2,
    type=click.FloatRange(min=0, min_open=True),
    default=(1e-7, 10.0),
    show_default=True,
    metavar="MIN MAX",
)
@click.option(
    "--train-script",
    metavar="FILE.py",
    help="Your training script: recommendations become diffs against its loop "
    "(otherwise they are patterns against a canonical loop).",
)
@click.option("--no-profile", is_flag=True, help="Skip the baseline profile.")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json", "markdown", "html"]),
    default="text",
    show_default=True,
)
@click.option("--seed", type=int, default=0, show_default=True)
@output_options()
def tune(
    target: TargetRequest,
    loss: str,
    optimizer: str,
    loader: str | None,
    device: str,
    budget: float,
    knobs: str | None,
    skip: str | None,
    use_compile: bool,
    compile_backend: str,
    compile_budget: float,
    find_batch_size: bool,
    max_batch_size: int | None,
    memory_budget: str | None,
    headroom: float,
    find_lr: bool,
    lr_range: tuple[float, float],
    train_script: str | None,
    no_profile: bool,
    fmt: str,
    seed: int,
    console: Console,
) -> None:
    """Measure a training step and report what would make it faster, with evidence.

    \b
    Every knob (channels_last, bf16 autocast, fused optimizers, thread count,
    torch.compile, DataLoader workers, and on CUDA fp16+GradScaler, TF32,
    cudnn.benchmark, pinned memory, CUDA graphs) runs on a private copy, is
    checked for correctness, and is timed against the baseline in interleaved
    rounds; a verdict needs a confidence interval, not a single ratio.
    \b
      torchwise tune model.py:Net --input 'f32[32,3,32,32]'
      torchwise tune zoo:resnet18 --input 'f32[16,3,64,64]' --budget 120 --format html -o tune.html
      torchwise tune model.py:GPT -i 'i64[8,128]<50257' --optimizer 'adamw:lr=3e-4' --find-lr
      torchwise tune model.py:MLP -i 'f32[64,512]' --loader data.py:make_loader
    """
    if fmt == "html" and console.output is None:
        console.note("note: --format html writes a whole page; use -o report.html to save it")
    _check_output(console)
    from torchwise.deps import require_torch

    require_torch("torchwise tune")
    from torchwise.tune import TuneOptions
    from torchwise.tune import tune as run_tune
    from torchwise.tune.options import validate_options

    options = TuneOptions(
        loss=loss,
        optimizer=optimizer,
        device=device,
        budget_s=budget,
        knobs=knobs.split(",") if knobs else None,
        skip=tuple(skip.split(",")) if skip else (),
        compile=use_compile,
        compile_backend=compile_backend,
        compile_budget_s=compile_budget,
        profile=not no_profile,
        find_batch_size=find_batch_size,
        max_batch_size=max_batch_size,
        memory_budget=_parse_size(memory_budget),
        headroom=headroom,
        find_lr=find_lr,
        lr_range=lr_range,
        seed=seed,
        train_script=train_script,
    )
    validate_options(options)  # every option, before the model is even built
    # Built on the CPU: tune copies the model to the device for every trial.
    resolved = target.resolve(device="cpu")
    for note in resolved.notes:
        console.note(f"note: {note}")
    options = dataclasses.replace(options, batch_dim=resolved.batch_dim)
    with console.progress(None, "tuning") as bar:
        # On a terminal the stage being measured is the spinner's detail; otherwise
        # each stage is a status line (hidden by --quiet).
        spinner = console.show_progress()

        def notify(line: str) -> None:
            if spinner:
                bar.advance(0, label=line.strip())
            else:
                console.note(line)

        report = run_tune(
            resolved.model,
            resolved.args,
            kwargs=resolved.kwargs,
            loader=loader,
            options=options,
            name=resolved.name,
            notify=notify,
        )
    console.emit(report.render(fmt))


def _list_knobs(ctx: click.Context) -> None:
    from torchwise.tune.knobs import knob_table

    click.echo(knob_table())
    ctx.exit(0)


def _check_output(console: Console) -> None:
    """``-o`` must name a file that can be written, checked before minutes of measuring."""
    path = console.output
    if path is None:
        return
    target = Path(path)
    if target.is_dir():
        raise OutputError(f"-o {target}: is a directory", hint="name a file, e.g. -o tune.txt")
    parent = target.parent if str(target.parent) else Path(".")
    if not parent.is_dir():
        raise OutputError(f"-o {target}: the directory {parent} does not exist")
    if not os.access(parent, os.W_OK) or (target.exists() and not os.access(target, os.W_OK)):
        raise OutputError(f"-o {target}: cannot write there (permission denied)")
