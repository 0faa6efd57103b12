"""``torchwise ckpt``: inspect, scan and convert checkpoints without executing them."""

from __future__ import annotations

import json
import sys

import click


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def ckpt() -> None:
    """Inspect, scan and convert checkpoints without executing them.

    \b
      torchwise ckpt inspect model.pt          keys, shapes, dtypes, totals
      torchwise ckpt scan downloads/           is it safe to torch.load?
      torchwise ckpt convert model.pt -o model.safetensors
    """


@ckpt.command("inspect")
@click.argument("path", type=click.Path(exists=True))
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text")
@click.option("--all", "show_all", is_flag=True, help="List every tensor (default: first 200).")
def inspect_command(path: str, fmt: str, show_all: bool) -> None:
    """List a checkpoint's tensors, totals and structure (reads no tensor data)."""
    from torchwise.ckpt import inspect
    from torchwise.ckpt.report import inspect_text

    result = inspect(path)
    if fmt == "json":
        click.echo(json.dumps(result.to_json(), indent=2, default=str))
    else:
        click.echo(inspect_text(result, None if show_all else 200))


@ckpt.command("scan")
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True))
@click.option("--format", "fmt", type=click.Choice(["text", "json", "sarif"]), default="text")
@click.option("--allow", multiple=True, metavar="module.Name", help="Accept this global.")
def scan_command(paths: tuple[str, ...], fmt: str, allow: tuple[str, ...]) -> None:
    """Allowlist scan: exit 0 safe, 1 unsafe, 2 error (corrupt, truncated, unknown)."""
    from torchwise.ckpt import scan
    from torchwise.ckpt.report import scan_sarif, scan_text

    report = scan(list(paths), allow=allow)
    if fmt == "json":
        click.echo(json.dumps(report.to_json(), indent=2))
    elif fmt == "sarif":
        click.echo(json.dumps(scan_sarif(report), indent=2))
    else:
        click.echo(scan_text(report))
    sys.exit(int(report.exit_code))


@ckpt.command("convert")
@click.argument("path", type=click.Path(exists=True))
@click.option("-o", "--output", required=True, type=click.Path(), help="The .safetensors file.")
@click.option("--allow", multiple=True, metavar="module.Name", help="Accept this global.")
@click.option("--split", is_flag=True, help="One file per top-level section (model, optimizer).")
@click.option("--force", is_flag=True, help="Overwrite existing output files.")
def convert_command(
    path: str, output: str, allow: tuple[str, ...], split: bool, force: bool
) -> None:
    """Convert to safetensors after a clean scan; verifies every tensor."""
    from torchwise.ckpt import convert

    result = convert(path, output, allow=allow, split=split, force=force)
    click.echo(f"wrote {', '.join(result.outputs)}")
    click.echo(
        f"{result.tensors} tensors written, {result.verified} keys read back identical "
        f"(dtype, shape, every byte)"
    )
    if result.aliases:
        pairs = ", ".join(f"{a} -> {c}" for a, c in list(result.aliases.items())[:5])
        click.echo(f"{len(result.aliases)} aliases stored once, recorded in metadata: {pairs}")
    if result.made_contiguous:
        click.echo(f"made contiguous: {', '.join(result.made_contiguous)}")
    if result.copied_views:
        click.echo(f"overlapping views written as copies: {', '.join(result.copied_views)}")
    if result.extras:
        click.echo(f"non-tensor values kept as JSON metadata: {', '.join(result.extras[:8])}")
