"""``torchwise doctor TARGET``: run health checks on a model and one batch."""

from __future__ import annotations

import click

from torchwise.commands._common import output_options
from torchwise.commands._target import target_options
from torchwise.console import Console
from torchwise.doctor.options import DEFAULT_OVERFIT_STEPS
from torchwise.doctor.registry import CHECKS
from torchwise.target.request import TargetRequest

_CHECK_LIST = "\n".join(f"  {entry.id:<20} {entry.title}" for entry in CHECKS)


@click.command(
    context_settings={"help_option_names": ["-h", "--help"]},
    epilog=f"\b\nChecks (--checks ID,ID):\n{_CHECK_LIST}",
)
@target_options
@click.option(
    "--target-spec", metavar="SPEC",
    help="Labels for the loss, e.g. 'i64[8]<10' (class indices) or 'f32[8,1]'. "
    "Default: built from the output's shape.",
)  # fmt: skip
@click.option(
    "--loss", default="auto", show_default=True, metavar="auto|ce|mse|bce|module:fn",
    help="The loss to train and measure with; auto uses the model's own loss when forward "
    "takes labels=/targets=, else picks from the output (and target) shape.",
)  # fmt: skip
@click.option(
    "--causal", "causal_dim", type=click.IntRange(min=0), metavar="DIM",
    help="Check that position t along DIM (1 for (B, T) tokens, 0 time-first) ignores later "
    "positions.",
)  # fmt: skip
@click.option("--checks", "check_ids", metavar="ID,ID", help="Run only these checks (below).")
@click.option(
    "--format", "fmt", type=click.Choice(["text", "json", "markdown"]), default="text",
    show_default=True,
)  # fmt: skip
@click.option(
    "--overfit-steps", type=click.IntRange(min=1), default=DEFAULT_OVERFIT_STEPS,
    show_default=True, help="Step budget of overfit-batch (it stops early at its goal).",
)  # fmt: skip
@click.option(
    "--overfit-lr", type=click.FloatRange(min=0, min_open=True), default=None,
    help="Adam learning rate of overfit-batch (default: 1e-2 below 2M parameters, else 1e-3).",
)  # fmt: skip
@click.option(
    "--seed", type=int, default=0, show_default=True,
    help="One seed for everything random: the model's initial weights, the inputs, the "
    "labels and every draw a check makes. The same seed gives the same verdicts.",
)  # fmt: skip
@click.option("--device", type=click.Choice(["cpu", "cuda"]), default="cpu", show_default=True)
@output_options()
@click.pass_context
def doctor(
    click_ctx: click.Context,
    target: TargetRequest,
    target_spec: str | None,
    loss: str,
    causal_dim: int | None,
    check_ids: str | None,
    fmt: str,
    overfit_steps: int,
    overfit_lr: float | None,
    seed: int,
    device: str,
    console: Console,
) -> None:
    """Run a model on a batch and check what an expert would check by hand.

    \b
    TARGET is path/to/file.py:Name, package.module:Name, file.py --build EXPR,
    hf:NAME, timm:NAME, zoo:NAME, or a model named in [tool.torchwise.models.NAME].
    Exit status 1 when a check fails, 130 when interrupted (the finished checks
    are reported).
    \b
      torchwise doctor zoo:resnet18 --input 'f32[8,3,64,64]'
      torchwise doctor model.py:GPT --build 'GPT(GPTConfig(n_layer=2))' \\
          --input 'i64[4,64]<50304' --causal 1
      torchwise doctor hf:LlamaForCausalLM --init-kwargs '{"num_hidden_layers": 2}' --causal 1
      torchwise doctor lstm.py:RNNModel -i 'i64[35,4]<100, (f32[2,4,64], f32[2,4,64])' \\
          --batch-dim 1
    """
    import sys

    from torchwise.deps import require_device
    from torchwise.doctor.diagnose import prepare_diagnosis
    from torchwise.doctor.report import CheckResult, line_for
    from torchwise.errors import ExitCode

    require_device(device)
    diagnosis = prepare_diagnosis(
        target,
        check_ids.split(",") if check_ids else None,
        device=device,
        seed=seed,
        loss=loss,
        labels=target_spec,
        causal_dim=causal_dim,
        overfit_steps=overfit_steps,
        overfit_lr=overfit_lr,
    )  # every option checked: an error is the one line, before any note
    for note in diagnosis.resolved.notes:
        console.note(f"note: {note}")
    # On a terminal the report follows on the same screen: show each finished check in
    # the bar only, so the table is printed once.
    rows_above_bar = console.output is not None or not sys.stdout.isatty()
    with console.progress(diagnosis.total, f"doctor {diagnosis.resolved.name}") as bar:

        def finished(result: CheckResult) -> None:
            if rows_above_bar:
                bar.log(line_for(result))
            bar.advance(label=f"{result.id} {result.status.value}")

        report = diagnosis.run(on_result=finished)
    console.emit(report.render(fmt))
    if report.interrupted:
        click_ctx.exit(ExitCode.INTERRUPTED)
    if not report.ok:
        click_ctx.exit(ExitCode.FINDINGS)
