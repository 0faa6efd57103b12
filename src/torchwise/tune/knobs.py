"""The knobs tune tries: what each changes in the step, in the code, and how to check it.

A :class:`Knob` is data: the :class:`~torchwise.tune.step.StepSettings` fields it
changes, the edits that turn the canonical loop into the recommended one, the
steps its correctness check needs, and a predicate saying when it applies
(channels_last needs convolutions; TF32 needs CUDA). Knobs in the
same ``group`` are alternatives (fused vs foreach optimizer; 1 vs 2 threads): at
most one of a group is recommended.

:func:`available_knobs` is the one place that decides what is offered for a
workload and why the others are not, so the choice is unit-testable without
the hardware (``Facts`` can describe a CUDA machine on a CPU-only one).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from torchwise.tune.graphs import GRAPH_WARMUP
from torchwise.tune.loader import LoaderSettings
from torchwise.tune.loop import Edit, Loop, add_call_kwargs, add_setup

SPEED = "speed"
MEMORY = "memory"


@dataclass(frozen=True)
class Facts:
    """What decides which knobs apply; built from the workload, or by hand in tests."""

    device: str
    cores: int
    threads: int
    has_conv: bool
    optimizer_name: str
    optimizer_args: frozenset[str]
    has_loader: bool = False
    compile: bool = False
    compile_backend: str = "inductor"
    checkpoint_blocks: str = ""
    bf16_supported: bool = True
    tf32_capable: bool = False
    static_shapes: bool = True


@dataclass(frozen=True)
class Knob:
    id: str
    title: str
    group: str
    changes: dict[str, Any]
    edits: tuple[Edit, ...] = ()
    why: str = ""
    kind: str = SPEED
    #: shown instead of (or beside) the loop diff when the change is in the model's code
    model_change: str = ""
    #: steps of the correctness check's trajectory (None: the oracle's default)
    check_steps: int | None = None
    #: knobs a trial needs together, e.g. ("fp16 autocast", "GradScaler")
    parts: tuple[str, ...] = field(default=())
    #: the part of the step the knob changes, when others change it too
    #: ("optimizer": the fused/foreach update and how zero_grad leaves the
    #: gradients it reads): such knobs' effects need not add up, so accepting one
    #: reopens the others (:meth:`torchwise.tune.search.Search._reopen`)
    phase: str = ""
    #: groups of knobs this one gains with, beyond adding up: accepting one of them
    #: reopens this knob if it was settled without it (channels_last pays off with
    #: autocast's NHWC tensor-core kernels, not in fp32)
    interacts: frozenset[str] = frozenset()

    @property
    def groups(self) -> frozenset[str]:
        """A pair knob ("bf16-autocast+channels-last") belongs to both its knobs' groups."""
        return frozenset(self.group.split("+"))


@dataclass(frozen=True)
class Candidate:
    """A knob and, when it cannot be tried here, why not."""

    knob: Knob
    skip_reason: str | None = None


Factory = Callable[[Facts], Sequence[Candidate]]


_CL = "memory_format=torch.channels_last"


def _channels_last_edit(loop: Loop) -> Loop:
    model = loop.model[0].replace(".to(device)", f".to(device, {_CL})")
    to_device = tuple(
        line.replace("inputs.to(device", f"inputs.to(device, {_CL}", 1) for line in loop.to_device
    )
    return loop.replace(model=(model, *loop.model[1:]), to_device=to_device)


def _channels_last(facts: Facts) -> list[Candidate]:
    knob = Knob(
        "channels-last",
        "channels_last memory format",
        "memory-format",
        {"channels_last": True},
        (_channels_last_edit,),
        why="NHWC convolutions avoid layout conversions in oneDNN and cuDNN kernels.",
        interacts=frozenset({"autocast"}),
    )
    if not facts.has_conv:
        return [Candidate(knob, "the model has no 2-d convolutions")]
    return [Candidate(knob)]


