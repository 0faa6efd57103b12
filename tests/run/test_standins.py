"""Stand-ins: synthetic data for datasets whose files are missing, random
weights for downloads that fail, each said in a note.

torchvision and timm are not installed here: a minimal package with their
interface is written next to each script (the constructor sets its
transforms, then raises torchvision's "Dataset not found" when the files are
missing; the model builders fetch weights through
``torch.hub.load_state_dict_from_url``). The download URL is a closed local
port, so a download fails the same way on any machine.
"""

from __future__ import annotations

import importlib.util
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from run_helpers import codes, run_source

from torchwise.run.standins.hooks import AfterImport
from torchwise.run.standins.weights import download_failed

UNREACHABLE = "http://127.0.0.1:9/weights.pth"  # the discard port: refused at once

_DATASETS = """
import os

import numpy as np
from PIL import Image


class VisionDataset:
    def __init__(self, root, transforms=None, transform=None, target_transform=None):
        self.root = root
        self.transform = transform
        self.target_transform = target_transform


class CIFAR10(VisionDataset):
    def __init__(self, root, train=True, transform=None, target_transform=None, download=False):
        super().__init__(root, transform=transform, target_transform=target_transform)
        self.train = train
        if download:
            raise AssertionError("a stand-in run must not download")
        if not os.path.exists(os.path.join(root, "cifar-10-batches-py")):
            raise RuntimeError(
                "Dataset not found or corrupted. You can use download=True to download it"
            )
        self.data = np.zeros((4, 32, 32, 3), dtype=np.uint8)
        self.targets = [0, 1, 2, 3]
        self.classes = ["airplane", "automobile", "bird", "cat"]

    def __getitem__(self, index):
        image = Image.fromarray(self.data[index])
        if self.transform is not None:
            image = self.transform(image)
        return image, self.targets[index]

    def __len__(self):
        return len(self.data)


class CIFAR100(CIFAR10):
    pass


class DatasetFolder(VisionDataset):
    def __init__(self, root, loader, extensions=None, transform=None, target_transform=None,
                 is_valid_file=None, allow_empty=False):
        super().__init__(root, transform=transform, target_transform=target_transform)
        classes = sorted(entry.name for entry in os.scandir(root) if entry.is_dir())
        if not classes:
            raise FileNotFoundError(f"Couldn't find any class folder in {root}.")
        self.classes = classes


def default_loader(path):
    return Image.open(path)


class ImageFolder(DatasetFolder):
    def __init__(self, root, transform=None, target_transform=None, loader=default_loader,
                 is_valid_file=None, allow_empty=False):
        super().__init__(root, loader, (".jpg", ".png"), transform=transform,
                         target_transform=target_transform)
        self.imgs = self.samples
"""

_MODELS = f'''
import torch
from torch.hub import load_state_dict_from_url


def tiny(pretrained=False):
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 32 * 32, 10))
    if pretrained:
        model.load_state_dict(load_state_dict_from_url("{UNREACHABLE}", progress=False))
    return model
'''


def _library(directory: Path) -> None:
    package = directory / "torchvision"
    (package / "datasets").mkdir(parents=True)
    (package / "__init__.py").write_text("from torchvision import datasets, models\n")
    (package / "datasets" / "__init__.py").write_text(_DATASETS)
    (package / "models.py").write_text(_MODELS)


_TRAIN = """
    import torch
    import torchvision
    from torch.utils.data import DataLoader


    def to_tensor(image):
        pixels = torch.tensor(__import__("numpy").array(image), dtype=torch.float32)
        return pixels.permute(2, 0, 1) / 255

    train = torchvision.datasets.CIFAR10("./data", train=True, download=True, transform=to_tensor)
    test = torchvision.datasets.CIFAR10("./data", train=False, transform=to_tensor)
    print("SIZES", len(train), len(test), len(train.targets), train.classes[:1], train.data.shape)
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 32 * 32, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in DataLoader(train, batch_size=8, shuffle=True):
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()
"""


def _run(tmp_path: Path, source: str, **options: Any) -> dict[str, Any]:
    _library(tmp_path)
    return run_source(tmp_path, source, **options)


def _notes(result: dict[str, Any]) -> list[str]:
    return [note for note in result["notes"] if note.startswith("stand-in")]


def test_a_dataset_without_its_files_runs_on_synthetic_items_of_its_real_shape(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    result = _run(tmp_path, _TRAIN)
    assert codes(result, serious=True) == []
    assert result["steps"] == 5
    assert "SIZES 50000 10000 50000 ['class 0'] (50000, 32, 32, 3)" in capsys.readouterr().out
    notes = _notes(result)
    assert len(notes) == 2
    assert any("50,000 synthetic 32x32 RGB images of 10 classes (train split)" in n for n in notes)
    assert any("although the script asks for it" in n for n in notes)  # download=True
    assert not (tmp_path / "data").exists()  # nothing downloaded, nothing written


def test_a_dataset_whose_files_are_there_is_the_real_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "data" / "cifar-10-batches-py").mkdir(parents=True)
    source = _TRAIN.replace("download=True", "download=False")
    result = _run(tmp_path, source.replace('print("SIZES"', 'print("REAL"'))
    assert _notes(result) == []
    assert "REAL 4 4 4 ['airplane'] (4, 32, 32, 3)" in capsys.readouterr().out


