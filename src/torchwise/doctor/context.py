"""What every check works with: the model, one batch, the loss and the options.

Inputs are cloned on every call so a model that writes into its input cannot
change the caller's tensors. The model's output is reduced to one "primary"
tensor and its kind read (:mod:`torchwise.doctor.outputs`).

Three adaptations make mainstream models run as their authors meant:

- a Hugging Face model (a forward with a ``use_cache`` parameter, or ``**kwargs`` and
  a config with ``use_cache``) is called with ``use_cache=False``: the key/value cache
  is an inference output, not part of what training or export should be judged on;
- a forward that accepts labels (``labels=``, ``targets=``) and returns a loss with
  them is trained and judged with **its own loss**, on labels made to fit its
  output, so the model's loss code is checked too; a forward with a
  ``return_loss`` flag (CLIP's contrastive loss) is called with it set;
- every forward a check compares with another starts from the same state of every
  random number generator doctor knows (torch, CUDA, numpy, python ``random``):
  :meth:`Context.reseed` replays dropout masks, layer-drop decisions and numpy-drawn
  masks, so two runs differ only by what the check changed.
"""

from __future__ import annotations

import inspect
import random
import sys
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import torch
from torch import nn

from torchwise.doctor.options import Options
from torchwise.doctor.outputs import auto_loss, is_pairwise, primary_output, returned_loss
from torchwise.doctor.preflight import batched_input
from torchwise.doctor.trace import module_in_traceback
from torchwise.errors import TorchwiseError, UserCodeError
from torchwise.losses import LossChoice
from torchwise.tensortree import map_tensors, tensors_in

__all__ = [
    "LABEL_PARAMETERS",
    "LOSS_FLAGS",
    "Context",
    "backward",
    "map_tensors",
    "normalize_inputs",
    "primary_output",
    "reseed_all",
    "returned_loss",
    "tensors_in",
]

#: forward parameters that take labels and make a model return its own loss.
LABEL_PARAMETERS = ("labels", "targets", "target", "label")
#: forward flags that make a model return its own loss without labels (CLIP).
LOSS_FLAGS = ("return_loss",)


def backward(loss: torch.Tensor, *, retain_graph: bool = False) -> None:
    """``loss.backward()``, typed (torch leaves Tensor.backward unannotated)."""
    loss.backward(retain_graph=retain_graph)  # type: ignore[no-untyped-call]


def reseed_all(seed: int) -> None:
    """Seed torch (every device), python's ``random`` and numpy's global generator."""
    torch.manual_seed(seed)
    random.seed(seed)
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        numpy.random.seed(seed % 2**32)


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


