"""Project knowledge from a tree: triggers, stack, layout, commands, modules, build plans.

Every project here is a minimal reproduction written for the test (in tmp_path);
none of their code is ever imported: knowledge is static.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from trees import know, write

from torchwise.project.schema import ModuleClass, ProjectKnowledge


def by_name(k: ProjectKnowledge) -> dict[str, ModuleClass]:
    return {m.name: m for m in k.modules}


# -- triggers ------------------------------------------------------------------------


def test_a_project_without_torch_is_not_a_pytorch_project(tmp_path: Path) -> None:
    write(tmp_path, {"app.py": "import numpy as np\nprint(np.zeros(3))\n"})
    k = know(tmp_path)
    assert not k.is_pytorch
    assert k.triggers == []


@pytest.mark.parametrize(
    ("files", "kind"),
    [
        ({"requirements.txt": "torch>=2.1\n"}, "dependency"),
        ({"x.py": "import torch.nn as nn\n"}, "import"),
        ({"weights/model.pt": "not really a pickle"}, "checkpoint"),
        ({"m.py": "from torch import nn\nclass Net(nn.Module):\n    pass\n"}, "module"),
    ],
)
def test_each_trigger_alone_marks_a_pytorch_project(
    tmp_path: Path, files: dict[str, str], kind: str
) -> None:
    k = know(write(tmp_path, files))
    assert k.is_pytorch
    assert kind in {t.kind for t in k.triggers}


# -- dependencies and stack --------------------------------------------------------------


def test_declared_dependencies_from_every_kind_of_file(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "pyproject.toml": """
                [project]
                name = "demo"
                requires-python = ">=3.10"
                dependencies = ["torch>=2.2,<3", "einops"]
                [project.optional-dependencies]
                track = ["wandb>=0.16"]
            """,
            "requirements-dev.txt": "pytest\ntimm==0.9.16  # models\n-r requirements.txt\n",
            "setup.py": "from setuptools import setup\n"
            "setup(install_requires=['lightning>=2.0'])\n",
            "setup.cfg": "[options]\ninstall_requires =\n    transformers>=4.40\n",
            "environment.yml": "name: x\ndependencies:\n  - pytorch=2.1.0\n"
            "  - pip:\n    - hydra-core>=1.3\n",
        },
    )
    k = know(tmp_path)
    stack = {p.name: p for p in k.stack}
    assert k.name == "demo" and k.python == ">=3.10"
    assert stack["torch"].declared == ">=2.2,<3"
    assert stack["torch"].declared_in == "pyproject.toml:4"
    assert stack["timm"].declared == "==0.9.16"
    assert stack["lightning"].declared == ">=2.0"
    assert stack["transformers"].declared == ">=4.40"
    assert stack["hydra-core"].declared == ">=1.3"
    assert stack["wandb"].role == "experiment tracking"
    assert k.torch.declared == ">=2.2,<3"


def test_imported_but_undeclared_packages_join_the_stack(tmp_path: Path) -> None:
    write(
        tmp_path,
        {"a.py": "import pytorch_lightning as pl\nimport torch\n", "b.py": "import torch\n"},
    )
    stack = {p.name: p for p in know(tmp_path).stack}
    assert stack["torch"].imported_by == 2 and stack["torch"].declared is None
    assert stack["pytorch-lightning"].imported_by == 1


def test_installed_versions_come_from_the_projects_own_venv(tmp_path: Path) -> None:
    site = tmp_path / ".venv/lib/python3.11/site-packages"
    (site / "torch-2.0.1.dist-info").mkdir(parents=True)
    write(tmp_path, {"a.py": "import torch\n"})
    k = know(tmp_path)
    assert k.torch.installed == "2.0.1"


# -- commands ------------------------------------------------------------------------


def test_commands_from_makefile_readme_ci_scripts_and_pyproject(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "Makefile": "train:\n\tpython train.py --epochs 10\nlint:\n\truff check .\n"
            "export-onnx:\n\tpython tools/export.py\n",
            "README.md": """
                # Demo

                ```bash
                $ pip install -e .
                $ python train.py \\
                    --lr 0.1
                python evaluate.py --ckpt best.pt
                ```

                ```python
                python train.py  # not a shell block
                ```
            """,
            ".github/workflows/ci.yml": """
                jobs:
                  test:
                    steps:
                      - run: pip install -e .
                      - run: |
                          pytest -q tests/
                          python bench/profile_step.py
            """,
            "scripts/finetune.sh": "python train.py --finetune\n",
            "docs/README.md": "```\npython train.py -h\npytest -x  # fast\n```\n",
            "pyproject.toml": '[project]\nname = "d"\n'
            '[project.scripts]\ndemo-train = "d.cli:train"\n',
        },
    )
    commands = {(c.purpose, c.command): c.source for c in know(tmp_path).commands}
    assert commands[("train", "make train")] == "Makefile:1"
    assert ("export", "make export-onnx") in commands
    assert ("train", "demo-train") in commands
    assert commands[("train", "python train.py --lr 0.1")] == "README.md:5"
    assert commands[("evaluate", "python evaluate.py --ckpt best.pt")] == "README.md:7"
    assert commands[("test", "pytest -q tests/")] == ".github/workflows/ci.yml:6"
    assert ("profile", "python bench/profile_step.py") in commands
    assert ("train", "bash scripts/finetune.sh") in commands
    assert ("test", "pytest -x") in commands  # the shell comment is not part of it
    assert not any(c.endswith("-h") for _, c in commands)
    assert not any("ruff" in c or "pip install" in c for _, c in commands)


def test_readme_commands_take_their_purpose_from_the_comment_above_or_inline_code(
    tmp_path: Path,
) -> None:
    # The pytorch-cifar and Pytorch-UNet READMEs.
    write(
        tmp_path,
        {
            "README.md": """
                ```
                # Start training with:
                python main.py

                python main.py --resume --lr=0.01
                ```
                Predict with `python predict.py -i image.jpg -o output.jpg` on one image.
                ```bash
                python super_resolve.py --input_image dataset/images/test/1.jpg
                python run.py --split test
                python main.py --epochs 6 --tied    # Train a tied LSTM on Wikitext-2.
                ```
            """,
        },
    )
    commands = {(c.purpose, c.command): c.source for c in know(tmp_path).commands}
    assert commands[("train", "python main.py")] == "README.md:3"
    # a blank line ends what the comment speaks for
    assert not any(c == "python main.py --resume --lr=0.01" for _, c in commands)
    assert commands[("evaluate", "python predict.py -i image.jpg -o output.jpg")] == "README.md:7"
    # a data directory called test is not a test run (the sentence before the block says
    # what it is); a --split test argument is
    assert ("evaluate", "python super_resolve.py --input_image dataset/images/test/1.jpg") in (
        commands
    )
    assert ("test", "python run.py --split test") in commands
    assert ("train", "python main.py --epochs 6 --tied") in commands  # its own comment


# -- modules and how to build them ---------------------------------------------------------


MODELS = {
    "models/blocks.py": """
        import torch.nn as nn

        class Block(nn.Module):
            def __init__(self, dim, hidden=4):
                super().__init__()
                self.fc = nn.Linear(dim, hidden)
    """,
    "models/net.py": """
        from dataclasses import dataclass
        from torch.nn import Module
        from models.blocks import Block

        @dataclass
        class NetConfig:
            dim: int = 8
            depth: int = 2

        class Base(Module):
            pass

        class Net(Base):
            def __init__(self, config):
                super().__init__()
                self.blocks = [Block(config.dim) for _ in range(config.depth)]
            def forward(self, x):
                return x

        class Tiny(Base):
            def forward(self, x, mask=None):
                return x

        def make_tiny():
            model = Tiny()
            return model

        class NotAModule:
            pass
    """,
    "lit.py": """
        import lightning as L
        from models.net import Tiny

        class LitModel(L.LightningModule):
            def __init__(self, lr: float = 1e-3):
                super().__init__()
                self.model = Tiny()
    """,
    "hf.py": """
        from transformers import PreTrainedModel, PretrainedConfig

        class MyConfig(PretrainedConfig):
            def __init__(self, hidden=16, **kwargs):
                super().__init__(**kwargs)

        class MyModel(PreTrainedModel):
            def __init__(self, config: MyConfig):
                super().__init__(config)
    """,
}


def test_module_classes_across_files_and_bases(tmp_path: Path) -> None:
    modules = by_name(know(write(tmp_path, MODELS)))
    assert set(modules) == {"Block", "Base", "Net", "Tiny", "LitModel", "MyModel"}
    assert modules["LitModel"].kind == "lightning"
    assert modules["MyModel"].kind == "transformers"
    assert modules["Net"].bases == ["Base"]


def test_build_plans(tmp_path: Path) -> None:
    modules = by_name(know(write(tmp_path, MODELS)))
    block, net, tiny = modules["Block"], modules["Net"], modules["Tiny"]
    assert block.build.how == "needs-arguments" and block.build.required == ["dim"]
    assert net.build.how == "config-class" and net.build.build == "Net(NetConfig())"
    assert tiny.build.how == "default" and tiny.build.target == "models/net.py:Tiny"
    assert tiny.forward_inputs == 1
    assert modules["MyModel"].build.build == "MyModel(MyConfig())"
    assert modules["LitModel"].build.how == "default"


def test_parts_of_other_modules_are_components_but_a_lightning_wrapper_keeps_its_model(
    tmp_path: Path,
) -> None:
    modules = by_name(know(write(tmp_path, MODELS)))
    assert not modules["Block"].top_level
    assert modules["Net"].top_level and modules["Tiny"].top_level


def test_a_block_type_a_factory_passes_to_its_model_is_a_component(tmp_path: Path) -> None:
    # The pytorch-cifar pattern: ResNet18() returns ResNet(BasicBlock, [2, 2, 2, 2]).
    write(
        tmp_path,
        {
            "resnet.py": """
                import torch.nn as nn
                class BasicBlock(nn.Module):
                    def __init__(self, in_planes, planes):
                        super().__init__()
                class ResNet(nn.Module):
                    def __init__(self, block, num_blocks):
                        super().__init__()
                        self.layer = block(3, 8)
                def ResNet18():
                    return ResNet(BasicBlock, [2, 2, 2, 2])
                def helper(x):
                    return print(x)
            """
        },
    )
    modules = by_name(know(tmp_path))
    assert not modules["BasicBlock"].top_level
    assert modules["ResNet"].top_level and modules["ResNet"].build.how == "factory"


def test_a_same_named_class_elsewhere_does_not_make_a_model_a_component(tmp_path: Path) -> None:
    # pytorch/examples: mnist/main.py's Net and FSDP2's Transformer are models; another
    # example's ParameterServer uses its own Net, and a translator uses nn.Transformer.
    write(
        tmp_path,
        {
            "mnist/main.py": """
                import torch.nn as nn
                class Net(nn.Module):
                    def __init__(self):
                        super().__init__()
            """,
            "fsdp/model.py": """
                import torch.nn as nn
                class Transformer(nn.Module):
                    def __init__(self):
                        super().__init__()
            """,
            "rpc/server.py": """
                import torch.nn as nn
                class Net(nn.Module):
                    def __init__(self):
                        super().__init__()
                class ParameterServer(nn.Module):
                    def __init__(self):
                        super().__init__()
                        self.model = Net()
            """,
            "translation/model.py": """
                import torch.nn as nn
                from fsdp.model import Transformer as Shared
                class Translator(nn.Module):
                    def __init__(self):
                        super().__init__()
                        self.transformer = nn.Transformer()
            """,
            "unet/parts.py": """
                import torch.nn as nn
                class Down(nn.Module):
                    def __init__(self):
                        super().__init__()
            """,
            "unet/model.py": """
                import torch.nn as nn
                from .parts import *
                class UNet(nn.Module):
                    def __init__(self):
                        super().__init__()
                        self.down = Down()
            """,
            "uses.py": """
                import torch.nn as nn
                from rpc import server
                class Wrapper(nn.Module):
                    def __init__(self):
                        super().__init__()
                        self.inner = server.ParameterServer()
            """,
        },
    )
    top = {(m.path, m.name): m.top_level for m in know(tmp_path).modules}
    assert top[("mnist/main.py", "Net")] and top[("fsdp/model.py", "Transformer")]
    assert not top[("rpc/server.py", "Net")]
    assert not top[("rpc/server.py", "ParameterServer")]  # through `server.`, a project module
    assert top[("translation/model.py", "Translator")]
    assert not top[("unet/parts.py", "Down")]  # Pytorch-UNet's `from .unet_parts import *`


def test_a_factory_is_used_when_the_constructor_needs_arguments(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "m.py": """
                import torch.nn as nn
                class Net(nn.Module):
                    def __init__(self, width):
                        super().__init__()
                def build():
                    return Net(16)
                def build_from(cfg):
                    return Net(cfg.width)
            """
        },
    )
    plan = by_name(know(tmp_path))["Net"].build
    assert plan.how == "factory" and plan.target == "m.py:build"


def test_configured_models_come_first_with_their_inputs(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "pyproject.toml": """
                [tool.torchwise.models.small]
                target = "src/net.py:Net"
                inputs = ["f32[batch=2,8]"]
            """,
            "src/net.py": "import torch\nclass Net(torch.nn.Module):\n    def __init__(self, d):\n"
            "        super().__init__()\n",
        },
    )
    k = know(tmp_path)
    plan = by_name(k)["Net"].build
    assert k.configured_models == ["small"]
    assert (plan.how, plan.target, plan.inputs) == ("configured", "small", ["f32[batch=2,8]"])


# -- import safety and layout --------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "risky"),
    [
        (
            "import torch\nclass A(torch.nn.Module):\n    pass\n"
            "if __name__ == '__main__':\n    main()\n",
            False,
        ),
        ("import torch\ntorch.manual_seed(0)\nDEVICE = torch.device('cpu')\n", False),
        ("import torch\nfor epoch in range(3):\n    pass\n", True),
        ("import torch\ntrain()\n", True),
        ("import torchvision\nds = torchvision.datasets.MNIST('.', download=True)\n", True),
        ("import torch\nstate = torch.load('x.pt')\n", True),
    ],
)
def test_import_risk(source: str, risky: bool) -> None:
    from torchwise.project.source import analyse

    assert (analyse(source, "m.py").import_risk is not None) is risky


def test_layout(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "models/net.py": "import torch\nclass Net(torch.nn.Module):\n    pass\n",
            "train.py": "import torch\nloss.backward()\nopt.step()\n",
            "tools/finetune_lora.py": "import torch\n",
            "configs/base.yaml": "lr: 0.1\n",
            "tests/test_net.py": "import torch\n",
            "checkpoints/.keep": "",
            "runs/exp1/last.ckpt": "x",
            "notebooks/explore.ipynb": "{}",
        },
    )
    layout = know(tmp_path).layout
    assert layout.model_dirs == ["models"]
    assert layout.training_scripts[:2] == ["train.py", "tools/finetune_lora.py"]
    assert layout.config_dirs == ["configs"]
    assert layout.test_dirs == ["tests"]
    assert layout.checkpoint_dirs == ["checkpoints", "runs/exp1"]
    assert layout.notebooks == ["notebooks/explore.ipynb"]


def test_tooling_dirs_and_symlinks_out_of_the_tree_are_not_walked(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    write(outside, {"secret.py": "import torch\nclass Leak(torch.nn.Module):\n    pass\n"})
    project = write(
        tmp_path / "project",
        {
            "net.py": "import torch\nclass Net(torch.nn.Module):\n    pass\n",
            ".venv/lib/x.py": "import torch\nclass Vendored(torch.nn.Module):\n    pass\n",
            "node_modules/y.py": "import torch\nclass Js(torch.nn.Module):\n    pass\n",
        },
    )
    (project / "linked").symlink_to(outside, target_is_directory=True)
    assert set(by_name(know(project))) == {"Net"}


def test_the_example_project(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[2] / "examples" / "cifar_project"
    k = know(root)
    modules = by_name(k)
    assert k.is_pytorch and k.configured_models == ["cifarnet"]
    assert modules["CifarNet"].build.target == "cifarnet"
    assert not modules["ConvBlock"].top_level
    assert k.layout.training_scripts[0] == "train.py"


def test_commands_are_capped_per_purpose_keeping_the_makefile(tmp_path: Path) -> None:
    lines = "\n".join(f"python train.py --seed {i}" for i in range(12))
    write(
        tmp_path, {"README.md": f"```bash\n{lines}\n```\n", "Makefile": "train:\n\tpython t.py\n"}
    )
    commands = [c.command for c in know(tmp_path).commands]
    assert len(commands) == 8 and commands[0] == "make train"
