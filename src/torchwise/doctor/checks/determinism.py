"""determinism: the same ``torch.manual_seed`` gives the same outputs and gradients.

Two training steps from one ``torch.manual_seed`` are compared bit for bit. When they
differ, the cause is established by proof, never guessed:

1. **numpy / python ``random``**: the step runs once more under a profiler that sees
   every draw from numpy's global generator and python's ``random``, with the line
   that made it. If both steps agree once those generators are seeded too, they were
   the cause: a warning when the draws are in the user's code (seed them, or draw
   with torch), evidence only when they are in an installed library's (transformers
   draws SpecAugment masks from numpy; its ``set_seed`` seeds numpy).
2. **non-deterministic kernels**: otherwise the steps are repeated under
   ``torch.use_deterministic_algorithms(True)`` (the ops torch knows to be
   non-deterministic are named in its warnings). If they agree then, the kernels
   were the cause: documented behaviour of the device (cuDNN, atomics on CUDA),
   accepted when the difference is within the rounding of reordered sums for the
   dtype (:func:`torchwise.numerics.reduction_tolerance`), a warning when larger.
3. Still different, but within the rounding of reordered sums (outputs relative to
   the outputs' scale, gradients to the gradients'): kernel noise that deterministic
   mode could not remove at run time. On CUDA, cuBLAS reads its workspace setting
   (``CUBLAS_WORKSPACE_CONFIG``) once, when CUDA starts, so a check that turns
   deterministic mode on later cannot make cuBLAS and some cuDNN backward kernels
   reproducible: on an H200, healthy timm models (DeiT, RegNet, ConvNeXt, LeViT)
   differed by 1e-9 to 8.5e-5 in their gradients (at most 5e-5 of their size),
   always with identical outputs.
   Accepted. An unseeded random source changes the values by far more.
4. Larger: randomness from an unseeded source (a private generator, ``os.urandom``,
   the clock), a failure.
"""

from __future__ import annotations

import contextlib
import os
import random
import sys
import traceback
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from torchwise.doctor.checks._compare import max_abs_diff
from torchwise.doctor.checks.base import Check, Run, Verdict
from torchwise.doctor.context import Context, backward, reseed_all
from torchwise.doctor.report import Status
from torchwise.doctor.state import Snapshot
from torchwise.doctor.trace import (
    Trace,
    first_divergence,
    frame_owner,
    model_code_frame,
    recording,
    short_location,
)
from torchwise.numerics import reduction_tolerance
from torchwise.tensortree import tensors_in

#: kernel non-determinism is accepted up to this many reduction tolerances
KERNEL_SLACK = 64.0


@dataclass
class Draw:
    """One draw from a global generator during forward/backward."""

    source: str  # "numpy.random.normal", "random.random"
    at: str | None  # file:line of the model code that made it
    owner: str  # "user" or "library"


@dataclass
class DeterminismM:
    seed: int
    output_diff: float
    grad_diff: float
    where: tuple[str, str] | None = None
    #: identical once numpy and python random are seeded too
    reproducible_with_all_rngs: bool = False
    draws: list[Draw] = field(default_factory=list)
    #: identical under torch.use_deterministic_algorithms(True)
    reproducible_deterministic: bool = False
    nondeterministic_ops: list[str] = field(default_factory=list)
    #: the largest difference allowed for reordered sums at this dtype and size
    kernel_tolerance: float = 0.0
    scale: float = 1.0  # the outputs' largest magnitude
    grad_scale: float = 1.0  # the gradients' largest magnitude
    device: str = "cpu"

    @property
    def relative_diff(self) -> float:
        """The larger of the outputs' and the gradients' difference, each relative to its
        own scale (a gradient is not measured in the units of the output)."""
        return max(
            self.output_diff / max(self.scale, 1e-30), self.grad_diff / max(self.grad_scale, 1e-30)
        )


def _seeded_step(
    ctx: Context, seed: int, all_rngs: bool, record: bool = False
) -> tuple[list[torch.Tensor], list[torch.Tensor | None], Trace]:
    if all_rngs:
        reseed_all(seed)
    else:
        torch.manual_seed(seed)
    ctx.zero_grads()
    trace = Trace()
    with recording(ctx.model) if record else contextlib.nullcontext(trace) as trace:
        out, loss = ctx.train_loss()
    if loss.requires_grad:
        backward(loss)
    grads = [None if p.grad is None else p.grad.clone() for p in ctx.model.parameters()]
    return [t.detach().clone() for t in tensors_in(out)], grads, trace


def _diffs(
    a: tuple[list[torch.Tensor], list[torch.Tensor | None]],
    b: tuple[list[torch.Tensor], list[torch.Tensor | None]],
) -> tuple[float, float]:
    grads_a = [g for g in a[1] if g is not None]
    grads_b = [g for g in b[1] if g is not None]
    return max_abs_diff(a[0], b[0]), max_abs_diff(grads_a, grads_b)


_NOT_DRAWS = {"seed", "getstate", "setstate", "get_state", "set_state", "default_rng"}


