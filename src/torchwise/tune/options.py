"""What shapes a tune run besides the model and its data, checked before anything runs."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from torchwise.errors import TorchwiseError
from torchwise.tune.optim import OptimizerSpec
from torchwise.tune.script import read_train_script
from torchwise.tune.session import SessionConfig


@dataclass(frozen=True)
class TuneOptions:
    """Everything that shapes a tune run besides the model and its data."""

    loss: str = "auto"
    optimizer: str | OptimizerSpec = "adamw"
    device: str = "cpu"
    budget_s: float = 60.0
    knobs: Sequence[str] | None = None
    skip: Sequence[str] = ()
    compile: bool = False
    compile_backend: str = "inductor"
    compile_budget_s: float | None = 300.0
    profile: bool = True
    find_batch_size: bool = False
    max_batch_size: int | None = None
    memory_budget: int | None = None
    headroom: float = 0.2
    batch_dim: int = 0
    find_lr: bool = False
    lr_range: tuple[float, float] = (1e-7, 10.0)
    lr_steps: int = 100
    seed: int = 0
    session: SessionConfig = field(default_factory=SessionConfig)
    #: the user's training script: recommendations are diffs against its loop
    train_script: str | None = None


@dataclass(frozen=True)
class Budgets:
    """``--budget`` split between the timed parts of a run, which together stay within it.

    The DataLoader scan gets a quarter when there is a loader; the batch-size
    search a third when asked for; the knob search the rest. Checks and the
    profile are not timed against it.
    """

    search_s: float
    loader_s: float = 0.0
    batch_size_s: float = 0.0

    @classmethod
    def split(cls, options: TuneOptions, *, has_loader: bool) -> Budgets:
        total = options.budget_s
        loader_s = total * 0.25 if has_loader else 0.0
        batch_size_s = total / 3 if options.find_batch_size else 0.0
        return cls(total - loader_s - batch_size_s, loader_s, batch_size_s)


def validate_options(options: TuneOptions) -> None:
    """Every option checked before anything is measured (one clear error each)."""
    from torchwise.losses import check_loss
    from torchwise.tune.knobs import known_knob

    check_loss(options.loss)
    for what, ids in (("--knobs", options.knobs or ()), ("--skip", options.skip)):
        unknown = [i for i in ids if not known_knob(i)]
        if unknown:
            raise TorchwiseError(
                f"{what}: unknown knob(s) {', '.join(map(repr, unknown))}",
                hint="torchwise tune --list-knobs lists them",
            )
    if isinstance(options.compile_backend, str):  # a callable backend is the API's
        backends = _compile_backends()
        if options.compile_backend not in backends:
            raise TorchwiseError(
                f"--compile-backend {options.compile_backend!r} is not a torch.compile backend",
                hint="one of " + ", ".join(sorted(backends)),
            )
    if options.train_script is not None:
        read_train_script(options.train_script, options.device)  # readable, with a loop
    low, high = options.lr_range
    if not 0 < low < high:
        raise TorchwiseError(
            f"--lr-range {low:g} {high:g}: needs 0 < MIN < MAX",
            hint="e.g. --lr-range 1e-7 10",
        )
    if options.budget_s <= 0:
        raise TorchwiseError(f"--budget must be positive, not {options.budget_s:g}")
    if not 0 <= options.headroom < 1:
        raise TorchwiseError(f"--headroom must be in [0, 1), not {options.headroom:g}")
    if options.max_batch_size is not None and options.max_batch_size < 1:
        raise TorchwiseError(f"--max-batch-size must be at least 1, not {options.max_batch_size}")


def _compile_backends() -> set[str]:
    import torch._dynamo

    return set(torch._dynamo.list_backends(exclude_tags=()))
