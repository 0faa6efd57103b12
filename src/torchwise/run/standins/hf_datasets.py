"""A stand-in for Hugging Face ``datasets.load_dataset`` when the data cannot be fetched.

``load_dataset`` is tried as written first: a cached or local dataset is the
real one. When it fails because the hub cannot be reached or the files are
not there, the stand-in is a synthetic dataset of the same kind:

- the columns of the dataset the name says, for the datasets most scripts
  train on (:data:`KNOWN_COLUMNS`: IMDB's ``text`` and ``label``, GLUE tasks'
  sentence pairs, SQuAD's ``question``/``context``/``answers``...), with labels
  over the real number of classes;
- a ``text`` column otherwise (language-model corpora, local text, JSON or
  Parquet files whose columns cannot be known), as the note says;
- the split asked (``split="train[:10%]"`` is a ``Dataset``), or a
  ``DatasetDict`` of train, validation and test; ``streaming=True`` gives an
  iterable dataset.

Texts are made of common English words from a private generator, so a
tokenizer (real or the byte-level stand-in) encodes them and the script's
random state is not touched.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from types import ModuleType
from typing import Any

from torchwise.run.needs import GUESSED_COLUMNS

Note = Callable[[str], None]
Patch = Callable[[Any, str, Any], None]

ROWS = {"train": 512, "validation": 128, "test": 128}
_TEXT = (
    "the a model learns from data every step of training moves its weights toward lower loss "
    "on this small batch while the held out set tells whether it generalises or only "
    "remembers what it has seen before the next epoch begins again"
)
_WORDS = tuple(_TEXT.split())
#: name (or name/config) -> {column: kind}; kind is "text", "int", or "label:N"
KNOWN_COLUMNS: dict[str, dict[str, str]] = {
    "imdb": {"text": "text", "label": "label:2"},
    "rotten_tomatoes": {"text": "text", "label": "label:2"},
    "ag_news": {"text": "text", "label": "label:4"},
    "yelp_review_full": {"text": "text", "label": "label:5"},
    "yelp_polarity": {"text": "text", "label": "label:2"},
    "amazon_polarity": {"title": "text", "content": "text", "label": "label:2"},
    "emotion": {"text": "text", "label": "label:6"},
    "dair-ai/emotion": {"text": "text", "label": "label:6"},
    "sst2": {"idx": "int", "sentence": "text", "label": "label:2"},
    "glue/sst2": {"sentence": "text", "label": "label:2", "idx": "int"},
    "glue/cola": {"sentence": "text", "label": "label:2", "idx": "int"},
    "glue/mrpc": {"sentence1": "text", "sentence2": "text", "label": "label:2", "idx": "int"},
    "glue/qqp": {"question1": "text", "question2": "text", "label": "label:2", "idx": "int"},
    "glue/stsb": {"sentence1": "text", "sentence2": "text", "label": "float", "idx": "int"},
    "glue/mnli": {"premise": "text", "hypothesis": "text", "label": "label:3", "idx": "int"},
    "glue/qnli": {"question": "text", "sentence": "text", "label": "label:2", "idx": "int"},
    "glue/rte": {"sentence1": "text", "sentence2": "text", "label": "label:2", "idx": "int"},
    "glue/wnli": {"sentence1": "text", "sentence2": "text", "label": "label:2", "idx": "int"},
    "snli": {"premise": "text", "hypothesis": "text", "label": "label:3"},
    "squad": {
        "id": "text",
        "title": "text",
        "context": "text",
        "question": "text",
        "answers": "answers",
    },
    "tatsu-lab/alpaca": {"instruction": "text", "input": "text", "output": "text", "text": "text"},
}


def patch_datasets(
    module: ModuleType, note: Note, patch: Patch, offline: Callable[[], bool]
) -> None:
    """Wrap ``datasets.load_dataset`` (the module's, as scripts import it from there).
    ``offline()`` says whether the hub is unreachable (then datasets runs offline too,
    failing at once instead of retrying)."""
    original = getattr(module, "load_dataset", None)
    if not callable(original):
        return

    def load_dataset(path: Any, name: Any = None, *args: Any, **kwargs: Any) -> Any:
        config = getattr(module, "config", None)
        if offline() and config is not None and hasattr(config, "HF_DATASETS_OFFLINE"):
            patch(config, "HF_DATASETS_OFFLINE", True)
        try:
            return original(path, name, *args, **kwargs)
        except Exception as error:
            if not unreachable(error):
                raise
            return stand_in(module, str(path), name, kwargs, error, note)

    load_dataset.__wrapped__ = original  # type: ignore[attr-defined]
    patch(module, "load_dataset", load_dataset)


_UNREACHABLE_WORDS = (
    "couldn't reach", "offline", "doesn't exist on the hub", "unable to find", "connection",
    "no such file", "couldn't find",
)  # fmt: skip


def unreachable(error: BaseException) -> bool:
    """The data could not be fetched or found (not a bug in how the script asked)."""
    kinds = {type(kind).__name__ for kind in (error, error.__cause__) if kind is not None}
    known = {
        "ConnectionError", "DatasetNotFoundError", "FileNotFoundError", "OfflineModeIsEnabled",
        "LocalEntryNotFoundError", "HfHubHTTPError", "EmptyDatasetError",
    }  # fmt: skip
    if kinds & known or isinstance(error, (ConnectionError, FileNotFoundError)):
        return True
    text = str(error).lower()
    return any(words in text for words in _UNREACHABLE_WORDS)


def columns_for(path: str, name: Any) -> tuple[dict[str, str], bool]:
    """The columns of the dataset ``path`` (config ``name``), and whether they are known."""
    short = path.rstrip("/").split("/")[-1].lower()
    for key in (f"{path}/{name}".lower(), f"{short}/{name}".lower(), path.lower(), short):
        if key in KNOWN_COLUMNS:
            return KNOWN_COLUMNS[key], True
    return {"text": "text"}, False


def stand_in(
    module: ModuleType,
    path: str,
    name: Any,
    kwargs: dict[str, Any],
    error: BaseException,
    note: Note,
) -> Any:
    columns, known = columns_for(path, name)
    split = kwargs.get("split")
    splits = [_base_split(split)] if isinstance(split, str) else list(ROWS)
    made = {part: module.Dataset.from_dict(_rows(columns, ROWS[part], part)) for part in splits}
    result: Any = made[splits[0]] if isinstance(split, str) else module.DatasetDict(made)
    if kwargs.get("streaming"):
        result = (
            result.to_iterable_dataset()
            if isinstance(split, str)
            else module.IterableDatasetDict({k: v.to_iterable_dataset() for k, v in made.items()})
        )
    shown = ", ".join(columns)
    what = "its columns" if known else f"a text column (its {GUESSED_COLUMNS} offline)"
    sizes = ", ".join(f"{part} {ROWS[part]}" for part in splits)
    note(
        f"stand-in data: load_dataset({path!r}{', ' + repr(name) if name else ''}) could not be "
        f"fetched ({type(error).__name__}); synthetic rows with {what} ({shown}) take its place "
        f"({sizes} rows; --no-stand-ins runs only on the real data)"
    )
    return result


def _base_split(split: str) -> str:
    base = re.split(r"[\[+]", split, maxsplit=1)[0].strip()
    return base if base in ROWS else "train"


def _rows(columns: dict[str, str], count: int, split: str) -> dict[str, list[Any]]:
    rng = random.Random(f"{split}:{count}")
    data: dict[str, list[Any]] = {}
    for column, kind in columns.items():
        if kind == "text":
            data[column] = [_sentence(rng) for _ in range(count)]
        elif kind == "int":
            data[column] = list(range(count))
        elif kind == "float":
            data[column] = [round(rng.uniform(0, 5), 3) for _ in range(count)]
        elif kind == "answers":
            data[column] = [{"text": [rng.choice(_WORDS)], "answer_start": [0]}] * count
        else:  # label:N
            classes = int(kind.split(":")[1])
            data[column] = [index % classes for index in range(count)]
    return data


def _sentence(rng: random.Random) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(rng.randint(12, 48)))
