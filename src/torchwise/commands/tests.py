"""``torchwise tests TARGET``: write a pytest module for a model, from measurements of it."""

from __future__ import annotations

from pathlib import Path

import click

from torchwise.commands._common import output_options
from torchwise.commands._target import target_options
from torchwise.console import Console
from torchwise.target.request import TargetRequest


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@target_options
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write the module here (default: print it; its imports assume "
    "<tests dir>/test_<model>.py).",
)
@click.option("--force", is_flag=True, help="Replace an existing --output file.")
@click.option(
    "--check",
    is_flag=True,
    help="Write nothing; exit 1 with a diff when --output differs from a fresh generation "
    "(a CI gate).",
)
@click.option(
    "--checks",
    "check_ids",
    metavar="ID,ID",
    help="Consider only these doctor checks (default: all that apply and pass now).",
)
@click.option(
    "--causal",
    "causal_dim",
    type=click.IntRange(min=0),
    metavar="DIM",
    help="The model is causal along this input dim (default: measured on sequence inputs).",
)
@click.option(
    "--loss",
    default="auto",
    show_default=True,
    metavar="auto|ce|mse|bce|module:fn",
    help="The loss doctor's checks train and measure with.",
)
@output_options(report=False)
def tests(
    target: TargetRequest,
    output: Path | None,
    force: bool,
    check: bool,
    check_ids: str | None,
    causal_dim: int | None,
    loss: str,
    console: Console,
) -> None:
    """Write a pytest module for a model: its shape contract, health and round trips.

    \b
    The module states the shape contract with symbolic dims (measured by torchwise
    doc), eval determinism, a state_dict round trip (weights_only=True), float64,
    bfloat16, CUDA and MPS moves, and the doctor checks that apply, with budgets in
    steps. Every test runs once before it is written: the file passes on the model
    as it is, and fails when a change breaks what it measured.
    \b
      torchwise tests model.py:Net --input 'f32[batch=8,3,32,32]' -o tests/test_net.py
      torchwise tests hf:GPT2LMHeadModel --init-kwargs '{"n_layer": 2}' -o tests/test_gpt2.py
      torchwise tests cifarnet -o tests/test_cifarnet.py --check     # CI: exit 1 if stale
    """
    from torchwise.deps import require
    from torchwise.errors import ExitCode, TorchwiseError
    from torchwise.testgen import write_tests

    # The file is pytest's and torchwise runs it once before writing it: without pytest
    # that run would fail at `import pytest` and read as a failure of the model.
    require("pytest", purpose="torchwise tests (it writes and runs a pytest module)")
    if target.build_on == "meta":
        raise TorchwiseError("tests run the model: --build-on meta does not apply")
    if target.inputs_from:
        raise click.UsageError(
            "--inputs-from is not supported by tests yet: the generated file builds its inputs "
            "from specs; describe them with --input"
        )
    if target.no_batch:
        raise click.UsageError(
            "--batch-dim none is not supported by tests yet: the generated shape and doctor "
            "tests need a batch dim"
        )
    if check and output is None:
        raise click.UsageError("--check needs -o/--output, the file to compare with")
    if check and force:
        raise click.UsageError("--check writes nothing; drop --force")
    result = write_tests(
        target,
        output=output,
        force=force,
        check=check,
        checks=check_ids.split(",") if check_ids else None,
        causal_dim=causal_dim,
        loss=loss,
        on_start=console.note,
    )
    for warning in result.warnings:
        console.warn(warning)
    if result.status == "generated":
        click.echo(result.text, nl=False)
    _summarize(result, console)
    if result.status in ("stale", "missing"):
        if result.diff:
            click.echo(result.diff, nl=False)
        raise click.exceptions.Exit(ExitCode.FINDINGS)


def _summarize(result: object, console: Console) -> None:
    from torchwise.testgen import GeneratedTests

    assert isinstance(result, GeneratedTests)
    shown = _shown(result.path)
    verdict = {
        "generated": f"tests for {result.title} (meant for {shown})",
        "written": f"wrote {shown}: tests for {result.title}",
        "fresh": f"{shown} is up to date",
        "stale": f"{shown} is stale: regenerate it with\n  {result.command}",
        "missing": f"{shown} does not exist: generate it with\n  {result.command}",
    }[result.status]
    if result.status in ("stale", "missing"):
        click.echo(verdict, err=True)
    else:
        console.note(verdict)
    if result.status in ("fresh", "stale", "missing"):
        return
    for line in result.summary():
        console.note(line if line.startswith("note: ") else f"  {line}")
    console.note(f"the tests ran in {result.verified_seconds:.1f} s here (without start-up)")


def _shown(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)
