"""Portability checks: device-consistency (a run on the meta device) and exportable
(torch.export plus the torch.compile graph-break count)."""

from __future__ import annotations

import contextlib
import importlib
import io
import logging
import signal
import threading
import time
import warnings
from collections.abc import Iterator
from typing import Any

import torch
from torch import nn

from torchwise.doctor.context import Context, map_tensors, tensors_in
from torchwise.doctor.registry import register, result
from torchwise.doctor.report import CheckResult, Status


def _unregistered(model: nn.Module) -> tuple[list[str], list[str]]:
    """(plain tensor attributes, lists/dicts of modules that nn.Module does not see)."""
    tensors, containers = [], []
    for name, module in model.named_modules():
        prefix = f"{name}." if name else ""
        for key, value in vars(module).items():
            if isinstance(value, torch.Tensor) and not isinstance(value, nn.Parameter):
                tensors.append(prefix + key)
            elif (
                isinstance(value, (list, tuple)) and any(isinstance(v, nn.Module) for v in value)
            ) or (
                isinstance(value, dict)
                and not key.startswith("_")
                and any(isinstance(v, nn.Module) for v in value.values())
            ):
                containers.append(prefix + key)
    return tensors, containers


_META_LIMITS = ("cannot be called on meta", "data-dependent", "meta tensors", "nonzero", "item()")


@register(
    "device-consistency", title="runs with everything on the meta device", cost="1 fwd (meta)"
)
def device_consistency(ctx: Context) -> CheckResult:
    plain, containers = _unregistered(ctx.model)
    evidence: dict[str, Any] = {}
    if plain:
        evidence["unregistered_tensors"] = plain
    if containers:
        evidence["unregistered_module_containers"] = containers
    meta = {
        name: t.to("meta")
        for name, t in [*ctx.model.named_parameters(), *ctx.model.named_buffers()]
    }
    args, kwargs = map_tensors(ctx.fresh_inputs(), lambda t: t.to("meta"))
    stack: list[str] = []
    handles = []
    for name, module in ctx.model.named_modules():

        def push(mod: nn.Module, a: object, name: str = name or type(module).__name__) -> None:
            stack.append(name)

        def pop(mod: nn.Module, a: object, out: object) -> None:
            stack.pop()

        handles.append(module.register_forward_pre_hook(push))
        handles.append(module.register_forward_hook(pop))
    error = None
    try:
        ctx.model.eval()
        with torch.no_grad():
            out = torch.func.functional_call(ctx.model, meta, args, kwargs, strict=False)
        stray = [t for t in tensors_in(out) if t.device.type != "meta"]
        if stray:
            error = f"an output tensor is on {stray[0].device} although every input was on meta"
    except Exception as exc:
        error = f"{type(exc).__name__}: {str(exc).splitlines()[0][:240]}"
    finally:
        for h in handles:
            h.remove()
    culprit = stack[-1] if stack else None
    if error and any(m in error for m in _META_LIMITS) and "device" not in error:
        evidence["meta_run"] = f"not possible: {error}"
        error = None  # data-dependent ops: the meta device cannot tell us anything
        ran = False
    else:
        ran = True
    if error or containers:
        if error:
            evidence["meta_run_error"] = error
            if culprit:
                evidence["failing_module"] = culprit
        where = ([culprit] if culprit and error else []) + containers
        return result(
            "device-consistency",
            Status.FAIL,
            "the model does not follow its parameters to another device"
            + (f" (fails in `{culprit}`)" if culprit and error else ""),
            evidence=evidence,
            where=where,
            causes=[
                "a tensor created in forward without device= (torch.zeros(n), torch.arange(T)"
                ", torch.tensor(...)) or with a fixed device='cpu'/'cuda'",
                "a tensor stored as a plain attribute (self.mask = torch.ones(...)) instead of "
                "register_buffer, so .to()/.cuda() does not move it",
                "submodules kept in a plain list/dict (use nn.ModuleList/nn.ModuleDict), so "
                "their parameters are neither moved, saved nor trained",
            ],
            fix="create tensors with device=x.device (or torch.zeros_like / x.new_zeros); "
            "register_buffer for constant tensors; nn.ModuleList for lists of layers",
        )
    if plain:
        return result(
            "device-consistency",
            Status.WARN,
            f"{len(plain)} tensors are plain attributes: .to(device) and state_dict skip them",
            evidence=evidence,
            where=plain,
            causes=["self.x = torch.tensor(...) instead of self.register_buffer('x', ...)"],
            fix="use self.register_buffer(name, tensor, persistent=False) for constants",
        )
    summary = (
        "forward runs with every parameter, buffer and input on the meta device"
        if ran
        else "no device problems found statically; the meta run is not possible "
        "(data-dependent ops)"
    )
    return result("device-consistency", Status.PASS, summary, evidence=evidence)


