"""The review cache is reused, counted (never timed): a warm run of an unchanged
project summarises and analyses nothing; a change re-summarises only that file and
re-analyses only the files whose view of the project it can change."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from torchwise.review import runner
from torchwise.review.cache import ReviewCache
from torchwise.review.index.records import ArgFact, ModuleSummary
from torchwise.review.index.summary import summarize_tree
from torchwise.review.settings import ReviewSettings

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
    assert defaults["a"] == ArgFact(literal=False)
    assert defaults["b"].literal == 0 and defaults["b"].literal is not False


# -- run records: an unchanged project answered from stat calls alone ---------------
def _age(root: Path, seconds: int = 60) -> None:
    """Date every file and directory under ``root`` back: a record never vouches
    for what changed within a clock tick of its run."""
    stamp = Path(root).stat().st_mtime - seconds
    for path in [root, *root.rglob("*")]:
        os.utime(path, (stamp, stamp))


def quick_review(project: Path, *paths: str) -> runner.ReviewReport:
    targets = [project / path for path in paths] or [project]
    return runner.review_paths(
        targets,
        ReviewSettings(),
        jobs=1,
        cache_dir=project.parent / "cache",
        with_index=False,
    )


@pytest.fixture
def aged(tmp_path: Path) -> Path:
    """The project, a repository of its own (the search for packaging files stops
    at its root), dated back."""
    root = tmp_path / "project"
    (root / ".git").mkdir(parents=True)
    for name, text in PROJECT.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    _age(root)
    return root


class Reads:
    """Counts every file entry the cache is asked for (one per reviewed file)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.entries = 0
        get = ReviewCache.get

        def counted(cache: ReviewCache, path: Path):  # type: ignore[no-untyped-def]
            self.entries += 1
            return get(cache, path)

        monkeypatch.setattr(ReviewCache, "get", counted)


def test_an_unchanged_project_is_answered_from_the_run_record(
    aged: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cold = quick_review(aged)
    reads = Reads(monkeypatch)
    warm = quick_review(aged)
    assert reads.entries == 0
    assert warm.index is None and all(file.cached for file in warm.files)
    assert [(f.path, f.findings, f.lines) for f in warm.files] == [
        (f.path, f.findings, f.lines) for f in cold.files
    ]


def test_an_edited_file_is_not_answered_from_the_record(aged: Path) -> None:
    quick_review(aged, "train.py")
    train = aged / "train.py"
    train.write_text(train.read_text().replace("model = ", "model = model = "))
    edited = quick_review(aged, "train.py").findings
    assert edited == runner.review_paths([train], ReviewSettings(), jobs=1).findings
    assert [f.column for f in edited if f.code == "TW301"] == [17]  # was 9


def test_a_new_project_file_an_import_now_finds_is_seen(
    aged: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (aged / "main.py").write_text("import torch\nfrom helpers import build\n\nnet = build()\n")
    _age(aged)
    quick_review(aged, "main.py")
    (aged / "helpers.py").write_text("def build():\n    return 1\n")
    _age(aged)  # even dated back: the directory's listing changed
    reads = Reads(monkeypatch)
    report = quick_review(aged, "main.py")
    assert reads.entries == 1 and report.index is not None
    assert any(path.endswith("helpers.py") for path in report.index.summaries)


def test_a_packaging_file_edited_in_place_is_seen(
    aged: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (aged / "requirements.txt").write_text("torch>=2.0\n")
    _age(aged)
    quick_review(aged, "train.py")
    (aged / "requirements.txt").write_text("torch>=2.1\n")  # same size, same directory listing
    reads = Reads(monkeypatch)
    quick_review(aged, "train.py")
    assert reads.entries == 1


def test_files_changed_just_before_the_run_get_no_record(tmp_path: Path) -> None:
    (tmp_path / "project" / ".git").mkdir(parents=True)
    (tmp_path / "project" / "train.py").write_text("import torch\n")
    quick_review(tmp_path / "project")
    assert not list((tmp_path / "cache").rglob("runs/*.json"))


def test_a_report_that_needs_the_index_never_comes_from_a_record(aged: Path) -> None:
    quick_review(aged)
    report = runner.review_paths([aged], ReviewSettings(), jobs=1, cache_dir=aged.parent / "cache")
    assert report.index is not None
