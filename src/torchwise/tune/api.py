"""``torchwise.tune.tune(model, inputs)``: measured performance advice for a training step.

The run, in order (every stage uses private copies; the user's model, its
gradients, the global RNG and torch's thread count are as they were afterwards):

1. build the workload: the batch (from ``inputs`` or the first batch of
   ``loader``), the loss (:mod:`torchwise.losses`), the optimizer recipe;
2. time the user's DataLoader under other settings, when one is given;
3. check and time every knob that applies, then combine the winners greedily
   (:mod:`torchwise.tune.search`);
4. profile the baseline step (phases, operators, syncs, memory);
5. optionally find a batch size and a learning rate (:mod:`torchwise.tune.finders`).
"""

from __future__ import annotations

import contextlib
import os
import platform
import time
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch import nn

from torchwise.errors import TorchwiseError, UserCodeError
from torchwise.losses import LossChoice, choose_loss
from torchwise.tensortree import map_tensors, tensors_in
from torchwise.tune.checkpointing import find_blocks
from torchwise.tune.knobs import Facts, available_knobs, loader_knob
from torchwise.tune.loader import LoaderSource, load_loader
from torchwise.tune.loader_scan import scan_loader
from torchwise.tune.loop import Loop, canonical_loop
from torchwise.tune.memory import StepMemory, live_training_state, measure_step_memory
from torchwise.tune.optim import OptimizerSpec, parse_optimizer
from torchwise.tune.options import Budgets, TuneOptions, validate_options
from torchwise.tune.profile import Profile, profile_step
from torchwise.tune.report import Environment, TuneReport
from torchwise.tune.script import read_train_script
from torchwise.tune.search import Search, SearchConfig
from torchwise.tune.session import SessionConfig
from torchwise.tune.step import (
    Batch,
    StepSettings,
    TrainingStep,
    Workload,
    copy_model,
    primary_output,
)

Notify = Callable[[str], None]


def tune(
    model: nn.Module,
    inputs: Any = None,
    *,
    kwargs: dict[str, Any] | None = None,
    target: torch.Tensor | None = None,
    loader: str | LoaderSource | None = None,
    options: TuneOptions | None = None,
    name: str | None = None,
    notify: Notify = lambda _: None,
    **overrides: Any,
) -> TuneReport:
    """Measure ``model``'s training step and report what would make it faster.

    ``inputs`` is a tensor or a tuple of forward arguments (``kwargs`` the
    keyword ones), ``target`` the loss's labels (made up to fit the output when
    omitted). With ``loader`` (``"data.py:make_loader"`` or a
    :class:`~torchwise.tune.loader.LoaderSource`) batches come from the user's
    DataLoader and its settings are tuned too. ``overrides`` are
    :class:`TuneOptions` fields, e.g. ``tune(model, x, budget_s=20, compile=True)``.
    """
    options = options or TuneOptions()
    if overrides:
        options = TuneOptions(**{**options.__dict__, **overrides})
    validate_options(options)
    started = time.perf_counter()
    device = _device(options.device)
    script = (
        read_train_script(options.train_script, options.device) if options.train_script else None
    )
    source = load_loader(loader) if isinstance(loader, str) else loader
    label = name or type(model).__name__
    with _restored_state(device):
        torch.manual_seed(options.seed)
        workload, loss_choice = build_workload(
            model, inputs, kwargs, target, source, options, device, label
        )
        environment = Environment.capture(device)
        budgets = Budgets.split(options, has_loader=source is not None)
        scan, search_budget_s = None, budgets.search_s
        if source is not None:
            notify("timing the DataLoader under other settings")
            budget = dict(options.session.__dict__, budget_s=budgets.loader_s)
            scan_started = time.perf_counter()
            scan = scan_loader(source, device, SessionConfig(**budget))
            spent = time.perf_counter() - scan_started
            search_budget_s = _after_scan(budgets.search_s + budgets.loader_s, spent)
        facts = workload_facts(workload, options)
        knobs, skipped = available_knobs(facts, only=options.knobs, skip=options.skip)
        if scan is not None and scan.best != scan.user and "loader" not in options.skip:
            knobs.append(loader_knob(scan.best, scan.user))
        search = Search(
            workload,
            knobs,
            SearchConfig(
                budget_s=search_budget_s,
                session=options.session,
                compile_budget_s=options.compile_budget_s,
                seed=options.seed,
            ),
            notify=notify,
        )
        result = search.run()
        baseline = result.stages[0].session if result.stages else None
        step_s = baseline.baseline.median_s if baseline is not None else None
        profile, memory = None, None
        if options.profile:
            notify("profiling the baseline step")
            profile, memory = _profile(workload, step_s)
        batch_size = lr = None
        if options.find_batch_size:
            from torchwise.tune.batch_size import find_batch_size

            notify(
                f"searching for the batch size with the best throughput that fits "
                f"(up to {budgets.batch_size_s:.0f} s)"
            )
            batch_size = find_batch_size(
                workload,
                max_batch_size=options.max_batch_size,
                memory_budget=options.memory_budget,
                headroom=options.headroom,
                batch_dim=options.batch_dim,
                time_budget_s=budgets.batch_size_s,
                start_step_s=step_s if step_s == step_s else None,
                notify=notify,
            )
        if options.find_lr:
            from torchwise.tune.lr_range import lr_range_test

            notify("running the learning-rate range test")
            lr = lr_range_test(
                workload,
                lr_min=options.lr_range[0],
                lr_max=options.lr_range[1],
                steps=options.lr_steps,
                seed=options.seed,
            )
    environment.finish()
    return TuneReport(
        name=label,
        environment=environment,
        workload=describe_workload(workload, loss_choice, source, options.batch_dim),
        search=result,
        skipped=[(k, reason) for k, reason in skipped if reason != "not selected"],
        profile=profile,
        memory=memory,
        loader_scan=scan,
        batch_size=batch_size,
        lr=lr,
        session=options.session,
        budget_s=options.budget_s,
        elapsed_s=time.perf_counter() - started,
        canonical=canonical_for(workload, loss_choice, source),
        script=script,
    )


