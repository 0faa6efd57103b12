"""``torchwise review``: parse options, call :mod:`torchwise.review`, print."""

from __future__ import annotations

import difflib
import os
import sys
from pathlib import Path

import click

from torchwise.errors import ExitCode


def _codes(values: tuple[str, ...]) -> list[str]:
    """Accept ``--select TW1,TW3`` and ``--select TW1 --select TW3``."""
    return [code.strip() for value in values for code in value.split(",") if code.strip()]


@click.command()
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json", "sarif", "github", "markdown"]),
    default="text",
    show_default=True,
    help="Output format.",
)
@click.option("-o", "--output", type=click.Path(path_type=Path), help="Write the report to a file.")
@click.option(
    "--select", multiple=True, help="Rule codes or prefixes to enable (replaces the default set)."
)
@click.option("--extend-select", multiple=True, help="Codes or prefixes to enable in addition.")
@click.option("--ignore", multiple=True, help="Codes or prefixes to disable.")
@click.option("--fix", is_flag=True, help="Apply safe fixes in place.")
@click.option("--unsafe-fixes", is_flag=True, help="Also apply fixes that need a human glance.")
@click.option("--diff", is_flag=True, help="Print the fixes as a diff; write nothing.")
@click.option("--exit-zero", is_flag=True, help="Exit 0 even when problems are found.")
@click.option(
    "-j", "--jobs", type=click.IntRange(min=1), help="Worker processes [default: all cores]."
)
@click.option("--no-cache", is_flag=True, help="Analyse every file, ignoring .torchwise_cache/.")
@click.option(
    "--config",
    "config_path",
    type=click.Path(path_type=Path, dir_okay=False),
    help="pyproject.toml to read [tool.torchwise] from.",
)
@click.option("--min-torch-version", help="Oldest torch the code must support, e.g. 2.4.")
@click.option(
    "--color/--no-color", default=None, help="Colour the output [default: when a terminal]."
)
def review(
    paths: tuple[Path, ...],
    fmt: str,
    output: Path | None,
    select: tuple[str, ...],
    extend_select: tuple[str, ...],
    ignore: tuple[str, ...],
    fix: bool,
    unsafe_fixes: bool,
    diff: bool,
    exit_zero: bool,
    jobs: int | None,
    no_cache: bool,
    config_path: Path | None,
    min_torch_version: str | None,
    color: bool | None,
) -> None:
    """Review PyTorch code in PATHS (files or directories; default: .).

    \b
    Exit codes: 0 no problems, 1 problems found, 2 error.
    Examples:
      torchwise review src/ --format sarif -o review.sarif
      torchwise review train.py --fix
      torchwise review . --select TW1 --ignore TW106
    """
    from torchwise.config import load_config
    from torchwise.review import Applicability, FixMode, build_settings, review_paths
    from torchwise.review.output import RenderOptions, render
    from torchwise.review.runner import CACHE_DIR_NAME

    targets = list(paths) or [Path(".")]
    config = load_config(targets[0], path=config_path)
    settings = build_settings(
        config,
        select=_codes(select) or None,
        extend_select=_codes(extend_select),
        ignore=_codes(ignore),
        min_torch_version=min_torch_version,
    )
    fix_mode = None
    if fix or diff or unsafe_fixes:
        minimum = Applicability.UNSAFE if unsafe_fixes else Applicability.SAFE
        fix_mode = FixMode(minimum=minimum, write=not diff)
    cache_dir = None if no_cache else (config.root or Path.cwd()) / CACHE_DIR_NAME
    report = review_paths(targets, settings, fix=fix_mode, jobs=jobs, cache_dir=cache_dir)

    if diff:
        changed = [file for file in report.files if file.fixed is not None]
        for file in changed:
            assert file.original is not None and file.fixed is not None
            click.echo(
                "".join(
                    difflib.unified_diff(
                        file.original.splitlines(keepends=True),
                        file.fixed.splitlines(keepends=True),
                        fromfile=f"a/{file.path}",
                        tofile=f"b/{file.path}",
                    )
                ),
                nl=False,
            )
        fixes = sum(file.fixes_applied for file in changed)
        click.echo(
            f"Would apply {fixes} fix{'es' * (fixes != 1)} to {len(changed)} file(s).", err=True
        )
        sys.exit(ExitCode.FINDINGS if changed and not exit_zero else ExitCode.OK)

    use_color = (
        color
        if color is not None
        else (output is None and sys.stdout.isatty() and "NO_COLOR" not in os.environ)
    )
    text = render(report, fmt, RenderOptions(color=bool(use_color and fmt == "text")))
    if output is not None:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(text + "\n", encoding="utf-8")
    else:
        # --color must survive a pipe (click strips ANSI codes when not a terminal).
        click.echo(text, color=True if use_color else None)
    found = bool(report.findings)
    sys.exit(ExitCode.FINDINGS if found and not exit_zero else ExitCode.OK)
