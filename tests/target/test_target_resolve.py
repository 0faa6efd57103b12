"""resolve_target: files, packages, zoo, config, factories, and clear errors."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import torch

from torchwise.errors import TorchwiseError
from torchwise.target import resolve_target

REPO = Path(__file__).resolve().parents[2]
CIFAR = REPO / "examples" / "cifar_project"

MODELS = """
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self, dim: int = 4) -> None:
        super().__init__()
        self.fc = nn.Linear(dim, 2)

    def forward(self, x, scale=None):
        return self.fc(x)


instance = Net(dim=6)


def make_net(dim: int = 5):
    return Net(dim)


def make_with_example():
    return Net(3), torch.randn(7, 3)


def make_with_kwargs():
    return Net(3), (torch.randn(2, 3),), {"scale": torch.ones(1)}


def not_a_model():
    return 42
"""


@pytest.fixture()
def models_file(tmp_path: Path) -> Path:
    path = tmp_path / "models.py"
    path.write_text(MODELS)
    return path


def test_class_with_init_kwargs(models_file: Path) -> None:
    t = resolve_target(f"{models_file}:Net", inputs=["f32[2,8]"], init_kwargs='{"dim": 8}')
    assert t.model.fc.in_features == 8 and t.args[0].shape == (2, 8)
    assert t.cls is not None and t.cls.__name__ == "Net"
    assert t.source_file == models_file
    assert t.init_kwargs == {"dim": 8}


def test_instance_and_factory(models_file: Path) -> None:
    assert resolve_target(f"{models_file}:instance", inputs=["f32[1,6]"]).model.fc.in_features == 6
    assert resolve_target(f"{models_file}:make_net", inputs=["f32[1,5]"]).model.fc.in_features == 5


def test_factory_example_inputs_become_specs(models_file: Path) -> None:
    t = resolve_target(f"{models_file}:make_with_example")
    assert t.args[0].shape == (7, 3)
    assert [str(s) for s in t.input_specs] == ["f32[7,3]"]
    t2 = resolve_target(f"{models_file}:make_with_kwargs")
    assert set(t2.kwargs) == {"scale"} and [s.name for s in t2.input_specs] == [None, "scale"]


def test_package_module_target(models_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(models_file.parent))
    t = resolve_target("models:Net", inputs=["f32[3,4]"])
    assert t.model(*t.args).shape == (3, 2)


def test_zoo_target_on_meta_has_default_inputs() -> None:
    t = resolve_target("zoo:gpt2", device="meta")
    assert next(t.model.parameters()).device.type == "meta"
    assert t.args[0].shape == (1, 1024) and t.args[0].dtype == torch.int64
    assert t.input_specs[0].high == 50257


def test_config_target_from_example_project() -> None:
    t = resolve_target("cifarnet", config_start=CIFAR)
    assert t.cls is not None and t.cls.__name__ == "CifarNet"
    assert t.args[0].shape == (8, 3, 32, 32)
    assert t.source_file == CIFAR / "model.py"


def test_config_inputs_and_init_kwargs(tmp_path: Path, models_file: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        textwrap.dedent(
            """
            [tool.torchwise.models.small]
            target = "models.py:Net"
            inputs = "f32[batch=2,7]"
            init-kwargs = { dim = 7 }
            """
        )
    )
    t = resolve_target("small", config_start=tmp_path)
    assert t.model.fc.in_features == 7 and t.args[0].shape == (2, 7)


@pytest.mark.parametrize(
    ("target", "inputs", "init", "message"),
    [
        ("missing.py:Net", (), None, "model file not found: missing.py"),
        ("{file}:Nope", (), None, "has no attribute 'Nope'"),
        ("{file}:Net", (), '{"width": 3}', "unexpected keyword argument 'width'"),
        ("{file}:Net", (), "{dim: 3}", "--init-kwargs is not valid JSON"),
        ("{file}:Net", (), None, "missing a required argument: 'x'"),
        ("{file}:not_a_model", (), None, "returned int, not an nn.Module"),
        ("{file}:Net", ("f32[2,4",), None, "bad input spec"),
        ("zoo:resnet5", (), None, "no zoo model 'resnet5'"),
        ("no_such_pkg_xyz:Net", (), None, "no module named 'no_such_pkg_xyz'"),
        ("unconfigured", (), None, "unknown target 'unconfigured'"),
    ],
)
def test_clear_errors(
    models_file: Path, target: str, inputs: tuple[str, ...], init: str | None, message: str
) -> None:
    with pytest.raises(TorchwiseError) as info:
        resolve_target(
            target.format(file=models_file), inputs=inputs, init_kwargs=init,
            config_start=models_file.parent,
        )  # fmt: skip
    assert message in str(info.value)


def test_missing_name_lists_the_models_defined(models_file: Path) -> None:
    with pytest.raises(TorchwiseError) as info:
        resolve_target(f"{models_file}:Nope")
    assert (
        info.value.hint is not None and "Net" in info.value.hint and "instance" in info.value.hint
    )


def test_import_error_shows_the_exception_and_line(tmp_path: Path) -> None:
    broken = tmp_path / "broken.py"
    broken.write_text("import torch\n\nraise ValueError('bad config value')\n")
    with pytest.raises(TorchwiseError) as info:
        resolve_target(f"{broken}:Net")
    assert "ValueError: bad config value" in str(info.value)
    assert "broken.py:3" in str(info.value)


def test_forward_signature_is_named_when_inputs_are_missing(models_file: Path) -> None:
    with pytest.raises(TorchwiseError) as info:
        resolve_target(f"{models_file}:Net")
    assert "Net.forward(x, scale=None)" in str(info.value)


def test_huge_zoo_model_refused_off_meta() -> None:
    with pytest.raises(TorchwiseError, match="meta device"):
        resolve_target("zoo:llama-70b", device="cpu")


@pytest.mark.parametrize(
    ("ref", "message"),
    [
        ("graphs.py", "is not 'file.py:function'"),
        ("nope.py:make", "no file nope.py"),
        ("graphs.py:nope", "graphs.py has no 'nope'"),
        ("graphs.py:SIZE", r"SIZE is not a function \(it is int\)"),
    ],
)
def test_inputs_from_is_found_before_the_model_is_built(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ref: str, message: str
) -> None:
    """A typo in --inputs-from costs no build: the constructor never runs."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "graphs.py").write_text("SIZE = 3\n")
    (tmp_path / "model.py").write_text(
        "from torch import nn\n\n\nclass Net(nn.Module):\n"
        "    def __init__(self):\n        raise RuntimeError('built')\n"
    )
    with pytest.raises(TorchwiseError, match=message):
        resolve_target("model.py:Net", inputs_from=ref)
