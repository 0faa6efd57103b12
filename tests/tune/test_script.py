"""Recommendations as diffs against the user's own training script (--train-script)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from torchwise.errors import TorchwiseError
from torchwise.tune.anchors import find_anchors
from torchwise.tune.knobs import Facts, Knob, available_knobs, loader_knob
from torchwise.tune.loader import LoaderSettings
from torchwise.tune.loop import Loop
from torchwise.tune.script import read_train_script

SCRIPT = '''\
"""Train the classifier."""
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader

from model import Classifier

device = "cuda" if torch.cuda.is_available() else "cpu"
net = Classifier(width=64).to(device)
opt = torch.optim.AdamW(net.parameters(), lr=3e-4, weight_decay=0.1)
train_loader = DataLoader(dataset, batch_size=128, shuffle=True)


def evaluate():
    pass


for epoch in range(10):
    for images, labels in train_loader:
        images, labels = images.to(device), labels.to(device)
        opt.zero_grad()
        logits = net(images)
        loss = F.cross_entropy(logits, labels)
        loss.backward()
        opt.step()
    evaluate()
'''


def knobs() -> dict[str, Knob]:
    facts = Facts(
        device="cuda",
        cores=8,
        threads=8,
        has_conv=True,
        optimizer_name="torch.optim.AdamW",
        optimizer_args=frozenset({"foreach", "fused", "capturable"}),
        compile=True,
        checkpoint_blocks="4 Block blocks",
        tf32_capable=True,
    )
    offered = {k.id: k for k in available_knobs(facts)[0]}
    cpu = Facts(**{**facts.__dict__, "device": "cpu", "tf32_capable": False})
    offered |= {k.id: k for k in available_knobs(cpu)[0] if k.id.startswith("threads-")}
    user = LoaderSettings(0, False, False, None)
    offered["loader"] = loader_knob(LoaderSettings(4, False, True, 4), user)
    return offered


@pytest.fixture
def script(tmp_path: Path):  # type: ignore[no-untyped-def]
    path = tmp_path / "train.py"
    path.write_text(SCRIPT)
    return read_train_script(path, "cuda")


def test_the_loop_is_found_by_what_it_does() -> None:
    a = find_anchors(SCRIPT)
    lines = SCRIPT.splitlines()
    assert a.model_name == "net" and a.input_name == "images" and a.optimizer_name == "opt"
    assert lines[a.backward or 0].strip() == "loss.backward()"
    assert lines[a.step or 0].strip() == "opt.step()"
    assert a.forward is not None and lines[a.forward[0]].strip() == "logits = net(images)"
    assert lines[a.model_stmt or 0].startswith("net = Classifier")


EXPECTED = {
    "fused-optimizer": (
        "+opt = torch.optim.AdamW(net.parameters(), lr=3e-4, weight_decay=0.1, fused=True)"
    ),
    "bf16-autocast": '+        with torch.autocast("cuda", dtype=torch.bfloat16):',
    "fp16-autocast": "+        scaler.scale(loss).backward()",
    "channels-last": "+        images = images.to(memory_format=torch.channels_last)",
    "compile": "+net = torch.compile(net)",
    "tf32": '+torch.backends.cuda.matmul.fp32_precision = "tf32"',
    "cudnn-benchmark": "+torch.backends.cudnn.benchmark = True",
    "zero-grad-in-place": "+        opt.zero_grad(set_to_none=False)",
    "pinned-memory": (
        "+        images, labels = images.to(device, non_blocking=True), "
        "labels.to(device, non_blocking=True)"
    ),
    "threads-1": "+torch.set_num_threads(1)",
    "loader": "shuffle=True, num_workers=4, persistent_workers=True, prefetch_factor=4)",
}


@pytest.mark.parametrize("knob_id", list(EXPECTED))
def test_each_knob_is_a_diff_of_the_users_script_that_still_parses(script, knob_id: str) -> None:  # type: ignore[no-untyped-def]
    knob = knobs()[knob_id]
    (diff,) = script.diffs([knob], fallback=Loop())
    name = script.path.as_posix().lstrip("/")
    assert diff.startswith(f"--- a/{name}\n+++ b/{name}\n"), diff
    assert EXPECTED[knob_id] in diff, diff
    after = script._apply(SCRIPT.splitlines(), knob)
    ast.parse("\n".join(after))


def test_fp16_wraps_the_forward_and_steps_through_the_scaler(script) -> None:  # type: ignore[no-untyped-def]
    after = "\n".join(script._apply(SCRIPT.splitlines(), knobs()["fp16-autocast"]))
    assert 'scaler = torch.amp.GradScaler("cuda")' in after
    assert "scaler.step(opt)\n        scaler.update()" in after
    assert (
        '        with torch.autocast("cuda", dtype=torch.float16):\n'
        "            logits = net(images)\n"
        "            loss = F.cross_entropy(logits, labels)"
    ) in (after)


def test_knobs_build_on_each_other_and_a_graph_is_a_labelled_pattern(script) -> None:  # type: ignore[no-untyped-def]
    ks = knobs()
    chosen = [ks["bf16-autocast"], ks["channels-last"], ks["cuda-graphs"]]
    diffs = script.diffs(chosen, fallback=Loop())
    assert "images = images.to(memory_format=torch.channels_last)" in diffs[1]
    assert diffs[2].startswith("# cuda-graphs: shown as a pattern against the canonical loop")
    combined = script.combined_diff(chosen, fallback=Loop())
    name = script.path.as_posix().lstrip("/")
    assert combined.startswith(f"--- a/{name}") and "pattern.py" in combined


def test_a_script_that_does_not_parse_is_one_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "broken.py"
    path.write_text("for x in loader:\n    loss.backward(\n")
    with pytest.raises(TorchwiseError, match="is not valid Python"):
        read_train_script(path)


def test_the_example_projects_script_gets_edits_in_its_own_loop() -> None:
    root = Path(__file__).resolve().parents[2]
    script = read_train_script(root / "examples" / "cifar_project" / "train.py", "cuda")
    a = find_anchors(script.source)
    assert (a.model_name, a.input_name, a.optimizer_name) == ("model", "images", "optimizer")
    ks = knobs()
    bf16, fused = script.diffs([ks["bf16-autocast"], ks["fused-optimizer"]], fallback=Loop())
    # its forward is already under fp16 autocast: the context changes, no second one nests
    assert "-        with torch.cuda.amp.autocast():" in bf16
    assert '+        with torch.autocast("cuda", dtype=torch.bfloat16):' in bf16
    assert "SGD(model.parameters(), lr=0.1, momentum=0.9, fused=True)" in fused
