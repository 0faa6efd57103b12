"""``torchwise run SCRIPT.py``: run a training script for a few steps under the checks."""

from __future__ import annotations

import sys

import click

from torchwise.commands._common import output_options
from torchwise.console import Console
from torchwise.errors import ExitCode


@click.command(
    context_settings={"help_option_names": ["-h", "--help"]},
    epilog="\b\nEverything after -- goes to the script: torchwise run train.py -- --lr 0.1",
)
@click.argument("script", required=False)
@click.argument("script_args", nargs=-1, type=click.UNPROCESSED)
@click.option("-m", "module", metavar="MODULE", help="Run a module, as python -m MODULE would.")
@click.option(
    "--steps", type=click.IntRange(min=1), default=5, show_default=True,
    help="Optimizer steps per training pass (one DataLoader iteration).",
)  # fmt: skip
@click.option(
    "--epochs", type=click.IntRange(min=1), default=2, show_default=True,
    help="Training passes per training loader (two compare the epochs' orders).",
)  # fmt: skip
@click.option(
    "--eval-batches", type=click.IntRange(min=1), default=3, show_default=True,
    help="Batches per evaluation pass.",
)  # fmt: skip
@click.option(
    "--as-cuda", is_flag=True,
    help="Make the script believe CUDA is available and report the device errors it would "
    "hit on a GPU, on this CPU. The default when this machine has no GPU and the script "
    "uses CUDA where it is available.",
)  # fmt: skip
@click.option(
    "--cpu", is_flag=True,
    help="Run on this machine's CPU as it is, even when the script would use a GPU "
    "(no simulated GPU).",
)  # fmt: skip
@click.option(
    "--gpus", type=click.IntRange(min=1), default=None,
    help="With --as-cuda: how many GPUs torch.cuda.device_count() reports (default: one per "
    "rank), for scripts that spawn one process per GPU.",
)  # fmt: skip
@click.option(
    "--stand-ins/--no-stand-ins", default=True, show_default=True,
    help="Synthetic data in place of a dataset whose files are missing (torchvision's "
    "datasets, ImageFolder) and random weights in place of a pretrained download that fails; "
    "each is said in the report. --no-stand-ins runs on the real data and weights only.",
)  # fmt: skip
@click.option(
    "--nproc", type=click.IntRange(min=1), default=1, show_default=True,
    help="Run under torch.distributed.run with this many ranks (gloo on CPU). A script that "
    "starts its own ranks with mp.spawn needs none: each spawned process is checked.",
)  # fmt: skip
@click.option(
    "--timeout", type=click.FloatRange(min=0, min_open=True), default=900.0, show_default=True,
    help="Seconds before a run that does not end is stopped.",
)  # fmt: skip
@click.option(
    "--collective-timeout", type=click.FloatRange(min=0, min_open=True), default=30.0,
    show_default=True, help="Seconds a rank may wait in a collective before it is a finding.",
)  # fmt: skip
@click.option(
    "--format", "fmt", type=click.Choice(["text", "json", "sarif", "github"]), default="text",
    show_default=True,
)  # fmt: skip
@click.option("--exit-zero", is_flag=True, help="Exit 0 even when problems are found.")
@click.option("--explain", metavar="CODE", help="Print one check's documentation and exit.")
@click.option("--list-checks", is_flag=True, help="List every check and exit.")
@output_options()
def run(
    script: str | None,
    script_args: tuple[str, ...],
    module: str | None,
    steps: int,
    epochs: int,
    eval_batches: int,
    as_cuda: bool,
    cpu: bool,
    gpus: int | None,
    stand_ins: bool,
    nproc: int,
    timeout: float,
    collective_timeout: float,
    fmt: str,
    exit_zero: bool,
    explain: str | None,
    list_checks: bool,
    console: Console,
) -> None:
    """Run SCRIPT (or -m MODULE) for a few steps per phase and report what it really does.

    \b
    The script runs unmodified, as `python SCRIPT ARGS` would (same working
    directory, data and sys.argv): this executes your code. It stops after
    --steps optimizer steps per training pass and --eval-batches batches per
    evaluation pass, then reports training-loop, evaluation, data, device,
    reproducibility and distributed findings at your file:line.
    Exit codes: 0 no warning or error, 1 problems found, 2 bad input.
    \b
      torchwise run train.py
      torchwise run train.py --as-cuda --format json -o run.json -- --epochs 1
      torchwise run -m project.train --nproc 2
      torchwise run spawn_train.py --as-cuda --gpus 2
      torchwise run --explain TWR101
    """
    from torchwise.run import catalog

    if explain is not None:
        console.emit(catalog.explain(explain))
        return
    if list_checks:
        console.emit(catalog.table())
        return
    if module is not None and script is not None:
        script_args = (script, *script_args)  # -m MODULE ARGS: the first word is an argument
        script = None
    if script is None and module is None:
        raise click.UsageError("give a script to run (or -m MODULE)")

    from torchwise.deps import require_torch
    from torchwise.run import RunOptions, check_target, run_script, simulates_gpu_by_default

    if as_cuda and cpu:
        raise click.UsageError("--as-cuda and --cpu contradict each other: give one")
    require_torch("torchwise run")
    target = check_target(script, module)
    if not as_cuda and not cpu and simulates_gpu_by_default(target):
        as_cuda = True
        console.note(
            "this machine has no GPU and the script uses CUDA where it is available: it runs "
            "as on a GPU (a simulated one; --cpu runs it on the CPU as is)"
        )
    if gpus is not None and not as_cuda:
        raise click.UsageError("--gpus sets the simulated GPUs: not with --cpu")
    options = RunOptions(
        steps=steps,
        epochs=epochs,
        eval_batches=eval_batches,
        as_cuda=as_cuda,
        gpus=gpus or 0,
        stand_ins=stand_ins,
        nproc=nproc,
        timeout=timeout,
        collective_timeout=collective_timeout,
        script_output="capture" if console.quiet else "stderr",
    )
    what = f"-m {module}" if module else script
    console.note(
        f"running {what} ({steps} steps per training pass, {eval_batches} batches per "
        f"evaluation pass{', simulated GPU' if as_cuda else ''}"
        f"{f', {nproc} ranks' if nproc > 1 else ''}): this executes your script"
    )
    report = run_script(script, script_args, module=module, options=options)
    console.emit(report.render(fmt, color=console.color_stdout and fmt == "text"))
    sys.exit(ExitCode.OK if exit_zero else report.exit_code)
