"""Which knobs are offered where, and the code each one recommends (no hardware needed)."""

from __future__ import annotations

import ast
import itertools

import pytest

from torchwise.tune.knobs import Facts, Knob, all_candidates, available_knobs, loader_knob
from torchwise.tune.loader import LoaderSettings
from torchwise.tune.loop import add_call_kwargs, apply, canonical_loop, diff

GPU_ONLY = {"fp16-autocast", "tf32", "cudnn-benchmark", "pinned-memory", "cuda-graphs"}


def facts(device: str = "cpu", **changes: object) -> Facts:
    base = dict(
        device=device,
        cores=8,
        threads=8,
        has_conv=True,
        optimizer_name="torch.optim.AdamW",
        optimizer_args=frozenset({"foreach", "fused", "capturable"}),
        compile=True,
        checkpoint_blocks="4 Block blocks",
        tf32_capable=device == "cuda",
    )
    base.update(changes)
    return Facts(**base)  # type: ignore[arg-type]


def offered(f: Facts) -> set[str]:
    return {k.id for k in available_knobs(f)[0]}


def loop() -> object:
    return canonical_loop(
        device="cpu",
        model_call="Net()",
        optimizer_call="torch.optim.AdamW(model.parameters(), lr=0.001, betas=(0.9, 0.95))",
        loss_line="loss = torch.nn.functional.cross_entropy(output, target)",
        loader_line="loader = torch.utils.data.DataLoader(dataset, batch_size=32)",
    )


def test_cpu_offers_no_gpu_knob() -> None:
    ids = offered(facts("cpu"))
    assert not ids & GPU_ONLY
    assert {
        "channels-last",
        "bf16-autocast",
        "foreach-optimizer",
        "fused-optimizer",
        "compile",
        "zero-grad-in-place",
        "activation-checkpointing",
    } <= ids
    assert {"threads-1", "threads-4"} <= ids and "threads-8" not in ids
    skipped = dict((k.id, reason) for k, reason in available_knobs(facts("cpu"))[1])
    assert skipped["tf32"] == "GPU only"


def test_cuda_offers_the_gpu_knobs_and_no_thread_count() -> None:
    ids = offered(facts("cuda"))
    assert ids >= GPU_ONLY
    assert not any(i.startswith("threads-") for i in ids)
    # foreach is CUDA's default already; fused is still a change.
    assert "foreach-optimizer" not in ids and "fused-optimizer" in ids


@pytest.mark.parametrize(
    ("changes", "knob", "reason"),
    [
        ({"has_conv": False}, "channels-last", "the model has no 2-d convolutions"),
        ({"compile": False}, "compile", "opt-in"),
        ({"checkpoint_blocks": ""}, "activation-checkpointing", "no repeated blocks"),
        ({"optimizer_args": frozenset()}, "fused-optimizer", "has no fused option"),
        ({"bf16_supported": False}, "bf16-autocast", "does not support bfloat16"),
    ],
)
def test_a_knob_that_does_not_apply_says_why(
    changes: dict[str, object], knob: str, reason: str
) -> None:
    device = "cuda" if "bf16_supported" in changes else "cpu"
    skipped = {k.id: why for k, why in available_knobs(facts(device, **changes))[1]}
    assert reason in skipped[knob]


def test_gpu_knobs_explain_their_hardware_limits() -> None:
    skipped = {
        k.id: why
        for k, why in available_knobs(facts("cuda", tf32_capable=False, static_shapes=False))[1]
    }
    assert "Ampere" in skipped["tf32"]
    assert "shapes vary" in skipped["cuda-graphs"] and "shapes vary" in skipped["cudnn-benchmark"]
    no_capture = facts(
        "cuda", optimizer_args=frozenset({"foreach"}), optimizer_name="torch.optim.Adagrad"
    )
    assert (
        "cannot be captured"
        in dict((k.id, r) for k, r in available_knobs(no_capture)[1])["cuda-graphs"]
    )


def test_only_and_skip_select_knobs() -> None:
    ids = {k.id for k in available_knobs(facts(), only=["compile", "threads-1"])[0]}
    assert ids == {"compile", "threads-1"}
    assert "compile" not in {k.id for k in available_knobs(facts(), skip=["compile"])[0]}


def every_knob() -> list[Knob]:
    found: dict[str, Knob] = {}
    for device in ("cpu", "cuda"):
        for candidate in all_candidates(facts(device)):
            found.setdefault(candidate.knob.id, candidate.knob)
    found["loader"] = loader_knob(LoaderSettings(4, True, True, 4), LoaderSettings())
    return list(found.values())