def _autocast_edit(device: str, dtype: str) -> Edit:
    context = f'torch.autocast("{device}", dtype=torch.{dtype})'
    return lambda loop: loop.replace(contexts=(*loop.contexts, context))


def _bf16(facts: Facts) -> list[Candidate]:
    knob = Knob(
        "bf16-autocast",
        "bf16 autocast",
        "autocast",
        {"autocast": "bf16"},
        (_autocast_edit(facts.device, "bfloat16"),),
        "Matmuls and convolutions in bfloat16: half the memory traffic, and fast "
        "on CPUs with AMX/AVX512-BF16 and on Ampere+ GPUs.",
    )
    if not facts.bf16_supported:
        return [Candidate(knob, "this GPU does not support bfloat16")]
    return [Candidate(knob)]


def _fp16(facts: Facts) -> list[Candidate]:
    def edit(loop: Loop) -> Loop:
        loop = _autocast_edit("cuda", "float16")(loop)
        return loop.replace(
            extras=(*loop.extras, 'scaler = torch.amp.GradScaler("cuda")'),
            backward=("scaler.scale(loss).backward()",),
            step=("scaler.step(optimizer)", "scaler.update()"),
        )

    knob = Knob(
        "fp16-autocast",
        "fp16 autocast with GradScaler",
        "autocast",
        {"autocast": "fp16", "grad_scaler": True},
        (edit,),
        "Tensor-core float16 with dynamic loss scaling so small gradients do not underflow.",
        parts=("fp16 autocast", "GradScaler"),
    )
    if facts.device != "cuda":
        return [Candidate(knob, "GPU only (fp16 autocast on CPU is slow)")]
    return [Candidate(knob)]


def _optimizer_impls(facts: Facts) -> list[Candidate]:
    out = []
    for impl, title, why in (
        (
            "foreach",
            "foreach optimizer",
            "One multi-tensor kernel per operation instead of a Python loop over parameters.",
        ),
        ("fused", "fused optimizer", "The whole update in one fused kernel per parameter group."),
    ):
        knob = Knob(
            f"{impl}-optimizer",
            f"{title} ({impl}=True)",
            "optimizer-impl",
            {"optimizer_impl": impl},
            (add_call_kwargs("optimizer", **{impl: True}),),
            why=why,
            phase="optimizer",
        )
        if impl not in facts.optimizer_args:
            out.append(Candidate(knob, f"{facts.optimizer_name} has no {impl} option"))
        elif impl == "foreach" and facts.device == "cuda":
            out.append(Candidate(knob, "foreach is already the default on CUDA"))
        else:
            out.append(Candidate(knob))
    return out


def _zero_grad(facts: Facts) -> list[Candidate]:
    knob = Knob(
        "zero-grad-in-place",
        "zero_grad(set_to_none=False)",
        "zero-grad",
        {"set_to_none": False},
        (lambda loop: loop.replace(zero_grad=("optimizer.zero_grad(set_to_none=False)",)),),
        why="Zeroes gradient buffers in place instead of freeing them (the default "
        "since torch 2.0 frees them); measured to confirm the default.",
        phase="optimizer",
    )
    return [Candidate(knob)]


