"""Optional dependencies: what a command needs that the base install lacks.

The base install (``pip install torchwise``) carries what ``review``, ``rules``
and ``ckpt scan``/``ckpt inspect`` need, none of which imports torch. The model
commands need PyTorch, which is the user's: their environment has the build
that matches their hardware, and a linter's pre-commit hook must not download
gigabytes of CUDA wheels. ``pip install 'torchwise[torch]'`` adds it for clean
installs.

torch is imported through :func:`import_torch` (and its import warnings hidden by
:func:`quiet_torch_warnings`) so that what torch says about the environment it found
while it is imported (``Failed to initialize NumPy`` when NumPy is missing) is not
printed ahead of every command's output; ``--verbose`` shows it.
"""

from __future__ import annotations

import contextlib
import importlib.util
import sys
import warnings
from collections.abc import Iterator
from types import ModuleType

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
    "pytest": "pytest",
}

#: Import name -> the torchwise extra that brings it, when one does.
EXTRAS: dict[str, str] = {
    "torch": "torch",
    "safetensors": "torch",
    "numpy": "torch",
    "mcp": "mcp",
    "pygls": "server",
    "pydantic": "project",
    "jinja2": "project",
}


#: PyTorch's own index of CPU-only wheels (the one pytorch.org's "Get Started" gives).
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"

#: What installing torch costs, said wherever torchwise tells a user to install it: on
#: Linux, PyPI's default torch wheel is the CUDA build, whose NVIDIA libraries come to
#: several GB; the CPU build from PyTorch's index is under 1 GB installed.
TORCH_INSTALL_HINT = (
    "on Linux, pip's default torch is the CUDA build (several GB of NVIDIA libraries); "
    f"for a CPU-only install: pip install torch --index-url {TORCH_CPU_INDEX}"
)

#: What torch warns about while it is imported that concerns the environment, not the
#: user's work: torch runs without NumPy (only tensor<->NumPy conversion fails, and the
#: commands that need it say so themselves).
TORCH_IMPORT_WARNINGS = (r"Failed to initialize NumPy",)


def install_hint(module: str) -> str:
    """The command that installs the package providing ``module``."""
    top = module.split(".")[0]
    package = PIP_NAMES.get(top, top)
    extra = EXTRAS.get(top)
    command = f"pip install {package}"
    return f"{command} (or pip install 'torchwise[{extra}]')" if extra else command


def missing(module: str, *, purpose: str | None = None) -> MissingDependencyError:
    """The error for a missing ``module``; ``purpose`` says who needs it.

    For torch the hint says what the default install costs and gives the CPU-only one.
    """
    top = module.split(".")[0]
    label = "PyTorch" if top == "torch" else top
    who = purpose or "this command"
    return MissingDependencyError(
        f"{who} needs {label}, which is not installed: {install_hint(top)}",
        hint=TORCH_INSTALL_HINT if top == "torch" else None,
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


@contextlib.contextmanager
def quiet_torch_warnings(*, verbose: bool = False) -> Iterator[None]:
    """Hide :data:`TORCH_IMPORT_WARNINGS` while the block runs (unless ``verbose``).

    Every command runs inside this (see ``Console.torch_logs``), so torch's import
    warnings stay hidden wherever in a command torch is first imported.
    """
    if verbose:
        yield
        return
    with warnings.catch_warnings():
        for pattern in TORCH_IMPORT_WARNINGS:
            warnings.filterwarnings("ignore", message=pattern)
        yield


def import_torch(*, verbose: bool = False, purpose: str | None = None) -> ModuleType:
    """``import torch``, or the one-line error when it is not installed.

    The import's environment warnings (:data:`TORCH_IMPORT_WARNINGS`) are hidden
    unless ``verbose``; they are emitted once per process, at the first import.
    """
    if "torch" not in sys.modules:
        require_torch(purpose)
    with quiet_torch_warnings(verbose=verbose):
        import torch
    return torch


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
