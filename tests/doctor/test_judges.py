"""Every check's judge() on hand-made measurements, at both sides of each threshold.

judge() holds every threshold and runs no model, so these tests pin the rules down
without the noise of a real run: one test per check, walking its thresholds.
"""

from __future__ import annotations

import math

import pytest
import torch

from torchwise.doctor import CHECK_IDS
from torchwise.doctor.checks._wiring_probes import AxisFinding, SkipGain
from torchwise.doctor.checks.amp_drift import (
    AMPLIFY_FAIL,
    AMPLIFY_WARN,
    AmpDrift,
    AmpM,
    StepResult,
)
from torchwise.doctor.checks.base import Verdict
from torchwise.doctor.checks.batch_independence import BatchIndependence, BatchM
from torchwise.doctor.checks.causal_leak import CausalLeak, CausalM
from torchwise.doctor.checks.dead_units import SHIFT, DeadUnits, DeadUnitsM, chance_of_dead
from torchwise.doctor.checks.determinism import Determinism, DeterminismM, Draw
from torchwise.doctor.checks.device_consistency import DeviceConsistency, DeviceM, Stray
from torchwise.doctor.checks.eval_determinism import EvalDeterminism, EvalDeterminismM
from torchwise.doctor.checks.exportable import Blame, Exportable, ExportM
from torchwise.doctor.checks.grad_flow import GradFlow, GradFlowM
from torchwise.doctor.checks.grad_scale import FAIL_RATIO, WARN_RATIO, GradScale, GradScaleM
from torchwise.doctor.checks.init_loss import INVARIANT, InitLoss, InitLossM
from torchwise.doctor.checks.nan_inf import NanInf, NanInfM
from torchwise.doctor.checks.overfit_batch import LABELS, TWIN, OverfitBatch, OverfitM
from torchwise.doctor.checks.param_update import ParamUpdate, ParamUpdateM
from torchwise.doctor.checks.train_eval_gap import HEAVY_DROPOUT, TrainEvalGap, TrainEvalM
from torchwise.doctor.checks.wiring import Wiring, WiringM
from torchwise.doctor.report import Status
from torchwise.doctor.trace import Trace

PASS, WARN, FAIL = Status.PASS, Status.WARN, Status.FAIL

#: every check id has a test in this module (by the name test_<id with underscores>)
TESTED = {
    "grad-flow", "batch-independence", "causal-leak", "eval-determinism", "train-eval-gap",
    "init-loss", "overfit-batch", "param-update", "nan-inf", "grad-scale", "dead-units",
    "wiring", "determinism", "amp-drift", "device-consistency", "exportable",
}  # fmt: skip


def test_every_check_has_a_judge_test() -> None:
    assert set(CHECK_IDS) == TESTED


def status(v: Verdict) -> Status:
    return v.status


def test_grad_flow() -> None:
    judge = GradFlow().judge
    assert status(judge(GradFlowM(4, 1.0))) is PASS
    assert status(judge(GradFlowM(4, 1.0, zero=["a.weight"]))) is WARN
    assert status(judge(GradFlowM(4, 1.0, unused=["a.weight"]))) is FAIL
    assert status(judge(GradFlowM(4, 1.0, detached=["a.weight"]))) is FAIL
    assert status(judge(GradFlowM(4, 1.0, nonfinite=["a.weight"]))) is FAIL
    # layer drop and library results computed and discarded are explained, not flagged
    explained = GradFlowM(4, 1.0, skipped_at_random=["l.1.w"], library_discards=["h.q.w"])
    verdict = judge(explained)
    assert verdict.status is PASS
    assert verdict.evidence["skipped_at_random_in_training"] == ["l.1.w"]


def test_batch_independence() -> None:
    judge = BatchIndependence().judge
    assert status(judge(BatchM(4, 0, 0))) is PASS
    assert status(judge(BatchM(4, 0, 0, leak_row=0))) is FAIL
    pairwise = judge(BatchM(4, 0, 0, pairwise=True))
    assert pairwise.status is PASS and "similarity matrix" in pairwise.summary


