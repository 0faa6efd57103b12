"""Optional dependencies: what a command needs that the base install lacks.

The base install (``pip install torchwise``) carries what ``review``, ``rules``
and ``ckpt scan``/``ckpt inspect`` need, none of which imports torch. The model
commands need PyTorch, which is the user's: their environment has the build
that matches their hardware, and a linter's pre-commit hook must not download
gigabytes of CUDA wheels. ``pip install 'torchwise[torch]'`` adds it for clean
installs.
"""

from __future__ import annotations

import importlib.util

from torchwise.errors import MissingDependencyError

#: Import name -> what to ``pip install`` when it is missing.
PIP_NAMES: dict[str, str] = {
    "torch": "torch",
    "safetensors": "safetensors",
    "transformers": "transformers",
    "timm": "timm",
    "diffusers": "diffusers",
    "mcp": "mcp",
    "jinja2": "jinja2",
    "yaml": "pyyaml",
    "PIL": "pillow",
    "sklearn": "scikit-learn",
    "numpy": "numpy",
    "pytest": "pytest",
}

#: Import name -> the torchwise extra that brings it, when one does.
EXTRAS: dict[str, str] = {
    "torch": "torch",
    "safetensors": "torch",
    "mcp": "mcp",
    "pydantic": "project",
    "jinja2": "project",
}


def install_hint(module: str) -> str:
    """The command that installs the package providing ``module``."""
    top = module.split(".")[0]
    package = PIP_NAMES.get(top, top)
    extra = EXTRAS.get(top)
    command = f"pip install {package}"
    return f"{command} (or pip install 'torchwise[{extra}]')" if extra else command


def missing(module: str, *, purpose: str | None = None) -> MissingDependencyError:
    """The error for a missing ``module``; ``purpose`` says who needs it."""
    top = module.split(".")[0]
    label = "PyTorch" if top == "torch" else top
    who = purpose or "this command"
    return MissingDependencyError(
        f"{who} needs {label}, which is not installed: {install_hint(top)}"
    )


def require(module: str, *, purpose: str | None = None) -> None:
    """Raise :class:`MissingDependencyError` unless ``module`` can be imported.

    Only looks the module up (no import), so it costs microseconds even for torch.
    """
    top = module.split(".")[0]
    try:
        found = importlib.util.find_spec(top) is not None
    except (ImportError, ValueError):  # a broken or blocked install counts as missing
        found = False
    if not found:
        raise missing(top, purpose=purpose)


def require_torch(purpose: str | None = None) -> None:
    """``require("torch")``: call it first in every command that runs a model."""
    require("torch", purpose=purpose)


def require_device(device: str) -> None:
    """A clear error when ``--device`` names an accelerator this torch cannot use.

    Checked before any model is built: ``torch.device("cuda")`` is accepted by a CPU
    build of torch and fails only at the first tensor moved there, deep in the run.
    """
    import torch

    from torchwise.errors import TorchwiseError

    kind = torch.device(device).type
    if kind == "cuda" and not torch.cuda.is_available():
        build = "a CPU-only build" if torch.version.cuda is None else "no CUDA device visible"
        raise TorchwiseError(
            f"--device {device}: CUDA is not available here (torch {torch.__version__}, {build})",
            hint="use --device cpu, or run on a machine with a CUDA GPU and a CUDA build of torch",
        )
    if kind == "mps" and not torch.backends.mps.is_available():
        raise TorchwiseError(
            f"--device {device}: MPS is not available here", hint="use --device cpu"
        )