def _global_draws(module: Any, generator: Any) -> dict[str, Any]:
    """The module-level functions of ``module`` that draw from ``generator``."""
    found = {}
    for name in dir(module):
        value = getattr(module, name, None)
        if name.startswith("_") or name in _NOT_DRAWS or not callable(value):
            continue
        if getattr(value, "__self__", None) is generator:
            found[name] = value
    return found


@contextlib.contextmanager
def watching_draws(draws: list[Draw]) -> Iterator[None]:
    """Record every draw from numpy's global generator and python's ``random`` made through
    their module functions (``np.random.normal``, ``random.random``), with the line of
    model code that made it; a draw made another way still shows as a changed state."""
    numpy = sys.modules.get("numpy")
    watched: list[tuple[Any, str, Any, str]] = []
    sources = [(random, getattr(random, "_inst", None), "random.")]
    if numpy is not None:
        mtrand = getattr(numpy.random, "mtrand", None)
        sources.append((numpy.random, getattr(mtrand, "_rand", None), "numpy.random."))
    for module, generator, prefix in sources:
        if generator is None:
            continue
        for name, function in _global_draws(module, generator).items():
            watched.append((module, name, function, prefix + name))

    def wrap(function: Any, source: str) -> Any:
        def draw(*args: Any, **kwargs: Any) -> Any:
            if len(draws) < 20:
                code = model_code_frame(traceback.extract_stack()[:-1])
                where = short_location(code) if code is not None else None
                who = frame_owner(code.filename) if code is not None else "user"
                draws.append(Draw(source, where, "library" if who == "library" else "user"))
            return function(*args, **kwargs)

        return draw

    before = (random.getstate(), _numpy_state(numpy))
    for module, name, function, source in watched:
        setattr(module, name, wrap(function, source))
    try:
        yield
    finally:
        for module, name, function, _ in watched:
            setattr(module, name, function)
    if not draws and before != (random.getstate(), _numpy_state(numpy)):
        draws.append(Draw("a global generator (not through its module functions)", None, "user"))


def _numpy_state(numpy: Any) -> Any:
    if numpy is None:
        return None
    state = numpy.random.get_state()
    return (state[0], state[1].tobytes(), *state[2:])


@contextlib.contextmanager
def deterministic_algorithms(ops: list[str]) -> Iterator[None]:
    """``torch.use_deterministic_algorithms(True, warn_only=True)``; the ops torch warns
    about are appended to ``ops``. The caller's setting is restored by the runner."""
    env = "CUBLAS_WORKSPACE_CONFIG"
    had = os.environ.get(env)
    if had is None:
        os.environ[env] = ":4096:8"  # cuBLAS is deterministic only with a fixed workspace
    torch.use_deterministic_algorithms(True, warn_only=True)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            yield
        for w in caught:
            text = str(w.message).splitlines()[0]
            if "deterministic" in text and text not in ops:
                ops.append(text[:160])
    finally:
        if had is None:
            os.environ.pop(env, None)