def test_causal_leak() -> None:
    judge = CausalLeak().judge
    assert status(judge(CausalM(1, 8, 3))) is PASS
    assert status(judge(CausalM(1, 8, 3, leaks=True))) is FAIL


def test_eval_determinism() -> None:
    judge = EvalDeterminism().judge
    assert status(judge(EvalDeterminismM(0.0, None))) is PASS
    assert status(judge(EvalDeterminismM(1e-9, None))) is FAIL  # any difference


def test_train_eval_gap() -> None:
    judge = TrainEvalGap().judge
    layers = {"bn": "BatchNorm2d"}
    assert status(judge(TrainEvalM(8, layers, gap=30.0))) is PASS  # informational
    assert status(judge(TrainEvalM(8, layers, bn_batches={"bn": 1}))) is WARN
    drop = {"drop": HEAVY_DROPOUT}
    assert status(judge(TrainEvalM(8, {"drop": "Dropout"}, heavy_dropout=drop))) is WARN
    assert status(judge(TrainEvalM(8, layers, train_error="RuntimeError: x"))) is FAIL


def _init(expected: float, **kw: object) -> InitLossM:
    chance = math.log(10)
    return InitLossM(chance, expected, expected, False, 1.0, "head", **kw)  # type: ignore[arg-type]


def test_init_loss() -> None:
    judge = InitLoss().judge
    chance = math.log(10)
    assert status(judge(_init(1.4 * chance))) is PASS
    assert status(judge(_init(2.0 * chance))) is WARN
    assert status(judge(_init(3.5 * chance))) is FAIL
    assert status(judge(_init(math.inf))) is FAIL
    probs = InitLossM(chance, chance, chance, True, 0.1, "head")
    assert status(judge(probs)) is WARN
    # the own loss: normalised over the class dim (2) passes whatever its scale (a sum)
    right = _init(chance, own_loss="labels", class_dim=2,
                  sum_ratios={0: 0.3, 1: 0.4, 2: INVARIANT / 10})  # fmt: skip
    assert status(judge(right)) is PASS
    wrong = _init(chance, own_loss="labels", class_dim=2,
                  sum_ratios={0: 0.3, 1: INVARIANT / 10, 2: 0.2})  # fmt: skip
    verdict = judge(wrong)
    assert verdict.status is FAIL and "dim 1" in verdict.summary
    # no dim normalised (a contrastive or sigmoid loss): no judgement of the axis
    assert status(judge(_init(chance, own_loss="labels", sum_ratios={0: 0.5, 1: 0.5}))) is PASS


def test_overfit_batch() -> None:
    judge = OverfitBatch().judge
    assert status(judge(OverfitM([2.0, 0.1], 0.2, 200, 1e-2, LABELS))) is PASS
    stalled = [2.0] + [1.5] * 199  # stopped moving before halving
    assert status(judge(OverfitM(stalled, 0.2, 200, 1e-2, LABELS))) is FAIL
    falling = [2.0 - 0.005 * i for i in range(200)]  # still falling at the budget
    assert status(judge(OverfitM(falling, 0.2, 200, 1e-2, LABELS))) is WARN
    assert status(judge(OverfitM([2.0, math.nan], 0.2, 200, 1e-2, LABELS))) is FAIL
    assert status(judge(OverfitM([1.0, 0.4], 0.5, 200, 1e-2, TWIN))) is PASS


def test_param_update() -> None:
    judge = ParamUpdate().judge
    assert status(judge(ParamUpdateM(4, []))) is PASS
    assert status(judge(ParamUpdateM(4, [], ["pos.weight"]))) is PASS  # a position table
    assert status(judge(ParamUpdateM(4, ["fc1.weight"]))) is WARN  # a frozen layer
    assert status(judge(ParamUpdateM(4, [], unchanged=["fc.weight"], steps=2))) is FAIL
    assert status(judge(ParamUpdateM(0, ["fc.weight"]))) is FAIL