class _OverBudget(Exception):
    pass


@contextlib.contextmanager
def _deadline(seconds: float) -> Iterator[None]:
    """Interrupt the block after ``seconds`` (main thread on Unix only; else no limit)."""
    usable = hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
    if not usable or seconds <= 0:
        yield
        return

    def fire(signum: int, frame: Any) -> None:
        raise _OverBudget()

    previous = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    loggers = [
        logging.getLogger(n)
        for n in (
            "torch._dynamo",
            "torch.export",
            "torch._export",
            "torch.fx.experimental.symbolic_shapes",
        )
    ]
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


@register("exportable", title="torch.export works; torch.compile graph breaks", cost="seconds")
def exportable(ctx: Context) -> CheckResult:
    budget = ctx.options.export_budget_s
    evidence: dict[str, Any] = {"budget_s": budget}
    export_error = None
    breaks: list[str] = []
    start = time.perf_counter()
    ctx.model.eval()
    args, kwargs = ctx.fresh_inputs()
    try:
        with _quiet(), _deadline(budget):
            try:
                program = torch.export.export(ctx.model, args, kwargs, strict=False)
                evidence["export_nodes"] = len(program.graph.nodes)
            except _OverBudget:
                raise
            except Exception as exc:
                export_error = _first_line(exc)
            evidence["export_s"] = round(time.perf_counter() - start, 2)
            try:
                dynamo: Any = importlib.import_module("torch._dynamo")
                explained = dynamo.explain(ctx.model)(*args, **kwargs)
                evidence["graph_breaks"] = int(explained.graph_break_count)
                for reason in explained.break_reasons[:10]:
                    frame = reason.user_stack[-1] if reason.user_stack else None
                    at = f" at {frame.filename.rsplit('/', 1)[-1]}:{frame.lineno}" if frame else ""
                    breaks.append(f"{str(reason.reason).splitlines()[0][:160]}{at}")
            except _OverBudget:
                raise
            except Exception as exc:
                evidence["compile_error"] = _first_line(exc)
    except _OverBudget:
        evidence["seconds"] = round(time.perf_counter() - start, 2)
        return result(
            "exportable",
            Status.WARN,
            f"export/compile did not finish within the {budget:g}s budget",
            evidence=evidence,
            fix="raise the budget (--export-budget SECONDS)",
        )
    finally:
        with contextlib.suppress(Exception):
            importlib.import_module(
                "torch._dynamo"
            ).reset()  # drop the compiled code dynamo cached on forward
    evidence["seconds"] = round(time.perf_counter() - start, 2)
    if breaks:
        evidence["break_reasons"] = breaks
    if export_error:
        evidence["export_error"] = export_error
        return result(
            "exportable",
            Status.FAIL,
            f"torch.export fails: {export_error[:160]}",
            evidence=evidence,
            causes=[
                "Python control flow on tensor values (if x.sum() > 0, while loss > eps)",
                ".item()/.tolist()/.numpy() in forward, or calls into non-torch libraries",
                "shapes computed from tensor data",
            ],
            fix="replace data-dependent branches with torch.where / torch.cond, keep values "
            "as tensors, move numpy/print calls out of forward",
        )
    n_breaks = int(evidence.get("graph_breaks", 0))
    if n_breaks or "compile_error" in evidence:
        return result(
            "exportable",
            Status.WARN,
            f"torch.export works; torch.compile breaks the graph {n_breaks} times",
            evidence=evidence,
            causes=["print/logging, .item(), numpy or other non-torch calls inside forward"],
            fix="move the calls named in break_reasons out of forward",
        )
    return result(
        "exportable",
        Status.PASS,
        "torch.export succeeds and torch.compile captures one graph with no breaks",
        evidence=evidence,
    )
