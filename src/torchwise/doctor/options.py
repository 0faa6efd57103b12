"""The one list of knobs of a doctor run, shared by ``check()``, the CLI and the checks.

No option is a time budget: every budget is a number of steps, so the same model
and batch get the same verdicts on an idle laptop and a loaded CI runner.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from torchwise.errors import TorchwiseError

if TYPE_CHECKING:
    import torch

#: overfit-batch's default step budget. It stops as soon as the loss is down to its
#: goal, so a healthy model rarely spends it: small MLPs and CNNs get there in
#: 10-40 steps, a 2-layer LSTM language model needs about 160 (it fails at 60).
DEFAULT_OVERFIT_STEPS = 200


@dataclasses.dataclass(frozen=True)
class Options:
    """How doctor runs the model and what it trains it with.

    Pass one to ``check(model, inputs, options=Options(...))``, or the same names
    as keywords (``check(model, inputs, causal_dim=1)``).
    """

    #: ``auto``, ``ce``, ``mse``, ``bce`` or ``module:function``; with ``auto`` and a
    #: forward that accepts labels (``labels=``/``targets=``), the model's own loss
    loss: str = "auto"
    #: labels for the loss; built from the output's shape when None
    target: torch.Tensor | None = None
    #: the input and output dim that is time, for ``causal-leak`` (None: not causal)
    causal_dim: int | None = None
    #: which dim of the inputs (and outputs) is the batch: 1 for time-first (T, B, ...);
    #: None when the inputs are one example with no batch dim (a graph's nodes and
    #: adjacency), so samples cannot be told apart and batch-independence does not apply
    batch_dim: int | None = 0
    #: overfit-batch: Adam steps at most (it stops early once the batch is memorised)
    overfit_steps: int = DEFAULT_OVERFIT_STEPS
    #: overfit-batch's Adam learning rate. None: 1e-2 below 2M parameters (small nets
    #: need it to memorise in a few dozen steps), 1e-3 above (transformers diverge at 1e-2)
    overfit_lr: float | None = None
    #: seed of the generated labels, of every random draw a check makes and of every
    #: compared forward (torch, CUDA, numpy and python ``random`` are all reseeded)
    seed: int = 0

    def __post_init__(self) -> None:
        if self.overfit_steps < 1:
            raise TorchwiseError(f"overfit_steps must be at least 1, not {self.overfit_steps}")
        if self.overfit_lr is not None and not self.overfit_lr > 0:
            raise TorchwiseError(f"overfit_lr must be positive, not {self.overfit_lr}")
        if self.batch_dim is not None and self.batch_dim < 0:
            raise TorchwiseError(f"batch_dim must be 0 or more, not {self.batch_dim}")
        if self.causal_dim is not None and self.causal_dim < 0:
            raise TorchwiseError(f"causal_dim must be 0 or more, not {self.causal_dim}")


def options_from(options: Options | None, overrides: dict[str, Any]) -> Options:
    """``options`` with keyword ``overrides``; an unknown name is a clear error."""
    names = {f.name for f in dataclasses.fields(Options)}
    unknown = sorted(set(overrides) - names)
    if unknown:
        raise TorchwiseError(
            f"unknown doctor option(s): {', '.join(unknown)}",
            hint=f"options: {', '.join(sorted(names))}",
        )
    return dataclasses.replace(options or Options(), **overrides)