def test_nan_inf() -> None:
    judge = NanInf().judge
    assert status(judge(NanInfM([]))) is PASS
    assert status(judge(NanInfM(["w"]))) is FAIL
    assert status(judge(NanInfM([], output_finite=False))) is FAIL
    assert status(judge(NanInfM([], loss=math.inf))) is FAIL
    assert status(judge(NanInfM([], bad_grads=["w"]))) is FAIL


@pytest.mark.parametrize(
    ("ratio", "expected"),
    [(1.0, PASS), (WARN_RATIO / 2, PASS), (WARN_RATIO * 2, WARN), (FAIL_RATIO * 2, FAIL),
     (1 / (WARN_RATIO * 2), WARN), (1 / (FAIL_RATIO * 2), FAIL)],
)  # fmt: skip
def test_grad_scale(ratio: float, expected: Status) -> None:
    m = GradScaleM([("l.0.w", ratio), ("l.1.w", 1.0)], "l.#.w", 1)
    assert GradScale().judge(m).status is expected


def test_dead_units() -> None:
    judge = DeadUnits().judge
    shifted = SHIFT * 2
    assert status(judge(DeadUnitsM({"fc": (2, 32, 64, shifted)}, 8))) is PASS
    assert status(judge(DeadUnitsM({"fc": (20, 32, 64, shifted)}, 8))) is WARN  # 62%
    assert status(judge(DeadUnitsM({"fc": (32, 32, 8, shifted)}, 8))) is FAIL
    # one of two units silent on two values is what chance gives a healthy layer
    assert chance_of_dead(1, 2, 2) > 0.1
    assert status(judge(DeadUnitsM({"se": (1, 2, 2, shifted)}, 2))) is PASS
    # pre-activations centred on zero: dead units come from nearly equal inputs, not a bias
    assert status(judge(DeadUnitsM({"se": (6, 8, 4, 0.0)}, 4))) is PASS


def test_wiring() -> None:
    judge = Wiring().judge
    assert status(judge(WiringM(gains=[SkipGain("l.0", 1.0, 0.0, True)]))) is PASS
    doubled = WiringM(gains=[SkipGain("l.0", 2.0, 0.0, True)])
    assert status(judge(doubled)) is WARN
    norm = WiringM(gains=[SkipGain("l.0", 2.0, 0.0, False)])  # LayerNorm(x): not a plain skip
    assert status(judge(norm)) is PASS
    assert status(judge(WiringM(buffers_as_weights={"fc.weight": "F.linear weight"}))) is WARN
    assert status(judge(WiringM(axis=[AxisFinding("attn", 1, 2, (2, 4, 4), "bmm")]))) is WARN
    assert status(judge(WiringM(copies=[("a.w", "b.w")]))) is WARN
    assert status(judge(WiringM(config_tie_broken=("emb.w", "head.w")))) is FAIL


def test_determinism() -> None:
    judge = Determinism().judge
    assert status(judge(DeterminismM(0, 0.0, 0.0))) is PASS
    user = Draw("numpy.random.normal", "model.py:3", "user")
    library = Draw("numpy.random.rand", "transformers/x.py:9", "library")
    both = {"reproducible_with_all_rngs": True}
    assert status(judge(DeterminismM(0, 1.0, 1.0, draws=[user], **both))) is WARN
    assert status(judge(DeterminismM(0, 1.0, 1.0, draws=[library], **both))) is PASS
    kernels = {"reproducible_deterministic": True, "kernel_tolerance": 1e-5, "scale": 1.0}
    assert status(judge(DeterminismM(0, 1e-8, 0.0, **kernels))) is PASS  # reordered sums
    assert status(judge(DeterminismM(0, 1e-2, 0.0, **kernels))) is WARN
    assert status(judge(DeterminismM(0, 1.0, 1.0))) is FAIL  # unseeded
    # Not reproducible even in deterministic mode, but within kernel rounding: the
    # CUDA case where cuBLAS's workspace setting came too late (H200, healthy timm).
    noise = {"kernel_tolerance": 1e-3, "scale": 4.0, "grad_scale": 0.5, "device": "cuda"}
    assert status(judge(DeterminismM(0, 0.0, 2.98e-8, **noise))) is PASS
    assert status(judge(DeterminismM(0, 0.0, 0.05, **noise))) is FAIL  # 10% of the gradients
    assert status(judge(DeterminismM(0, 0.002, 0.0, **noise))) is PASS  # 0.05% of 4.0
    assert status(judge(DeterminismM(0, 0.4, 0.0, **noise))) is FAIL


