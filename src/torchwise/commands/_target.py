"""The options every model command shares: which model, built how, fed what."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import click

F = TypeVar("F", bound=Callable[..., object])

INPUT_HELP = (
    "An input spec, once per forward argument: 'f32[8,3,224,224]', "
    "'ids=i64[batch=2,seq=128]<50257', '{image: f32[2,3,32,32]}'. "
    "Named dims name the symbols torchwise reports."
)


def target_options(command: F) -> F:
    """TARGET, ``--input``, ``--init-kwargs`` and ``--config`` (see docs/targets.md)."""
    decorators = (
        click.argument("target"),
        click.option("--input", "-i", "inputs", multiple=True, metavar="SPEC", help=INPUT_HELP),
        click.option(
            "--init-kwargs", metavar="JSON", help="Constructor arguments as a JSON object."
        ),
        click.option(
            "--config",
            "config_start",
            type=click.Path(path_type=Path),
            default=None,
            help="Where to look for pyproject.toml (default: the current directory).",
        ),
    )
    for decorator in reversed(decorators):
        command = decorator(command)
    return command
