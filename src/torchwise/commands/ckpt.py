"""``torchwise ckpt``: inspect, scan and convert checkpoints without executing them."""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from torchwise.commands._common import output_options
from torchwise.console import Console

F = TypeVar("F", bound=Callable[..., Any])


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def ckpt() -> None:
    """Inspect, scan and convert checkpoints without executing them.

    \b
      torchwise ckpt inspect model.pt          keys, shapes, dtypes, totals
      torchwise ckpt scan downloads/           is it safe to torch.load?
      torchwise ckpt convert model.pt -o model.safetensors
    """


def budget_options(command: F) -> F:
    """``--max-bytes`` & co.: the limits past which a file is "unsafe: too large to vet"."""
    from torchwise.ckpt.budgets import DEFAULT_BUDGETS, Budgets

    @functools.wraps(command)
    def run(*args: Any, **kwargs: Any) -> Any:
        limits = {field: kwargs.pop(field) for _, field, _ in Budgets.FLAGS}
        return command(*args, budgets=Budgets(**limits), **kwargs)

    wrapped: Any = run
    for flag, field, what in reversed(Budgets.FLAGS):
        default = getattr(DEFAULT_BUDGETS, field)
        limit = (
            click.FloatRange(min=0, min_open=True)
            if isinstance(default, float)
            else click.IntRange(min=min(1, default))  # --max-depth 0: no limit
        )
        wrapped = click.option(
            flag,
            field,
            type=limit,
            default=default,
            show_default=True,
            metavar="N",
            help=f"Limit on {what}; past it a file is unsafe: too large to vet.",
        )(wrapped)
    return wrapped  # type: ignore[no-any-return]


def _existing(paths: tuple[str, ...]) -> list[Path]:
    from torchwise.errors import TorchwiseError

    for path in paths:
        if not Path(path).exists():
            raise TorchwiseError(f"{path}: no such file or directory")
        if Path(path).is_file():
            try:
                with open(path, "rb") as handle:
                    handle.read(1)
            except OSError as exc:
                raise TorchwiseError(f"cannot read {path}: {exc.strerror or exc}") from None
    return [Path(p) for p in paths]


@ckpt.command("inspect")
@click.argument("path")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text")
@click.option("--all", "show_all", is_flag=True, help="List every tensor (default: first 200).")
@budget_options
@output_options()
def inspect_command(path: str, fmt: str, show_all: bool, budgets: Any, console: Console) -> None:
    """List a checkpoint's tensors, totals and structure (reads no tensor data)."""
    from torchwise.ckpt import inspect
    from torchwise.ckpt.report import inspect_text

    [target] = _existing((path,))
    result = inspect(target, budgets)
    if fmt == "json":
        console.emit(json.dumps(result.to_json(), indent=2, default=str))
    else:
        console.emit(inspect_text(result, None if show_all else 200))


@ckpt.command("scan")
@click.argument("paths", nargs=-1, required=True)
@click.option("--format", "fmt", type=click.Choice(["text", "json", "sarif"]), default="text")
@click.option("--allow", multiple=True, metavar="module.Name", help="Accept this global.")
@budget_options
@output_options()
def scan_command(
    paths: tuple[str, ...], fmt: str, allow: tuple[str, ...], budgets: Any, console: Console
) -> None:
    """Could loading it run code? Exit 0 safe, 1 unsafe, 2 error (no loader reads it)."""
    from torchwise.ckpt.policy import check_allowed
    from torchwise.ckpt.report import scan_sarif, scan_text
    from torchwise.ckpt.scan import expand, scan_targets

    allowed = check_allowed(allow)
    targets = expand(_existing(paths))
    total = len(targets.files)
    with console.progress(total if total > 1 else None, "scanning") as bar:
        report = scan_targets(
            targets, allowed, budgets, progress=lambda path: bar.advance(label=path.name)
        )
    if fmt == "json":
        console.emit(json.dumps(report.to_json(), indent=2))
    elif fmt == "sarif":
        console.emit(json.dumps(scan_sarif(report), indent=2))
    else:
        console.emit(scan_text(report, paint=console.paint))
    sys.exit(int(report.exit_code))


@ckpt.command("convert")
@click.argument("path")
@click.option("-o", "--output", "out", required=True, help="The .safetensors file to write.")
@click.option("--allow", multiple=True, metavar="module.Name", help="Accept this global.")
@click.option(
    "--split",
    is_flag=True,
    help="Store tensors safetensors cannot hold (complex128, quantized, sparse) as their parts, "
    "with a note in the metadata saying how to rebuild them.",
)
@click.option(
    "--drop-non-tensor",
    is_flag=True,
    help="Leave out non-tensor values that have no JSON form (listed), instead of refusing.",
)
@click.option("--per-section", is_flag=True, help="One file per top-level section (model, ...).")
@click.option("--force", is_flag=True, help="Overwrite existing output files.")
@budget_options
@output_options(report=False)
def convert_command(
    path: str,
    out: str,
    allow: tuple[str, ...],
    split: bool,
    drop_non_tensor: bool,
    per_section: bool,
    force: bool,
    budgets: Any,
    console: Console,
) -> None:
    """Convert to safetensors after a clean scan, streaming tensors; verifies every byte."""
    from torchwise.ckpt.conversion.convert import ConvertOptions, convert
    from torchwise.ckpt.report import convert_text

    [source] = _existing((path,))
    options = ConvertOptions(
        allow=frozenset(allow),
        split=split,
        drop_non_tensor=drop_non_tensor,
        per_section=per_section,
        force=force,
        budgets=budgets,
    )
    with console.progress(None, "converting") as bar:
        result = convert(
            source, Path(out), options, progress=lambda nbytes, key: bar.advance(label=key)
        )
    console.emit(convert_text(result))
