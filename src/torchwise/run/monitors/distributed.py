"""One rank of a ``--nproc`` run: what it records for the cross-rank checks (TWR601-TWR606).

Each rank runs the whole script under ``torch.distributed.run``. This monitor
makes that possible on CPU ranks (``init_process_group`` and ``new_group`` use
gloo whatever the script asks, with the run's collective time limit;
``SyncBatchNorm``, which has no CPU kernel, is computed with a differentiable
all-reduce of the batch statistics) and records what only a comparison of the
ranks can judge, in the rank's result (:mod:`torchwise.run.crossrank` compares
them in the parent):

- the sample indices and batch fingerprints of each training pass (TWR601);
- a fingerprint of every optimized parameter after the first steps (TWR602);
- every collective call, written to ``collectives.rank<N>.jsonl`` as it starts
  and ends, so a rank stuck in one still says where (TWR603);
- ``torch.save`` paths (TWR606).

Judged here, per rank: parameters a ``DistributedDataParallel`` model never
gives a gradient (TWR604), batch norm that is not synchronised although the
script converted a model to ``SyncBatchNorm`` (TWR605), and a step whose
gradients came from calling the module a ``DistributedDataParallel`` wraps
instead of the wrapper, with no collective since the last step (TWR607: nothing
averaged the gradients; seen at the first step, even while warm-up keeps the
learning rate at 0 and the ranks' weights still agree).
"""

from __future__ import annotations

import datetime
import functools
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from torchwise.findings import Severity
from torchwise.run.monitors.modules import ModuleMonitor
from torchwise.run.monitors.optim import OptimizerMonitor
from torchwise.run.session import Session
from torchwise.run.sites import Site, is_user_file, user_site

COLLECTIVES = (
    "all_reduce", "broadcast", "barrier", "all_gather", "all_gather_into_tensor", "reduce",
    "reduce_scatter", "reduce_scatter_tensor", "gather", "scatter", "all_to_all",
    "all_to_all_single", "all_gather_object", "broadcast_object_list", "gather_object",
    "scatter_object_list", "monitored_barrier",
)  # fmt: skip
#: steps after which every rank fingerprints its parameters
FINGERPRINTED_STEPS = (1, 2, 3)


