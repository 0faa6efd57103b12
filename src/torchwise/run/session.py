"""One run of a user's script: the budget, the passes over data, the events, the findings.

The monitors (``run/monitors/``) patch torch and report what the script does as
events on the :class:`Session`: a ``backward``, an optimizer step, a pass over a
DataLoader starting or ending. The session keeps the counts every monitor
shares (which pass is running, how many steps it made), decides when the
budget is spent (:class:`StopRun` unwinds the script), and collects findings,
one per code and place.

A *pass* is one iteration of a DataLoader. It is a training pass when a
``backward`` ran while it was the innermost pass yielding batches; otherwise it
is an evaluation pass. Nothing here imports torch.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from torchwise.findings import Finding, Severity
from torchwise.run.catalog import get_check
from torchwise.run.options import RunOptions
from torchwise.run.sites import Site

_MISSING = object()
#: batches a training pass may run without reaching its steps (gradient accumulation)
ACCUMULATION_CAP = 64
#: short passes allowed over a loader's data after its training epochs
EXTRA_PASSES = 2
#: Model calls outside any DataLoader pass, with no backward between them, that a run
#: allows once it has made a training pass's worth of steps: a sampling or generation
#: loop (a diffusion model's hundreds of denoising calls) is then stopped.
LOOSE_CALLS = 100


class StopRun(BaseException):
    """Raised inside the script to end it once the budget is spent.

    A BaseException, so that the script's own ``except Exception`` lets it through.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Patches:
    """Attributes replaced and hooks added during a run, undone in reverse order."""

    def __init__(self) -> None:
        self._undo: list[Callable[[], None]] = []

    def setattr(self, owner: Any, name: str, value: Any) -> None:
        before = vars(owner).get(name, _MISSING) if isinstance(owner, type) else _MISSING
        if not isinstance(owner, type):
            before = getattr(owner, name, _MISSING)

        def restore() -> None:
            if before is _MISSING:
                delattr(owner, name)
            else:
                setattr(owner, name, before)

        setattr(owner, name, value)
        self._undo.append(restore)

    def handle(self, handle: Any) -> None:
        """A removable hook handle (``handle.remove()``)."""
        self._undo.append(handle.remove)

    def call_on_undo(self, undo: Callable[[], None]) -> None:
        self._undo.append(undo)

    def undo(self) -> None:
        while self._undo:
            self._undo.pop()()


@dataclass
class Pass:
    """One iteration over a DataLoader."""

    number: int
    key: int  # the dataset, sampler kind and batch size: a re-created loader keeps it
    loader_site: Site | None
    iter_site: Site | None
    batches: int = 0
    backwards: int = 0
    step_batches: int = 0  # batches during which an optimizer stepped
    ended_by: str = ""  # "exhausted", "budget" or "" while running
    last_step_batch: int = -1
    indices: list[int] = field(default_factory=list)
    fingerprints: list[tuple[object, ...]] = field(default_factory=list)
    details: dict[str, object] = field(default_factory=dict)

    @property
    def training(self) -> bool:
        """A backward ran during it, within the epoch budget."""
        return self.backwards > 0 and not self.details.get("extra")


Listener = Callable[..., None]


