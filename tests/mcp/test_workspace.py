"""Every path and model target an agent names is confined to the workspace root."""

from __future__ import annotations

from pathlib import Path

import pytest

from torchwise.errors import TorchwiseError
from torchwise.mcp.workspace import OutsideWorkspace, Workspace


@pytest.fixture
def layout(tmp_path: Path) -> tuple[Workspace, Path]:
    root = tmp_path / "project"
    (root / "pkg").mkdir(parents=True)
    (root / "model.py").write_text("")
    (root / "pkg" / "net.py").write_text("")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.py").write_text("")
    (root / "link_out").symlink_to(outside / "secret.py")
    (root / "dir_out").symlink_to(outside, target_is_directory=True)
    (root / "link_in").symlink_to(root / "model.py")
    return Workspace.at(root), outside


@pytest.mark.parametrize("value", ["model.py", "pkg/net.py", ".", "link_in", "pkg/../model.py"])
def test_paths_inside_are_resolved(layout: tuple[Workspace, Path], value: str) -> None:
    workspace, _ = layout
    resolved = workspace.path(value)
    assert resolved == workspace.root or workspace.root in resolved.parents


@pytest.mark.parametrize(
    "value", ["..", "../outside/secret.py", "link_out", "dir_out/secret.py", "pkg/../../outside"]
)
def test_paths_that_leave_are_refused(layout: tuple[Workspace, Path], value: str) -> None:
    workspace, _ = layout
    with pytest.raises(OutsideWorkspace, match="outside the workspace"):
        workspace.path(value)


def test_absolute_paths_are_refused_unless_inside(layout: tuple[Workspace, Path]) -> None:
    workspace, outside = layout
    with pytest.raises(OutsideWorkspace):
        workspace.path(str(outside / "secret.py"))
    with pytest.raises(OutsideWorkspace):
        workspace.path("/etc/passwd")
    assert workspace.path(str(workspace.root / "model.py")) == workspace.root / "model.py"


def test_a_missing_path_is_an_error(layout: tuple[Workspace, Path]) -> None:
    workspace, _ = layout
    with pytest.raises(TorchwiseError, match="does not exist"):
        workspace.path("nope.py")


@pytest.mark.parametrize(
    "target",
    [
        "../outside/secret.py:Net",
        "link_out:Net",
        "dir_out/secret.py:Net",
        "/etc/passwd:Net",
        "torch.nn:Linear",  # an installed package, not the workspace's code
        "hf:bert-base-uncased",
        "timm:resnet18",
    ],
)
def test_targets_that_leave_are_refused(layout: tuple[Workspace, Path], target: str) -> None:
    workspace, _ = layout
    with pytest.raises(OutsideWorkspace):
        workspace.model(target)


def test_targets_inside_become_absolute_files(layout: tuple[Workspace, Path]) -> None:
    workspace, _ = layout
    root = workspace.root
    assert workspace.model("model.py:Net").target == f"{root / 'model.py'}:Net"
    assert workspace.model("pkg.net:Net").target == f"{root / 'pkg' / 'net.py'}:Net"
    assert workspace.model("zoo:resnet18").target == "zoo:resnet18"


def test_a_configured_target_must_point_inside(layout: tuple[Workspace, Path]) -> None:
    workspace, _ = layout
    (workspace.root / "pyproject.toml").write_text(
        '[tool.torchwise.models.good]\ntarget = "model.py:Net"\n'
        '[tool.torchwise.models.bad]\ntarget = "../outside/secret.py:Net"\n'
        '[tool.torchwise.models.built]\ntarget = "../outside/secret.py"\nbuild = "Net()"\n'
        '[tool.torchwise.models.hub]\ntarget = "hf:gpt2"\n'
    )
    resolved = workspace.model("good")
    assert (resolved.target, resolved.config_start) == ("good", workspace.root)
    for name in ("bad", "built", "hub"):
        with pytest.raises(OutsideWorkspace):
            workspace.model(name)
    with pytest.raises(TorchwiseError, match="unknown target 'nope'"):
        workspace.model("nope")
