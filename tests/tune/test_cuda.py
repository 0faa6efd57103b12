"""The CUDA paths on a real GPU: run wherever CUDA is available, skipped (with why) elsewhere.

Nothing else in the suite needs a GPU, and the CPU tests already cover which CUDA
knobs are offered and the code changes they recommend. These run what only a GPU
can: every CUDA knob built, checked for correctness and timed on the device, the
caching allocator's peak, the syncs torch.cuda's debug mode counts, and the
report they all end up in.
"""

from __future__ import annotations

import pytest
import torch
from conftest import TinyCNN
from torch import nn

from torchwise.tune import SessionConfig, tune

pytestmark = pytest.mark.skipif(
    not torch.cuda.is_available(),
    reason="needs a CUDA GPU: the CUDA knobs (fp16 + GradScaler, TF32, cudnn.benchmark, "
    "pinned memory, CUDA graphs) and the allocator's statistics run only on one",
)

QUICK = SessionConfig(warmup_steps=2, min_rounds=8, max_rounds=12, budget_s=2.0)
CUDA_KNOBS = [
    "fp16-autocast",
    "bf16-autocast",
    "tf32",
    "cudnn-benchmark",
    "cuda-graphs",
    "channels-last",
    "fused-optimizer",
]
VERDICTS = {"faster", "slower", "no significant difference"}


def test_every_cuda_knob_is_checked_and_timed_or_reported_broken() -> None:
    torch.manual_seed(0)
    report = tune(
        TinyCNN(),
        torch.randn(8, 3, 16, 16),
        device="cuda",
        budget_s=10,
        session=QUICK,
        knobs=CUDA_KNOBS,
    )
    data = report.to_dict()
    tried = {t["knob"]: t for t in data["trials"]}
    skipped = {s["knob"]: s["reason"] for s in data["skipped"]}
    assert set(CUDA_KNOBS) <= set(tried) | set(skipped)
    # On a GPU no knob here is left out for being "GPU only"; TF32 may be, on a
    # GPU older than Ampere, and says so.
    assert "GPU only" not in skipped.values(), skipped
    assert set(skipped) & set(CUDA_KNOBS) <= {"tf32"}, skipped
    for knob, trial in tried.items():
        if trial["status"] == "not applicable":  # e.g. a graph that cannot be captured: why
            assert trial["not_applicable"], (knob, trial)
            continue
        # every knob here trains a conv net with BatchNorm correctly: never "incorrect"
        assert trial["status"] != "incorrect", (knob, trial["check"])
        if trial["status"] == "failed":
            assert trial["error"], (knob, trial)  # one line of why, never a crash of the run
            continue
        assert trial["check"]["ok"], (knob, trial["check"])
        assert trial["comparison"]["verdict"] in VERDICTS, (knob, trial["comparison"])
    memory = data["baseline"]["memory"]
    assert memory["source"] == "cuda allocator" and memory["peak_bytes"] > 0
    assert "torch.cuda sync debug mode" in report.render("text")


class ReadsBack(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.fc(x)  # (B, 4)
        return h / h.abs().max().item()  # a value read back: the host waits for the GPU


def test_a_read_back_is_a_sync_on_the_gpu_too() -> None:
    torch.manual_seed(0)
    report = tune(
        ReadsBack(),
        torch.randn(8, 16),
        device="cuda",
        budget_s=2,
        session=QUICK,
        knobs=["fused-optimizer"],
    )
    syncs = report.to_dict()["baseline"]["syncs"]
    assert [s["op"] for s in syncs] == ["_local_scalar_dense"], syncs
    assert syncs[0]["where"][0].startswith(f"{__file__}:")
    assert report.profile is not None and report.profile.cuda_syncs is not None
    assert report.profile.cuda_syncs >= 1


@pytest.mark.parametrize(
    "settings",
    [
        {"cuda_graph": True},
        {"cuda_graph": True, "autocast": "bf16"},
        {"autocast": "fp16", "grad_scaler": True},
        {"tf32": True},
        {"autocast": "bf16", "channels_last": True},
    ],
)
def test_the_oracle_passes_correct_cuda_knobs(settings: dict[str, object]) -> None:
    from torchwise.tune.api import build_workload
    from torchwise.tune.graphs import GRAPH_WARMUP
    from torchwise.tune.options import TuneOptions
    from torchwise.tune.oracle import Oracle
    from torchwise.tune.step import StepSettings, TrainingStep

    torch.manual_seed(0)
    device = torch.device("cuda")
    wl, _ = build_workload(
        TinyCNN(), torch.randn(8, 3, 16, 16), None, None, None, TuneOptions(), device, "TinyCNN"
    )
    step = TrainingStep(wl, StepSettings(**settings))  # type: ignore[arg-type]
    # a graph's trajectory covers its warm-up steps and then replays of the captured step
    result = Oracle(wl).judge(step, steps=GRAPH_WARMUP + 2)
    assert result.ok, result.summary()