class GlooRanks:
    """What makes a script written for NCCL run on CPU ranks, without any check."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def install(self) -> None:
        patches = self.session.patches
        timeout = self.session.options.collective_timeout
        patches.setattr(dist, "init_process_group", _gloo_init(dist.init_process_group, timeout))
        patches.setattr(dist, "new_group", _gloo_group(dist.new_group))
        patches.setattr(nn.SyncBatchNorm, "forward", _sync_batch_norm_on_cpu)
        # DDP refuses SyncBatchNorm on CPU modules because torch has no CPU kernel for it;
        # the forward above is one
        ddp = nn.parallel.DistributedDataParallel
        patches.setattr(ddp, "_passing_sync_batchnorm_handle", lambda wrapper, module: None)


def _gloo_init(original: Callable[..., Any], seconds: float) -> Callable[..., Any]:
    timeout = datetime.timedelta(seconds=seconds)

    @functools.wraps(original)
    def init_process_group(*args: Any, **kwargs: Any) -> Any:
        if args:
            kwargs.setdefault("backend", args[0])
            args = args[1:]
        kwargs["backend"] = "gloo"
        kwargs["timeout"] = timeout
        kwargs.pop("device_id", None)
        return original(*args, **kwargs)

    return init_process_group


def _gloo_group(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def new_group(*args: Any, **kwargs: Any) -> Any:
        if len(args) > 2:  # new_group(ranks, timeout, backend, ...)
            args = (*args[:2], "gloo", *args[3:])
        else:
            kwargs["backend"] = "gloo"
        kwargs.pop("device_id", None)
        return original(*args, **kwargs)

    return new_group


class DistributedMonitor:
    """Records a rank's facts for the cross-rank checks; judges TWR604 and TWR605."""

    def __init__(
        self, session: Session, modules: ModuleMonitor, optimizers: OptimizerMonitor
    ) -> None:
        self.session = session
        self.modules = modules
        self.optimizers = optimizers
        self.log = Path(session.workdir).parent / f"collectives.rank{session.rank}.jsonl"
        self.sequence = 0
        self.ddp: list[tuple[Any, Site | None, bool]] = []  # (module, line, find_unused)
        self.converted: list[tuple[int, Site | None]] = []  # (id of the result, line)
        self.params: dict[str, dict[str, tuple[float, float]]] = {}
        self.saves: list[dict[str, object]] = []
        self.unused_checked = False
        self.calls_at_last_step = 0
        self.collectives_at_last_step = 0

    def install(self) -> None:
        GlooRanks(self.session).install()
        patches = self.session.patches
        for name in COLLECTIVES:
            if hasattr(dist, name):
                patches.setattr(dist, name, self._collective(name, getattr(dist, name)))
        patches.setattr(torch, "save", self._save(torch.save))
        ddp = nn.parallel.DistributedDataParallel
        patches.setattr(ddp, "__init__", self._ddp(ddp.__init__))
        patches.setattr(
            nn.SyncBatchNorm,
            "convert_sync_batchnorm",
            classmethod(self._convert(nn.SyncBatchNorm.convert_sync_batchnorm)),
        )
        self.reports = ReportedValues(self.session)
        self.reports.install()
        self.session.listen("step_pre", self._step_pre)
        self.session.listen("step_pre", self._bypassed_wrapper)
        self.session.listen("step_post", self._step_post)

    # collectives ------------------------------------------------------------------
    def _write(self, event: dict[str, object]) -> None:
        with self.log.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(event) + "\n")

    def _collective(self, name: str, original: Callable[..., Any]) -> Callable[..., Any]:
        monitor = self

        @functools.wraps(original)
        def collective(*args: Any, **kwargs: Any) -> Any:
            monitor.sequence += 1
            site = user_site()
            event: dict[str, object] = {
                "seq": monitor.sequence, "op": name, "step": monitor.session.steps,
                "site": site.to_json() if site is not None else None,
            }  # fmt: skip
            monitor._write({**event, "phase": "enter"})
            try:
                result = original(*args, **kwargs)
            except Exception as exc:
                monitor._write({**event, "phase": "raised", "error": str(exc)[:300]})
                raise
            monitor._write({**event, "phase": "exit"})
            return result

        return collective

    def _save(self, original: Callable[..., Any]) -> Callable[..., Any]:
        monitor = self

        @functools.wraps(original)
        def save(obj: Any, f: Any, *args: Any, **kwargs: Any) -> Any:
            if isinstance(f, (str, os.PathLike)):
                site = user_site()
                monitor.saves.append({
                    "path": os.path.abspath(os.fspath(f)),
                    "site": site.to_json() if site is not None else None,
                })  # fmt: skip
            return original(obj, f, *args, **kwargs)

        return save

    # DDP and SyncBatchNorm --------------------------------------------------------
    def _ddp(self, original: Callable[..., Any]) -> Callable[..., Any]:
        monitor = self

        @functools.wraps(original)
        def init(wrapper: Any, module: nn.Module, *args: Any, **kwargs: Any) -> None:
            original(wrapper, module, *args, **kwargs)
            unused = bool(getattr(wrapper, "find_unused_parameters", False))
            monitor.ddp.append((wrapper, user_site(), unused))
            monitor.collectives_at_last_step = monitor.sequence  # its own broadcast aside

        return init

    def _convert(self, original: Callable[..., Any]) -> Callable[..., Any]:
        monitor = self
        function = original.__func__ if hasattr(original, "__func__") else original

        def convert(cls: type, module: nn.Module, *args: Any, **kwargs: Any) -> Any:
            result = function(cls, module, *args, **kwargs)
            monitor.converted.append((id(result), user_site()))
            return result

        return convert

    # steps ------------------------------------------------------------------------
    def _step_pre(self, optimizer: Any) -> None:
        if self.unused_checked or not self.ddp:
            return
        self.unused_checked = True
        for wrapper, site, find_unused in self.ddp:
            unused = [
                name for name, p in wrapper.module.named_parameters()
                if p.requires_grad and p.grad is None
            ]  # fmt: skip
            if unused and not find_unused:
                self.session.report(
                    "TWR604",
                    site,
                    f"{len(unused)} parameter(s) of the DistributedDataParallel model get no "
                    "gradient, and find_unused_parameters is False: the next iteration raises "
                    "'Expected to have finished reduction in the prior iteration'",
                    evidence={"parameters": ", ".join(unused[:4])},
                )
            elif find_unused and not unused:
                self.session.report(
                    "TWR604",
                    site,
                    "find_unused_parameters=True but every parameter gets a gradient: each "
                    "iteration pays an extra traversal of the graph for nothing",
                    severity=Severity.INFO,
                )

    def _bypassed_wrapper(self, optimizer: Any) -> None:
        """TWR607: the gradients of this step came from the wrapped module, called bare."""
        calls = self.modules.calls[self.calls_at_last_step :]
        collectives = self.sequence - self.collectives_at_last_step
        if not self.ddp or self.session.world < 2 or collectives:
            return
        for wrapper, site, _ in self.ddp:
            inner = id(wrapper.module)
            if any(call.module_id == id(wrapper) for call in calls):
                continue
            bare = next((c for c in calls if c.module_id == inner and c.used and c.grad), None)
            if bare is None:
                continue
            self.session.report(
                "TWR607",
                bare.site,
                f"the model is called as the module DistributedDataParallel wraps, not "
                f"through the wrapper built at line {site.line if site else '?'}: its "
                "gradients are never averaged across ranks, so each rank trains its own copy",
                evidence={"ranks": self.session.world},
            )

    def _step_post(self, optimizer: Any) -> None:
        self.calls_at_last_step = len(self.modules.calls)
        self.collectives_at_last_step = self.sequence
        step = self.session.optimizer_steps.get(id(optimizer), 0) + 1
        if step not in FINGERPRINTED_STEPS:
            return
        owners = self.modules.parameter_owners()
        prints: dict[str, tuple[float, float]] = {}
        with torch.no_grad():
            for group in optimizer.param_groups:
                for p in group["params"]:
                    name = owners.get(id(p), (f"#{len(prints)}", 0))[0].removeprefix("module.")
                    flat = p.detach().reshape(-1).double()
                    prints[name] = (float(flat.sum()), float(flat.abs().sum()))
        self.params[str(step)] = prints
        if "step_site" not in self.session.facts:
            site = user_site()
            self.session.facts["step_site"] = site.to_json() if site is not None else None

    # the end ----------------------------------------------------------------------
    def finish(self) -> None:
        self._unsynchronised()
        passes = []
        for ran in self.session.passes:
            if ran.training:
                passes.append({
                    "loader": ran.loader_site.to_json() if ran.loader_site else None,
                    "indices": ran.indices[:1024],
                    "fingerprints": [repr(f) for f in ran.fingerprints[:8]],
                })  # fmt: skip
        self.session.facts.update(
            passes=passes,
            params=self.params,
            saves=self.saves,
            reported=self.reports.lines,
            ddp=len(self.ddp),
            crash=None if self.session.crash is None else {
                "site": self.session.crash[0].to_json() if self.session.crash[0] else None,
                "error": self.session.crash[1],
            },
        )  # fmt: skip

    def _unsynchronised(self) -> None:
        if not self.converted or not self.ddp:
            return
        for wrapper, _, _ in self.ddp:
            plain = [
                name for name, layer in wrapper.module.named_modules()
                if isinstance(layer, nn.modules.batchnorm._BatchNorm)
                and not isinstance(layer, nn.SyncBatchNorm) and layer.training
            ]  # fmt: skip
            if plain:
                self.session.report(
                    "TWR605",
                    self.converted[0][1],
                    f"the script converts to SyncBatchNorm, but the model that trains has "
                    f"{len(plain)} batch-norm layer(s) that are not synchronised: each rank "
                    "normalises with its own batch only",
                    evidence={"layers": ", ".join(plain[:4])},
                )
                return


