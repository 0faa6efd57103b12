"""What every check works with: the model, one batch, the loss and the options.

Inputs are cloned on every call so a model that writes into its input cannot
change the caller's tensors. The model's output is reduced to one "primary"
tensor: the tensor itself, ``out["logits"]``/``out.logits`` (Hugging Face), or
the first floating-point tensor of a tuple, list or dict.

Two adaptations make mainstream models run as their authors meant:

- a forward with a ``use_cache`` parameter (Hugging Face decoders) is called with
  ``use_cache=False``: the key/value cache is an inference output, not part of
  what training or export should be judged on;
- a forward that accepts labels (``labels=``, ``targets=``) and returns a loss
  with them is trained and judged with **its own loss**, on labels made to fit
  its output, so the model's loss code is checked too.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import torch
from torch import nn

from torchwise.doctor.options import Options
from torchwise.doctor.tensors import map_tensors, tensors_in
from torchwise.doctor.trace import module_in_traceback
from torchwise.errors import TorchwiseError, UserCodeError
from torchwise.losses import LossChoice, choose_loss

__all__ = [
    "LABEL_PARAMETERS",
    "Context",
    "backward",
    "map_tensors",
    "normalize_inputs",
    "primary_output",
    "returned_loss",
    "tensors_in",
]

#: forward parameters that take labels and make a model return its own loss.
LABEL_PARAMETERS = ("labels", "targets", "target", "label")


def primary_output(out: Any) -> torch.Tensor:
    """The tensor doctor computes its own loss on and compares between runs."""
    if isinstance(out, torch.Tensor):
        return out
    logits = out.get("logits") if isinstance(out, Mapping) else getattr(out, "logits", None)
    if isinstance(logits, torch.Tensor):
        return logits
    for tensor in tensors_in(out):
        if tensor.is_floating_point() and tensor.ndim > 0:
            return tensor
    raise TorchwiseError(
        f"the model returned {type(out).__name__} with no floating-point tensor in it",
        hint="doctor needs forward() to return a tensor, a tuple/dict of tensors or .logits",
    )


def returned_loss(out: Any) -> torch.Tensor | None:
    """The loss a model returned with its labels: ``out.loss``, ``out["loss"]``, or the
    0-d floating-point tensor of a tuple such as nanoGPT's ``(logits, loss)``."""
    loss = out.get("loss") if isinstance(out, Mapping) else getattr(out, "loss", None)
    if isinstance(loss, torch.Tensor) and loss.ndim == 0 and loss.is_floating_point():
        return loss
    if isinstance(out, (tuple, list)):
        for item in out:
            if isinstance(item, torch.Tensor) and item.ndim == 0 and item.is_floating_point():
                return item
    return None


def backward(loss: torch.Tensor, *, retain_graph: bool = False) -> None:
    """``loss.backward()``, typed (torch leaves Tensor.backward unannotated)."""
    loss.backward(retain_graph=retain_graph)  # type: ignore[no-untyped-call]


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


def _forward_parameters(model: nn.Module) -> Mapping[str, inspect.Parameter]:
    try:
        return inspect.signature(model.forward).parameters
    except (TypeError, ValueError):
        return {}


