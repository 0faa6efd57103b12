"""What reading a checkpoint produces: its pickles, its structure, and what torch would do.

A :class:`Container` is the result of following ``torch.load``'s own route
through a file (zip, then the pre-1.0 tar attempt, then stacked pickles), with
every pickle found in it (:class:`PickleMember`, ``loaded`` when torch.load
unpickles it), the structural tricks found on the way (:class:`Trick`, always
unsafe), and ``failure``: the reason torch.load fails on the file (before
unpickling anything, or after a truncated storage), when it does.

Every byte read goes through :class:`TrackedFile`, which records the ranges, so
a test can prove that no tensor storage is ever read.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from torchwise.ckpt.loaders.names import EXPORT_LOAD, TORCH_LOAD
from torchwise.ckpt.picklevm.source import ByteStream
from torchwise.ckpt.picklevm.values import PickleResult

#: tricks of one kind listed per container (a crafted archive can repeat one a million times)
_TRICKS_PER_KIND = 20


class TrackedFile(io.RawIOBase):
    """An unbuffered file that records every byte range it reads."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self._file = path.open("rb")
        self.ranges: list[tuple[int, int]] = []

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = 0) -> int:
        return self._file.seek(offset, whence)

    def tell(self) -> int:
        return self._file.tell()

    def readinto(self, buffer: Any) -> int:
        start = self._file.tell()
        n = self._file.readinto(buffer)
        if n:
            self.ranges.append((start, start + n))
        return n or 0

    def close(self) -> None:
        self._file.close()
        super().close()


class WindowFile(io.RawIOBase):
    """``length`` bytes of ``raw`` from ``start``, as a seekable file of their own
    (a stored zip member or a tar member, read in place: nothing is copied)."""

    def __init__(self, raw: ByteStream, start: int, length: int) -> None:
        super().__init__()
        self.raw, self.start, self.length, self.pos = raw, start, length, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = 0) -> int:
        base = {0: 0, 1: self.pos, 2: self.length}[whence]
        self.pos = max(0, base + offset)
        return self.pos

    def tell(self) -> int:
        return self.pos

    def readinto(self, buffer: Any) -> int:
        n = max(0, min(len(buffer), self.length - self.pos))
        if not n:
            return 0
        self.raw.seek(self.start + self.pos)
        data = self.raw.read(n) or b""
        buffer[: len(data)] = data
        self.pos += len(data)
        return len(data)


@dataclass(frozen=True)
class Trick:
    """A structure that makes readers disagree or that the scan cannot vet: always unsafe."""

    message: str
    #: where in the file (or member) it is
    where: str
    offset: int
    #: a short machine-readable kind: zip-confusion, tar-link, too-large, ...
    kind: str
    #: unsafe, or warning for what misleads other tools but not torch (a bad checksum)
    severity: str = "unsafe"
    #: the loaders it concerns (the ones that would run the code it names)
    loaders: tuple[str, ...] = ()


@dataclass
class PickleMember:
    """One pickle found in the file."""

    #: where it is: a zip member name, "pickle #2 at byte 80", "tar:storages pickle #3"
    name: str
    #: data (the object torch.load returns), legacy-header, storage-keys, tar-storages,
    #: tar-tensors, payload (loaded by torch.export.load), array (an object array's data),
    #: extra (no modelled loader unpickles it: judged all the same)
    role: str
    #: the loaders that unpickle it (:mod:`torchwise.ckpt.loaders.names`); empty for extras
    loaders: tuple[str, ...]
    result: PickleResult

    @property
    def loaded(self) -> bool:
        """torch.load (or torch.export.load, for a .pt2) unpickles it."""
        return TORCH_LOAD in self.loaders or EXPORT_LOAD in self.loaders

    def also(self, *loaders: str) -> None:
        """More loaders unpickle these same bytes the same way."""
        self.loaders = tuple(dict.fromkeys((*self.loaders, *loaders)))


@dataclass
class SafetensorsEntry:
    name: str
    dtype: str
    shape: tuple[int, ...]
    nbytes: int


@dataclass
class Container:
    path: Path
    #: torch-zip, torchscript, pt2, zip, torch-legacy, torch-tar, pickle, safetensors,
    #: hf-sharded
    format: str
    pickles: list[PickleMember] = field(default_factory=list)
    tricks: list[Trick] = field(default_factory=list)
    #: why torch.load fails on this file (before unpickling, or on the way), if it does
    failure: str | None = None
    #: storage key -> bytes present in the file for it
    storages: dict[str, int] = field(default_factory=dict)
    #: storage key -> zip member (torch zip) for convert
    storage_members: dict[str, str] = field(default_factory=dict)
    safetensors: list[SafetensorsEntry] = field(default_factory=list)
    #: tensors described outside any pickle: a .pt2's weight configs, a tar's tensors member
    described: dict[str, Any] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    children: list[Container] = field(default_factory=list)
    file_size: int = 0
    read_ranges: list[tuple[int, int]] = field(default_factory=list)
    #: loader -> None when it reads the file, else why it refuses or fails
    routes: dict[str, str | None] = field(default_factory=dict)
    #: tricks of one kind past the first few, counted but not listed
    unlisted: dict[str, int] = field(default_factory=dict)

    @property
    def data(self) -> PickleMember | None:
        return next((p for p in self.pickles if p.role == "data"), None)

    @property
    def bytes_read(self) -> int:
        own = sum(end - start for start, end in self.read_ranges)
        return own + sum(child.bytes_read for child in self.children)

    def reject(self, reason: str) -> None:
        """Record the first reason torch.load fails on this file."""
        if self.failure is None:
            self.failure = reason

    def trick(
        self,
        message: str,
        where: str,
        offset: int,
        kind: str,
        severity: str = "unsafe",
        loaders: tuple[str, ...] = (),
    ) -> None:
        if sum(t.kind == kind for t in self.tricks[-_TRICKS_PER_KIND:]) >= _TRICKS_PER_KIND:
            self.unlisted[kind] = self.unlisted.get(kind, 0) + 1  # a flood of one kind
            return
        self.tricks.append(Trick(message, where, offset, kind, severity, loaders))

    def route(self, loader: str, failure: str | None) -> None:
        """Record whether ``loader`` reads this file (None) or why it fails; first word wins."""
        self.routes.setdefault(loader, failure)