def _sync_batch_norm_on_cpu(self: nn.SyncBatchNorm, input: torch.Tensor) -> torch.Tensor:
    """SyncBatchNorm's forward for CPU ranks: statistics summed over ranks by all-reduce."""
    if not self.training or not dist.is_available() or not dist.is_initialized():
        return F.batch_norm(
            input, self.running_mean, self.running_var, self.weight, self.bias,
            self.training or self.running_mean is None, self.momentum or 0.0, self.eps,
        )  # fmt: skip
    from torch.distributed.nn.functional import all_reduce

    channels = input.shape[1]
    dims = [0, *range(2, input.dim())]
    count = torch.tensor([input.numel() / channels], dtype=input.dtype)
    stacked = torch.cat([input.sum(dims), (input * input).sum(dims), count])
    totals: torch.Tensor = all_reduce(stacked)  # type: ignore[no-untyped-call]
    n = totals[-1]
    mean = totals[:channels] / n
    var = totals[channels : 2 * channels] / n - mean * mean  # biased, as batch norm uses
    if self.track_running_stats and self.running_mean is not None and self.running_var is not None:
        with torch.no_grad():
            momentum = self.momentum if self.momentum is not None else 0.1
            self.running_mean.mul_(1 - momentum).add_(momentum * mean.detach())
            unbiased = var.detach() * n / max(float(n) - 1, 1.0)
            self.running_var.mul_(1 - momentum).add_(momentum * unbiased)
            if self.num_batches_tracked is not None:
                self.num_batches_tracked.add_(1)
    shape = [1, channels] + [1] * (input.dim() - 2)
    out = (input - mean.reshape(shape)) / torch.sqrt(var.reshape(shape) + self.eps)
    if self.weight is not None and self.bias is not None:
        out = out * self.weight.reshape(shape) + self.bias.reshape(shape)
    return out


