"""Targets for real code: build expressions, scripts, meta builds, batch dims, config keys."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest
import torch

from torchwise.errors import TorchwiseError
from torchwise.target import REAL_BUILD_LIMIT, resolve_target

# A nanoGPT-style file, written here (not copied): a config dataclass passed to the
# constructor, which prints the parameter count, and a forward that takes labels.
GPT_FILE = """
from dataclasses import dataclass

import torch
from torch import nn


@dataclass
class GPTConfig:
    block_size: int = 16
    vocab_size: int = 64
    n_layer: int = 2
    n_embd: int = 32


class GPT(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.wte = nn.Embedding(config.vocab_size, config.n_embd)
        self.blocks = nn.ModuleList(
            nn.Linear(config.n_embd, config.n_embd) for _ in range(config.n_layer)
        )
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        self.rates = [x.item() for x in torch.linspace(0, 0.1, config.n_layer)]
        print("number of parameters: %.2fK" % (sum(p.numel() for p in self.parameters()) / 1e3))

    def forward(self, idx, targets=None):
        x = self.wte(idx)
        for block in self.blocks:
            x = x + block(x)
        logits = self.lm_head(x)
        if targets is None:
            return logits, None
        return logits, nn.functional.cross_entropy(logits.flatten(0, 1), targets.flatten())


def make_big():
    return GPT(GPTConfig(vocab_size=100_000, n_embd=8192, n_layer=30))
"""

SCRIPT_FILE = """
import argparse

from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--data", required=True)
args = parser.parse_args()


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(2, 2)

    def forward(self, x):
        return self.fc(x)
"""

LSTM_FILE = """
from torch import nn


class RNNModel(nn.Module):
    def __init__(self, ntoken=50, ninp=16, nhid=16, nlayers=2):
        super().__init__()
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnn = nn.LSTM(ninp, nhid, nlayers)
        self.decoder = nn.Linear(nhid, ntoken)

    def forward(self, input, hidden):
        output, hidden = self.rnn(self.encoder(input), hidden)
        return self.decoder(output), hidden
"""


@pytest.fixture()
def gpt_file(tmp_path: Path) -> Path:
    path = tmp_path / "gptmini.py"
    path.write_text(GPT_FILE)
    return path


def test_build_expression_in_the_module_namespace(
    gpt_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    t = resolve_target(
        str(gpt_file), build="GPT(GPTConfig(n_layer=3))", inputs=["i64[batch=2,seq=8]<64"]
    )
    assert len(t.model.blocks) == 3
    assert (t.build, t.module, t.module_file) == ("GPT(GPTConfig(n_layer=3))", "gptmini", gpt_file)
    assert t.build_names == ("GPT", "GPTConfig")
    assert t.import_line() == "from gptmini import GPT, GPTConfig"
    assert t.origin == "file" and t.name == "GPT" and t.built_on == "cpu"
    # the constructor's print went to stderr, once (the size probe on meta is silent)
    out, err = capsys.readouterr()
    assert out == "" and err.count("number of parameters") == 1


def test_build_with_a_name_and_keyword_inputs(gpt_file: Path) -> None:
    t = resolve_target(
        f"{gpt_file}:GPT",
        build="GPT(GPTConfig())",
        inputs=["i64[batch=2,seq=8]<64, targets=i64[batch=2,seq=8]<64"],
    )
    logits, loss = t.model(*t.args, **t.kwargs)
    assert logits.shape == (2, 8, 64) and loss is not None
    assert t.cls is not None and t.cls.__name__ == "GPT"


def test_plain_class_records_its_build_expression(gpt_file: Path) -> None:
    models = gpt_file.parent / "models.py"
    models.write_text(
        "from torch import nn\n\nclass Net(nn.Module):\n    def __init__(self, dim=4):\n"
        "        super().__init__()\n        self.fc = nn.Linear(dim, 2)\n\n"
        "    def forward(self, x):\n        return self.fc(x)\n"
    )
    t = resolve_target(f"{models}:Net", init_kwargs='{"dim": 8}', inputs=["f32[2,8]"])
    assert (t.build, t.build_names, t.module) == ("Net(dim=8)", ("Net",), "models")
    namespace: dict[str, object] = {}
    sys.path.insert(0, str(models.parent))
    try:
        exec(f"{t.import_line()}\nmodel = {t.build}", namespace)  # the recorded code rebuilds it
    finally:
        sys.path.remove(str(models.parent))
    assert sum(p.numel() for p in namespace["model"].parameters()) == 18  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("build", "message"),
    [
        ("GPT(GPTConfg())", "'GPTConfg', which"),
        ("GPT(GPTConfig(n_layer=)", "--build is not a Python expression"),
        ("GPT(GPTConfig(n_layer='x'))", "gptmini.py:22"),
        ("GPTConfig()", "returned GPTConfig, not an nn.Module"),
    ],
)
def test_bad_build_expressions_say_why(gpt_file: Path, build: str, message: str) -> None:
    with pytest.raises(TorchwiseError) as info:
        resolve_target(str(gpt_file), build=build, inputs=["i64[2,8]<64"])
    assert message in str(info.value)


def test_a_typo_in_build_suggests_the_name(gpt_file: Path) -> None:
    with pytest.raises(TorchwiseError) as info:
        resolve_target(str(gpt_file), build="GPT(GPTConfg())")
    assert info.value.hint == "did you mean GPTConfig?"


def test_script_parsing_argv_at_import_is_one_clear_error(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(SCRIPT_FILE)
    argv = list(sys.argv)
    with pytest.raises(TorchwiseError) as info:
        resolve_target(f"{script}:Net", inputs=["f32[1,2]"])
    message = str(info.value)
    assert f"{script}:8" in message  # the parse_args() line
    assert "the following arguments are required: --data" in message
    assert "__name__ == '__main__'" in (info.value.hint or "")
    assert sys.argv == argv


def test_script_sees_a_clean_argv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    script = tmp_path / "opts.py"
    script.write_text(
        "import argparse, sys\nfrom torch import nn\n"
        "args = argparse.ArgumentParser().parse_args()\nSEEN = list(sys.argv)\n"
        "class Net(nn.Module):\n    def forward(self, x):\n        return x\n"
    )
    monkeypatch.setattr(sys, "argv", ["torchwise", "inspect", "--depth", "2"])
    t = resolve_target(f"{script}:Net", inputs=["f32[1]"])
    seen = sys.modules[type(t.model).__module__].SEEN
    assert seen == [str(script)]


def test_syntax_error_points_at_the_users_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("import torch\ndef broken(:\n    pass\n")
    with pytest.raises(TorchwiseError) as info:
        resolve_target(f"{bad}:Net")
    assert f"{bad}:2" in str(info.value) and "SyntaxError" in str(info.value)
    assert "torchwise" not in str(info.value).replace(str(tmp_path), "")


def test_constructor_error_names_the_users_line(tmp_path: Path) -> None:
    models = tmp_path / "raises.py"
    models.write_text(
        "from torch import nn\n\nclass Net(nn.Module):\n    def __init__(self):\n"
        "        super().__init__()\n        raise ValueError('width must be even')\n"
    )
    with pytest.raises(TorchwiseError) as info:
        resolve_target(f"{models}:Net", inputs=["f32[1]"])
    assert f"{models}:6" in str(info.value) and "ValueError: width must be even" in str(info.value)


def test_big_model_builds_on_meta_where_measuring(gpt_file: Path) -> None:
    # 30 x (8192^2 + 8192) + 2 x 100,000 x 8192 = 3,651,911,680 parameters: 13.6 GiB
    t = resolve_target(f"{gpt_file}:make_big", inputs=["i64[1,8]<64"], device="meta")
    size = sum(p.numel() for p in t.model.parameters())
    assert size == 30 * (8192 * 8192 + 8192) + 2 * 100_000 * 8192 > REAL_BUILD_LIMIT
    assert t.built_on == "meta" and "built on meta" in t.notes[0]
    assert all(p.device.type == "meta" for p in t.model.parameters())


def test_big_model_is_refused_where_it_would_run(gpt_file: Path) -> None:
    with pytest.raises(TorchwiseError, match="3,651,911,680 parameters"):
        resolve_target(f"{gpt_file}:make_big", inputs=["i64[1,8]<64"], device="cpu")


def test_build_on_meta_keeps_real_values_for_non_parameters(gpt_file: Path) -> None:
    # .item() on a linspace in __init__ works: only parameters and buffers go to meta
    t = resolve_target(f"{gpt_file}:GPT", build="GPT(GPTConfig())", build_on="meta",
                       inputs=["i64[1,8]<64"], device="meta")  # fmt: skip
    assert t.built_on == "meta" and t.model.rates == pytest.approx([0.0, 0.1])
    assert t.model.lm_head.weight.device.type == "meta"


def test_build_on_meta_is_refused_for_a_command_that_runs(gpt_file: Path) -> None:
    with pytest.raises(TorchwiseError, match="without weights"):
        resolve_target(str(gpt_file), build="GPT(GPTConfig())", build_on="meta", device="cpu")


def test_tuple_hidden_state_and_time_first_batch_dim(tmp_path: Path) -> None:
    lstm = tmp_path / "lstm.py"
    lstm.write_text(LSTM_FILE)
    t = resolve_target(
        f"{lstm}:RNNModel",
        inputs=["i64[seq=35,batch=20]<50", "(f32[2,batch=20,16], f32[2,batch=20,16])"],
    )
    assert t.batch_dim == 1  # named in the spec
    out, (h, _) = t.model(*t.args)
    assert out.shape == (35, 20, 50) and h.shape == (2, 20, 16)
    explicit = resolve_target(f"{lstm}:RNNModel", inputs=["i64[35,20]<50, (f32[2,20,16], "
                              "f32[2,20,16])"], batch_dim=1)  # fmt: skip
    assert explicit.batch_dim == 1


def test_batch_dim_out_of_range(tmp_path: Path) -> None:
    lstm = tmp_path / "lstm.py"
    lstm.write_text(LSTM_FILE)
    with pytest.raises(TorchwiseError, match="out of range"):
        resolve_target(f"{lstm}:RNNModel", inputs=["i64[35,20]<50, (f32[2,20,16], f32[2,20,16])"],
                       batch_dim=2)  # fmt: skip


def test_config_build_and_batch_dim(tmp_path: Path, gpt_file: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        textwrap.dedent(
            """
            [tool.torchwise.models.tiny-gpt]
            target = "gptmini.py"
            build = "GPT(GPTConfig(n_layer=1))"
            inputs = "i64[seq=8,batch=2]<64"
            batch-dim = 1
            """
        )
    )
    t = resolve_target("tiny-gpt", config_start=tmp_path)
    assert len(t.model.blocks) == 1 and t.batch_dim == 1
    assert t.config_name == "tiny-gpt" and t.name == "tiny-gpt" and t.build is not None


def test_init_kwargs_do_not_mix_with_build(gpt_file: Path) -> None:
    with pytest.raises(TorchwiseError, match="--init-kwargs does not apply with --build"):
        resolve_target(str(gpt_file), build="GPT(GPTConfig())", init_kwargs='{"n_layer": 1}')


def test_zoo_target_records_its_build() -> None:
    t = resolve_target("zoo:llama-tiny", device="meta")
    assert t.origin == "zoo" and t.module == "torchwise.zoo.llama" and t.build is not None
    assert t.build.startswith("llama(") and t.built_on == "meta"
    namespace: dict[str, object] = {}
    exec(f"{t.import_line()}\nmodel = {t.build}", namespace)
    n = sum(p.numel() for p in namespace["model"].parameters())  # type: ignore[attr-defined]
    assert n == 123_712


def test_module_instance_target_has_its_name_as_build(tmp_path: Path) -> None:
    path = tmp_path / "inst.py"
    path.write_text("from torch import nn\nmodel = nn.Linear(3, 2)\n")
    t = resolve_target(f"{path}:model", inputs=["f32[1,3]"])
    assert t.build == "model" and t.build_names == ("model",)
    assert isinstance(t.model, torch.nn.Linear)