def test_without_stand_ins_the_missing_dataset_is_the_scripts_crash(tmp_path: Path) -> None:
    result = _run(tmp_path, _TRAIN.replace("download=True", "download=False"), stand_ins=False)
    assert codes(result) == ["TWR001"]
    assert "Dataset not found" in result["findings"][0]["message"]
    assert _notes(result) == []


def test_a_subclass_keeps_its_own_getitem_and_reads_the_stand_ins_data(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = """
        import torchvision


        class Pairs(torchvision.datasets.CIFAR100):
            def __getitem__(self, index):
                return self.data[index].shape, self.targets[index]


        pairs = Pairs("./nowhere", train=False)
        print("ITEM", len(pairs), pairs[7], type(pairs).__name__, isinstance(pairs, Pairs))
    """
    result = _run(tmp_path, source)
    assert "ITEM 10000 ((32, 32, 3), 7) Pairs True" in capsys.readouterr().out
    assert any("100 classes (test split)" in note for note in _notes(result))


def test_an_image_folder_that_is_not_there_gets_two_classes_of_images(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = """
        import torchvision

        folder = torchvision.datasets.ImageFolder("celeba/")
        image, label = folder[3]
        print("FOLDER", len(folder), folder.classes, image.size, image.mode, label)
        print("IMGS", len(folder.imgs))
    """
    result = _run(tmp_path, source)
    output = capsys.readouterr().out
    assert "FOLDER 256 ['class_0', 'class_1'] (256, 256) RGB 1" in output and "IMGS 256" in output
    assert any("has no class folders of images there" in note for note in _notes(result))


def test_weights_that_cannot_be_downloaded_leave_the_model_initialised(tmp_path: Path) -> None:
    source = """
        import torch
        import torchvision

        model = torchvision.models.tiny(pretrained=True)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for step in range(3):
            optimizer.zero_grad()
            model(torch.randn(4, 3, 32, 32)).sum().backward()
            optimizer.step()
    """
    result = _run(tmp_path, source)
    assert codes(result, serious=True) == []
    (note,) = _notes(result)
    assert note.startswith(f"stand-in weights: {UNREACHABLE} could not be downloaded (URLError")


def test_a_state_dict_renamed_from_the_stand_in_is_accepted_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = f"""
        import torch

        state = torch.hub.load_state_dict_from_url("{UNREACHABLE}")
        state = {{key.replace("module.", ""): value for key, value in state.items()}}
        model = torch.nn.Linear(2, 2)
        model.load_state_dict(state)
        print("LOADED")
    """
    result = _run(tmp_path, source)
    assert "LOADED" in capsys.readouterr().out and codes(result) == []


def test_an_empty_state_dict_without_a_stand_in_fails_as_usual(tmp_path: Path) -> None:
    result = _run(tmp_path, "import torch\ntorch.nn.Linear(2, 2).load_state_dict({})\n")
    assert codes(result) == ["TWR001"]
    assert "Error(s) in loading state_dict" in result["findings"][0]["message"]


def test_timm_is_built_again_without_pretrained_weights_when_they_cannot_be_fetched(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "timm").mkdir()
    (tmp_path / "timm" / "__init__.py").write_text(
        textwrap.dedent(
            """
            import torch

            def create_model(model_name, pretrained=False, num_classes=1000, **kwargs):
                if pretrained:
                    raise OSError(f"couldn't connect to 'https://huggingface.co' for {model_name}")
                return torch.nn.Linear(4, num_classes)
            """
        )
    )
    source = """
        import timm

        model = timm.create_model("resnet50", pretrained=True, num_classes=3)
        print("OUT", model.out_features)
    """
    result = _run(tmp_path, source)
    assert "OUT 3" in capsys.readouterr().out
    (note,) = _notes(result)
    assert "timm's pretrained resnet50 could not be downloaded (OSError" in note


def test_other_failures_of_a_pretrained_model_are_the_scripts(tmp_path: Path) -> None:
    (tmp_path / "timm").mkdir()
    (tmp_path / "timm" / "__init__.py").write_text(
        "def create_model(name, pretrained=False):\n"
        "    raise RuntimeError(f'Unknown model ({name})')\n"
    )
    result = _run(tmp_path, "import timm\ntimm.create_model('resnet5O', pretrained=True)\n")
    assert codes(result) == ["TWR001"] and _notes(result) == []


def test_the_import_hook_runs_after_the_module_and_at_once_for_one_already_imported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "later_module.py").write_text("VALUE = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    seen: list[tuple[str, int]] = []
    hook = AfterImport(
        {
            "later_module": lambda module: seen.append((module.__name__, module.VALUE)),
            "json": lambda module: seen.append((module.__name__, 0)),
        }
    )
    remove = hook.install()
    try:
        assert seen == [("json", 0)]  # imported before: patched at once
        # finding the module without importing it (is it installed?) runs nothing yet
        assert importlib.util.find_spec("later_module") is not None and len(seen) == 1
        import later_module  # noqa: F401

        assert seen == [("json", 0), ("later_module", 1)]
    finally:
        remove()
        sys.modules.pop("later_module", None)
    assert hook not in sys.meta_path


@pytest.mark.parametrize(
    ("error", "failed"),
    [
        (OSError("We couldn't connect to 'https://huggingface.co'"), True),
        (ConnectionRefusedError(111, "Connection refused"), True),
        (PermissionError("read-only cache"), False),
        (RuntimeError("Error(s) in loading state_dict"), False),
        (KeyError("fc.weight"), False),
    ],
)
def test_what_counts_as_a_failed_download(error: BaseException, failed: bool) -> None:
    assert download_failed(error) is failed