class ReportedValues:
    """What the rank prints or logs from the user's code, for TWR608: the first
    lines at each place, with their text, compared across ranks in the parent."""

    PER_SITE = 8
    SITES = 64

    def __init__(self, session: Session) -> None:
        self.session = session
        self.lines: list[dict[str, object]] = []
        self._counts: dict[tuple[str, int], int] = {}

    def install(self) -> None:
        import builtins
        import logging

        patches = self.session.patches
        original_print = builtins.print
        reports = self

        def print_(*args: Any, **kwargs: Any) -> None:
            original_print(*args, **kwargs)
            if kwargs.get("file") in (None, sys.stdout, sys.stderr):
                reports.record(user_site(), " ".join(str(arg) for arg in args))

        patches.setattr(builtins, "print", print_)
        original_handle = logging.Logger.handle

        def handle(logger: logging.Logger, record: logging.LogRecord) -> None:
            original_handle(logger, record)
            if is_user_file(record.pathname):
                site = Site(os.path.abspath(record.pathname), record.lineno)
                reports.record(site, record.getMessage())

        patches.setattr(logging.Logger, "handle", handle)

    def record(self, site: Site | None, text: str) -> None:
        if site is None or self.session.replaying:
            return
        key = (site.path, site.line)
        count = self._counts.get(key, 0)
        if count >= self.PER_SITE or (count == 0 and len(self._counts) >= self.SITES):
            return
        self._counts[key] = count + 1
        self.lines.append({"site": site.to_json(), "text": text[:300]})
