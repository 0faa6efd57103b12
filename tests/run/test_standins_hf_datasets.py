"""The stand-in for ``datasets.load_dataset`` when the data cannot be fetched.

The real library is not a test dependency: a minimal ``datasets`` package with
its interface (``Dataset.from_dict``, ``DatasetDict``, a ``load_dataset`` that
cannot reach the hub) is written next to the script.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from run_helpers import codes, run_source

from torchwise.run.standins.hf_datasets import columns_for, unreachable

FAKE_DATASETS = """
class Dataset(dict):
    @classmethod
    def from_dict(cls, columns):
        made = cls(columns)
        made.column_names = list(columns)
        return made

    def __len__(self):
        return len(next(iter(self.values())))


class DatasetDict(dict):
    pass


def load_dataset(path, name=None, **kwargs):
    raise ConnectionError(f"Couldn't reach '{path}' on the Hub (LocalEntryNotFoundError)")
"""

SCRIPT = """
import torch
from torch import nn
from datasets import load_dataset

data = load_dataset("glue", "sst2")
train = data["train"]
print("COLUMNS", train.column_names, len(train), sorted(data))
labels = torch.tensor(train["label"][:32])
lengths = torch.tensor([[len(text.split())] for text in train["sentence"][:32]], dtype=torch.float)
model = nn.Linear(1, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(2):
    loss = nn.functional.cross_entropy(model(lengths), labels)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


def _write_fake(directory: Path) -> None:
    (directory / "datasets").mkdir()
    (directory / "datasets" / "__init__.py").write_text(textwrap.dedent(FAKE_DATASETS))


def test_a_glue_task_that_cannot_be_fetched_gets_its_own_columns(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _write_fake(tmp_path)
    result = run_source(tmp_path, SCRIPT)
    assert codes(result, serious=True) == [] and result["steps"] == 2
    out = capsys.readouterr().out
    assert "COLUMNS ['sentence', 'label', 'idx'] 512 ['test', 'train', 'validation']" in out
    (note,) = [n for n in result["notes"] if n.startswith("stand-in data: load_dataset")]
    assert "load_dataset('glue', 'sst2') could not be fetched (ConnectionError)" in note


def test_without_stand_ins_the_script_meets_the_unreachable_hub(tmp_path: Path) -> None:
    _write_fake(tmp_path)
    result = run_source(tmp_path, SCRIPT, stand_ins=False)
    assert result["steps"] == 0 and "ConnectionError" in result["findings"][0]["message"]


def test_the_columns_of_known_datasets_and_a_text_column_otherwise() -> None:
    assert columns_for("imdb", None) == ({"text": "text", "label": "label:2"}, True)
    assert columns_for("stanfordnlp/imdb", None)[0]["label"] == "label:2"
    assert columns_for("glue", "mnli")[0]["label"] == "label:3"
    assert columns_for("parquet", None) == ({"text": "text"}, False)


def test_only_data_that_cannot_be_reached_is_stood_in_for() -> None:
    assert unreachable(ConnectionError("Couldn't reach 'imdb' on the Hub"))
    assert unreachable(FileNotFoundError("Unable to find 'data/train.json'"))
    assert not unreachable(ValueError("BuilderConfig 'sst3' not found. Available: ['sst2']"))
    assert not unreachable(TypeError("load_dataset() got an unexpected keyword 'splt'"))