def _step(output: torch.Tensor, loss: float) -> StepResult:
    return StepResult(loss, output, [], Trace())


def test_amp_drift() -> None:
    judge = AmpDrift().judge
    base = torch.linspace(-1, 1, 20).reshape(2, 10)
    off = torch.randn(2, 10, generator=torch.Generator().manual_seed(0))

    def amp(error: float, reference: float) -> AmpM:
        return AmpM("test", _step(base, 2.3), _step(base + error * off, 2.3),
                    reference=_step(base + reference * off, 2.3), class_dim=None)  # fmt: skip

    assert status(judge(amp(0.2, 0.2))) is PASS  # sensitive, but no more than rounding
    ref = 2.0**-7
    assert status(judge(amp(ref * (AMPLIFY_WARN + AMPLIFY_FAIL) / 2, ref))) is WARN
    assert status(judge(amp(ref * AMPLIFY_FAIL * 4, ref))) is FAIL
    assert status(judge(amp(1e-4, 1e-5))) is PASS  # amplified but the output barely moves
    broken = AmpM("test", _step(base, 1.0), None, error="RuntimeError: dtype")
    assert status(judge(broken)) is FAIL


def test_device_consistency() -> None:
    judge = DeviceConsistency().judge
    assert status(judge(DeviceM(["mask"], []))) is PASS  # a plain attribute moved before use
    assert status(judge(DeviceM(["cache"], [], cached=["cache"]))) is WARN
    stray = Stray("add", "head", ["cpu", "meta"], "model.py:3", None)
    assert status(judge(DeviceM([], [], strays=[stray]))) is FAIL
    assert status(judge(DeviceM([], ["blocks"]))) is FAIL
    gap = judge(DeviceM([], [], gap="aten._grouped_mm in `experts`: RuntimeError: bf16 only"))
    assert gap.status is Status.SKIP and "could not check on meta" in gap.summary


def test_exportable() -> None:
    judge = Exportable().judge
    assert status(judge(ExportM(export_nodes=10))) is PASS
    assert status(judge(ExportM(export_nodes=10, user_breaks=["print at m.py:3"]))) is WARN
    user = ExportM(export_error="Error: x", export_blame=Blame("user", "m.py:3", "m.py:3"))
    assert status(judge(user)) is FAIL
    library = ExportM(export_error="Error: x", export_blame=Blame("library", "lib.py:9"))
    assert status(judge(library)) is Status.SKIP
    outside = ExportM(export_error="RuntimeError: Found DynamicCache in output",
                      export_blame=Blame("unknown"))  # fmt: skip
    assert status(judge(outside)) is Status.SKIP


def test_the_registry_is_the_one_source_of_ids_and_titles() -> None:
    from torchwise.doctor import CHECKS
    from torchwise.testgen.render import GUARDS

    assert [entry.id for entry in CHECKS] == list(CHECK_IDS)
    assert all(entry.title and entry.guards for entry in CHECKS)
    assert {entry.id: entry.guards for entry in CHECKS} == GUARDS  # testgen reads, not copies
