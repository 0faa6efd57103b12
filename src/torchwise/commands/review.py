"""``torchwise review``: parse options, call :mod:`torchwise.review`, print."""

from __future__ import annotations

import difflib
import functools
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from torchwise.commands._common import output_options
from torchwise.console import Console
from torchwise.errors import ExitCode, TorchwiseError

if TYPE_CHECKING:
    from torchwise.review import FixMode, ReviewReport, ReviewSettings

#: Below this many files a progress bar would only flicker.
_PROGRESS_FROM = 20


def _codes(values: tuple[str, ...]) -> list[str]:
    """Accept ``--select TW1,TW3`` and ``--select TW1 --select TW3``."""
    return [code.strip() for value in values for code in value.split(",") if code.strip()]


@click.command()
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path, allow_dash=True))
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json", "sarif", "github", "markdown"]),
    default="text",
    show_default=True,
    help="Output format.",
)
@click.option(
    "--select", multiple=True, help="Rule codes or prefixes to enable (replaces the default set)."
)
@click.option("--extend-select", multiple=True, help="Codes or prefixes to enable in addition.")
@click.option("--ignore", multiple=True, help="Codes or prefixes to disable.")
@click.option("--fix", is_flag=True, help="Apply safe fixes in place (with -: print the code).")
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
    "--stdin-filename",
    type=click.Path(path_type=Path),
    help="With PATH '-': the file the code on stdin stands for (paths, config, imports).",
)
@click.option(
    "--force-exclude",
    is_flag=True,
    help="Apply `exclude` to files named on the command line too (for pre-commit hooks).",
)
@output_options()
def review(
    paths: tuple[Path, ...],
    fmt: str,
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
    stdin_filename: Path | None,
    force_exclude: bool,
    console: Console,
) -> None:
    """Review PyTorch code in PATHS (files or directories; default: .; - for stdin).

    \b
    Exit codes: 0 no problems, 1 problems found (with --diff: something to fix),
    2 error (a missing path, a bad option or config, no Python files).
    -q prints the findings and nothing else (no summary, no notes).
    Examples:
      torchwise review src/ --format sarif -o review.sarif
      torchwise review train.py --fix
      torchwise review . --select TW1 --ignore TW106
      cat train.py | torchwise review - --stdin-filename train.py
    """
    from torchwise.config import load_config
    from torchwise.review import Applicability, FixMode, build_settings, review_paths
    from torchwise.review.runner import CACHE_DIR_NAME, select_files

    from_stdin = Path("-") in paths
    if from_stdin and len(paths) > 1:
        raise TorchwiseError("'-' (stdin) cannot be combined with other paths")
    if stdin_filename is not None and not from_stdin:
        raise TorchwiseError("--stdin-filename only applies to PATH '-'")
    anchor = (stdin_filename or Path("stdin.py")) if from_stdin else None
    targets = list(paths) or [Path(".")]
    config = load_config(anchor or targets[0], path=config_path)
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

    if anchor is not None:
        _review_stdin(anchor, settings, fix_mode, fmt, diff, exit_zero, force_exclude, console)
        return

    files, excluded = select_files(targets, settings, force_exclude)
    _check_readable(targets)
    for path in excluded:
        console.note(f"{path}: excluded by `exclude` in [tool.torchwise] (--force-exclude)")
    if not files:
        if excluded:
            sys.exit(ExitCode.OK)  # a hook passed only excluded files: nothing to do
        names = ", ".join(str(path) for path in targets)
        raise TorchwiseError(f"no Python files found in {names}", hint="review .py, .pyi or .ipynb")
    cache_dir = None if no_cache else (config.root or Path.cwd()) / CACHE_DIR_NAME
    run = functools.partial(
        review_paths,
        files,
        settings,
        fix=fix_mode,
        jobs=jobs,
        cache_dir=cache_dir,
        with_index=fmt == "markdown",  # its testing advice names the project's models
    )
    if len(files) < _PROGRESS_FROM:
        report = run()
    else:
        with console.progress(len(files), "Reviewing") as bar:
            report = run(progress=bar.advance)
    if diff:
        _print_diff(report, console)
        changed = [file for file in report.files if file.fixed is not None]
        sys.exit(ExitCode.FINDINGS if changed and not exit_zero else ExitCode.OK)
    _print_report(report, fmt, console, _configured_models(config))
    sys.exit(ExitCode.FINDINGS if report.findings and not exit_zero else ExitCode.OK)


