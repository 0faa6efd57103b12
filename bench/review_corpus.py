"""The real-code corpus of the review benchmarks: code no one here wrote.

Two kinds of source, both unpacked under ``bench/.corpus/`` (git-ignored) and
never committed:

- PyPI packages (``_corpus.py``): the ``.py`` files of a wheel, by version;
- public GitHub repositories, as snapshots the ``fetch`` tool brings under
  ``/work/.mirror/<owner>+<name>/repo`` (bare git directories). The commit each
  label was made against is pinned here; ``extract`` unpacks that commit's
  Python files and notebooks with ``git archive``.

``bench/labels/precision.csv`` names every labelled finding by corpus entry,
version or commit, path and line, so the study can be rerun on the same code.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _corpus import CORPUS, LIBRARIES, corpus, version

MIRROR = Path("/work/.mirror")


@dataclass(frozen=True)
class Repository:
    name: str  # owner/name on GitHub
    commit: str
    what: str  # one line: what kind of code it is

    @property
    def key(self) -> str:
        return self.name.replace("/", "+")


#: Training scripts, tutorials, paper implementations and example folders.
REPOSITORIES = (
    Repository("pytorch/examples", "77f55b912142e11fcfdf5b530231fb9c52f181e8",
               "the official PyTorch examples"),
    Repository("karpathy/nanoGPT", "3adf61e154c3fe3fca428ad6bc3818b27a3b8291",
               "GPT training script and model"),
    Repository("karpathy/minGPT", "37baab71b9abea1b76ab957409a1cc2fbfba8a26",
               "GPT library, trainer and demo projects"),
    Repository("Lightning-AI/pytorch-lightning", "7f0c3436cd3f6ad3753125672024fc415cbcb414",
               "Lightning and Fabric, their examples"),
    Repository("huggingface/diffusers", "58eb52c0803ea9af3abec60841c2a093bdf1f951",
               "diffusion library and its training example scripts"),
    Repository("huggingface/accelerate", "16cb6eb80dd9aa8b4df1a63ef57863e455d53b83",
               "distributed training library and examples"),
    Repository("huggingface/peft", "5d602fdbff04c33c1c4de55cda9d4ae1d7cb7e40",
               "parameter-efficient fine-tuning library and examples"),
    Repository("huggingface/pytorch-image-models", "aa4b5850c1543fa488abf260f18390eda46cf85d",
               "timm with its train/validate scripts"),
    Repository("facebookresearch/detr", "29901c51d7fe8712168b8d0d64351170bc0f83e0",
               "paper implementation: detection transformer"),
    Repository("facebookresearch/dino", "7c446df5b9f45747937fb0d72314eb9f7b66930a",
               "paper implementation: self-supervised ViT"),
    Repository("facebookresearch/mae", "efb2a8062c206524e35e47d04501ed4f544c0ae8",
               "paper implementation: masked autoencoders"),
    Repository("openai/improved-diffusion", "1bc7bbbdc414d83d4abf2ad8cc1446dc36c4e4d5",
               "paper implementation: diffusion models"),
    Repository("eriklindernoren/PyTorch-GAN", "36d3c77e5ff20ebe0aeefd322326a134a279b93e",
               "GAN paper implementations (training scripts)"),
    Repository("eriklindernoren/PyTorch-YOLOv3", "1d621c8489e22c76ceb93bb2397ac6c8dfb5ceb7",
               "paper implementation: object detection"),
    Repository("kuangliu/pytorch-cifar", "49b7aa97b0c12fe0d4054e670403a16b6b834ddd",
               "CIFAR-10 training script and model zoo"),
    Repository("milesial/Pytorch-UNet", "21d7850f2af30a9695bbeea75f3136aa538cfc4a",
               "segmentation training script"),
    Repository("yunjey/pytorch-tutorial", "0500d3df5a2a8080ccfccbc00aca0eacc21818db",
               "tutorial scripts"),
    Repository("MorvanZhou/PyTorch-Tutorial", "dbe154a9e56635e51c6b0c2ccea8ae36cfb585a7",
               "tutorial scripts"),
    Repository("hunkim/PyTorchZeroToAll", "e5a260fac0b4ff1e2ec434fc6f0d962ac97fc289",
               "tutorial scripts"),
    Repository("GunhoChoi/Kind-PyTorch-Tutorial", "6e98e475eda6b1a449a8470384a7978462820e52",
               "tutorial scripts"),
    Repository("AntixK/PyTorch-VAE", "a6896b944c918dd7030e7d795a8c13e5c6345ec7",
               "VAE paper implementations"),
    Repository("1Konny/Beta-VAE", "977a1ece88e190dd8a556b4e2efb665f759d0772",
               "paper implementation: beta-VAE"),
    Repository("Shawn1993/cnn-text-classification-pytorch",
               "93415f08168a1ae60635320569f6eca0ae3a40bb", "text CNN training script"),
    Repository("higgsfield/RL-Adventure", "0f82b6922e8a1a8515fc4c84c28702e7caa226f1",
               "reinforcement learning notebooks"),
    Repository("jadore801120/attention-is-all-you-need-pytorch",
               "132907dd272e2cc92e3c10e6c4e783a87ff8893d", "paper implementation: Transformer"),
    Repository("sgrvinod/a-PyTorch-Tutorial-to-Image-Captioning",
               "cc9c7e2f4017938d414178d3781fed8dbe442852", "image captioning tutorial"),
    Repository("spro/practical-pytorch", "c520c52e68e945d88fff563dba1c028b6ec0197b",
               "RNN tutorials"),
)  # fmt: skip

REPOS = CORPUS / "repos"
# Sources, and the files that declare a project's torch version.
_SUFFIXES = (".py", ".ipynb", "requirements.txt", ".toml", ".cfg")


def extract(repository: Repository, into: Path | None = None) -> Path:
    """The repository's Python files at the pinned commit, unpacked once (and
    its small files without an extension: scripts such as ``train``, which
    review takes when they start with a Python shebang).

    Snapshots may lack their largest blobs (data files), so the wanted files
    are listed with ``git ls-tree`` and read one by one, not archived whole.
    """
    target = (into or REPOS) / repository.key
    if target.is_dir():
        return target
    git_dir = MIRROR / repository.key / "repo"
    if (git_dir / ".git").is_dir():
        git_dir = git_dir / ".git"  # a snapshot with a work tree
    if not git_dir.is_dir():
        raise SystemExit(f"{repository.name}: not under {MIRROR}; bring it with `fetch` first")
    git = ["git", f"--git-dir={git_dir}"]
    listing = subprocess.run(
        [*git, "ls-tree", "-r", "-l", "-z", repository.commit], capture_output=True, check=True
    ).stdout.decode()
    blobs = []
    for entry in filter(None, listing.split("\0")):
        meta, path = entry.split("\t", 1)
        _, kind, sha, size = meta.split()
        if kind != "blob":
            continue
        script = "." not in Path(path).name and size.isdigit() and int(size) < 1_000_000
        if path.endswith(_SUFFIXES) or script:
            blobs.append((sha, path))
    partial = target.with_suffix(".part")
    shutil.rmtree(partial, ignore_errors=True)
    for sha, path in blobs:
        done = subprocess.run([*git, "cat-file", "blob", sha], capture_output=True, check=False)
        if done.returncode == 0 and ".." not in Path(path).parts:
            destination = partial / path
            destination.parent.mkdir(parents=True, exist_ok=True)
            destination.write_bytes(done.stdout)
    partial.mkdir(parents=True, exist_ok=True)
    partial.rename(target)
    return target


@dataclass(frozen=True)
class Entry:
    """One corpus entry: a package version or a repository commit, and its files."""

    name: str
    version: str  # a package version or a commit
    root: Path
    what: str


def entries(names: list[str] | None = None) -> list[Entry]:
    """Every corpus entry (or those whose name contains one of ``names``)."""
    found = []
    for name in LIBRARIES:
        if not names or any(part in name for part in names):
            root = corpus(name)  # downloads the wheel first: version() reads its name
            found.append(Entry(name, version(name), root, "PyPI package sources"))
    for repository in REPOSITORIES:
        if names and not any(part in repository.name for part in names):
            continue
        found.append(
            Entry(repository.name, repository.commit, extract(repository), repository.what)
        )
    return found