@pytest.mark.parametrize("knob", every_knob(), ids=lambda k: k.id)
def test_every_knob_recommends_valid_python(knob: Knob) -> None:
    before = loop()
    after = apply(before, knob.edits)  # type: ignore[arg-type]
    ast.parse(after.render())
    if knob.edits:
        assert diff(before, after).startswith("--- a/train.py")  # type: ignore[arg-type]
    else:
        assert knob.model_change  # a change in the model's code instead


def test_any_combination_of_one_knob_per_group_is_valid_python() -> None:
    groups: dict[str, list[Knob]] = {}
    for knob in every_knob():
        if knob.edits and knob.id != "cuda-graphs":
            groups.setdefault(knob.group, []).append(knob)
    firsts = [options[0] for options in groups.values()]
    for size in (2, 3, len(firsts)):
        for combo in itertools.combinations(firsts, size):
            edits = [e for k in combo for e in k.edits]
            ast.parse(apply(loop(), edits).render())  # type: ignore[arg-type]


def knob(knob_id: str, device: str = "cpu") -> Knob:
    return next(c.knob for c in all_candidates(facts(device)) if c.knob.id == knob_id)


def added_lines(knob_id: str, device: str = "cpu") -> list[str]:
    text = diff(loop(), apply(loop(), knob(knob_id, device).edits))  # type: ignore[arg-type]
    return [
        line[1:].strip()
        for line in text.splitlines()
        if line.startswith("+") and not line.startswith("+++")
    ]


def test_the_fused_optimizer_diff_keeps_the_users_arguments() -> None:
    assert added_lines("fused-optimizer") == [
        "optimizer = torch.optim.AdamW(model.parameters(), lr=0.001, betas=(0.9, 0.95), fused=True)"
    ]


def test_autocast_wraps_forward_and_loss_only() -> None:
    rendered = apply(loop(), knob("bf16-autocast").edits).render()  # type: ignore[arg-type]
    assert (
        '    with torch.autocast("cpu", dtype=torch.bfloat16):\n'
        "        output = model(inputs)\n"
        "        loss = torch.nn.functional.cross_entropy(output, target)\n"
        "    loss.backward()\n"
    ) in rendered


def test_fp16_brings_its_grad_scaler() -> None:
    assert added_lines("fp16-autocast", "cuda") == [
        'scaler = torch.amp.GradScaler("cuda")',
        'with torch.autocast("cuda", dtype=torch.float16):',
        "output = model(inputs)",
        "loss = torch.nn.functional.cross_entropy(output, target)",
        "scaler.scale(loss).backward()",
        "scaler.step(optimizer)",
        "scaler.update()",
    ]


def test_tf32_uses_the_fp32_precision_api() -> None:
    assert added_lines("tf32", "cuda") == [
        'torch.backends.cuda.matmul.fp32_precision = "tf32"',
        'torch.backends.cudnn.conv.fp32_precision = "tf32"',
    ]


def test_pinned_memory_pins_the_loader_and_copies_without_blocking() -> None:
    assert added_lines("pinned-memory", "cuda") == [
        "loader = torch.utils.data.DataLoader(dataset, batch_size=32, pin_memory=True)",
        "inputs, target = inputs.to(device, non_blocking=True), "
        "target.to(device, non_blocking=True)",
    ]


def test_channels_last_converts_the_model_and_the_inputs() -> None:
    assert added_lines("channels-last") == [
        "model = Net().to(device, memory_format=torch.channels_last)",
        "inputs, target = inputs.to(device, memory_format=torch.channels_last), target.to(device)",
    ]


def test_cuda_graphs_capture_with_a_capturable_optimizer() -> None:
    rendered = apply(loop(), knob("cuda-graphs", "cuda").edits).render()  # type: ignore[arg-type]
    assert "capturable=True" in rendered
    assert "with torch.cuda.graph(graph):" in rendered and "graph.replay()" in rendered


def test_loader_knob_names_only_the_changed_settings() -> None:
    k = loader_knob(LoaderSettings(4, False, True, None), LoaderSettings())
    assert k.title == "DataLoader(num_workers=4, persistent_workers=True)"


def test_call_kwargs_replace_an_existing_keyword() -> None:
    edited = add_call_kwargs("optimizer", foreach=True)(loop())  # type: ignore[arg-type]
    again = add_call_kwargs("optimizer", foreach=False)(edited)
    assert again.optimizer[0].count("foreach") == 1 and "foreach=False" in again.optimizer[0]
