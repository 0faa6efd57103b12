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
    "pygls": "pygls",
    "jinja2": "jinja2",
    "yaml": "pyyaml",
    "PIL": "pillow",
    "sklearn": "scikit-learn",
    "numpy": "numpy",
}

#: Import name -> the torchwise extra that brings it, when one does.
EXTRAS: dict[str, str] = {
    "torch": "torch",
    "safetensors": "torch",
    "mcp": "mcp",
    "pygls": "server",
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
