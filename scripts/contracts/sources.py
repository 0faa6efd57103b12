"""The released packages, as PyPI serves them: one wheel per minor release.

Only the Python sources and the type stubs are read (``*.py``, ``*.pyi``);
nothing from a wheel is imported or executed, so a wheel built for another
platform or Python serves as well as this machine's (the Python sources of a
release are the same on every platform). The smallest wheel of the newest
patch release of each minor version is taken, and kept in a cache directory.
"""

from __future__ import annotations

import hashlib
import json
import re
import urllib.parse
import urllib.request
import zipfile
from dataclasses import dataclass
from pathlib import Path

PYPI = "https://pypi.org/pypi/{package}/json"


@dataclass(frozen=True)
class Release:
    package: str
    version: str  # the newest patch release of the minor version: "2.6.0"
    filename: str
    url: str
    sha256: str
    #: The release's other wheels, smallest first: their metadata may pin torch
    #: where the smallest one's does not.
    others: tuple[tuple[str, str, str], ...] = ()

    @property
    def minor(self) -> str:
        return ".".join(self.version.split(".")[:2])


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def releases(package: str, first: str, last: str | None = None) -> list[Release]:
    """The newest patch release of every minor version from ``first`` on."""
    index_url = PYPI.format(package=package)
    with urllib.request.urlopen(index_url, timeout=60) as response:
        index = json.load(response)
    newest: dict[tuple[int, ...], str] = {}
    for version, files in index["releases"].items():
        if not re.fullmatch(r"\d+\.\d+(\.\d+)?", version) or not files:
            continue
        key = _version_key(version)
        if key[:2] < _version_key(first)[:2]:
            continue
        if last is not None and key[:2] > _version_key(last)[:2]:
            continue
        if not any(item["filename"].endswith(".whl") for item in files):
            continue
        if key[:2] not in newest or key > _version_key(newest[key[:2]]):
            newest[key[:2]] = version
    found = []
    for minor in sorted(newest):
        version = newest[minor]
        wheels = [item for item in index["releases"][version] if item["filename"].endswith(".whl")]
        ordered = sorted(wheels, key=lambda item: item["size"])
        smallest = ordered[0]
        others = tuple(
            (
                item["filename"],
                urllib.parse.urljoin(index_url, item["url"]),
                item["digests"]["sha256"],
            )
            for item in ordered[1:4]
        )
        found.append(
            Release(
                package,
                version,
                smallest["filename"],
                urllib.parse.urljoin(index_url, smallest["url"]),
                smallest["digests"]["sha256"],
                others,
            )
        )
    return found


def download(release: Release, cache: Path) -> Path:
    """The wheel, from the cache or PyPI, checked against PyPI's digest."""
    cache.mkdir(parents=True, exist_ok=True)
    path = cache / release.filename
    if not path.exists() or _sha256(path) != release.sha256:
        partial = path.with_suffix(".part")
        urllib.request.urlretrieve(release.url, partial)
        if _sha256(partial) != release.sha256:
            partial.unlink()
            raise RuntimeError(f"{release.filename}: digest differs from PyPI's")
        partial.replace(path)
    return path


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@dataclass(frozen=True)
class SourceFile:
    module: str  # "torch.nn.modules.rnn"
    package: bool  # an __init__ file
    stub: bool  # a .pyi file
    text: str


def source_files(wheel: Path, top: str) -> list[SourceFile]:
    """Every ``.py`` and ``.pyi`` file of the top-level package ``top``."""
    found = []
    with zipfile.ZipFile(wheel) as archive:
        for name in archive.namelist():
            if not name.startswith(top + "/") or not name.endswith((".py", ".pyi")):
                continue
            stub = name.endswith(".pyi")
            parts = name[: -4 if stub else -3].split("/")
            package = parts[-1] == "__init__"
            if package:
                parts = parts[:-1]
            if not all(part.isidentifier() for part in parts):
                continue
            text = archive.read(name).decode("utf-8", errors="replace")
            found.append(SourceFile(".".join(parts), package, stub, text))
    return found


def required_torch(wheel: Path) -> str | None:
    """The torch release a companion wheel is built for (``Requires-Dist: torch
    (==2.6.0)``, or the lower bound of ``>=2.14.0``), as a minor version; None
    when it names none."""
    with zipfile.ZipFile(wheel) as archive:
        names = [name for name in archive.namelist() if name.endswith(".dist-info/METADATA")]
        if not names:
            return None
        metadata = archive.read(names[0]).decode("utf-8", errors="replace")
    for line in metadata.splitlines():
        match = re.match(r"Requires-Dist:\s*torch\s*\(?\s*(==|>=)\s*(\d+)\.(\d+)", line)
        if match:
            return f"{match.group(2)}.{match.group(3)}"
    return None


def built_for(release: Release, cache: Path) -> str | None:
    """The torch release ``release`` is built for, from the first of its wheels
    whose metadata says."""
    found = required_torch(download(release, cache))
    for filename, url, sha256 in release.others:
        if found is not None:
            break
        other = Release(release.package, release.version, filename, url, sha256)
        found = required_torch(download(other, cache))
    return found