class Context:
    """One model and one batch, shared by the checks of a run."""

    def __init__(
        self,
        model: nn.Module,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        options: Options,
        *,
        name: str | None = None,
    ) -> None:
        if not isinstance(model, nn.Module):
            raise TorchwiseError(f"doctor needs a torch.nn.Module, got {type(model).__name__}")
        self.model = model
        self.options = options
        self.name = name or type(model).__name__
        self.args = args
        self.kwargs = dict(kwargs)
        #: what doctor changed about how it calls the model, for the report
        self.notes: list[str] = []
        params = _forward_parameters(model)
        if "use_cache" in params and "use_cache" not in self.kwargs:
            self.kwargs["use_cache"] = False
            self.notes.append("called with use_cache=False: the KV cache is an inference output")
        self.batch_dim = options.batch_dim
        found = [t for t in tensors_in((args, kwargs)) if t.ndim > self.batch_dim]
        if not found:
            raise TorchwiseError(
                f"doctor needs an input tensor with a batch dim (dim {self.batch_dim})",
                hint="pass --batch-dim N when the batch is not dim 0",
            )
        self.batch_size = int(found[0].shape[self.batch_dim])
        self.device = found[0].device
        self.names = {id(m): (n or type(m).__name__) for n, m in model.named_modules()}
        #: plain tensor attributes before doctor's first forward: any other one that
        #: shows up later is a cache forward keeps on the module
        self.plain_before = {
            (id(m), key)
            for m in model.modules()
            for key, value in vars(m).items()
            if isinstance(value, torch.Tensor) and not isinstance(value, nn.Parameter)
        }
        #: the forward parameter the labels go to when the model computes its own loss;
        #: once set, every forward gets the labels (nanoGPT returns the logits of every
        #: position only when it is given targets)
        self.labels_arg: str | None = None
        with torch.no_grad():
            probe = primary_output(self.call(train=False, doing=f"forward of {self.name}"))
        self.loss: LossChoice = choose_loss(probe, options.loss, options.target, seed=options.seed)
        own = self._own_loss(params, probe)
        if own is not None:
            self.labels_arg, labels, probe = own
            self.loss = choose_loss(probe, options.loss, labels, seed=options.seed)
        self.output_shape = tuple(probe.shape)
        #: the output dim holding the batch: the inputs' batch dim, else 0, else None
        self.output_batch_dim = self._output_batch_dim(probe)

    # -- setting up --------------------------------------------------------------

    def _output_batch_dim(self, probe: torch.Tensor) -> int | None:
        for dim in (self.batch_dim, 0):
            if probe.ndim > dim and probe.shape[dim] == self.batch_size:
                return dim
        return None

    def _own_loss(
        self, params: Mapping[str, inspect.Parameter], probe: torch.Tensor
    ) -> tuple[str, torch.Tensor, torch.Tensor] | None:
        """(labels parameter, labels, primary output) when forward computes its own loss.

        Two guesses at the labels' shape: the one the output suggests (class indices
        per row), and, for language models, one label per input token.
        """
        if self.options.loss != "auto":
            return None
        candidates = [self.loss.target]
        ids = next((t for t in tensors_in(self.args) if not t.is_floating_point() and t.ndim >= 2),
                   None)  # fmt: skip
        if ids is not None and probe.ndim >= 2 and probe.shape[-1] >= 2:
            gen = torch.Generator().manual_seed(self.options.seed)
            tokens = torch.randint(0, probe.shape[-1], tuple(ids.shape), generator=gen)
            candidates.append(tokens.to(ids.device))
        for name in LABEL_PARAMETERS:
            param = params.get(name)
            if param is None or name in self.kwargs or param.default is inspect.Parameter.empty:
                continue
            errors = []
            for labels in candidates:
                args, kwargs = self.fresh_inputs()
                try:
                    with torch.no_grad():
                        out = self.model(*args, **{**kwargs, name: labels})
                except Exception as exc:
                    errors.append(type(exc).__name__)
                    continue
                if returned_loss(out) is not None:
                    return name, labels, primary_output(out)
            if errors:
                self.notes.append(
                    f"forward({name}=...) raised {errors[0]} with labels doctor made; using "
                    "doctor's own loss instead (give the labels with --target-spec)"
                )
        return None

    def describe_loss(self) -> str:
        """The report's ``loss:`` line."""
        if self.labels_arg is None:
            return self.loss.describe()
        labels = "random class indices" if self.loss.kind == "ce" else "labels"
        return (
            f"the model's own loss: forward({self.labels_arg}=...) with {labels} shaped "
            f"{list(self.loss.target.shape)} ({self.loss.name})"
        )

    # -- running the model -------------------------------------------------------

    def fresh_inputs(self) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """Clones of the batch (with the labels, when the model computes its own loss)."""
        clone: Callable[[torch.Tensor], torch.Tensor] = lambda t: t.detach().clone()  # noqa: E731
        args, kwargs = map_tensors(self.args, clone), map_tensors(self.kwargs, clone)
        if self.labels_arg is not None:
            kwargs[self.labels_arg] = self.loss.target.clone()
        return args, kwargs

    def call(self, *, train: bool, doing: str) -> Any:
        """A forward that reports the user's exception as one clear line."""
        self.model.train(train)
        args, kwargs = self.fresh_inputs()
        try:
            return self.model(*args, **kwargs)
        except Exception as exc:
            raise UserCodeError.from_exception(
                exc,
                doing=doing,
                where=self.describe_module(module_in_traceback(exc, self.model)),
                hint="check the input shapes (--input) against what forward() expects",
            ) from exc

    def describe_module(self, name: str | None) -> str | None:
        """``transformer.h.0.attn (CausalSelfAttention)``; None for None."""
        if name is None:
            return None
        return f"{name} ({type(self.model.get_submodule(name)).__name__})"

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

    def reseed(self) -> None:
        """Reset torch's RNG so random ops draw the same numbers in every compared run."""
        torch.manual_seed(self.options.seed)

    def loss_of(self, out: Any) -> torch.Tensor:
        """The loss of an output (of a forward that was given the labels, if own loss)."""
        if self.labels_arg is not None:
            own = returned_loss(out)
            if own is not None:
                return own
        return self.loss.fn(primary_output(out), self.loss.target)

    def train_loss(self) -> tuple[Any, torch.Tensor]:
        """One forward in train mode and its loss, with grad enabled."""
        with torch.enable_grad():
            out = self.forward(train=True)
            return out, self.loss_of(out)

    # -- the batch dim -------------------------------------------------------------

    def has_batch(self, t: torch.Tensor, dim: int | None = None) -> bool:
        """Whether ``t`` has the batch along ``dim`` (default: the inputs' batch dim)."""
        d = self.batch_dim if dim is None else dim
        return t.ndim > d and t.shape[d] == self.batch_size

    # -- the model's parts ---------------------------------------------------------

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
