"""The options every model command shares: which model, built how, fed what.

``@target_options`` adds TARGET and the target options to a command and hands
the command one :class:`~torchwise.target.TargetRequest` as its ``target``
argument; the command calls ``target.resolve(device=...)`` or passes the request
on to the library.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from torchwise.deps import import_torch
from torchwise.target.request import TargetRequest

if TYPE_CHECKING:
    pass

F = TypeVar("F", bound=Callable[..., object])

INPUT_HELP = (
    "Input specs for forward's arguments, once per argument or comma-separated: "
    "'f32[8,3,224,224]', 'ids=i64[batch=2,seq=128]<50257', '{image: f32[2,3,32,32]}', "
    "'f32[35,20], (f32[2,20,200], f32[2,20,200])' (a tuple), 'use_cache=False'."
)


#: ``--batch-dim none``
NO_BATCH = "none"


class BatchDim(click.ParamType):  # type: ignore[type-arg]
    """``--batch-dim``: a dim index (0 or more) or ``none``."""

    name = "batch_dim"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, int) or value is None:
            return value
        text = str(value).strip().lower()
        if text == NO_BATCH:
            return NO_BATCH
        try:
            dim = int(text)
        except ValueError:
            self.fail(f"{value!r} is not a dim index or 'none'", param, ctx)
        if dim < 0:
            self.fail(f"{value!r} is negative; use 0 or more, or 'none'", param, ctx)
        return dim


def target_options(command: F) -> F:
    """TARGET, ``--input``, ``--init-kwargs``, ``--build``, ``--build-on``, ``--batch-dim``
    and ``--config``, passed to the command as one ``target: TargetRequest``."""

    @functools.wraps(command)
    def wrapper(
        *args: Any,
        target: str,
        inputs: tuple[str, ...],
        init_kwargs: str | None,
        build: str | None,
        build_on: str,
        batch_dim: int | str | None,
        config_start: Path | None,
        inputs_from: str | None,
        **kwargs: Any,
    ) -> object:
        # Every model command needs torch; say so before the user's module is imported
        # (its own `import torch` would otherwise read as a bug in their file). Import it
        # now, before the command's console silences torch's loggers: importing torch
        # configures its logging and would undo the silencing, and the first fake-tensor
        # fallback would then print a traceback ahead of our one line.
        import_torch(
            verbose=bool(kwargs.get("verbose")), purpose=click.get_current_context().command_path
        )

        no_batch = batch_dim == NO_BATCH
        request = TargetRequest(
            target,
            inputs,
            init_kwargs,
            build,
            build_on,
            None if no_batch or batch_dim is None else int(batch_dim),
            config_start,
            no_batch=no_batch,
            inputs_from=inputs_from,
        )
        return command(*args, target=request, **kwargs)

    decorators = (
        click.argument("target"),
        click.option("--input", "-i", "inputs", multiple=True, metavar="SPEC", help=INPUT_HELP),
        click.option(
            "--init-kwargs",
            metavar="JSON",
            help="Constructor arguments as a JSON object (for hf:NAME, fields of its config).",
        ),
        click.option(
            "--build",
            metavar="EXPR",
            help="A Python expression that builds the model, evaluated in the target module's "
            "namespace: --build 'GPT(GPTConfig(n_layer=2))'.",
        ),
        click.option(
            "--build-on",
            type=click.Choice(["auto", "meta", "cpu"]),
            default="auto",
            show_default=True,
            help="meta: build without allocating weights (measuring commands only); auto: "
            "meta for the zoo and for models over 2B parameters, else cpu.",
        ),
        click.option(
            "--batch-dim",
            type=BatchDim(),
            default=None,
            metavar="N|none",
            help="Which input dim is the batch (1 for time-first (T, B, ...) inputs; none "
            "when the inputs are one example, such as a graph). Default: a dim named "
            "'batch' in the spec, else 0.",
        ),
        click.option(
            "--inputs-from",
            metavar="FILE.py:FN",
            help="A function (no arguments) that returns forward's inputs: a tensor, a tuple, "
            "a dict of keyword arguments or (args, kwargs); for inputs a spec cannot "
            "describe, such as a normalised adjacency matrix.",
        ),
        click.option(
            "--config",
            "config_start",
            type=click.Path(exists=True, path_type=Path),
            default=None,
            help="Where to look for pyproject.toml (default: the current directory).",
        ),
    )
    decorated: Any = wrapper
    for decorator in reversed(decorators):
        decorated = decorator(decorated)
    return decorated  # type: ignore[no-any-return]