def _after_scan(budget_s: float, scan_s: float) -> float:
    """The search's share of ``budget_s`` once the DataLoader scan took ``scan_s`` of it.

    The scan is one of the timing sessions the budget covers; the search keeps at
    least half, so a scan that overran its quarter (its first look always
    completes) cannot leave the stages nothing.
    """
    return max(budget_s - scan_s, budget_s / 2)


def _device(text: str) -> torch.device:
    device = torch.device(text)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise TorchwiseError(
            "--device cuda: CUDA is not available on this machine",
            hint="run on a GPU machine, or tune the CPU step with --device cpu",
        )
    if device.type not in ("cpu", "cuda"):
        raise TorchwiseError(f"tune runs on cpu or cuda, not {device.type}")
    return device


@contextlib.contextmanager
def _restored_state(device: torch.device) -> Iterator[None]:
    """Leave the caller's RNG streams and thread count as they were."""
    threads = torch.get_num_threads()
    devices = [device.index or 0] if device.type == "cuda" else []
    with torch.random.fork_rng(devices=devices):
        try:
            yield
        finally:
            torch.set_num_threads(threads)


def _host(obj: Any) -> Any:
    return map_tensors(obj, lambda t: t.detach().cpu())


def build_workload(
    model: nn.Module,
    inputs: Any,
    kwargs: dict[str, Any] | None,
    target: torch.Tensor | None,
    source: LoaderSource | None,
    options: TuneOptions,
    device: torch.device,
    label: str,
) -> tuple[Workload, LossChoice]:
    """The batch (host copies), the loss and the optimizer for the step."""
    if source is not None:
        batch = source.first_batch()
        target = batch.target if target is None else target
    else:
        args = inputs if isinstance(inputs, tuple) else (() if inputs is None else (inputs,))
        batch = Batch(_host(args), _host(dict(kwargs or {})), None)
    optimizer = (
        options.optimizer
        if isinstance(options.optimizer, OptimizerSpec)
        else parse_optimizer(options.optimizer)
    )
    if any(p.device.type == "meta" for p in model.parameters()):
        raise TorchwiseError(
            f"{label} has its parameters on the meta device (no values): tune trains real steps",
            hint="build it on the CPU (--build-on cpu) with a configuration that fits in memory",
        )
    probe = copy_model(model).to(device)
    probe.train()
    moved = map_tensors((batch.args, batch.kwargs), lambda t: t.to(device))
    try:
        with torch.no_grad():
            output = primary_output(probe(*moved[0], **moved[1]))
    except TorchwiseError:
        raise
    except Exception as exc:
        raise UserCodeError.from_exception(exc, doing=f"forward of {label}") from None
    choice = choose_loss(output, options.loss, target, seed=options.seed)
    batch = Batch(batch.args, batch.kwargs, choice.target.detach().cpu())
    workload = Workload(model, batch, choice.fn, optimizer, device, source, label)
    return workload, choice


