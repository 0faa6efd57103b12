"""The commands a project documents: where they are written, what each is for and does,
and the directory each runs from. Each project is a minimal reproduction of a pattern
seen in real repositories (named in the comments), written for the test."""

from __future__ import annotations

import json
from pathlib import Path

from trees import know, write

from torchwise.project.schema import ProjectCommand

TRAINS = "import torch\nfor x in []:\n    loss = x\n    loss.backward()\n    opt.step()\n"


def commands(root: Path) -> dict[str, ProjectCommand]:
    return {c.command: c for c in know(root).commands}


def test_quoted_commands_and_what_introduces_them(tmp_path: Path) -> None:
    # stylegan2-pytorch writes its commands as `> python ...` quotes after a sentence.
    write(
        tmp_path,
        {
            "README.md": """
                ## Usage

                First create lmdb datasets:

                > python prepare_data.py --out LMDB_PATH DATASET_PATH

                Then you can train model in distributed settings

                > python -m torch.distributed.launch --nproc_per_node=2 train.py LMDB_PATH

                ### Closed-Form Factorization

                > python closed_form_factorization.py CHECKPOINT
            """,
            "prepare_data.py": "import lmdb\n",
            "train.py": TRAINS,
            "closed_form_factorization.py": "import torch\n",
        },
    )
    found = commands(tmp_path)
    prepare = found["python prepare_data.py --out LMDB_PATH DATASET_PATH"]
    assert prepare.purpose == "prepare" and prepare.description == "First create lmdb datasets"
    assert prepare.source == "README.md:5"
    train = found["python -m torch.distributed.launch --nproc_per_node=2 train.py LMDB_PATH"]
    assert train.purpose == "train"
    other = found["python closed_form_factorization.py CHECKPOINT"]
    # a project script with no purpose named is still a documented command, with its heading
    assert other.purpose == "run" and other.description == "Closed-Form Factorization"


def test_a_script_named_in_a_readme_runs_where_it_lives(tmp_path: Path) -> None:
    # pygcn: "```python train.py```" in the README, for pygcn/train.py.
    write(
        tmp_path,
        {
            "README.md": "## Installation\n\n```python setup.py install```\n\n"
            "## Usage\n\n```python train.py```\n",
            "setup.py": "from setuptools import setup\n",
            "pygcn/train.py": TRAINS,
            "pygcn/__init__.py": "",
        },
    )
    found = commands(tmp_path)
    train = found["python train.py"]
    assert train.cwd == "pygcn" and train.purpose == "train" and train.description == "Usage"
    assert "python setup.py install" not in found  # packaging, not a project run


def test_cd_in_a_block_and_readmes_in_subdirectories_set_the_directory(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "README.md": "```bash\ncd examples/mnist\npython main.py --epochs 1  # train it\n```\n",
            "examples/mnist/main.py": TRAINS,
            "examples/vae/README.md": "```bash\npython main.py --epochs 10\n```\n",
            "examples/vae/main.py": TRAINS,
        },
    )
    found = know(tmp_path).commands
    where = {(c.command, c.cwd) for c in found}
    assert ("python main.py --epochs 1", "examples/mnist") in where
    assert ("python main.py --epochs 10", "examples/vae") in where


def test_a_test_script_given_a_trained_model_evaluates_it(tmp_path: Path) -> None:
    # CRAFT-pytorch and deepspeech.pytorch: test.py runs a trained model on test data.
    write(
        tmp_path,
        {
            "README.md": """
                ```
                python test.py --trained_model=craft.pth --test_folder=images/
                python test.py model.model_path=models/deepspeech.pth
                pytest tests/ -x
                ```
            """,
            "test.py": "import torch\n",
        },
    )
    found = commands(tmp_path)
    assert found["python test.py --trained_model=craft.pth --test_folder=images/"].purpose == (
        "evaluate"
    )
    assert found["python test.py model.model_path=models/deepspeech.pth"].purpose == "evaluate"
    assert found["pytest tests/ -x"].purpose == "test"


