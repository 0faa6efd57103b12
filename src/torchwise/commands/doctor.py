"""``torchwise doctor TARGET``: run health checks on a model and one batch."""

from __future__ import annotations

import click

from torchwise.commands._target import TargetArgs, target_options

#: Named dims resized when the batch comes from a target's default inputs: doctor
#: needs more than one sample (batch-independence, BatchNorm in train mode) and a
#: short sequence keeps the overfit loop fast.
_DOCTOR_SIZES = {"batch": 4, "seq": 32}


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@target_options
@click.option(
    "--target-spec", metavar="SPEC",
    help="Labels for the loss, e.g. 'i64[8]<10' (class indices) or 'f32[8,1]'. "
    "Default: built from the output's shape.",
)  # fmt: skip
@click.option(
    "--loss", default="auto", show_default=True, metavar="auto|ce|mse|bce|module:fn",
    help="The loss to train and measure with; auto picks from the output (and target) shape.",
)  # fmt: skip
@click.option(
    "--causal", "causal_dim", type=int, metavar="DIM",
    help="Check that position t along DIM (e.g. 1 for (B, T) tokens) ignores later positions.",
)  # fmt: skip
@click.option("--checks", "check_ids", metavar="ID,ID", help="Run only these checks.")
@click.option(
    "--format", "fmt", type=click.Choice(["text", "json", "markdown"]), default="text",
    show_default=True,
)  # fmt: skip
@click.option(
    "--overfit-steps",
    type=click.IntRange(min=1),
    default=60,
    show_default=True,
    help="Step budget of overfit-batch.",
)
@click.option(
    "--overfit-lr",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="Adam learning rate of overfit-batch (default: 1e-2 below 2M parameters, else 1e-3).",
)
@click.option(
    "--overfit-budget",
    type=click.FloatRange(min=0, min_open=True),
    default=30.0,
    show_default=True,
    help="Seconds overfit-batch may run before it stops and warns.",
)
@click.option(
    "--export-budget",
    type=click.FloatRange(min=0, min_open=True),
    default=60.0,
    show_default=True,
    help="Seconds for torch.export plus the graph-break count.",
)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed for inputs and labels.")
@click.option("--device", type=click.Choice(["cpu", "cuda"]), default="cpu", show_default=True)
@click.pass_context
def doctor(
    click_ctx: click.Context,
    target: TargetArgs,
    target_spec: str | None,
    loss: str,
    causal_dim: int | None,
    check_ids: str | None,
    fmt: str,
    overfit_steps: int,
    overfit_lr: float | None,
    overfit_budget: float,
    export_budget: float,
    seed: int,
    device: str,
) -> None:
    """Run a model on a batch and check what an expert would check by hand.

    \b
    TARGET is path/to/file.py:Name, package.module:Name, zoo:NAME, or a model
    named in [tool.torchwise.models.NAME]. Exit status 1 when a check fails.
    \b
      torchwise doctor zoo:resnet18 --input 'f32[8,3,64,64]'
      torchwise doctor model.py:GPT --input 'i64[4,64]<512' --causal 1
      torchwise doctor model.py:Net -i 'f32[8,20]' --loss mse --checks grad-flow,nan-inf
    """
    from torchwise.doctor import check
    from torchwise.errors import ExitCode
    from torchwise.target import make_inputs, parse_input_spec

    selected = check_ids.split(",") if check_ids else None
    resolved = target.resolve(device=device)
    args, kwargs = resolved.args, resolved.kwargs
    if not target.inputs:
        named = {n for spec in resolved.input_specs for n in spec.dim_names()}
        sizes = {k: v for k, v in _DOCTOR_SIZES.items() if k in named}
        if sizes:
            args, kwargs = resolved.inputs_at(device=device, sizes=sizes)
    labels = None
    if target_spec:
        (labels,), _ = make_inputs([parse_input_spec(target_spec)], device=device, seed=seed + 1)
    report = check(
        resolved.model,
        args,
        selected,
        kwargs=kwargs,
        loss=loss,
        target=labels,
        causal_dim=causal_dim,
        overfit_steps=overfit_steps,
        overfit_lr=overfit_lr,
        overfit_budget_s=overfit_budget,
        export_budget_s=export_budget,
        seed=seed,
        name=resolved.name,
    )
    click.echo(report.render(fmt))
    if not report.ok:
        click_ctx.exit(ExitCode.FINDINGS)
