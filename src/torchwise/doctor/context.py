"""What every check works with: the model, a batch, the chosen loss and the options.

Inputs are cloned on every call so a model that writes into its input cannot
change the caller's tensors, and the model's output is reduced to one "primary"
tensor: the tensor itself, the first tensor of a tuple/list, ``out["logits"]`` or
the first value of a dict, or ``out.logits`` for Hugging Face style outputs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import torch
from torch import nn

from torchwise.errors import TorchwiseError
from torchwise.losses import LossChoice, choose_loss


@dataclasses.dataclass
class Options:
    """Knobs for a doctor run; defaults keep the suite fast on a laptop CPU."""

    loss: str = "auto"
    #: labels for the loss; built from the output's shape when None
    target: torch.Tensor | None = None
    #: input/output dim that is time for ``causal-leak`` (None: check skipped)
    causal_dim: int | None = None
    #: overfit-batch: optimizer steps and Adam learning rate (raise both for big models)
    overfit_steps: int = 60
    #: None: 1e-2 below 2M parameters (small nets need it to memorize in 60 steps),
    #: 1e-3 above (transformers diverge at 1e-2)
    overfit_lr: float | None = None
    #: overfit-batch stops after this many seconds and warns instead of judging
    overfit_budget_s: float = 30.0
    #: exportable: seconds for torch.export plus the graph-break count together
    export_budget_s: float = 60.0
    seed: int = 0


def map_tensors(obj: Any, fn: Callable[[torch.Tensor], Any]) -> Any:
    """Apply ``fn`` to every tensor inside nested tuples, lists and dicts."""
    if isinstance(obj, torch.Tensor):
        return fn(obj)
    if isinstance(obj, tuple):
        return tuple(map_tensors(o, fn) for o in obj)
    if isinstance(obj, list):
        return [map_tensors(o, fn) for o in obj]
    if isinstance(obj, Mapping):
        return {k: map_tensors(v, fn) for k, v in obj.items()}
    return obj


def tensors_in(obj: Any) -> list[torch.Tensor]:
    """Every tensor inside ``obj`` in a stable order (also HF-style output objects)."""
    found: list[torch.Tensor] = []
    if isinstance(obj, torch.Tensor):
        found.append(obj)
    elif isinstance(obj, (tuple, list)):
        for o in obj:
            found.extend(tensors_in(o))
    elif isinstance(obj, Mapping):
        for v in obj.values():
            found.extend(tensors_in(v))
    elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        for f in dataclasses.fields(obj):
            found.extend(tensors_in(getattr(obj, f.name)))
    return found


def primary_output(out: Any) -> torch.Tensor:
    """The tensor doctor computes the loss on."""
    if isinstance(out, torch.Tensor):
        return out
    logits = out.get("logits") if isinstance(out, Mapping) else getattr(out, "logits", None)
    if isinstance(logits, torch.Tensor):
        return logits
    for tensor in tensors_in(out):
        if tensor.is_floating_point():
            return tensor
    raise TorchwiseError(
        f"the model returned {type(out).__name__} with no floating-point tensor in it",
        hint="doctor needs forward() to return a tensor, a tuple/dict of tensors or .logits",
    )


def backward(loss: torch.Tensor) -> None:
    """``loss.backward()``, typed (torch leaves Tensor.backward unannotated)."""
    loss.backward()  # type: ignore[no-untyped-call]


def normalize_inputs(inputs: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """A tensor, a tuple/list of positional args or a dict of keyword args."""
    if isinstance(inputs, torch.Tensor):
        return (inputs,), {}
    if isinstance(inputs, (tuple, list)):
        return tuple(inputs), {}
    if isinstance(inputs, Mapping):
        return (), dict(inputs)
    raise TorchwiseError(
        f"inputs must be a tensor, a tuple of positional args or a dict of kwargs, "
        f"not {type(inputs).__name__}"
    )


class Context:
    """One model and one batch, shared by the checks of a run."""

    def __init__(
        self,
        model: nn.Module,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        options: Options,
    ) -> None:
        if not isinstance(model, nn.Module):
            raise TorchwiseError(f"doctor needs a torch.nn.Module, got {type(model).__name__}")
        self.model = model
        self.args = args
        self.kwargs = kwargs
        self.options = options
        found = [t for t in tensors_in((args, kwargs)) if t.ndim >= 1]
        if not found:
            raise TorchwiseError("doctor needs at least one input tensor with a batch dim")
        self.batch_size = int(found[0].shape[0])
        self.device = found[0].device
        self.names = {id(m): (n or type(m).__name__) for n, m in model.named_modules()}
        #: results shared between checks of one run (e.g. the train-mode backward)
        self.cache: dict[str, Any] = {}
        try:
            with torch.no_grad():
                probe = primary_output(self.forward(train=False))
        except TorchwiseError:
            raise
        except Exception as exc:
            raise TorchwiseError(
                f"the model failed on the given inputs: {type(exc).__name__}: {exc}",
                hint="check the input shapes (--input) against what forward() expects",
            ) from exc
        self.output_shape = tuple(probe.shape)
        self.loss: LossChoice = choose_loss(probe, options.loss, options.target, seed=options.seed)

    # -- running the model -------------------------------------------------------

    def fresh_inputs(self) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """Clones of the batch, so the model can never write into the caller's tensors."""
        clone: Callable[[torch.Tensor], torch.Tensor] = lambda t: t.detach().clone()  # noqa: E731
        return map_tensors(self.args, clone), map_tensors(self.kwargs, clone)

    def forward(
        self,
        *,
        train: bool,
        args: tuple[Any, ...] | None = None,
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        self.model.train(train)
        if args is None and kwargs is None:
            args, kwargs = self.fresh_inputs()
        return self.model(*(args or ()), **(kwargs or {}))

    def forward_current(self) -> Any:
        """A forward with fresh inputs that leaves the modules' modes as they are."""
        args, kwargs = self.fresh_inputs()
        return self.model(*args, **kwargs)

    def loss_of(self, out: Any) -> torch.Tensor:
        return self.loss.fn(primary_output(out), self.loss.target)

    def train_loss(self) -> tuple[Any, torch.Tensor]:
        """One forward in train mode and its loss, with grad enabled."""
        with torch.enable_grad():
            out = self.forward(train=True)
            return out, self.loss_of(out)

    def trainable(self) -> list[tuple[str, nn.Parameter]]:
        return [(n, p) for n, p in self.model.named_parameters() if p.requires_grad]

    def module_name(self, module: nn.Module) -> str:
        return self.names.get(id(module), type(module).__name__)

    def float_inputs(self) -> Iterator[torch.Tensor]:
        for t in tensors_in((self.args, self.kwargs)):
            if t.is_floating_point():
                yield t

    def zero_grads(self) -> None:
        for p in self.model.parameters():
            p.grad = None
