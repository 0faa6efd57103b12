"""The stand-in for the script's own Dataset whose files are missing: items
shaped for the model the script trains, said in a note, or one clear line
when they cannot be shaped."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from run_helpers import codes

from torchwise.run.needs import missing_file

Run = Callable[..., dict[str, Any]]

TOKENS = """
import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class Tokens(Dataset):
    def __init__(self, path, length=128):
        super().__init__()
        with open(path, "rb") as f:
            data = np.fromfile(f, dtype=np.uint16)
        self.data = data[: len(data) // length * length].reshape(-1, length)

    def __len__(self):
        return len(self.data)

    def __getitem__(self, i):
        row = torch.from_numpy(self.data[i].astype(np.int64))
        return row[:-1], row[1:]


class LanguageModel(nn.Module):
    def __init__(self, vocab=1000, dim=16, block_size=48):
        super().__init__()
        self.block_size = block_size
        self.embed = nn.Embedding(vocab, dim)
        self.head = nn.Linear(dim, vocab)

    def forward(self, x, y):
        assert x.shape[1] <= self.block_size
        logits = self.head(self.embed(x))
        return nn.functional.cross_entropy(logits.flatten(0, 1), y.flatten())


data = Tokens("data/train.bin")
loader = DataLoader(data, batch_size=8, shuffle=True, num_workers={workers})
model = LanguageModel()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
for step, (x, y) in enumerate(loader):
    loss = model(x, y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


def _notes(result: dict[str, Any]) -> list[str]:
    return [note for note in result["notes"] if note.startswith("stand-in data")]


def test_a_token_dataset_without_its_file_gets_next_token_items_for_the_language_model(
    run: Run,
) -> None:
    result = run(TOKENS.format(workers=0))
    assert result["exit_status"] == 0 and result["steps"] >= 5
    assert codes(result, serious=True) == []
    (note,) = _notes(result)
    assert "Tokens() could not read its files (FileNotFoundError" in note
    assert "int64 ids below 256 (48,) with targets int64 ids below 256 (48,)" in note
    assert "LanguageModel's Embedding(1000, 16)" in note


def test_the_note_comes_from_the_main_process_when_workers_read_the_items(run: Run) -> None:
    result = run(TOKENS.format(workers=2))
    assert result["exit_status"] == 0 and result["steps"] >= 5
    assert len(_notes(result)) == 1


def test_without_stand_ins_the_script_meets_its_missing_file(run: Run) -> None:
    result = run(TOKENS.format(workers=0), stand_ins=False)
    assert _notes(result) == [] and result["steps"] == 0
    assert any("FileNotFoundError" in f["message"] for f in result["findings"])


TABLE = """
import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class Table(Dataset):
    def __init__(self, path):
        table = np.loadtxt(path, delimiter=",")
        self.x, self.y = table[:, :-1], table[:, -1]

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return {item}


model = nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Linear(32, 5))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(Table("missing.csv"), batch_size=16, shuffle=True)
for {unpack} in loader:
    loss = nn.functional.cross_entropy(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


def test_a_table_dataset_gets_features_and_class_indices_for_a_classifier(run: Run) -> None:
    result = run(TABLE.format(item="self.x[i], self.y[i]", unpack="x, y"))
    assert result["exit_status"] == 0 and result["steps"] >= 5
    (note,) = _notes(result)
    assert "float32 (12,) with targets int64 ids below 5 ()" in note


def test_a_loop_unpacking_more_than_input_and_target_gets_one_clear_line(run: Run) -> None:
    result = run(TABLE.format(item="self.x[i], self.y[i], i, i", unpack="x, y, mark, other"))
    assert _notes(result) == [] and result["steps"] == 0
    (crash,) = [f for f in result["findings"] if f["code"] == "TWR001"]
    assert "Table's files are missing and its stand-in cannot be shaped" in crash["message"]
    assert "the loop unpacks 4 values from each batch" in crash["message"]
    assert crash["line"] == 23  # the loop, where the script meets its data


def test_other_errors_of_a_dataset_are_the_scripts_own() -> None:
    assert missing_file(FileNotFoundError(2, "No such file or directory", "x.csv"))
    assert missing_file(OSError("data/train does not exist"))
    assert not missing_file(ValueError("could not convert string to float: 'a'"))
    assert not missing_file(PermissionError(13, "Permission denied"))


STREAM = """
import torch
from torch import nn
from torch.utils.data import DataLoader, IterableDataset


class Stream(IterableDataset):
    def __init__(self, path):
        self.handle = open(path)

    def __iter__(self):
        for line in self.handle:
            values = [float(v) for v in line.split(",")]
            yield torch.tensor(values[:-1]), torch.tensor(values[-1:])


model = nn.Linear(6, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for x, y in DataLoader(Stream("stream.csv"), batch_size=8):
    loss = nn.functional.mse_loss(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


def test_an_iterable_dataset_streams_items_shaped_for_a_regression_model(run: Run) -> None:
    result = run(STREAM)
    assert result["exit_status"] == 0 and result["steps"] >= 5
    (note,) = _notes(result)
    assert "float32 (6,) with targets float32 (1,)" in note


def test_an_attribute_the_failed_constructor_never_set_is_the_stand_ins_limit(run: Run) -> None:
    """The script reads what __init__ would have set after the missing file: the run stops
    there, said as the stand-in's limit (a hint), not as the script's bug."""
    source = TOKENS.format(workers=0).replace(
        "model = LanguageModel()", "model = LanguageModel(vocab=data.vocab_size)"
    )
    result = run(source)
    (crash,) = [f for f in result["findings"] if f["code"] == "TWR001"]
    assert crash["severity"] == "info" and result["steps"] == 0
    assert "Tokens's files are missing and its stand-in has no `vocab_size`" in crash["message"]


def test_a_crash_before_the_first_step_on_guessed_items_is_not_called_a_bug(run: Run) -> None:
    source = TABLE.format(item="self.x[i], self.y[i]", unpack="x, y").replace(
        "loss = nn.functional.cross_entropy(model(x), y)",
        "loss = nn.functional.cross_entropy(model(x[:, :6]), y)",
    )
    result = run(source)
    (crash,) = [f for f in result["findings"] if f["code"] == "TWR001"]
    assert crash["severity"] == "info"
    assert crash["message"].startswith("the run stopped before its first step on stand-in data")