def test_what_a_script_does_is_the_commands_it_runs(tmp_path: Path) -> None:
    # RAFT: train_mixed.sh runs train.py four times; the README says ./train_mixed.sh.
    write(
        tmp_path,
        {
            "train_mixed.sh": "#!/bin/bash\nmkdir -p checkpoints\n"
            "python -u train.py --stage chairs\npython -u train.py --stage things\n",
            "download_models.sh": "#!/bin/bash\nwget https://x/models.zip\nunzip models.zip\n",
            "README.md": "```Shell\n./train_mixed.sh\n```\nRun `./download_models.sh`.\n",
            "train.py": TRAINS,
        },
    )
    found = commands(tmp_path)
    mixed = found["bash train_mixed.sh"]
    assert mixed.purpose == "train"
    assert mixed.description == "runs python -u train.py --stage chairs (and 1 more)"
    assert "./train_mixed.sh" not in found  # the same script, listed once
    assert found["bash download_models.sh"].purpose == "prepare"


def test_a_trained_script_without_a_word_of_purpose_is_a_training_run(tmp_path: Path) -> None:
    # makemore: "Let's point the script at it:" then `python makemore.py -i names.txt`.
    write(
        tmp_path,
        {
            "README.md": "Let's point the script at it:\n\n```bash\n"
            "$ python makemore.py -i names.txt -o names\n```\n\nYou can sample with:\n\n"
            "```bash\n$ python makemore.py -i names.txt -o names --sample-only\n```\n",
            "makemore.py": TRAINS,
        },
    )
    found = commands(tmp_path)
    assert found["python makemore.py -i names.txt -o names"].purpose == "train"
    assert found["python makemore.py -i names.txt -o names --sample-only"].purpose == "evaluate"


def test_the_word_test_in_a_sentence_is_not_a_test_run(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "README.md": "You can use apply_factor.py to test the meaning of directions:\n\n"
            "> python apply_factor.py -i 19 factor.pt\n",
            "apply_factor.py": "import torch\n",
        },
    )
    assert commands(tmp_path)["python apply_factor.py -i 19 factor.pt"].purpose == "run"


def test_a_notebook_cell_that_runs_a_script(tmp_path: Path) -> None:
    notebook = {
        "cells": [
            {"cell_type": "markdown", "source": ["# Train\n"]},
            {"cell_type": "code", "source": ["!python train.py --epochs 3\n"]},
            {"cell_type": "code", "source": ["%%bash\n", "python evaluate.py --ckpt best.pt\n"]},
        ]
    }
    write(
        tmp_path,
        {
            "notebooks/run.ipynb": json.dumps(notebook),
            "notebooks/train.py": TRAINS,
            "notebooks/evaluate.py": "import torch\n",
        },
    )
    found = commands(tmp_path)
    train = found["python train.py --epochs 3"]
    assert train.source == "notebooks/run.ipynb:cell 1:1" and train.cwd == "notebooks"
    assert found["python evaluate.py --ckpt best.pt"].purpose == "evaluate"


def test_converting_weights_and_downloading_prepare(tmp_path: Path) -> None:
    # stylegan2's convert_weight.py turns the official weights into a PyTorch checkpoint;
    # faster-rcnn's README downloads VOC with wget.
    write(
        tmp_path,
        {
            "README.md": "```bash\npython convert_weight.py --repo ~/stylegan2 f.pkl\n"
            "python export_onnx.py --convert\nwget http://example.org/VOCtrainval.tar\n```\n",
            "convert_weight.py": "import torch\n",
            "export_onnx.py": "import torch\n",
        },
    )
    found = commands(tmp_path)
    assert found["python convert_weight.py --repo ~/stylegan2 f.pkl"].purpose == "prepare"
    assert found["python export_onnx.py --convert"].purpose == "export"
    assert found["wget http://example.org/VOCtrainval.tar"].purpose == "prepare"


def test_a_script_is_for_what_the_scripts_it_runs_do(tmp_path: Path) -> None:
    # LeeJunHyun/Image_Segmentation: UNet.sh loops over `python3 main.py --model_type=$a`.
    write(
        tmp_path,
        {
            "UNet.sh": "for ((i=0;i<100;i++));do\n\ta='U_Net'\n\tpython3 main.py --model_type=$a\n",
            "main.py": "from solver import Solver\nSolver().train()\n" + TRAINS,
        },
    )
    assert commands(tmp_path)["bash UNet.sh"].purpose == "train"
