"""The one walker of nested tensors (torchwise.tensortree): what it walks and rebuilds."""

from __future__ import annotations

import dataclasses
from collections import OrderedDict, UserDict, namedtuple

import pytest
import torch

from torchwise.tensortree import map_tensors, tensors_in

Pair = namedtuple("Pair", "first second")


@dataclasses.dataclass
class Output:
    loss: torch.Tensor
    name: str = "out"


def test_containers_keep_their_types_and_order() -> None:
    a, b, c = torch.zeros(1), torch.ones(1), torch.full((1,), 2.0)
    value = (a, [b, {"c": c, "n": 3}], Pair(a, None), OrderedDict(x=b), "text")
    mapped = map_tensors(value, lambda t: t + 10)
    assert isinstance(mapped[2], Pair) and isinstance(mapped[3], OrderedDict)
    assert mapped[1][1]["n"] == 3 and mapped[4] == "text" and mapped[2].second is None
    assert [float(t) for t in tensors_in(mapped)] == [10.0, 11.0, 12.0, 10.0, 11.0]


def test_other_mappings_are_walked_and_become_dicts() -> None:
    encoding = UserDict({"input_ids": torch.zeros(2, dtype=torch.long)})  # like BatchEncoding
    mapped = map_tensors(encoding, lambda t: t + 1)
    assert type(mapped) is dict and mapped["input_ids"].tolist() == [1, 1]
    assert len(tensors_in(encoding)) == 1


def test_dataclass_fields_are_searched_but_left_alone_by_map() -> None:
    out = Output(torch.ones(1))
    assert tensors_in([out]) == [out.loss]
    assert map_tensors(out, lambda t: t * 0) is out


def test_a_library_output_type_is_rebuilt_as_itself() -> None:
    outputs = pytest.importorskip("transformers.modeling_outputs")
    logits = torch.randn(1, 3)
    out = outputs.SequenceClassifierOutput(logits=logits)
    mapped = map_tensors(out, lambda t: t.detach() * 2)
    assert type(mapped) is type(out) and torch.equal(mapped.logits, logits * 2)
    assert [t.shape for t in tensors_in(out)] == [logits.shape]