class Determinism(Check[DeterminismM]):
    cost = "2 fwd+bwd; when they differ, up to 5 more to find out why"

    def measure(self, run: Run) -> DeterminismM:
        ctx = run.ctx
        seed = ctx.options.seed
        start = Snapshot(ctx.model)  # every run starts from the same model state
        reseed_all(seed)  # numpy/python start alike, then move on as in real training
        first = _seeded_step(ctx, seed, all_rngs=False)
        start.restore(rng=False)
        second = _seeded_step(ctx, seed, all_rngs=False)
        m = DeterminismM(seed, *_diffs(first[:2], second[:2]), device=ctx.device.type)
        if m.output_diff == 0.0 and m.grad_diff == 0.0:
            return m
        start.restore(rng=False)  # two more runs, recorded, say where they part
        _, _, t0 = _seeded_step(ctx, seed, all_rngs=False, record=True)
        start.restore(rng=False)
        _, _, t1 = _seeded_step(ctx, seed, all_rngs=False, record=True)
        m.where = first_divergence(t0, t1, lambda t: t)
        start.restore(rng=False)
        reseed_all(seed)
        with watching_draws(m.draws):
            seeded = _seeded_step(ctx, seed, all_rngs=False)
        start.restore(rng=False)
        again = _seeded_step(ctx, seed, all_rngs=True)
        m.reproducible_with_all_rngs = _diffs(seeded[:2], again[:2]) == (0.0, 0.0)
        if m.reproducible_with_all_rngs:
            return m
        start.restore(rng=False)
        with deterministic_algorithms(m.nondeterministic_ops):
            det_a = _seeded_step(ctx, seed, all_rngs=True)
            start.restore(rng=False)
            det_b = _seeded_step(ctx, seed, all_rngs=True)
        m.reproducible_deterministic = _diffs(det_a[:2], det_b[:2]) == (0.0, 0.0)
        values = [t for t in first[0] if t.is_floating_point() and t.numel()]
        grads = [g for g in first[1] if g is not None and g.is_floating_point() and g.numel()]
        if grads:
            m.grad_scale = max(float(g.abs().max()) for g in grads) or 1.0
        if values:
            m.scale = max(float(t.abs().max()) for t in values) or 1.0
            dtype = values[0].dtype
            terms = max((p.numel() for p in ctx.model.parameters()), default=1)
            m.kernel_tolerance = KERNEL_SLACK * reduction_tolerance(dtype, terms)
        return m

    def judge(self, m: DeterminismM) -> Verdict:
        evidence: dict[str, Any] = {
            "seed": m.seed,
            "output_diff": m.output_diff,
            "grad_diff": m.grad_diff,
        }
        if m.output_diff == 0.0 and m.grad_diff == 0.0:
            return Verdict(
                Status.PASS,
                "torch.manual_seed reproduces the outputs and gradients bit for bit (fails on "
                "any difference that no documented cause explains)",
                evidence=evidence,
            )
        if m.where:
            evidence["first_divergence"] = m.where[1]
        where = [m.where[0]] if m.where else []
        if m.draws:
            evidence["draws_from_global_generators"] = [
                f"{d.source} at {d.at or 'an unknown line'} ({d.owner})" for d in m.draws[:8]
            ]
        if m.reproducible_with_all_rngs:
            return self._global_generators(m, evidence, where)
        if m.reproducible_deterministic:
            return self._kernels(m, evidence, where)
        if 0.0 < m.relative_diff <= m.kernel_tolerance:
            evidence["relative_diff"] = m.relative_diff
            evidence["kernel_tolerance"] = m.kernel_tolerance
            return Verdict(
                Status.PASS,
                f"the same seed gives results that differ by {m.relative_diff:.2g} of the "
                f"values, within the rounding of reordered sums ({m.kernel_tolerance:.2g}): "
                f"{m.device} kernels, not an unseeded source"
                + (
                    "; for bit-reproducible runs set CUBLAS_WORKSPACE_CONFIG=:4096:8 before "
                    "CUDA starts, then torch.use_deterministic_algorithms(True)"
                    if m.device == "cuda"
                    else ""
                ),
                evidence=evidence,
            )
        return Verdict(
            Status.FAIL,
            f"the same seed gives different results (output diff {m.output_diff:.3g}, grad diff "
            f"{m.grad_diff:.3g}), also with numpy and python random seeded and with "
            "torch.use_deterministic_algorithms(True)",
            evidence=evidence,
            where=where,
            causes=[
                "randomness from an unseeded source (os.urandom, time, a private Generator "
                "or numpy default_rng() created without a seed)",
                "state carried between calls that a seed does not reset",
            ],
            fix="seed every generator from one seed, or draw with torch's global one",
        )

    @staticmethod
    def _global_generators(m: DeterminismM, evidence: dict[str, Any], where: list[str]) -> Verdict:
        user = [d for d in m.draws if d.owner == "user"]
        if m.draws and not user:
            places = sorted({d.at for d in m.draws if d.at})
            return Verdict(
                Status.PASS,
                "reproducible from one seed once numpy and python random are seeded too: "
                f"installed library code draws from them ({', '.join(places[:3])}); seed "
                "them with torch (transformers.set_seed, lightning.seed_everything)",
                evidence=evidence,
            )
        at = [d.at for d in user if d.at]
        return Verdict(
            Status.WARN,
            "forward draws from numpy or python `random`: torch.manual_seed alone does not "
            "reproduce it" + (f" ({', '.join(sorted(set(at))[:3])})" if at else ""),
            evidence=evidence,
            where=sorted(set(at)) or where,
            causes=["np.random / random used inside forward (noise, augmentation, sampling)"],
            fix="draw randomness with torch (torch.rand(..., device=x.device)) so one "
            "torch.manual_seed reproduces the run, and torch.utils.data seeds workers",
        )

    @staticmethod
    def _kernels(m: DeterminismM, evidence: dict[str, Any], where: list[str]) -> Verdict:
        relative = m.relative_diff
        evidence["relative_diff"] = relative
        evidence["kernel_tolerance"] = m.kernel_tolerance
        if m.nondeterministic_ops:
            evidence["nondeterministic_ops"] = m.nondeterministic_ops[:6]
        if relative <= m.kernel_tolerance:
            return Verdict(
                Status.PASS,
                f"bit-reproducible under torch.use_deterministic_algorithms(True); by default "
                f"{m.device} kernels reorder sums and differ by {relative:.2g} of the values, "
                f"within the rounding of reordered sums ({m.kernel_tolerance:.2g})",
                evidence=evidence,
            )
        return Verdict(
            Status.WARN,
            f"non-deterministic kernels change the result by {relative:.2g} of the values, more "
            f"than reordered sums explain ({m.kernel_tolerance:.2g}); bit-reproducible under "
            "torch.use_deterministic_algorithms(True)",
            evidence=evidence,
            where=where,
            causes=[
                "atomic adds in scatter/index_add/embedding backward on the GPU, cuDNN "
                "algorithms picked by benchmark mode"
            ],
            fix="torch.use_deterministic_algorithms(True) (and CUBLAS_WORKSPACE_CONFIG=:4096:8) "
            "when runs must reproduce exactly",
        )