def _threads(facts: Facts) -> list[Candidate]:
    if facts.device != "cpu":
        return []
    counts = sorted({1, facts.threads // 2} - {0, facts.threads})
    return [
        Candidate(
            Knob(
                f"threads-{n}",
                f"torch.set_num_threads({n})",
                "threads",
                {"threads": n},
                (add_setup(f"torch.set_num_threads({n})"),),
                why=f"Fewer intra-op threads than the default {facts.threads}: small ops "
                "pay less synchronisation, and a busy machine pre-empts fewer of them.",
            )
        )
        for n in counts
    ]


def _compile(facts: Facts) -> list[Candidate]:
    backend = facts.compile_backend
    line = (
        "model = torch.compile(model)"
        if backend == "inductor"
        else (f'model = torch.compile(model, backend="{backend}")')
    )
    knob = Knob(
        "compile",
        "torch.compile" + ("" if backend == "inductor" else f" (backend={backend})"),
        "compile",
        {"compile": True, "compile_backend": backend},
        (lambda loop: loop.replace(model=(*loop.model, line)),),
        why="Fuses pointwise ops and removes Python overhead; the first step compiles.",
    )
    if not facts.compile:
        return [Candidate(knob, "opt-in: pass --compile (its first compile can take minutes)")]
    return [Candidate(knob)]


def _checkpointing(facts: Facts) -> list[Candidate]:
    knob = Knob(
        "activation-checkpointing",
        "activation checkpointing",
        "checkpointing",
        {"checkpointing": True},
        why="Recomputes each block's activations in the backward instead of storing "
        "them: less memory for more compute.",
        kind=MEMORY,
        model_change=(
            "from torch.utils.checkpoint import checkpoint\n"
            "# in forward(), for each block found (" + (facts.checkpoint_blocks or "none") + "):\n"
            "-        x = block(x)\n"
            "+        x = checkpoint(block, x, use_reentrant=False)"
        ),
    )
    if not facts.checkpoint_blocks:
        return [Candidate(knob, "no repeated blocks to checkpoint")]
    return [Candidate(knob)]


def _tf32(facts: Facts) -> list[Candidate]:
    knob = Knob(
        "tf32",
        "TF32 matmuls and convolutions",
        "tf32",
        {"tf32": True},
        (
            add_setup(
                'torch.backends.cuda.matmul.fp32_precision = "tf32"',
                'torch.backends.cudnn.conv.fp32_precision = "tf32"',
            ),
        ),
        "fp32 matmuls on tensor cores with 10-bit mantissa inputs (Ampere and newer).",
    )
    if facts.device != "cuda":
        return [Candidate(knob, "GPU only")]
    if not facts.tf32_capable:
        return [Candidate(knob, "needs an Ampere (sm_80) or newer GPU")]
    return [Candidate(knob)]


def _cudnn_benchmark(facts: Facts) -> list[Candidate]:
    knob = Knob(
        "cudnn-benchmark",
        "cudnn.benchmark",
        "cudnn-benchmark",
        {"cudnn_benchmark": True},
        (add_setup("torch.backends.cudnn.benchmark = True"),),
        why="cuDNN times its convolution algorithms once per input shape and keeps the fastest.",
        interacts=frozenset({"autocast", "memory-format"}),
    )
    if facts.device != "cuda":
        return [Candidate(knob, "GPU only")]
    if not facts.has_conv:
        return [Candidate(knob, "the model has no convolutions")]
    if not facts.static_shapes:
        return [Candidate(knob, "input shapes vary between batches (it re-tunes per shape)")]
    return [Candidate(knob)]


def _pinned(facts: Facts) -> list[Candidate]:
    def edit(loop: Loop) -> Loop:
        loop = add_call_kwargs("loader", pin_memory=True)(loop)
        to_device = tuple(
            line.replace(".to(device", ".to(device, non_blocking=True") for line in loop.to_device
        )
        return loop.replace(to_device=to_device)

    knob = Knob(
        "pinned-memory",
        "pinned memory + non_blocking copies",
        "pinned",
        {"pinned": True},
        (edit,),
        why="Page-locked host batches copy to the GPU asynchronously, overlapping compute.",
    )
    if facts.device != "cuda":
        return [Candidate(knob, "GPU only")]
    return [Candidate(knob)]


def _cuda_graphs(facts: Facts) -> list[Candidate]:
    def edit(loop: Loop) -> Loop:
        body = (
            "# capture the whole step once (static shapes), then replay it",
            "static_inputs, static_target = [t.to(device) for t in next(iter(loader))]",
            "stream = torch.cuda.Stream()",
            "stream.wait_stream(torch.cuda.current_stream())",
            "with torch.cuda.stream(stream):",
            "    for _ in range(3):  # warm up on a side stream before capture",
            "        optimizer.zero_grad(set_to_none=True)",
            "        output = model(static_inputs)",
            "        " + loop.forward[-1].replace("output, target", "output, static_target"),
            "        loss.backward()",
            "        optimizer.step()",
            "torch.cuda.current_stream().wait_stream(stream)",
            "graph = torch.cuda.CUDAGraph()",
            "optimizer.zero_grad(set_to_none=True)",
            "with torch.cuda.graph(graph):",
            "    output = model(static_inputs)",
            "    " + loop.forward[-1].replace("output, target", "output, static_target"),
            "    loss.backward()",
            "    optimizer.step()",
            "",
            "for inputs, target in loader:",
            "    static_inputs.copy_(inputs, non_blocking=True)",
            "    static_target.copy_(target, non_blocking=True)",
            "    graph.replay()",
        )
        optimizer = tuple(
            _capturable(line) if facts.optimizer_name != "torch.optim.SGD" else line
            for line in loop.optimizer
        )
        return loop.replace(optimizer=optimizer, body_override=body)

    knob = Knob(
        "cuda-graphs",
        "CUDA graph of the whole step",
        "cuda-graphs",
        {"cuda_graph": True},
        (edit,),
        why="Replays the step's kernels from one graph launch: no per-kernel CPU launch cost.",
        interacts=frozenset({"autocast"}),
        # the warm-up steps before capture, then replays of the captured step
        check_steps=GRAPH_WARMUP + 2,
    )
    if facts.device != "cuda":
        return [Candidate(knob, "GPU only")]
    if not facts.static_shapes:
        return [Candidate(knob, "input shapes vary between batches")]
    if "capturable" not in facts.optimizer_args and facts.optimizer_name != "torch.optim.SGD":
        return [Candidate(knob, f"{facts.optimizer_name} cannot be captured (no capturable=)")]
    return [Candidate(knob)]


def _capturable(line: str) -> str:
    return add_call_kwargs("optimizer", capturable=True)(Loop(optimizer=(line,))).optimizer[0]


@dataclass(frozen=True)
class Family:
    """A kind of knob as ``--list-knobs`` shows it: its id, what it does, where it can apply.

    ``devices`` is where the family is offered at all; whether it applies to a
    given workload (a conv net, an optimizer with ``fused=``) is its factory's
    call on that workload's :class:`Facts`.
    """

    id: str
    title: str
    devices: tuple[str, ...]
    factory: Factory


#: Every knob family, in the order the report lists knobs that tie.
FAMILIES: tuple[Family, ...] = (
    Family("threads-N", "torch.set_num_threads(N), N = 1 and half the default", ("cpu",), _threads),
    Family(
        "channels-last", "channels_last memory format (conv nets)", ("cpu", "cuda"), _channels_last
    ),
    Family("bf16-autocast", "bf16 autocast", ("cpu", "cuda"), _bf16),
    Family("fp16-autocast", "fp16 autocast with GradScaler", ("cuda",), _fp16),
    Family(
        "foreach-optimizer / fused-optimizer",
        "foreach=True / fused=True (when the optimizer has them; foreach is CUDA's default)",
        ("cpu", "cuda"),
        _optimizer_impls,
    ),
    Family("compile", "torch.compile (opt-in with --compile)", ("cpu", "cuda"), _compile),
    Family("tf32", "TF32 matmuls and convolutions (Ampere and newer)", ("cuda",), _tf32),
    Family(
        "cudnn-benchmark", "cudnn.benchmark (conv nets, static shapes)", ("cuda",), _cudnn_benchmark
    ),
    Family("pinned-memory", "pinned memory + non_blocking copies", ("cuda",), _pinned),
    Family("cuda-graphs", "CUDA graph of the whole step (static shapes)", ("cuda",), _cuda_graphs),
    Family("zero-grad-in-place", "zero_grad(set_to_none=False)", ("cpu", "cuda"), _zero_grad),
    Family(
        "activation-checkpointing",
        "activation checkpointing of repeated blocks (a memory trade-off)",
        ("cpu", "cuda"),
        _checkpointing,
    ),
    Family(
        "loader",
        "DataLoader workers, prefetch, pinning (with --loader)",
        ("cpu", "cuda"),
        lambda _: [],
    ),
)
FACTORIES: tuple[Factory, ...] = tuple(f.factory for f in FAMILIES)

#: Knob ids the families can produce besides ``threads-N``.
KNOB_IDS = frozenset({part for f in FAMILIES if f.id != "threads-N" for part in f.id.split(" / ")})


def known_knob(knob_id: str) -> bool:
    """Whether ``knob_id`` names a knob (``threads-N`` for any positive N, or a pair)."""
    if knob_id in {f"{a}+{b}" for a, b in PAIRS}:
        return True
    if knob_id.startswith("threads-"):
        return knob_id.removeprefix("threads-").isdigit() and int(knob_id[8:]) > 0
    return knob_id in KNOB_IDS


def knob_table() -> str:
    """``--list-knobs``: every family, the devices it applies to, and what it changes."""
    lines = [f"{'knob':36} {'devices':10} what"]
    lines += [f"{f.id:36} {', '.join(f.devices):10} {f.title}" for f in FAMILIES]
    return "\n".join(lines)


def loader_knob(settings: LoaderSettings, user: LoaderSettings) -> Knob:
    """The DataLoader settings the loader scan found fastest, as a knob."""
    changed = {k: v for k, v in settings.kwargs().items() if user.kwargs().get(k) != v}
    return Knob(
        "loader",
        "DataLoader(" + ", ".join(f"{k}={v}" for k, v in changed.items()) + ")",
        "loader",
        {"loader": settings},
        (add_call_kwargs("loader", **changed),),
        why="Worker processes load the next batches while the step computes.",
    )


#: Knobs an expert tries together: each alone may gain nothing (bf16 convolutions
#: in NCHW, NHWC in fp32) while the pair runs the fast NHWC low-precision kernels
#: of oneDNN and cuDNN.
PAIRS = (("bf16-autocast", "channels-last"), ("fp16-autocast", "channels-last"))


def pair_knob(first: Knob, second: Knob) -> Knob:
    """Two knobs as one trial: changes, edits and groups of both."""
    return Knob(
        f"{first.id}+{second.id}",
        f"{first.title} + {second.title}",
        f"{first.group}+{second.group}",
        {**first.changes, **second.changes},
        (*first.edits, *second.edits),
        why=f"Together: {first.why} {second.why}",
        parts=first.parts or second.parts,
    )


def all_candidates(facts: Facts) -> list[Candidate]:
    return [candidate for factory in FACTORIES for candidate in factory(facts)]


def available_knobs(
    facts: Facts, *, only: Sequence[str] | None = None, skip: Sequence[str] = ()
) -> tuple[list[Knob], list[tuple[Knob, str]]]:
    """(knobs to try, [(knob, why not)]) for a workload; ``only``/``skip`` are knob ids."""
    offered, skipped = [], []
    for candidate in all_candidates(facts):
        knob = candidate.knob
        if candidate.skip_reason is not None:
            skipped.append((knob, candidate.skip_reason))
        elif knob.id in skip or (only is not None and knob.id not in only):
            skipped.append((knob, "not selected"))
        else:
            offered.append(knob)
    by_id = {k.id: k for k in offered}
    for a, b in PAIRS:
        pair_id = f"{a}+{b}"
        wanted = only is None or pair_id in only or (a in only and b in only)
        if a in by_id and b in by_id and wanted and pair_id not in skip:
            offered.append(pair_knob(by_id[a], by_id[b]))
    return offered, skipped
