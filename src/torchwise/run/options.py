"""What a run is asked to do: the script, its arguments, the budget and the modes."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class RunOptions:
    """How far to run the user's script and what to simulate.

    The budget is in steps and batches, never seconds: a training pass (one
    iteration of a DataLoader in which ``backward`` runs) ends after ``steps``
    batches with an optimizer step, an evaluation pass after ``eval_batches``
    batches; after ``epochs`` training passes (two compare their orders) a loader
    gets two more short passes (so what follows the training loop runs) and the
    run ends at the next. Loops that use no DataLoader stop after
    ``steps * epochs`` optimizer steps. ``timeout`` is
    only the safety net for a script that hangs.
    """

    steps: int = 5
    epochs: int = 2
    eval_batches: int = 3
    #: make the script believe CUDA exists and track where every tensor would live
    as_cuda: bool = False
    #: with ``as_cuda``: the GPUs ``torch.cuda.device_count()`` reports; 0 is one per rank
    gpus: int = 0
    #: synthetic data for datasets whose files are missing, random weights for
    #: downloads that fail (each said in a note); False runs on the real ones only
    stand_ins: bool = True
    #: ranks under torch.distributed.run (gloo on CPU); 1 runs the script directly
    nproc: int = 1
    #: seconds for the whole run before it is stopped
    timeout: float = 900.0
    #: seconds a rank may wait in a collective before the wait is a finding
    collective_timeout: float = 30.0
    #: False: only stop the script on the budget, check nothing (a plain
    #: fast_dev_run-style run, for comparisons)
    checks: bool = True
    #: run under torch.autograd.detect_anomaly (for comparisons)
    detect_anomaly: bool = False
    #: the script's stdout and stderr: "inherit" (the terminal), "stderr" (both to
    #: our stderr, so a report on stdout stays clean) or "capture" (kept for the report)
    script_output: str = "stderr"
    extra_env: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        from torchwise.errors import TorchwiseError

        if self.steps < 1 or self.epochs < 1 or self.eval_batches < 1:
            raise TorchwiseError("--steps, --epochs and --eval-batches must be at least 1")
        if self.gpus < 0:
            raise TorchwiseError("--gpus must be at least 1")
        if self.nproc < 1:
            raise TorchwiseError("--nproc must be at least 1")
        if self.timeout <= 0 or self.collective_timeout <= 0:
            raise TorchwiseError("time limits must be positive")
        if self.script_output not in ("inherit", "stderr", "capture"):
            raise TorchwiseError(f"unknown script_output {self.script_output!r}")

    def to_json(self) -> dict[str, object]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, object]) -> RunOptions:
        return cls(**data)  # type: ignore[arg-type]


@dataclass(frozen=True)
class Target:
    """What to run: a script path, or a module name for ``-m``."""

    script: str | None
    module: str | None
    args: tuple[str, ...]

    def to_json(self) -> dict[str, object]:
        return {"script": self.script, "module": self.module, "args": list(self.args)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Target:
        return cls(data.get("script"), data.get("module"), tuple(data.get("args", ())))
