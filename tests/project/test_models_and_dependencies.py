"""Knowledge that was wrong on real repositories (issue 26): models defined in notebooks,
models assembled by builders, losses, and dependencies seen only through imports.
Each project is a minimal reproduction written for the test; nothing is imported."""

from __future__ import annotations

import json
from pathlib import Path

from trees import know, write

from torchwise.project.schema import ModuleClass, Package, ProjectKnowledge


def modules(k: ProjectKnowledge) -> dict[str, ModuleClass]:
    return {m.name: m for m in k.modules}


def stack(k: ProjectKnowledge) -> dict[str, Package]:
    return {p.name: p for p in k.stack}


def notebook(*cells: str) -> str:
    code = [{"cell_type": "code", "source": cell.splitlines(keepends=True)} for cell in cells]
    markdown = {"cell_type": "markdown", "source": ["# A tutorial\n"]}
    return json.dumps({"cells": [markdown, *code], "nbformat": 4})


INIT = "    def __init__(self, dim):\n        super().__init__()\n"


def test_models_defined_in_a_notebook(tmp_path: Path) -> None:
    # bentrevett/pytorch-seq2seq: the tutorial's model lives in its notebook's cells.
    write(
        tmp_path,
        {
            "1 - seq2seq.ipynb": notebook(
                "import torch\nimport torch.nn as nn\n%matplotlib inline\n",
                "class Encoder(nn.Module):\n" + INIT,
                "class Decoder(nn.Module):\n" + INIT,
                "\nclass Seq2Seq(nn.Module):\n"
                "    def __init__(self, encoder, decoder):\n        super().__init__()\n",
                "enc = Encoder(8)\ndec = Decoder(8)\nmodel = Seq2Seq(enc, dec)\n",
            )
        },
    )
    k = know(tmp_path)
    found = modules(k)
    assert set(found) == {"Encoder", "Decoder", "Seq2Seq"}
    seq2seq = found["Seq2Seq"]
    assert seq2seq.top_level and seq2seq.cell == 4 and seq2seq.line == 2
    assert seq2seq.build.how == "notebook" and "move Seq2Seq into a module" in str(
        seq2seq.build.reason
    )
    # the notebook assembles Seq2Seq from an Encoder and a Decoder: they are its parts
    assert not found["Encoder"].top_level and not found["Decoder"].top_level
    assert k.is_pytorch and stack(k)["torch"].imported_by == 1
    assert k.layout.model_dirs == []  # a notebook is listed as a notebook, not a model dir


def test_parts_a_builder_assembles_are_components_but_a_wrapped_model_stays_a_model(
    tmp_path: Path,
) -> None:
    # hkproj/pytorch-transformer's build_transformer(); simple-faster-rcnn's trainer.
    write(
        tmp_path,
        {
            "model.py": """
                import torch.nn as nn

                class EncoderBlock(nn.Module):
                    def __init__(self, d): super().__init__()
                class Encoder(nn.Module):
                    def __init__(self, d, layers): super().__init__()
                class Decoder(nn.Module):
                    def __init__(self, d): super().__init__()
                class Transformer(nn.Module):
                    def __init__(self, encoder, decoder): super().__init__()

                def build_transformer(d, depth):
                    blocks = []
                    for _ in range(depth):
                        block = EncoderBlock(d)
                        blocks.append(block)
                    encoder = Encoder(d, nn.ModuleList(blocks))
                    decoder = Decoder(d)
                    transformer = Transformer(encoder, decoder)
                    return transformer
            """,
            "trainer.py": """
                import torch.nn as nn
                from model import Transformer

                class Trainer(nn.Module):
                    def __init__(self, model): super().__init__()

                def main():
                    trainer = Trainer(Transformer(None, None))
            """,
        },
    )
    found = modules(know(tmp_path))
    assert not found["EncoderBlock"].top_level
    assert not found["Encoder"].top_level and not found["Decoder"].top_level
    assert found["Transformer"].top_level  # given alone to a wrapper, it stays the model
    assert found["Trainer"].top_level


def test_a_loss_is_not_a_model(tmp_path: Path) -> None:
    # brain-segmentation-pytorch's DiceLoss; a loss deriving from torch's _Loss.
    write(
        tmp_path,
        {
            "loss.py": """
                import torch.nn as nn
                from torch.nn.modules.loss import _Loss

                class DiceLoss(nn.Module):
                    def forward(self, y_pred, y_true):
                        return (y_pred - y_true).mean()

                class Smooth(_Loss):
                    pass
            """,
            "unet.py": "import torch.nn as nn\nclass UNet(nn.Module):\n    pass\n",
        },
    )
    found = modules(know(tmp_path))
    assert found["DiceLoss"].kind == "loss" and not found["DiceLoss"].top_level
    assert found["Smooth"].kind == "loss"
    assert found["UNet"].top_level


def test_dependencies_from_every_import(tmp_path: Path) -> None:
    # makemore and hkproj/pytorch-transformer write TensorBoard logs through torch.
    write(
        tmp_path,
        {
            "requirements.txt": "torch==2.0.1\numap-learn\nopencv-python-headless\n",
            "train.py": """
                import os, json
                import numpy as np
                import cv2
                import umap
                from PIL import Image
                from torch.utils.tensorboard import SummaryWriter
                from utils import helper
                from models.net import Net
            """,
            "utils.py": "def helper(): pass\n",
            "models/net.py": "import torch.nn as nn\nclass Net(nn.Module):\n    pass\n",
            "log.py": "import pytorch_lightning as pl\n"
            "from pytorch_lightning.loggers import WandbLogger\n",
        },
    )
    packages = stack(know(tmp_path))
    tensorboard = packages["tensorboard"]
    assert tensorboard.imported_by == 1 and tensorboard.via == "torch.utils.tensorboard"
    assert packages["wandb"].via == "pytorch_lightning.loggers.WandbLogger"
    assert packages["pillow"].imported_by == 1 and packages["pillow"].role == "images"
    # an import goes by the name the project declares it under
    assert packages["umap-learn"].imported_by == 1 and "umap" not in packages
    assert packages["opencv-python-headless"].imported_by == 1
    # the standard library and the project's own modules are not dependencies
    assert not {"os", "json", "utils", "models"} & set(packages)
    assert list(packages)[:2] == ["torch", "pytorch-lightning"]  # known roles first


def test_deployment_manifests_are_not_config_dirs(tmp_path: Path) -> None:
    # deepspeech.pytorch's kubernetes/data holds Kubernetes manifests
    manifest = "apiVersion: v1\nkind: PersistentVolume\n"
    files = {f"kubernetes/data/{name}.yaml": manifest for name in ("a", "b", "c")}
    files.update({f"configs/{name}.yaml": "lr: 0.1\n" for name in ("an4", "ted", "libri")})
    files["train.py"] = "import torch\n"
    layout = know(write(tmp_path, files)).layout
    assert layout.config_dirs == ["configs"]


def test_what_a_failed_build_needs_names_the_package_to_install() -> None:
    from torchwise.project.audit import needs_for
    from torchwise.project.schema import BuildPlan, ModuleClass

    module = ModuleClass(name="PNetLin", path="lpips/nets.py", line=1, bases=[], top_level=True,
                         build=BuildPlan(how="default"))  # fmt: skip
    said = needs_for(module, "importing lpips/nets.py raised: No module named 'skimage'")
    assert said == (
        "scikit-image, which is not installed where torchwise runs: pip install scikit-image"
    )
    inputs = needs_for(module, "could not infer the input from the first layer")
    assert inputs.startswith("its inputs: give them as `inputs` in [tool.torchwise.models.pnetlin]")
