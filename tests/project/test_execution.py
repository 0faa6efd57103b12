"""The audit's run: which command, how its launcher becomes run's options, where it runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from torchwise.project.execution import (
    COPY_FILE_LIMIT,
    Launch,
    NotRunnable,
    copy_project,
    parse_launch,
)


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("python train.py --epochs 1", Launch("train.py", None, ("--epochs", "1"), 1, {})),
        ("python3 -u tools/train.py c.yaml", Launch("tools/train.py", None, ("c.yaml",), 1, {})),
        (
            "CUDA_VISIBLE_DEVICES=0,1 torchrun --standalone --nproc_per_node=4 train.py --bs 8",
            Launch("train.py", None, ("--bs", "8"), 4, {"CUDA_VISIBLE_DEVICES": "0,1"}),
        ),
        (
            "python -m torch.distributed.launch --nproc_per_node 2 main.py -c x",
            Launch("main.py", None, ("-c", "x"), 2, {}),
        ),
        (
            "accelerate launch --num_processes 8 train.py train",
            Launch("train.py", None, ("train",), 8, {}),
        ),
        ("python -m pkg.train --lr 3e-4", Launch(None, "pkg.train", ("--lr", "3e-4"), 1, {})),
        ("./train.py --quick", Launch("./train.py", None, ("--quick",), 1, {})),
    ],
)
def test_a_launcher_becomes_the_script_its_arguments_and_its_ranks(
    command: str, expected: Launch
) -> None:
    assert parse_launch(command) == expected


@pytest.mark.parametrize(
    ("command", "reason"),
    [
        ("bash scripts/train.sh base", "is not a Python script"),
        ("accelerate config", "is not a launch"),
        ("python", "names no script"),
        ("python 'unterminated", "does not parse"),
    ],
)
def test_a_command_that_is_not_a_python_script_is_not_run(command: str, reason: str) -> None:
    with pytest.raises(NotRunnable, match=reason):
        parse_launch(command)


def test_the_run_gets_a_copy_without_version_control_environments_or_big_files(
    tmp_path: Path,
) -> None:
    root = tmp_path / "project"
    (root / ".git").mkdir(parents=True)
    (root / ".git" / "HEAD").write_text("ref")
    (root / "pkg").mkdir()
    (root / "pkg" / "model.py").write_text("x = 1\n")
    (root / "data.bin").write_bytes(b"\0" * 16)
    with (root / "huge.pt").open("wb") as handle:
        handle.truncate(COPY_FILE_LIMIT + 1)  # sparse: no disk used
    copy = tmp_path / "copy"
    left_out = copy_project(root, copy)
    assert left_out == ["huge.pt"]
    assert sorted(p.relative_to(copy).as_posix() for p in copy.rglob("*")) == [
        "data.bin", "pkg", "pkg/model.py",
    ]  # fmt: skip
