"""The project's stack and the torch/CUDA/MPS it runs on.

The stack joins three sources: what the project declares (requirements), what
its code imports, and what is installed. "Installed" means the project's own
virtual environment (``.venv``, ``venv`` or ``env`` at its root) when it has one,
else the environment torchwise runs in; the note says which.
"""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import re
import sys
from collections.abc import Iterable, Mapping, Set
from pathlib import Path

from torchwise.packaging import Requirement, normalise
from torchwise.project.schema import Package, TorchRuntime

#: Distribution name -> its role in a PyTorch project, in display order.
KNOWN_PACKAGES: dict[str, str] = {
    "torch": "framework",
    "torchvision": "vision",
    "torchaudio": "audio",
    "torchtext": "text",
    "lightning": "training loop",
    "pytorch-lightning": "training loop",
    "transformers": "models",
    "diffusers": "models",
    "timm": "models",
    "sentence-transformers": "models",
    "peft": "fine-tuning",
    "accelerate": "distributed training",
    "deepspeed": "distributed training",
    "fairscale": "distributed training",
    "datasets": "data",
    "torchdata": "data",
    "webdataset": "data",
    "albumentations": "data augmentation",
    "tokenizers": "tokenization",
    "sentencepiece": "tokenization",
    "tiktoken": "tokenization",
    "hydra-core": "configuration",
    "omegaconf": "configuration",
    "wandb": "experiment tracking",
    "tensorboard": "experiment tracking",
    "mlflow": "experiment tracking",
    "comet-ml": "experiment tracking",
    "torchmetrics": "metrics",
    "onnx": "export",
    "onnxruntime": "export",
    "torch-tensorrt": "export",
    "triton": "kernels",
    "xformers": "kernels",
    "flash-attn": "kernels",
    "bitsandbytes": "quantization",
    "torchao": "quantization",
    "einops": "tensor ops",
    "numpy": "arrays",
}

#: Roles of other common libraries (anything else a project uses is a "library").
OTHER_ROLES: dict[str, str] = {
    "pillow": "images",
    "opencv-python": "images",
    "scikit-image": "images",
    "imageio": "images",
    "matplotlib": "plotting",
    "seaborn": "plotting",
    "visdom": "experiment tracking",
    "tensorboardx": "experiment tracking",
    "scipy": "scientific computing",
    "pandas": "dataframes",
    "scikit-learn": "ML utilities",
    "tqdm": "progress bars",
    "pyyaml": "configuration",
    "lmdb": "data",
    "h5py": "data",
    "librosa": "audio",
    "soundfile": "audio",
    "nltk": "text",
    "spacy": "text",
    "pytest": "testing",
}

#: Import name -> distribution name, where they differ (checked before the environment's
#: own table, which only knows what is installed here).
IMPORT_NAMES: dict[str, str] = {
    "pytorch_lightning": "pytorch-lightning",
    "hydra": "hydra-core",
    "flash_attn": "flash-attn",
    "sentence_transformers": "sentence-transformers",
    "torch_tensorrt": "torch-tensorrt",
    "comet_ml": "comet-ml",
    "PIL": "pillow",
    "cv2": "opencv-python",
    "skimage": "scikit-image",
    "sklearn": "scikit-learn",
    "yaml": "pyyaml",
    "bs4": "beautifulsoup4",
    "attr": "attrs",
    "dateutil": "python-dateutil",
    "google.protobuf": "protobuf",
    "tensorboardX": "tensorboardx",
    "Levenshtein": "python-levenshtein",
    "umap": "umap-learn",
    "IPython": "ipython",
}

#: A dependency a project needs through an import of another package: the module (or a
#: name in it) -> the distribution it needs. ``torch.utils.tensorboard`` imports
#: ``tensorboard`` when used, and fails without it; Lightning's loggers likewise.
IMPLIED: dict[str, str] = {
    "torch.utils.tensorboard": "tensorboard",
    "pytorch_lightning.loggers.TensorBoardLogger": "tensorboard",
    "lightning.pytorch.loggers.TensorBoardLogger": "tensorboard",
    "pytorch_lightning.loggers.WandbLogger": "wandb",
    "lightning.pytorch.loggers.WandbLogger": "wandb",
    "pytorch_lightning.loggers.MLFlowLogger": "mlflow",
    "lightning.pytorch.loggers.MLFlowLogger": "mlflow",
    "pytorch_lightning.loggers.CometLogger": "comet-ml",
    "lightning.pytorch.loggers.CometLogger": "comet-ml",
}

#: Imports that are tooling, not dependencies of the project's code.
_TOOLING = frozenset({"__future__", "setuptools", "pkg_resources", "distutils", "pip"})

#: Packages whose presence alone marks a PyTorch project.
TORCH_FAMILY = frozenset({"torch", "torchvision", "torchaudio", "lightning", "pytorch-lightning"})


def _venv_versions(root: Path) -> tuple[dict[str, str], str | None]:
    """Versions installed in the project's own virtual environment, read from dist-info names."""
    for name in (".venv", "venv", "env"):
        for site in sorted((root / name).glob("lib/python*/site-packages")):
            versions = {}
            for info in site.glob("*.dist-info"):
                match = re.match(r"(.+?)-(\d[^-]*)\.dist-info$", info.name)
                if match:
                    versions[normalise(match.group(1))] = match.group(2)
            if versions:
                return versions, f"{name}/"
    return {}, None


