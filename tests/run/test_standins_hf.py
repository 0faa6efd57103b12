"""Stand-ins for Hugging Face models, configurations and tokenizers that
cannot be fetched. The names used do not exist on the hub, so a machine with
a network fails to fetch them as one without does (and downloads nothing)."""

from __future__ import annotations

from pathlib import Path

import pytest
from run_helpers import codes, run_source

transformers = pytest.importorskip("transformers")

from torchwise.run.standins.hf import byte_tokenizer, model_type_of, stand_in_config  # noqa: E402

MISSING = "torchwise-tests/bert-tiny-that-does-not-exist"
TINY = "num_hidden_layers=1, hidden_size=32, num_attention_heads=2, intermediate_size=64"


def test_a_model_and_tokenizer_that_cannot_be_fetched_train_as_stand_ins(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = f"""
        import torch
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained("{MISSING}")
        model = AutoModelForSequenceClassification.from_pretrained(
            "{MISSING}", num_labels=3, {TINY}
        )
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
        texts, labels = ["a good film", "a bad one", "fine"], torch.tensor([0, 1, 2])
        for step in range(2):
            batch = tokenizer(texts, padding=True, return_tensors="pt")
            optimizer.zero_grad()
            model(**batch, labels=labels).loss.backward()
            optimizer.step()
        print("MODEL", type(model).__name__, model.config.num_labels, model.config.hidden_size)
    """
    result = run_source(tmp_path, source)
    assert codes(result, serious=True) == []
    assert result["steps"] == 2
    assert "MODEL BertForSequenceClassification 3 32" in capsys.readouterr().out
    notes = [note for note in result["notes"] if note.startswith("stand-in")]
    assert any(note.startswith(f"stand-in tokenizer: '{MISSING}'") for note in notes)
    assert any("a randomly initialised BertForSequenceClassification" in note for note in notes)


def test_a_name_that_shows_no_model_type_meets_the_real_error(tmp_path: Path) -> None:
    source = """
        from transformers import AutoModel

        AutoModel.from_pretrained("./checkpoints/best-run")
    """
    result = run_source(tmp_path, source)
    assert codes(result) == ["TWR001"]


def test_without_stand_ins_a_missing_model_is_the_scripts_crash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)  # no half minute of retries
    source = f"""
        from transformers import AutoModel

        AutoModel.from_pretrained("{MISSING}")
    """
    assert codes(run_source(tmp_path, source, stand_ins=False)) == ["TWR001"]


@pytest.mark.parametrize(
    ("name", "model_type"),
    [
        ("bert-base-uncased", "bert"),
        ("FacebookAI/roberta-base", "roberta"),
        ("distilgpt2", "gpt2"),
        ("meta-llama/Llama-2-7b-hf", "llama"),
        ("google-t5/t5-small", "t5"),
        ("./output/checkpoint-500", None),
    ],
)
def test_the_model_type_a_hub_name_shows(name: str, model_type: str | None) -> None:
    assert model_type_of(name) == model_type


def test_a_default_configuration_too_large_for_a_few_cpu_steps_keeps_two_layers() -> None:
    config = stand_in_config("meta-llama/Llama-2-7b-hf", {"torch_dtype": "auto"}, None)
    assert type(config).__name__ == "LlamaConfig"
    assert config.num_hidden_layers == 2 and config.hidden_size == 4096
    small = stand_in_config("bert-base-uncased", {"num_labels": 5}, None)
    assert small.num_hidden_layers == 12 and small.num_labels == 5


def test_the_byte_tokenizer_encodes_any_text_below_its_size() -> None:
    tokenizer = byte_tokenizer(16)
    encoded = tokenizer(["héllo wörld ✓", "x"], padding=True, truncation=True)["input_ids"]
    assert all(0 <= token < len(tokenizer) <= 263 for row in encoded for token in row)
    assert len(encoded[0]) == len(encoded[1]) <= 16
