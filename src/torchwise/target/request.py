"""What a user asked for when they named a model: :class:`TargetRequest`.

One object for the model every front end names: the CLI's TARGET and target
options, the MCP server's tool arguments, the project audit's build plan and
the library's entry points (doc, tests) all make one and call
:meth:`TargetRequest.resolve`, so every front end builds the same model on the
same inputs. Nothing here imports torch or the user's code until ``resolve``.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from torchwise.target.resolve import ResolvedTarget


@dataclass(frozen=True)
class TargetRequest:
    """A model named by ``target`` (grammar in docs/targets.md), built and fed as asked.

    ``batch_dim`` is the inputs' batch dim when given; ``no_batch`` says the inputs
    are one example with no batch dim at all (``--batch-dim none``, a graph).
    """

    target: str
    inputs: tuple[str, ...] = ()
    #: constructor arguments: a JSON object's text (the CLI) or a mapping (the library)
    init_kwargs: str | Mapping[str, Any] | None = None
    build: str | None = None
    build_on: str = "auto"
    batch_dim: int | None = None
    #: where to look for pyproject.toml's [tool.torchwise.models]
    config_start: Path | None = None
    no_batch: bool = False
    #: ``file.py:function`` whose return value is forward's inputs
    inputs_from: str | None = None

    def resolve(self, *, device: str = "cpu") -> ResolvedTarget:
        """Build the model and its inputs (``device="meta"`` for measuring without running)."""
        from torchwise.target.resolve import resolve_target

        return resolve_target(
            self.target,
            inputs=self.inputs,
            init_kwargs=self.init_kwargs,
            build=self.build,
            build_on=self.build_on,
            batch_dim=self.batch_dim,
            config_start=self.config_start,
            device=device,
            inputs_from=self.inputs_from,
        )

    def command_words(self) -> str:
        """The command-line words that name this model again, shell-quoted."""
        words = [self.target]
        for spec in self.inputs:
            words += ["--input", spec]
        init_kwargs = self.init_kwargs
        if isinstance(init_kwargs, Mapping):
            import json

            init_kwargs = json.dumps(dict(init_kwargs))
        options: list[tuple[str, object]] = [
            ("--init-kwargs", init_kwargs),
            ("--build", self.build),
            ("--build-on", None if self.build_on == "auto" else self.build_on),
            ("--batch-dim", "none" if self.no_batch else self.batch_dim),
            ("--inputs-from", self.inputs_from),
            ("--config", self.config_start),
        ]
        for flag, value in options:
            if value is not None:
                words += [flag, str(value)]
        return shlex.join(words)