class Session:
    """The shared state of one process's run (see the module docstring)."""

    def __init__(self, options: RunOptions, *, workdir: str, rank: int = 0, world: int = 1) -> None:
        self.options = options
        #: a directory for what other processes (DataLoader workers) tell this one
        self.workdir = workdir
        self.rank = rank
        self.world = world
        self.patches = Patches()
        self.findings: dict[tuple[str, str, int], Finding] = {}
        self.passes: list[Pass] = []
        self.active: list[Pass] = []
        self.last_ended: Pass | None = None  # the pass that ended most recently
        self.backwards = 0
        self.steps = 0
        self.loose_steps = 0  # steps made outside any DataLoader pass
        self.calls_without_backward = 0  # root model calls outside passes since a backward
        self.optimizer_steps: dict[int, int] = {}
        #: the user's line of the backward running now (hooks during it report it)
        self.backward_site: Site | None = None
        self.step_times: list[float] = []
        self._last_step_end: float | None = None
        self.stopped_by = ""
        #: where the script first seeded torch's global generator (the checks record it)
        self.seeded_at: Site | None = None
        #: a replay of the model is running: monitors ignore what it does
        self.replaying = False
        self.started = time.perf_counter()
        self.notes: list[str] = []
        #: where the script raised and what (the TWR001 finding's facts)
        self.crash: tuple[Site | None, str] | None = None
        self.facts: dict[str, object] = {}  # for cross-rank checks and the report
        self._listeners: dict[str, list[Listener]] = {}

    # events ----------------------------------------------------------------------
    def listen(self, event: str, listener: Listener) -> None:
        self._listeners.setdefault(event, []).append(listener)

    def emit(self, event: str, *args: Any) -> None:
        for listener in self._listeners.get(event, ()):
            listener(*args)

    # passes ----------------------------------------------------------------------
    def current_pass(self) -> Pass | None:
        return self.active[-1] if self.active else None

    def start_pass(self, key: int, loader_site: Site | None, iter_site: Site | None) -> Pass:
        """A new pass; past the epoch budget it is short, and the third such pass ends the run.

        The short passes let a script with a few epochs reach what follows its loop (a
        final evaluation over the training loader, a save); one with many epochs stops.
        """
        same = [p for p in self.passes if p.key == key]
        extra = sum(1 for p in same if p.training) >= self.options.epochs
        if extra and sum(1 for p in same if p.details.get("extra")) >= EXTRA_PASSES:
            self.stop(f"{self.options.epochs} training passes over the same data")
        started = Pass(len(self.passes) + 1, key, loader_site, iter_site)
        if extra:
            started.details["extra"] = True
        self.passes.append(started)
        self.active.append(started)
        return started

    def pass_should_end(self, running: Pass) -> bool:
        """Whether ``running`` has used its budget (asked before each batch)."""
        if running.details.get("extra"):
            return running.batches >= self.options.eval_batches
        if running.step_batches >= self.options.steps:
            return True
        if running.backwards == 0 and running.batches >= self.options.eval_batches:
            return True
        return running.batches >= self.options.steps * ACCUMULATION_CAP

    def end_pass(self, ended: Pass, how: str) -> None:
        if ended.ended_by:
            return
        ended.ended_by = how
        self.last_ended = ended
        if ended in self.active:
            self.active.remove(ended)
        self.emit("pass_end", ended)

    # steps -----------------------------------------------------------------------
    def record_root_call(self) -> None:
        """A call of a model (not of one of its layers): outside any pass, once the
        run has made a training pass's worth of steps, a long run of them with no
        backward is a sampling loop, and the run stops there."""
        if self.current_pass() is not None or self.steps < self.options.steps:
            return
        self.calls_without_backward += 1
        if self.calls_without_backward > LOOSE_CALLS:
            self.stop(
                f"{LOOSE_CALLS} model calls with no backward and no DataLoader after "
                f"{self.steps} optimizer steps (a sampling or generation loop)"
            )

    def record_backward(self, site: Site | None) -> None:
        self.calls_without_backward = 0
        self.backwards += 1
        self.backward_site = site
        running = self.current_pass()
        if running is not None:
            running.backwards += 1

    def record_step(self, optimizer_id: int) -> None:
        """After an optimizer step: count it and stop when the budget is spent."""
        now = time.perf_counter()
        if self._last_step_end is not None:
            self.step_times.append(now - self._last_step_end)
        self._last_step_end = now
        self.steps += 1
        count = self.optimizer_steps.get(optimizer_id, 0) + 1
        self.optimizer_steps[optimizer_id] = count
        running = self.current_pass()
        if running is not None:
            if running.last_step_batch != running.batches:
                running.step_batches += 1
                running.last_step_batch = running.batches
            return
        if count > self.loose_steps:
            self.loose_steps = count
            if count >= self.options.steps * self.options.epochs:
                self.stop(f"{count} steps of one optimizer outside a DataLoader")

    def stop(self, reason: str) -> None:
        self.stopped_by = reason
        raise StopRun(reason)

    # findings --------------------------------------------------------------------
    def report(
        self,
        code: str,
        site: Site | None,
        message: str,
        *,
        severity: Severity | None = None,
        evidence: Mapping[str, object] | None = None,
    ) -> None:
        """One finding; a second report of the same code at the same place is dropped."""
        check = get_check(code)
        if check is None:  # pragma: no cover - programming error
            raise KeyError(code)
        if site is None:
            site = Site(path="<unknown>", line=1)
        key = (code, site.path, site.line)
        if key in self.findings:
            return
        self.findings[key] = Finding(
            code=code,
            message=message,
            path=site.path,
            line=site.line,
            column=site.column,
            end_line=site.end_line or site.line,
            end_column=site.end_column or site.column,
            severity=severity or check.severity,
            data={str(k): str(v) for k, v in (evidence or {}).items()},
        )

    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)
