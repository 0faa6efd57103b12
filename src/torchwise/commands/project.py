"""``torchwise project [PATH]``: project knowledge and an audit of everything torchwise checks."""

from __future__ import annotations

from pathlib import Path

import click

from torchwise.commands._common import output_options
from torchwise.console import Console


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("path", type=click.Path(path_type=Path), default=Path("."), required=False)
@click.option(
    "--format", "fmt", type=click.Choice(["text", "json", "markdown", "html"]), default="text",
    show_default=True, help="html is one self-contained page (no script, nothing fetched).",
)  # fmt: skip
@click.option(
    "--no-import", is_flag=True,
    help="Static audit only: never import the project's code (no inspect, no doctor).",
)  # fmt: skip
@click.option(
    "--doctor", "doctor", default="quick", show_default=True, metavar="quick|full|off|IDS",
    help="Health checks per model: quick skips export, bf16 and bit-exactness; or check ids.",
)  # fmt: skip
@click.option(
    "--no-run", is_flag=True,
    help="Do not run the project's training command for a few steps under torchwise run.",
)  # fmt: skip
@click.option(
    "--run-timeout", type=click.FloatRange(min=1), default=300.0, show_default=True,
    help="Seconds the training command may run (a few steps, one epoch) before it is stopped.",
)  # fmt: skip
@click.option("--no-review", is_flag=True, help="Skip the code review.")
@click.option("--no-checkpoints", is_flag=True, help="Skip scanning checkpoint files.")
@click.option(
    "--max-models", type=click.IntRange(min=0), default=8, show_default=True,
    help="Build and measure at most this many models.",
)  # fmt: skip
@click.option(
    "--model-timeout", type=click.FloatRange(min=1), default=300.0, show_default=True,
    help="Seconds one model may take to build, inspect and doctor before it is stopped.",
)  # fmt: skip
@output_options()
def project(
    path: Path,
    fmt: str,
    no_import: bool,
    doctor: str,
    no_run: bool,
    run_timeout: float,
    no_review: bool,
    no_checkpoints: bool,
    max_models: int,
    model_timeout: float,
    console: Console,
) -> None:
    """Learn a PyTorch project and audit it: stack, layout, commands, models, findings.

    \b
    Reads the project (dependencies, layout, train/test/export/profile commands,
    every nn.Module), reviews its code, scans its checkpoints, runs its training
    command for a few steps under `torchwise run` (with stand-ins for missing
    data, weights and GPUs), and builds its models in a separate process to
    inspect and doctor them; then merges every finding into one report:
    critical issues, performance, best practices, strengths, tests to add.
    Running the command and building a model execute the project's code;
    --no-run skips the first, --no-import never runs the project's code.
    Nothing in the project is written.
    \b
      torchwise project                                  # the current directory
      torchwise project examples/cifar_project --format html -o report.html
      torchwise project . --no-import --format json      # static facts for tools
    """
    from torchwise.deps import require

    require("pydantic", purpose="torchwise project")
    if fmt == "html":
        require("jinja2", purpose="torchwise project --format html")
    from torchwise.errors import TorchwiseError
    from torchwise.project import AuditOptions, audit_project, render

    if not path.is_dir():
        raise TorchwiseError(
            f"{path} is not a directory", hint="give the project's root, e.g. torchwise project ."
        )
    options = AuditOptions(
        import_models=not no_import,
        review=not no_review,
        checkpoints=not no_checkpoints,
        doctor=doctor,
        run_training=not no_run,
        run_timeout=run_timeout,
        max_models=max_models,
        model_timeout=model_timeout,
    )
    with console.progress(None, "auditing") as bar:
        report = audit_project(path, options, step=lambda label: bar.advance(0, label=label))
    console.emit(render(report, fmt, console.paint if fmt == "text" else None))