def _check_readable(paths: list[Path]) -> None:
    """A file named on the command line that cannot be read is an error, before any work.

    (A file found by walking a directory that cannot be read is a TW000 finding and the
    review goes on, as ruff reports E902.)
    """
    for path in paths:
        if path.is_file():
            try:
                with path.open("rb") as handle:
                    handle.read(1)
            except OSError as exc:
                raise TorchwiseError(f"cannot read {path}: {exc.strerror or exc}") from None


def _configured_models(config: object) -> tuple[tuple[str, str], ...]:
    """``[tool.torchwise.models]`` as (how to name it on the command line, its target)."""
    from torchwise.config import ToolConfig

    assert isinstance(config, ToolConfig)
    models = config.get("models") or {}
    root = config.root
    where = ""
    if root is not None and root.resolve() != Path.cwd().resolve():
        where = f" --config {os.path.relpath(root)}"
    return tuple(
        (f"{name}{where}", str(entry.get("target", name)))
        for name, entry in models.items()
        if isinstance(entry, dict)
    )


def _review_stdin(
    anchor: Path,
    settings: ReviewSettings,
    fix_mode: FixMode | None,
    fmt: str,
    diff: bool,
    exit_zero: bool,
    force_exclude: bool,
    console: Console,
) -> None:
    """``review -``: the buffer an editor sends, reviewed as if it were ``anchor``."""
    from torchwise.review import review_text

    if force_exclude and settings.is_excluded(str(anchor)):
        console.note(f"{anchor}: excluded by `exclude` in [tool.torchwise] (--force-exclude)")
        if fix_mode is not None and not diff:
            console.emit(sys.stdin.read())  # the buffer back, unchanged
        sys.exit(ExitCode.OK)
    text = sys.stdin.read()
    report = review_text(text, str(anchor), settings, fix=fix_mode)
    if diff:
        _print_diff(report, console)
        changed = report.files[0].fixed is not None
        sys.exit(ExitCode.FINDINGS if changed and not exit_zero else ExitCode.OK)
    if fix_mode is not None:
        # As ruff does: the fixed code on stdout, what is left to fix on stderr.
        file = report.files[0]
        console.emit(file.fixed if file.fixed is not None else text)
        for finding in file.findings:
            console.note(f"{finding.location}: {finding.code} {finding.message}")
        sys.exit(ExitCode.FINDINGS if file.findings and not exit_zero else ExitCode.OK)
    _print_report(report, fmt, console)
    sys.exit(ExitCode.FINDINGS if report.findings and not exit_zero else ExitCode.OK)


def _print_report(
    report: ReviewReport,
    fmt: str,
    console: Console,
    models: tuple[tuple[str, str], ...] = (),
) -> None:
    from torchwise.review.output import RenderOptions, render

    color = console.color_stdout and fmt == "text"
    # -q: the findings and nothing else (as ruff's -q): no per-code summary, no totals.
    options = RenderOptions(color=color, models=models, statistics=not console.quiet)
    text = render(report, fmt, options)
    if text or not console.quiet:
        console.emit(text)


def _print_diff(report: ReviewReport, console: Console) -> None:
    changed = [file for file in report.files if file.fixed is not None]
    chunks = []
    for file in changed:
        assert file.original is not None and file.fixed is not None
        chunks.append(
            "".join(
                difflib.unified_diff(
                    file.original.splitlines(keepends=True),
                    file.fixed.splitlines(keepends=True),
                    fromfile=f"a/{file.path}",
                    tofile=f"b/{file.path}",
                )
            )
        )
    if chunks:
        console.emit("".join(chunks))
    fixes = sum(file.fixes_applied for file in changed)
    console.note(f"Would apply {fixes} fix{'es' * (fixes != 1)} to {len(changed)} file(s).")