def _installed(dist: str, venv: Mapping[str, str], use_venv: bool) -> str | None:
    if use_venv:
        return venv.get(dist)
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def distribution(import_name: str) -> str:
    """The distribution that provides a top-level import name."""
    if import_name in IMPORT_NAMES:
        return IMPORT_NAMES[import_name]
    provided = _packages_distributions().get(import_name)
    return normalise(provided[0]) if provided else normalise(import_name)


@functools.lru_cache(maxsize=1)
def _packages_distributions() -> Mapping[str, list[str]]:
    try:
        return importlib.metadata.packages_distributions()
    except Exception:  # a broken distribution's metadata must not stop the scan
        return {}


def _declared_as(dist: str, declared: Mapping[str, Requirement]) -> str:
    """The declared name an imported distribution goes by: ``umap`` is ``umap-learn``,
    ``cv2`` may be ``opencv-python-headless`` (a declared name that extends it)."""
    if dist in declared:
        return dist
    longer = [d for d in declared if d.startswith(dist + "-") or d.endswith("-" + dist)]
    return longer[0] if len(longer) == 1 else dist


def third_party(name: str, local: Set[str]) -> bool:
    """Whether a top-level import is a dependency: not stdlib, tooling or the project's own."""
    return name not in sys.stdlib_module_names and name not in _TOOLING and name not in local


def stack(
    root: Path,
    requirements: Iterable[Requirement],
    imports: Mapping[str, int],
    *,
    modules: Iterable[Set[str]] = (),
    local: Set[str] = frozenset(),
) -> tuple[list[Package], str]:
    """Every library the project declares or imports; and where "installed" was read.

    ``imports`` counts the files importing each top-level name; ``modules`` is each
    file's dotted imports (for :data:`IMPLIED` dependencies); ``local`` the project's own
    module and package names, which are not dependencies. Known libraries come first,
    in :data:`KNOWN_PACKAGES` order, then the others by name.
    """
    venv, venv_dir = _venv_versions(root)
    declared: dict[str, Requirement] = {}
    for requirement in requirements:
        current = declared.get(requirement.name)
        if current is None or (not current.spec and requirement.spec):
            declared[requirement.name] = requirement
    imported: dict[str, int] = {}
    for name, count in imports.items():
        if third_party(name, local):
            dist = _declared_as(distribution(name), declared)
            imported[dist] = imported.get(dist, 0) + count
    implied: dict[str, tuple[int, str]] = {}
    for file_modules in modules:
        needed: dict[str, str] = {}
        for module, dist in IMPLIED.items():
            if module in file_modules or any(m.startswith(module + ".") for m in file_modules):
                needed.setdefault(dist, module)
        for dist, module in needed.items():
            count, first = implied.get(dist, (0, module))
            implied[dist] = (count + 1, first)
    names = [*KNOWN_PACKAGES, *sorted(({*declared, *imported, *implied}) - set(KNOWN_PACKAGES))]
    packages = []
    for dist in names:
        req = declared.get(dist)
        count = imported.get(dist, 0)
        via: str | None = None
        if count == 0 and dist in implied:
            count, via = implied[dist]
        if req is None and count == 0:
            continue
        packages.append(
            Package(
                name=dist,
                role=KNOWN_PACKAGES.get(dist) or OTHER_ROLES.get(dist, "library"),
                declared=(req.spec or "any") if req else None,
                declared_in=None if req is None else _where(req),
                installed=_installed(dist, venv, venv_dir is not None),
                imported_by=count,
                via=via,
            )
        )
    where = f"the project's {venv_dir}" if venv_dir else "the environment torchwise runs in"
    return packages, where


def _where(req: Requirement) -> str:
    return req.source if req.line is None else f"{req.source}:{req.line}"


def torch_importable() -> bool:
    """Whether torch can be imported here (looked up, not imported)."""
    try:
        return importlib.util.find_spec("torch") is not None
    except (ImportError, ValueError):
        return False


def torch_runtime(packages: list[Package], installed_where: str, *, probe: bool) -> TorchRuntime:
    """The declared and installed torch, and (with ``probe``) CUDA/MPS on this machine."""
    entry = next((p for p in packages if p.name == "torch"), None)
    runtime = TorchRuntime(
        declared=entry.declared if entry else None,
        declared_in=entry.declared_in if entry else None,
        installed=entry.installed if entry else _installed("torch", {}, False),
    )
    if not probe:
        runtime.note = "devices not probed"
        return runtime
    if not torch_importable():
        runtime.note = "torch is not installed where torchwise runs: devices unknown"
        return runtime
    import torch

    runtime.cuda_available = bool(torch.cuda.is_available())
    runtime.cuda_version = torch.version.cuda
    if runtime.cuda_available:
        runtime.gpus = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    mps = getattr(torch.backends, "mps", None)
    runtime.mps_available = bool(mps is not None and mps.is_available())
    runtime.note = (
        f"installed version read from {installed_where}; "
        f"devices probed with torch {torch.__version__} where torchwise runs"
    )
    return runtime
