"""exportable: ``torch.export`` works, and how often ``torch.compile`` breaks the graph.

A failure or a graph break is blamed on the code that caused it, found in the
traceback: in the user's own file, export failing fails the check and graph
breaks warn, with the line to fix. A failure inside torch's modules or an
installed library (Hugging Face, timm) means the check cannot judge the user's
code: it skips (warns when asked for by name) saying where and how to get past
it; graph breaks there are listed as evidence only, since the user cannot fix them.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import logging
import time
import traceback
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from torchwise.doctor.checks.base import Check, Run, Verdict
from torchwise.doctor.report import Status
from torchwise.doctor.trace import frame_owner, short_location


@dataclass
class Blame:
    """Whose code a failure happened in."""

    owner: str  # "user", "library" (torch's modules, an installed package) or "unknown"
    at: str | None = None  # innermost frame of the model's code
    user_at: str | None = None  # innermost frame of the user's own code


@dataclass
class ExportM:
    export_error: str | None = None
    export_blame: Blame | None = None
    export_nodes: int | None = None
    #: torch._dynamo.explain's count: -1 when it could not trace forward at all
    break_count: int = 0
    user_breaks: list[str] = field(default_factory=list)
    library_breaks: list[str] = field(default_factory=list)
    compile_error: str | None = None
    seconds: float = 0.0


def _model_frames(frames: Sequence[traceback.FrameSummary]) -> list[traceback.FrameSummary]:
    """The frames of the model's code: the user's, installed libraries, torch.nn modules."""
    return [
        f
        for f in frames
        if frame_owner(f.filename) in ("user", "library")
        or (frame_owner(f.filename) == "torch" and "/nn/modules/" in f.filename)
    ]


def blame(frames: Sequence[traceback.FrameSummary]) -> Blame:
    model = _model_frames(frames)
    if not model:
        return Blame("unknown")
    user = [f for f in model if frame_owner(f.filename) == "user"]
    innermost = model[-1]
    owner = "user" if frame_owner(innermost.filename) == "user" else "library"
    return Blame(owner, short_location(innermost), short_location(user[-1]) if user else None)


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    names = (
        "torch._dynamo",
        "torch.export",
        "torch._export",
        "torch.fx.experimental.symbolic_shapes",
    )
    loggers = [logging.getLogger(n) for n in names]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.CRITICAL)
    sink = io.StringIO()  # export errors and explain() print whole graphs
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(sink):
            warnings.simplefilter("ignore")
            with contextlib.redirect_stderr(sink):
                yield
    finally:
        for lg, level in zip(loggers, levels, strict=True):
            lg.setLevel(level)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:300] if text else ''}"


class Exportable(Check[ExportM]):
    cost = "torch.export plus torch._dynamo.explain: seconds, growing with the graph"

    def measure(self, run: Run) -> ExportM:
        ctx = run.ctx
        m = ExportM()
        start = time.perf_counter()
        ctx.model.eval()
        args, kwargs = ctx.fresh_inputs()
        try:
            with _quiet():
                try:
                    program = torch.export.export(ctx.model, args, kwargs, strict=False)
                    m.export_nodes = len(program.graph.nodes)
                except Exception as exc:
                    m.export_error = _first_line(exc)
                    m.export_blame = blame(traceback.extract_tb(exc.__traceback__))
                try:
                    dynamo: Any = importlib.import_module("torch._dynamo")
                    explained = dynamo.explain(ctx.model)(*args, **kwargs)
                    m.break_count = int(explained.graph_break_count)
                    # explain lists reasons even when it counts no break ("step_unsupported"
                    # on a call into nn.LSTM that it runs eagerly): only counted breaks count
                    reasons = explained.break_reasons if m.break_count > 0 else []
                    for reason in reasons[:20]:
                        text = str(reason.reason).splitlines()[0][:160]
                        where = blame(reason.user_stack or [])
                        line = f"{text} at {where.at}" if where.at else text
                        (m.user_breaks if where.owner == "user" else m.library_breaks).append(line)
                except Exception as exc:
                    m.compile_error = _first_line(exc)
        finally:
            with contextlib.suppress(Exception):  # drop the code dynamo cached on forward
                importlib.import_module("torch._dynamo").reset()
        m.seconds = round(time.perf_counter() - start, 2)
        return m

    def judge(self, m: ExportM) -> Verdict:
        evidence: dict[str, Any] = {"seconds": m.seconds}
        if m.export_nodes is not None:
            evidence["export_nodes"] = m.export_nodes
        if m.user_breaks:
            evidence["graph_breaks_in_your_code"] = m.user_breaks
        if m.library_breaks:
            evidence["graph_breaks_in_libraries"] = m.library_breaks
        if m.compile_error:
            evidence["compile_error"] = m.compile_error
        if m.break_count < 0:
            evidence["compile_note"] = "torch._dynamo.explain could not trace forward"
        if m.export_error:
            return self._export_failed(m, evidence)
        if m.user_breaks:
            return Verdict(
                Status.WARN,
                f"torch.export works; torch.compile breaks the graph {len(m.user_breaks)} times "
                "in your code (warns on any graph break in your own code)",
                evidence=evidence,
                where=sorted({b.rsplit(" at ", 1)[-1] for b in m.user_breaks if " at " in b}),
                causes=["print/logging, .item(), numpy or other non-torch calls inside forward"],
                fix="move the calls named in graph_breaks_in_your_code out of forward",
            )
        summary = "torch.export succeeds and torch.compile captures your code with no graph break"
        if m.library_breaks:
            summary += f" ({len(m.library_breaks)} breaks inside libraries, listed as evidence)"
        return Verdict(Status.PASS, summary, evidence=evidence)

    def _export_failed(self, m: ExportM, evidence: dict[str, Any]) -> Verdict:
        assert m.export_error is not None
        where = m.export_blame or Blame("unknown")
        evidence["export_error"] = m.export_error
        if where.at:
            evidence["failed_at"] = where.at
        if where.owner == "unknown":
            # No model code in the traceback: torch.export refused something about the
            # call itself (an output type it cannot flatten, such as a library's cache).
            return Verdict.cannot_run(
                f"torch.export fails outside the model's code ({m.export_error[:160]}); "
                "nothing in your code to fix here",
                **evidence,
            )
        if where.owner == "library":
            # Not the user's code: the check cannot judge it (a skip, or a warning when
            # --checks asked for it), and says how to get past the library's limit.
            called = f", called from your {where.user_at}" if where.user_at else ""
            verdict = Verdict.cannot_run(
                f"torch.export fails inside library code at {where.at}{called}, not in your "
                f"code ({m.export_error[:100]}); to export, call the library the way its docs "
                "give for export (nn.Transformer*: pass is_causal=True with a causal mask)",
                **evidence,
            )
            verdict.where = [where.user_at] if where.user_at else []
            return verdict
        at = f" at {where.at}" if where.at else ""
        return Verdict(
            Status.FAIL,
            f"torch.export fails{at}: {m.export_error[:160]}",
            evidence=evidence,
            where=[where.at] if where.at else [],
            causes=[
                "Python control flow on tensor values (if x.sum() > 0, while loss > eps)",
                ".item()/.tolist()/.numpy() in forward, or calls into non-torch libraries",
                "shapes computed from tensor data",
            ],
            fix="replace data-dependent branches with torch.where / torch.cond, keep values "
            "as tensors, move numpy/print calls out of forward",
        )
