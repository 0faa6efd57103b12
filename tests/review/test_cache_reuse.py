"""The review cache is reused, counted (never timed): a warm run of an unchanged
project summarises and analyses nothing; a change re-summarises only that file and
re-analyses only the files whose view of the project it can change."""

from __future__ import annotations

from pathlib import Path

import pytest

from torchwise.review import runner
from torchwise.review.settings import ReviewSettings
from torchwise.review.summary import ArgFact, ModuleSummary, summarize_tree

# A package with relative and absolute imports, a re-export, a star import, a
# cycle, and a save whose kind is known only from its caller: every way a
# file's index entry can depend on other files.
PROJECT = {
    "pkg/__init__.py": "from .models import Net\n",
    "pkg/models.py": (
        "import torch.nn as nn\nfrom pkg import layers\n\n"
        "class Net(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.drop = nn.Dropout(0.1)\n"
        "        self.fc = layers.make()\n"
    ),
    "pkg/layers.py": (
        "import torch.nn as nn\nfrom .models import *\n\n"
        "def make(bias=False, scale=0):\n    return nn.Linear(2, 2, bias=bias)\n"
    ),
    "pkg/io.py": "import torch\n\ndef save(model, path):\n    torch.save(model, path)\n",
    "train.py": (
        "import torch\nfrom pkg import Net\nfrom pkg.io import save\n\n"
        "def evaluate(model, x):\n    model.eval()\n    return model(x)\n\n"
        "net = Net()\nsave(net, 'net.pt')\nmodel = torch.load('net.pt')\n"
    ),
    "other/standalone.py": "import torch\nx = torch.ones(2)\n",
}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    for name, text in PROJECT.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    return tmp_path


class Counts:
    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.summarised: list[str] = []
        self.analysed: list[str] = []
        parse_and_summarise = runner._parse_and_summarise
        review_one = runner._review_one

        def counted_summary(path: str):  # type: ignore[no-untyped-def]
            self.summarised.append(Path(path).name)
            return parse_and_summarise(path)

        def counted_review(path: str, *args, **kwargs):  # type: ignore[no-untyped-def]
            self.analysed.append(Path(path).name)
            return review_one(path, *args, **kwargs)

        monkeypatch.setattr(runner, "_parse_and_summarise", counted_summary)
        monkeypatch.setattr(runner, "_review_one", counted_review)

    def reset(self) -> None:
        self.summarised.clear()
        self.analysed.clear()


def review(project: Path) -> runner.ReviewReport:
    return runner.review_paths(
        [project], ReviewSettings(), jobs=1, cache_dir=project / ".torchwise_cache"
    )


def test_a_warm_run_rebuilds_nothing(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    counts = Counts(monkeypatch)
    cold = review(project)
    assert len(counts.summarised) == len(counts.analysed) == len(PROJECT)
    for _ in range(2):
        counts.reset()
        warm = review(project)
        assert counts.summarised == counts.analysed == []
        assert all(file.cached for file in warm.files)
        assert warm.findings == cold.findings


def test_a_change_rebuilds_only_what_it_can_affect(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    counts = Counts(monkeypatch)
    review(project)
    counts.reset()
    (project / "pkg/io.py").write_text(PROJECT["pkg/io.py"] + "\n# edited\n")
    review(project)
    assert counts.summarised == ["io.py"]
    assert "standalone.py" not in counts.analysed  # imports nothing of the package
    assert "io.py" in counts.analysed and "train.py" in counts.analysed


def test_a_summary_survives_the_compact_cache_form() -> None:
    import ast

    source = "\n".join(
        [*PROJECT["pkg/layers.py"].splitlines(), "def g(a=False, b=0, c=None, d=''):", "    pass"]
    )
    summary = summarize_tree(ast.parse(source), source, "pkg/layers.py")
    restored = ModuleSummary.from_json(summary.to_json())
    assert restored == summary
    defaults = restored.functions["g"].defaults
    assert defaults["a"] == ArgFact(literal=False, has_literal=True)
    assert defaults["b"].literal == 0 and defaults["b"].literal is not False
