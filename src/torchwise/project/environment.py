"""The project's stack and the torch/CUDA/MPS it runs on.

The stack joins three sources: what the project declares (requirements), what
its code imports, and what is installed. "Installed" means the project's own
virtual environment (``.venv``, ``venv`` or ``env`` at its root) when it has one,
else the environment torchwise runs in; the note says which.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

from torchwise.project.requirements import Requirement, normalise
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

#: Import name -> distribution name, where they differ.
IMPORT_NAMES: dict[str, str] = {
    "pytorch_lightning": "pytorch-lightning",
    "hydra": "hydra-core",
    "flash_attn": "flash-attn",
    "sentence_transformers": "sentence-transformers",
    "torch_tensorrt": "torch-tensorrt",
    "comet_ml": "comet-ml",
}

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


def stack(
    root: Path, requirements: Iterable[Requirement], imports: Mapping[str, int]
) -> tuple[list[Package], str]:
    """The known libraries the project declares or imports; and where "installed" was read."""
    venv, venv_dir = _venv_versions(root)
    declared: dict[str, Requirement] = {}
    for requirement in requirements:
        current = declared.get(requirement.name)
        if current is None or (not current.spec and requirement.spec):
            declared[requirement.name] = requirement
    imported: dict[str, int] = {}
    for name, count in imports.items():
        dist = IMPORT_NAMES.get(name, normalise(name))
        imported[dist] = imported.get(dist, 0) + count
    packages = []
    for dist, role in KNOWN_PACKAGES.items():
        req = declared.get(dist)
        count = imported.get(dist, 0)
        if req is None and count == 0:
            continue
        packages.append(
            Package(
                name=dist,
                role=role,
                declared=(req.spec or "any") if req else None,
                declared_in=None if req is None else _where(req),
                installed=_installed(dist, venv, venv_dir is not None),
                imported_by=count,
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
