"""Evaluation judged from the model's root calls (TWR201, TWR202, TWR203).

An *evaluation loop* is two or more consecutive calls of one model at one line
of the user's code that no ``backward`` used, with no ``backward`` anywhere in
between (see :mod:`torchwise.run.monitors.modules`). That is what the program
does, whatever its functions are called: a GAN's ``with torch.no_grad(): fake =
G(z)`` is followed by the discriminator's backward before G's next call, so it
is a training call; ``[model(x) for x in chunks]`` before one backward is used
by it; a shared ``run_epoch(train=False)`` is an evaluation loop on its
evaluation path only.

- TWR201: an evaluation loop runs the model with dropout or batch norm in
  training mode;
- TWR202: an evaluation loop builds autograd graphs (no ``no_grad``);
- TWR203: training calls run with layers in eval mode that earlier training
  calls ran in training mode (``model.train()`` not restored after evaluation).
"""

from __future__ import annotations

from collections import defaultdict
from itertools import groupby

from torchwise.findings import Severity
from torchwise.run.monitors.modules import ModuleMonitor, RootCall
from torchwise.run.session import Session
from torchwise.run.sites import Site

SHOWN = 4


def evaluation_loops(calls: list[RootCall]) -> list[list[RootCall]]:
    """Runs of two or more consecutive unused calls at one line, with no backward between."""
    by_place: dict[tuple[Site | None, int], list[RootCall]] = defaultdict(list)
    for call in calls:
        by_place[(call.site, call.module_id)].append(call)
    loops: list[list[RootCall]] = []
    for place_calls in by_place.values():
        run: list[RootCall] = []
        for call in place_calls:
            joins = (
                run
                and not call.used
                and call.backwards_before == run[-1].backwards_before
                and call.number > run[-1].number
            )
            if joins:
                run.append(call)
                continue
            if len(run) >= 2:
                loops.append(run)
            run = [call] if not call.used else []
        if len(run) >= 2:
            loops.append(run)
    return sorted(loops, key=lambda loop: loop[0].number)


def _names(layers: tuple[str, ...]) -> str:
    return ", ".join(layers[:SHOWN]) + (
        f" (+{len(layers) - SHOWN} more)" if len(layers) > SHOWN else ""
    )


class EvaluationJudge:
    """Judges the root calls at the end of the run."""

    def __init__(self, session: Session, modules: ModuleMonitor) -> None:
        self.session = session
        self.modules = modules

    def finish(self) -> None:
        loops = evaluation_loops(self.modules.calls)
        for loop in loops:
            self._train_mode(loop)
            self._with_grad(loop)
        self._not_restored()

    def _loop_site(self, call: RootCall, evidence: dict[str, object]) -> Site | None:
        """Where an evaluation finding goes: the loop over the evaluation DataLoader (where
        `model.eval()` or `no_grad` belongs), not the model call, which may sit in a helper
        that training shares; the call's line goes in the evidence."""
        passes = self.session.passes
        number = call.pass_number
        loop = passes[number - 1].iter_site if number and number <= len(passes) else None
        if loop is None or call.site is None or loop == call.site:
            return call.site
        evidence["model called at"] = call.site.label
        return loop

    def _mode_call(self, module_id: int, index: int) -> Site | None:
        return self.modules.mode_calls.get(module_id, (None, None))[index]

    def _train_mode(self, loop: list[RootCall]) -> None:
        offending = next((c for c in loop if c.train_layers), None)
        if offending is None or not offending.train_layers:
            return
        active, first = offending.train_layers, offending  # not an earlier call in eval mode
        evidence: dict[str, object] = {
            "layers in training mode": _names(active),
            "calls": f"{len(loop)} evaluation batches, none used by a backward",
        }
        trained_at = self._mode_call(first.module_id, 1)
        if trained_at is not None:
            evidence["mode set by"] = f"model.train() at {trained_at.label}"
        self.session.report(
            "TWR201",
            self._loop_site(first, evidence),
            f"evaluation runs {first.module_type} in training mode: its "
            f"{len(active)} dropout/batch-norm layer(s) randomise the outputs and update "
            "the running statistics with evaluation data (call model.eval() first)",
            evidence=evidence,
        )

    def _with_grad(self, loop: list[RootCall]) -> None:
        if not all(call.grad for call in loop):
            return
        module = self.modules.roots.get(loop[0].module_id)
        if module is None or not any(p.requires_grad for p in module.parameters()):
            return
        first = loop[0]
        batched = first.pass_number is not None or max(call.samples for call in loop) > 1
        evidence: dict[str, object] = {
            "calls": f"{len(loop)} evaluation calls with grad enabled",
            "samples per call": max(call.samples for call in loop),
        }
        self.session.report(
            "TWR202",
            self._loop_site(first, evidence),
            f"evaluation runs {first.module_type} with autograd on: every "
            f"{'batch' if batched else 'call'} builds a graph no backward uses "
            "(wrap the loop in torch.no_grad() or torch.inference_mode())",
            severity=None if batched else Severity.INFO,
            evidence=evidence,
        )

    def _not_restored(self) -> None:
        used = [c for c in self.modules.calls if c.used and c.train_layers is not None]
        for _, group in groupby(
            sorted(used, key=lambda c: (c.module_id, c.number)), key=lambda c: c.module_id
        ):
            calls = list(group)
            first_train = next((c for c in calls if c.train_layers), None)
            if first_train is None:
                continue
            assert first_train.eval_layers is not None
            baseline = len(first_train.eval_layers)
            later = next(
                (
                    c for c in calls
                    if c.number > first_train.number and c.eval_layers is not None
                    and len(c.eval_layers) > baseline
                ),
                None,
            )  # fmt: skip
            if later is None:
                continue
            assert later.eval_layers is not None
            evidence: dict[str, object] = {
                "layers in eval mode": _names(later.eval_layers),
                "trained in training mode first": f"call {first_train.number} at "
                + (first_train.site.label if first_train.site else "?"),
            }
            evaled_at = self._mode_call(later.module_id, 0)
            if evaled_at is not None:
                evidence["mode set by"] = f"model.eval() at {evaled_at.label}"
            self.session.report(
                "TWR203",
                later.site,
                f"training continues with {later.module_type} in eval mode after evaluation: "
                "dropout is off and batch norm uses frozen statistics for these steps "
                "(call model.train() before training again)",
                evidence=evidence,
            )
