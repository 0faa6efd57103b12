"""The user's DataLoader, rebuilt under other settings, and what its batches look like.

``--loader data.py:make_loader`` names a function returning a
``torch.utils.data.DataLoader``. Trials rebuild it around the same dataset,
batch sampler and collate function with other ``num_workers``, ``pin_memory``,
``persistent_workers`` and ``prefetch_factor``; the dataset and the order of
samples are the user's.

A batch is split into forward arguments and a target the way training scripts
write them: ``(inputs, target)``, ``(x1, x2, ..., target)``, a dict with a
``labels``/``label``/``target``/``targets``/``y`` key (the rest are keyword
arguments), or a lone tensor (no target: the loss picker makes one).
"""

from __future__ import annotations

import gc
import importlib
import importlib.util
import os
import re
import sys
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch.utils.data import DataLoader, IterableDataset

from torchwise.errors import TorchwiseError, UserCodeError
from torchwise.tune.step import Batch

_LABEL_KEYS = ("labels", "label", "target", "targets", "y")


@dataclass(frozen=True)
class LoaderSettings:
    """The DataLoader options a trial varies."""

    num_workers: int = 0
    pin_memory: bool = False
    persistent_workers: bool = False
    prefetch_factor: int | None = None

    @property
    def queue_depth(self) -> int:
        """Batches the workers can have ready ahead of the consumer."""
        return self.num_workers * (self.prefetch_factor or 2)

    def kwargs(self) -> dict[str, Any]:
        out: dict[str, Any] = {"num_workers": self.num_workers, "pin_memory": self.pin_memory}
        if self.num_workers > 0:
            out["persistent_workers"] = self.persistent_workers
            if self.prefetch_factor is not None:
                out["prefetch_factor"] = self.prefetch_factor
        return out

    def describe(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.kwargs().items())


def split_batch(batch: Any) -> Batch:
    """A loader's batch -> forward arguments and target (see the module docstring)."""
    if isinstance(batch, torch.Tensor):
        return Batch((batch,))
    if isinstance(batch, Mapping):
        key = next((k for k in _LABEL_KEYS if k in batch), None)
        kwargs = {k: v for k, v in batch.items() if k != key}
        target = batch[key] if key is not None else None
        return Batch((), kwargs, target if isinstance(target, torch.Tensor) else None)
    if isinstance(batch, (tuple, list)) and batch:
        if len(batch) == 1:
            return Batch((batch[0],))
        *inputs, target = batch
        if len(inputs) == 1 and isinstance(inputs[0], (tuple, list)):
            inputs = list(inputs[0])
        if len(inputs) == 1 and isinstance(inputs[0], Mapping):
            return Batch((), dict(inputs[0]), target)
        return Batch(tuple(inputs), {}, target)
    raise TorchwiseError(
        f"the loader yields {type(batch).__name__}; tune understands a tensor, "
        "(inputs, target) tuples and dicts with a 'labels'/'target' key"
    )


@dataclass
class LoaderSource:
    """The user's loader, and rebuilt variants of it, cycling through epochs."""

    loader: DataLoader[Any]
    origin: str
    _loaders: dict[LoaderSettings, DataLoader[Any]] = field(default_factory=dict)
    _iterators: dict[LoaderSettings, Iterator[Any]] = field(default_factory=dict)

    @property
    def user_settings(self) -> LoaderSettings:
        dl = self.loader
        workers = dl.num_workers
        return LoaderSettings(
            workers,
            bool(dl.pin_memory),
            bool(dl.persistent_workers) if workers else False,
            dl.prefetch_factor if workers else None,
        )

    @property
    def is_iterable(self) -> bool:
        return isinstance(self.loader.dataset, IterableDataset)

    @property
    def batch_size(self) -> int | None:
        return self.loader.batch_size

    @property
    def static_shapes(self) -> bool:
        """Whether every batch has the same size (no short last batch of an epoch)."""
        dl = self.loader
        if dl.drop_last or self.is_iterable or dl.batch_size is None:
            return bool(dl.drop_last)
        try:
            return len(dl.dataset) % dl.batch_size == 0  # type: ignore[arg-type]
        except TypeError:
            return False

    def build(self, settings: LoaderSettings) -> DataLoader[Any]:
        if settings in self._loaders:
            return self._loaders[settings]
        dl = self.loader
        common: dict[str, Any] = {
            "collate_fn": dl.collate_fn,
            "worker_init_fn": dl.worker_init_fn,
            "multiprocessing_context": dl.multiprocessing_context,
            "generator": dl.generator,
            "timeout": dl.timeout,
            **settings.kwargs(),
        }
        if self.is_iterable or dl.batch_sampler is None:
            built = DataLoader(
                dl.dataset, batch_size=dl.batch_size, drop_last=dl.drop_last, **common
            )
        else:
            built = DataLoader(dl.dataset, batch_sampler=dl.batch_sampler, **common)
        self._loaders[settings] = built
        return built

    def next_raw(self, settings: LoaderSettings | None) -> Any:
        """The next batch under ``settings`` (None: the user's), starting a new epoch as needed."""
        settings = settings or self.user_settings
        iterator = self._iterators.get(settings)
        if iterator is None:
            iterator = self._iterators[settings] = self._start(settings)
        try:
            return next(iterator)
        except StopIteration:
            iterator = self._iterators[settings] = self._start(settings)
            try:
                return next(iterator)
            except StopIteration:
                raise TorchwiseError(f"the loader from {self.origin} yields no batches") from None

    def _start(self, settings: LoaderSettings) -> Iterator[Any]:
        with warnings.catch_warnings():
            # More workers than cores is deliberate here (I/O-bound datasets gain
            # from it); the measurement, not DataLoader's rule of thumb, decides.
            warnings.filterwarnings("ignore", message=".*worker processes in total.*")
            return iter(self.build(settings))

    def batches(self, settings: LoaderSettings | None, device: torch.device) -> Iterator[Batch]:
        while True:
            yield split_batch(self.next_raw(settings))

    def first_batch(self) -> Batch:
        """The first batch, loaded in this process (it becomes the example batch)."""
        return split_batch(next(iter(self.build(LoaderSettings()))))

    def close(self) -> None:
        """Shut down worker processes of every iterator made so far."""
        self._iterators.clear()
        self._loaders.clear()
        gc.collect()


