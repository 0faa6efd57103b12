"""The user's training step as one CUDA graph, captured as PyTorch documents it."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from torchwise.errors import TorchwiseError
from torchwise.tensortree import map_tensors, tensors_in
from torchwise.tune.step import Batch

if TYPE_CHECKING:
    from torchwise.tune.step import TrainingStep


class NotApplicable(TorchwiseError):
    """A knob that cannot apply to this step at all (reported with why, never as incorrect)."""


class GraphedStep:
    """The user's step captured as one CUDA graph and replayed (PyTorch's whole-network recipe).

    Every call is one real training step. The first :data:`GRAPH_WARMUP` run
    eagerly on a side stream (as ``torch.cuda.graphs`` requires before capture:
    lazy state such as the optimizer's is created there), each on its own batch,
    as the user's first steps would; the graph is then captured (capture runs
    nothing) and each later call copies its batch into the static inputs and
    replays. The optimizer is built with ``capturable=True`` (Adam/AdamW keep
    their step count on the device). A step that cannot be captured (a read back
    to the host, an op capture does not support) raises :class:`NotApplicable`.
    """

    def __init__(self, owner: TrainingStep) -> None:
        self.owner = owner
        self.static: Batch | None = None
        self.graph: torch.cuda.CUDAGraph | None = None
        self.loss: torch.Tensor | None = None
        self.warm = 0
        self.stream = torch.cuda.Stream()  # type: ignore[no-untyped-call]

    def _load(self, batch: Batch) -> Batch:
        if self.static is None:
            self.static = Batch(*map_tensors((batch.args, batch.kwargs, batch.target), torch.clone))
            return self.static
        for dst, src in zip(
            tensors_in((self.static.args, self.static.kwargs, self.static.target)),
            tensors_in((batch.args, batch.kwargs, batch.target)),
            strict=True,
        ):
            dst.copy_(src, non_blocking=True)
        return self.static

    def step(self, batch: Batch) -> torch.Tensor:
        owner, static = self.owner, self._load(batch)
        if self.graph is not None:
            self.graph.replay()
            assert self.loss is not None
            return self.loss.detach().clone()
        self.stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.stream):
            owner.optimizer.zero_grad(set_to_none=True)
            loss = owner.forward_loss(static)
            owner.backward(loss)
            owner.optimizer_step()
        torch.cuda.current_stream().wait_stream(self.stream)
        self.warm += 1
        if self.warm >= GRAPH_WARMUP:
            self._capture(static)
        return loss.detach()

    def _capture(self, static: Batch) -> None:
        owner = self.owner
        graph = torch.cuda.CUDAGraph()
        owner.optimizer.zero_grad(set_to_none=True)
        try:
            with torch.cuda.graph(graph):
                self.loss = owner.forward_loss(static)
                owner.backward(self.loss)
                owner.optimizer_step()
        except Exception as exc:
            raise NotApplicable(
                f"the step cannot be captured as a CUDA graph: {_first_line(exc)}"
            ) from None
        self.graph = graph


#: Eager steps before capture (torch.cuda.graphs' whole-network example runs 3).
GRAPH_WARMUP = 3


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:200]
