"""What the data and the loss do (TWR301-TWR306).

- TWR302 and TWR303 wrap the functional losses (which the ``nn.*Loss`` modules
  call): a regression loss whose input and target broadcast to a larger shape
  (``(N, 1)`` against ``(N,)`` gives ``(N, N)``), class indices outside
  ``[0, C)``, binary targets outside ``[0, 1]``; TWR305, ``cross_entropy`` over an
  output with one class (its loss is 0 whatever it gets); TWR306, a loss's input
  already normalised where the loss normalises it (probabilities into
  ``cross_entropy``, rows summing to 1) or not normalised where it must be (a value
  above 0 into ``nll_loss``, a sigmoid's output into ``..._with_logits``). A
  hand-written loss is checked from its autograd graph: an elementwise node that
  turns the model's ``(N, 1)`` or ``(N,)`` output into ``(N, N)`` against a target
  that needs no gradient.
- TWR301 and TWR304 judge the DataLoader passes at the end: a training loader
  whose order is the same in every epoch (no shuffle, a ``DistributedSampler``
  without ``set_epoch``), and training batches that are all the same batch (or,
  without a loader, a model that gets the same input at every step).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from torchwise.run.monitors.loader import LoaderMonitor
from torchwise.run.monitors.modules import ModuleMonitor
from torchwise.run.session import Pass, Session
from torchwise.run.sites import user_site

BROADCAST_LOSSES = ("mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "soft_margin_loss")
INDEX_LOSSES = ("cross_entropy", "nll_loss")
BINARY_LOSSES = ("binary_cross_entropy", "binary_cross_entropy_with_logits")
#: loss calls checked (each check reads the target's range: a device sync)
CHECKED_CALLS = 64
#: how far a row of probabilities may sum from 1: measured, softmax rows of 64 x 2..152,064
#: classes sum within 1.4e-5 of 1 in float32, 4.4e-4 in float16 and 2.4e-3 in bfloat16
ROW_SUM_TOLERANCE = 1e-2
#: how far above 0 a log-probability may round: measured 0 for log_softmax in all three
#: dtypes; ``log(p + eps)`` goes above 0 by about eps (1e-8)
LOG_PROBABILITY_TOLERANCE = 1e-4
#: samples, then rows of classes, read from a loss's input (a language model's logits
#: are batch x tokens x vocabulary: the whole tensor in float32 would be gigabytes)
SAMPLES_READ, ROWS_READ = 4, 256
#: backwards whose loss graph is searched for a silent broadcast
GRAPH_CHECKS = 3
ELEMENTWISE = ("SubBackward0", "SubBackward1", "AddBackward0", "MulBackward0", "DivBackward0",
               "RsubBackward0", "RsubBackward1")  # fmt: skip


class DataMonitor:
    """Loss wrappers and the end-of-run judgement of the DataLoader passes."""

    def __init__(self, session: Session, loaders: LoaderMonitor, modules: ModuleMonitor) -> None:
        self.session = session
        self.loaders = loaders
        self.modules = modules
        self.calls = 0
        self.graphs_checked = 0

    def install(self) -> None:
        for name in (*BROADCAST_LOSSES, *INDEX_LOSSES, *BINARY_LOSSES):
            original = getattr(F, name, None)
            if original is not None:
                self.session.patches.setattr(F, name, self._wrap(name, original))
        self.session.listen("backward", self._graph)

    def _wrap(self, name: str, original: Callable[..., Any]) -> Callable[..., Any]:
        ignore_at = (
            list(inspect.signature(original).parameters).index("ignore_index")
            if ("ignore_index" in inspect.signature(original).parameters)
            else None
        )
        monitor = self

        @functools.wraps(original)
        def loss(*args: Any, **kwargs: Any) -> Any:
            if monitor.calls < CHECKED_CALLS and not monitor.session.replaying:
                monitor.calls += 1
                arguments = {
                    "input": args[0] if args else kwargs.get("input"),
                    "target": args[1] if len(args) > 1 else kwargs.get("target"),
                    "ignore_index": args[ignore_at]
                    if ignore_at is not None and len(args) > ignore_at
                    else kwargs.get("ignore_index", -100),
                }  # fmt: skip
                monitor.check(name, arguments)
            return original(*args, **kwargs)

        return loss

    def check(self, name: str, arguments: dict[str, Any]) -> None:
        output, target = arguments.get("input"), arguments.get("target")
        if not isinstance(output, torch.Tensor) or not isinstance(target, torch.Tensor):
            return
        if name in BROADCAST_LOSSES:
            self._broadcast(name, output, target)
        elif name in INDEX_LOSSES:
            self._normalised_input(name, output)
            self._class_range(name, output, target, arguments.get("ignore_index", -100))
        else:
            if name == "binary_cross_entropy_with_logits":
                self._sigmoid_into_logits_loss(name, output)
            self._binary_range(name, target)

    def _normalised_input(self, name: str, output: torch.Tensor) -> None:
        """TWR306: probabilities into ``cross_entropy``; anything but log-probabilities
        into ``nll_loss``. Cross entropy of log-probabilities is the logits' own loss
        (``log_softmax`` is idempotent) and is left alone."""
        if not output.is_floating_point() or output.dim() == 0 or output.numel() == 0:
            return
        dim = 1 if output.dim() >= 2 else 0
        if output.shape[dim] < 2:
            return  # one class: TWR305's
        values = _class_rows(output, dim)
        probabilities = bool(values.min() >= 0) and bool(
            ((values.sum(-1) - 1).abs() <= ROW_SUM_TOLERANCE).all()
        )
        if name == "cross_entropy" and probabilities:
            message = (
                "cross_entropy gets probabilities (every row sums to 1): it applies "
                "log_softmax itself, so the softmax runs twice and the gradients shrink; "
                "pass the logits"
            )
        elif name == "nll_loss" and float(values.max()) > LOG_PROBABILITY_TOLERANCE:
            what = "probabilities (every row sums to 1)" if probabilities else "raw scores"
            message = (
                f"nll_loss gets {what}, not log-probabilities (a value of "
                f"{float(values.max()):.3g} > 0): it only negates input[target], so the loss "
                "is not the log-likelihood"
                + ("" if probabilities else " and has no lower bound")
                + "; apply log_softmax first, or use cross_entropy on the logits"
            )
        else:
            return
        self.session.report(
            "TWR306",
            user_site(),
            message,
            evidence={"input": tuple(output.shape), "class dim": dim},
        )

    def _sigmoid_into_logits_loss(self, name: str, output: torch.Tensor) -> None:
        node = output.grad_fn
        if node is None or node.name() != "SigmoidBackward0":
            return
        self.session.report(
            "TWR306",
            user_site(),
            f"{name} gets the output of a sigmoid: it applies the sigmoid itself, so it "
            "runs twice and predictions never leave [0.5, 0.73]; pass the logits",
            evidence={"input computed by": node.name()},
        )

    def _broadcast(self, name: str, output: torch.Tensor, target: torch.Tensor) -> None:
        if output.shape == target.shape:
            return
        try:
            shape = torch.broadcast_shapes(  # type: ignore[no-untyped-call]
                output.shape, target.shape
            )
        except RuntimeError:
            return  # torch raises on its own
        if shape.numel() > min(output.numel(), target.numel()):  # one of them was expanded
            self.session.report(
                "TWR302",
                user_site(),
                f"{name} broadcasts the input {tuple(output.shape)} against the target "
                f"{tuple(target.shape)} to {tuple(shape)}: predictions are compared with "
                "targets they do not belong to",
                evidence={"input": tuple(output.shape), "target": tuple(target.shape)},
            )

    def _class_range(
        self, name: str, output: torch.Tensor, target: torch.Tensor, ignore: Any
    ) -> None:
        if name == "cross_entropy" and output.dim() >= 2 and output.shape[1] == 1:
            self.session.report(
                "TWR305",
                user_site(),
                f"cross_entropy gets an output of shape {tuple(output.shape)}: one class, "
                "so the softmax is 1 and the loss 0 whatever the target, and no gradient "
                "flows (one logit needs binary_cross_entropy_with_logits or mse_loss)",
                evidence={"input": tuple(output.shape), "target": tuple(target.shape)},
            )
            return
        if target.is_floating_point() or target.dtype == torch.bool or output.dim() == 0:
            return  # probabilities, or torch's own error
        classes = output.shape[1] if output.dim() >= 2 else output.shape[0]
        valid = target[target != int(ignore)] if isinstance(ignore, int) else target
        if valid.numel() == 0:
            return
        low, high = int(valid.min()), int(valid.max())
        if low >= 0 and high < classes:
            return
        self.session.report(
            "TWR303",
            user_site(),
            f"{name} gets class indices from {low} to {high} for an output with {classes} "
            "classes: a label outside [0, classes) is an index error on the CPU and a "
            "device-side assert on a GPU",
            evidence={"labels": f"{low}..{high}", "classes": classes},
        )

    def _binary_range(self, name: str, target: torch.Tensor) -> None:
        if not target.is_floating_point() or target.numel() == 0:
            return
        low, high = float(target.min()), float(target.max())
        if low >= 0.0 and high <= 1.0:
            return
        self.session.report(
            "TWR303",
            user_site(),
            f"{name} gets targets from {low:g} to {high:g}: binary targets must lie in "
            "[0, 1] (class indices need cross_entropy)",
            evidence={"targets": f"{low:g}..{high:g}"},
        )

    # hand-written losses -----------------------------------------------------------
    def _graph(self, losses: list[torch.Tensor]) -> None:
        if self.graphs_checked >= GRAPH_CHECKS:
            return
        self.graphs_checked += 1
        for loss in losses:
            found = _broadcast_node(loss.grad_fn)
            if found is not None:
                node_name, before, after = found
                self.session.report(
                    "TWR302",
                    self.session.backward_site,
                    f"the loss broadcasts the model's {before} output against its target "
                    f"to {after} ({node_name}): every prediction is compared with every target",
                    evidence={"output": before, "broadcast to": after},
                )

    # end of run --------------------------------------------------------------------
    def finish(self) -> None:
        self._order()
        self._same_batch()

    def _training_passes(self) -> dict[int, list[Pass]]:
        found: dict[int, list[Pass]] = {}
        for ran in self.session.passes:
            if ran.training:
                found.setdefault(ran.key, []).append(ran)
        return found

    def _order(self) -> None:
        for key, passes in self._training_passes().items():
            kind = self.loaders.sampler_kinds.get(key, "custom")
            length, batch = self.loaders.lengths.get(key), self.loaders.batch_sizes.get(key)
            if length is not None and batch is not None and length <= batch:
                continue  # one batch per epoch: its order does not matter
            first = passes[0]
            if kind in ("sequential", "distributed-unshuffled"):
                self.session.report(
                    "TWR301",
                    first.loader_site,
                    "the training DataLoader is not shuffled: every epoch visits the samples "
                    "in the same order (pass shuffle=True, or a shuffling sampler)",
                    evidence={"sampler": kind},
                )
                continue
            if len(passes) < 2:
                continue
            second = passes[1]
            epochs = (first.details.get("sampler_epoch"), second.details.get("sampler_epoch"))
            if kind == "distributed" and epochs[0] == epochs[1]:
                self.session.report(
                    "TWR301",
                    second.iter_site,
                    "DistributedSampler.set_epoch() is never called: every epoch uses the "
                    "same shuffle (call sampler.set_epoch(epoch) before each epoch)",
                    evidence={"sampler epoch": epochs[0]},
                )
            elif kind in ("custom", "iterable") and _same_start(first, second):
                self.session.report(
                    "TWR301",
                    second.iter_site,
                    "the training data comes in the same order in two epochs",
                    evidence={
                        "sampler": kind,
                        "compared batches": min(first.batches, second.batches),
                    },
                )

    def _same_batch(self) -> None:
        for passes in self._training_passes().values():
            for ran in passes:
                prints = ran.fingerprints
                if len(prints) >= 3 and all(p == prints[0] for p in prints):
                    self.session.report(
                        "TWR304",
                        ran.loader_site,
                        f"the DataLoader yields the same batch {len(prints)} times in a row: "
                        "the dataset ignores the index it is given",
                        evidence={"batches compared": len(prints)},
                    )
                    break
        loose = [
            c for c in self.modules.calls if c.used and c.pass_number is None and c.fingerprint
        ]  # fmt: skip
        if len(loose) < 3 or any(c.fingerprint != loose[0].fingerprint for c in loose):
            return
        # full-batch training on a fixed tensor is deliberate; a batch a DataLoader
        # yielded once and the loop then reuses is the bug
        from_loaders = {part for ran in self.session.passes for f in ran.fingerprints for part in f}
        if not any(part in from_loaders for part in loose[0].fingerprint or ()):
            return
        self.session.report(
            "TWR304",
            loose[0].site,
            f"the model gets the same DataLoader batch at each of {len(loose)} training steps "
            "(a batch taken once, outside the loop?)",
            evidence={"steps compared": len(loose)},
        )


def _same_start(first: Pass, second: Pass) -> bool:
    count = min(len(first.indices), len(second.indices))
    if count >= 2:
        return first.indices[:count] == second.indices[:count]
    shared = min(len(first.fingerprints), len(second.fingerprints))
    return shared >= 2 and first.fingerprints[:shared] == second.fingerprints[:shared]


def _shape(node: Any) -> tuple[int, ...] | None:
    metadata = getattr(node, "_input_metadata", None)
    if not metadata:
        return None
    return tuple(int(d) for d in metadata[0].shape)


def _broadcast_node(
    root: Any, depth: int = 8
) -> tuple[str, tuple[int, ...], tuple[int, ...]] | None:
    """An elementwise node in the first ``depth`` levels under ``root`` that makes
    ``(N, N)`` out of a single differentiable ``(N, 1)`` or ``(N,)`` input."""
    frontier = [root] if root is not None else []
    for _ in range(depth):
        following = []
        for node in frontier:
            children = [n for n, _ in node.next_functions if n is not None]
            after = _shape(node)
            if node.name() in ELEMENTWISE and len(children) == 1 and after is not None:
                before = _shape(children[0])
                if (
                    before is not None and len(after) == 2 and after[0] == after[1] >= 2
                    and before in ((after[0], 1), (after[0],))
                ):  # fmt: skip
                    return node.name(), before, after
            following.extend(children)
        frontier = following[:32]
    return None


def _class_rows(output: torch.Tensor, dim: int) -> torch.Tensor:
    """A few rows of ``output`` with its class dimension last, in float32."""
    sample = output.detach()[:SAMPLES_READ] if dim == 1 else output.detach()
    classes = sample.shape[dim]
    return sample.movedim(dim, -1).reshape(-1, classes)[:ROWS_READ].float()