def load_loader(reference: str) -> LoaderSource:
    """``file.py:make_loader`` or ``package.module:make_loader`` -> a LoaderSource."""
    factory = load_reference(reference, what="--loader")
    if not callable(factory):
        raise TorchwiseError(f"--loader {reference}: {type(factory).__name__} is not callable")
    try:
        loader = factory()
    except Exception as exc:
        raise UserCodeError.from_exception(exc, doing=f"calling {reference}") from None
    if not isinstance(loader, DataLoader):
        raise TorchwiseError(
            f"{reference} returned {type(loader).__name__}, not a torch.utils.data.DataLoader"
        )
    return LoaderSource(loader, reference)


def load_reference(reference: str, *, what: str) -> Any:
    """The object ``path/to/file.py:name`` or ``package.module:name`` names.

    A file is imported under a private module name with its directory on
    ``sys.path`` (so it can import its siblings), as model targets are.
    """
    module_ref, sep, attr = reference.rpartition(":")
    if not sep or not module_ref or not attr:
        raise TorchwiseError(f"{what} {reference!r} is not 'file.py:name' or 'package.module:name'")
    is_file = module_ref.endswith(".py") or "/" in module_ref or os.sep in module_ref
    if is_file:
        path = Path(module_ref).resolve()
        if not path.is_file():
            raise TorchwiseError(f"{what}: file not found: {module_ref}")
        stem = re.sub(r"\W", "_", path.stem)
        name = f"_torchwise_tune_{stem}_{abs(hash(str(path))):x}"
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise TorchwiseError(f"{what}: cannot import {module_ref}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # workers unpickle datasets by module name
        sys.path.insert(0, str(path.parent))
        try:
            spec.loader.exec_module(module)
        except Exception as exc:
            del sys.modules[name]
            raise UserCodeError.from_exception(exc, doing=f"importing {module_ref}") from None
        finally:
            sys.path.remove(str(path.parent))
    else:
        try:
            module = importlib.import_module(module_ref)
        except ModuleNotFoundError as exc:
            if exc.name and module_ref.startswith(exc.name):
                raise TorchwiseError(f"{what}: no module named {module_ref!r}") from None
            raise UserCodeError.from_exception(exc, doing=f"importing {module_ref}") from None
        except Exception as exc:
            raise UserCodeError.from_exception(exc, doing=f"importing {module_ref}") from None
    if not hasattr(module, attr):
        raise TorchwiseError(f"{what}: {module_ref} has no attribute {attr!r}")
    return getattr(module, attr)


def worker_candidates(cores: int | None = None) -> list[int]:
    """num_workers values to try: 0, 1, 2, 4, ... up to twice the cores (I/O-bound
    loaders gain from more workers than cores, CPU-bound ones do not; measuring decides)."""
    cores = cores or os.cpu_count() or 1
    values, n = [0, 1], 2
    while n <= max(2, 2 * cores) and n <= 16:
        values.append(n)
        n *= 2
    return values