def workload_facts(workload: Workload, options: TuneOptions) -> Facts:
    model, device = workload.model, workload.device
    spec = workload.optimizer
    cuda = device.type == "cuda"
    capability = torch.cuda.get_device_capability(device) if cuda else (0, 0)
    return Facts(
        device=device.type,
        cores=os.cpu_count() or 1,
        threads=torch.get_num_threads(),
        has_conv=any(isinstance(m, nn.Conv2d) for m in model.modules()),
        optimizer_name=spec.name,
        optimizer_args=frozenset(a for a in ("foreach", "fused", "capturable") if spec.accepts(a)),
        has_loader=workload.loader is not None,
        compile=options.compile,
        compile_backend=options.compile_backend,
        checkpoint_blocks=find_blocks(model)[0],
        bf16_supported=torch.cuda.is_bf16_supported() if cuda else True,
        tf32_capable=capability >= (8, 0),
        static_shapes=workload.loader is None or workload.loader.static_shapes,
    )


def _profile(workload: Workload, step_s: float | None) -> tuple[Profile | None, StepMemory | None]:
    step = TrainingStep(workload, StepSettings())
    with step.scope():
        step.run(2)  # warm up: lazy allocations, oneDNN primitive caches
    # About a second per part, between 1 and 5 steps: enough for a split and a
    # table, and a slow step (seconds on a busy machine) does not take minutes.
    steps = 5 if not step_s else max(1, min(5, round(1.0 / step_s)))
    profile = profile_step(step, phase_steps=steps, profile_steps=min(steps, 3))
    with step.scope():
        step.zero_grad()
        memory = measure_step_memory(
            step.step, step.device, lambda: live_training_state(step.module, step.optimizer)
        )
    return profile, memory


def describe_workload(
    workload: Workload, choice: LossChoice, source: LoaderSource | None, batch_dim: int = 0
) -> dict[str, Any]:
    batch = workload.batch
    shapes = [f"{tuple(t.shape)} {str(t.dtype).replace('torch.', '')}" for t in _tensors(batch)]
    params = sum(p.numel() for p in workload.model.parameters())
    return {
        "model": workload.name,
        "parameters": params,
        "batch": shapes,
        "batch_size": _batch_size(batch, batch_dim),
        "loss": choice.describe(),
        "optimizer": workload.optimizer.call_text(),
        "loader": source.origin if source is not None else None,
        "device": str(workload.device),
        "python": platform.python_version(),
    }


def _tensors(batch: Batch) -> list[torch.Tensor]:
    return tensors_in((batch.args, batch.kwargs, batch.target))


def _batch_size(batch: Batch, batch_dim: int = 0) -> int | None:
    tensors = _tensors(Batch(batch.args, batch.kwargs))
    return int(tensors[0].shape[batch_dim]) if tensors and tensors[0].dim() > batch_dim else None


def canonical_for(workload: Workload, choice: LossChoice, source: LoaderSource | None) -> Loop:
    """The canonical loop (:mod:`torchwise.tune.loop`) with this workload's names."""
    batch = workload.batch
    if batch.kwargs and not batch.args:
        header, forward = "for batch, target in loader:", "model(**batch)"
        to_device: tuple[str, ...] = (
            "batch = {k: v.to(device) for k, v in batch.items()}",
            "target = target.to(device)",
        )
    elif len(batch.args) > 1:
        header, forward = "for inputs, target in loader:", "model(*inputs)"
        to_device = ("inputs, target = [x.to(device) for x in inputs], target.to(device)",)
    else:
        header, forward = "for inputs, target in loader:", "model(inputs)"
        to_device = ("inputs, target = inputs.to(device), target.to(device)",)
    functional = "torch.nn.functional"
    loss_text = {
        "ce": f"{functional}.cross_entropy(output, target)",
        "mse": f"{functional}.mse_loss(output, target)",
        "bce": f"{functional}.binary_cross_entropy_with_logits(output, target)",
    }.get(choice.kind, "loss_fn(output, target)")
    if choice.kind == "ce" and batch.target is not None and batch.target.dim() > 1:
        loss_text = f"{functional}.cross_entropy(output.flatten(0, -2), target.flatten())"
    loader_kwargs = {"batch_size": _batch_size(batch) or 32}
    if source is not None:
        loader_kwargs.update(source.user_settings.kwargs())
        loader_kwargs = {k: v for k, v in loader_kwargs.items() if v not in (0, False, None)}
    arguments = ", ".join(f"{k}={v!r}" for k, v in loader_kwargs.items())
    comment = f"  # as {source.origin} builds it" if source is not None else ""
    return canonical_loop(
        device=workload.device.type,
        model_call=f"{workload.name}()",
        optimizer_call=workload.optimizer.call_text(),
        loss_line=f"loss = {loss_text}",
        loader_line=f"loader = torch.utils.data.DataLoader(dataset, {arguments}){comment}",
        forward_call=forward,
        header=header,
        to_device=to_device,
    )