def _takes_use_cache(model: nn.Module, params: Mapping[str, inspect.Parameter]) -> bool:
    if "use_cache" in params:
        return True
    open_kwargs = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    config = getattr(model, "config", None)
    return open_kwargs and isinstance(getattr(config, "use_cache", None), bool)


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
        if _takes_use_cache(model, params) and "use_cache" not in self.kwargs:
            self.kwargs["use_cache"] = False
            self.notes.append("called with use_cache=False: the KV cache is an inference output")
        # check() has validated the options against the batch (doctor.preflight)
        tensors = tensors_in((args, kwargs))
        self.device = tensors[0].device
        #: the inputs' batch dim and size; both None with ``batch_dim=None`` (one example)
        self.batch_dim: int | None = options.batch_dim
        self.batch_size: int | None = None
        batched = batched_input(tensors, self.batch_dim)
        if batched is not None and self.batch_dim is not None:
            self.batch_size = int(batched.shape[self.batch_dim])
            self.device = batched.device
        self.names = {id(m): (n or type(m).__name__) for n, m in model.named_modules()}
        #: plain tensor attributes before doctor's first forward: any other one that
        #: shows up later is a cache forward keeps on the module
        self.plain_before = {
            (id(m), key)
            for m in model.modules()
            for key, value in vars(m).items()
            if isinstance(value, torch.Tensor) and not isinstance(value, nn.Parameter)
        }
        #: keyword arguments that make forward compute its own loss (``labels=...``,
        #: ``return_loss=True``); once found, every forward gets them (nanoGPT returns
        #: the logits of every position only when it is given targets)
        self.loss_kwargs: dict[str, Any] = {}
        #: the forward parameter the labels go to when the model computes its own loss
        self.labels_arg: str | None = None
        self.reseed()
        with torch.no_grad():
            probe = primary_output(self.call(train=False, doing=f"forward of {self.name}"))
        self.loss: LossChoice = self._choose(probe, options.target)
        if options.target is not None:
            self._check_target(probe)
        own = self._own_loss(params, probe)
        if own is not None:
            arg, value, probe = own
            self.loss_kwargs = {arg: value}
            if isinstance(value, torch.Tensor):
                self.labels_arg = arg
                self.loss = self._choose(probe, value)
            else:
                self.loss = self._choose(probe, options.target)
        self.output_shape = tuple(probe.shape)
        #: the output dim holding the batch: the inputs' batch dim, else 0, else None
        self.output_batch_dim = self._output_batch_dim(probe)
        #: the output is a (B, B) similarity matrix between the batch's samples
        self.pairwise = is_pairwise(self.output_shape, self.batch_size)

    # -- setting up --------------------------------------------------------------

    def _check_target(self, probe: torch.Tensor) -> None:
        """The user's labels must fit the output before any check blames the model."""
        labels = self.loss.target
        out_batch = self._output_batch_dim(probe)
        # the labels' batch leads, or sits where the output's does (time-first (T, B))
        if (
            out_batch is not None
            and 0 < labels.ndim <= probe.ndim
            and labels.shape[0] != probe.shape[out_batch]
            and not (labels.ndim > out_batch and labels.shape[out_batch] == probe.shape[out_batch])
        ):
            raise TorchwiseError(
                f"--target-spec {list(labels.shape)}: its batch ({labels.shape[0]}) differs from "
                f"the output's ({probe.shape[out_batch]}, output {list(probe.shape)})",
                hint=f"describe labels for {probe.shape[out_batch]} samples",
            )
        try:
            with torch.no_grad():
                self.loss.fn(probe, labels)
        except Exception as exc:
            raise TorchwiseError(
                f"--target-spec {list(labels.shape)} ({labels.dtype}) does not fit the output "
                f"{list(probe.shape)} under {self.loss.name}: {str(exc).splitlines()[0][:160]}",
                hint="class indices are one per output row ((B,) for (B, C) logits); "
                "regression targets have the output's shape",
            ) from None

    def _choose(self, probe: torch.Tensor, target: torch.Tensor | None) -> LossChoice:
        return auto_loss(
            probe,
            tensors_in((self.args, self.kwargs)),
            self.batch_size,
            loss=self.options.loss,
            target=target,
            seed=self.options.seed,
        )

    def _output_batch_dim(self, probe: torch.Tensor) -> int | None:
        if self.batch_dim is None:
            return None
        for dim in (self.batch_dim, 0):
            if probe.ndim > dim and probe.shape[dim] == self.batch_size:
                return dim
        return None

    def _own_loss(
        self, params: Mapping[str, inspect.Parameter], probe: torch.Tensor
    ) -> tuple[str, Any, torch.Tensor] | None:
        """(parameter, its value, primary output) when forward computes its own loss.

        Labels: two guesses at their shape, the one the output suggests (class indices
        per row) and, for language models, one label per input token. Flags
        (``return_loss``) are set to True.
        """
        if self.options.loss != "auto":
            return None
        candidates: list[Any] = [self.loss.target]
        ids = next((t for t in tensors_in(self.args) if not t.is_floating_point() and t.ndim >= 2),
                   None)  # fmt: skip
        if ids is not None and probe.ndim >= 2 and probe.shape[-1] >= 2:
            gen = torch.Generator().manual_seed(self.options.seed)
            tokens = torch.randint(0, probe.shape[-1], tuple(ids.shape), generator=gen)
            candidates.append(tokens.to(ids.device))
        tries = [(name, candidates) for name in LABEL_PARAMETERS]
        tries += [(name, [True]) for name in LOSS_FLAGS]
        for name, values in tries:
            param = params.get(name)
            if param is None or name in self.kwargs or param.default is inspect.Parameter.empty:
                continue
            errors = []
            for value in values:
                args, kwargs = self.fresh_inputs()
                self.reseed()
                try:
                    with torch.no_grad():
                        out = self.model(*args, **{**kwargs, name: value})
                except Exception as exc:
                    errors.append(type(exc).__name__)
                    continue
                if returned_loss(out) is not None:
                    return name, value, primary_output(out)
            if errors:
                self.notes.append(
                    f"forward({name}=...) raised {errors[0]} with labels doctor made; using "
                    "doctor's own loss instead (give the labels with --target-spec)"
                )
        return None

    def describe_loss(self) -> str:
        """The report's ``loss:`` line."""
        if "return_loss" in self.loss_kwargs:
            return "the model's own loss: forward(return_loss=True)"
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
        kwargs.update(map_tensors(self.loss_kwargs, clone))
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

    def quiet_train_mode(self) -> None:
        """Train mode with regularisation off: every module in eval mode except BatchNorm,
        which keeps normalising with the batch.

        Dropout, drop-path, layer drop and training-only masking (SpecAugment) are off,
        so a step is a function of the weights and the batch alone. ``train()`` is
        called first: modules that cache tensors in eval mode (timm's LeViT attention
        biases) drop those caches there, so a cache built with gradients in one step
        is never reused by the next step's backward.
        """
        self.model.train(True)
        self.model.eval()
        for module in self.model.modules():
            if isinstance(module, nn.modules.batchnorm._BatchNorm):
                module.train()

    def reseed(self) -> None:
        """Reset every RNG (torch, CUDA, numpy, python) so compared runs draw the same."""
        reseed_all(self.options.seed)

    def loss_of(self, out: Any) -> torch.Tensor:
        """The loss of an output (of a forward that was given the labels, if own loss)."""
        if self.loss_kwargs:
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
        return d is not None and t.ndim > d and t.shape[d] == self.batch_size

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
