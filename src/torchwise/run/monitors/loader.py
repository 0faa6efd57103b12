"""DataLoader passes: where the budget ends a pass, and what each pass yielded.

``DataLoader.__iter__`` starts a :class:`~torchwise.run.session.Pass`; the
iterator's ``__next__`` asks the session before each batch whether the pass has
used its budget and, if so, ends it as an exhausted loader would
(``StopIteration``), so the script's own loop moves on to its evaluation or its
next epoch. The sampler's indices and a fingerprint of each batch are kept for
the data checks: the same order in every epoch (TWR301), the same batch at every
step (TWR304), and, across ranks, overlapping batches (TWR601).
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator
from typing import Any

import torch
from torch.utils.data import DataLoader, RandomSampler, SequentialSampler
from torch.utils.data import dataloader as dataloader_module
from torch.utils.data.distributed import DistributedSampler

from torchwise.run.session import Pass, Session
from torchwise.run.sites import Site, user_site

MAX_INDICES = 4096
#: batches fingerprinted per pass (the data checks compare the first few)
FINGERPRINTED = 16


def tensors_in(value: Any, limit: int = 16) -> Iterator[torch.Tensor]:
    """The tensors in a batch (tuples, lists, dicts, dataclass-like objects), depth first."""
    stack = [value]
    found = 0
    while stack and found < limit:
        item = stack.pop()
        if isinstance(item, torch.Tensor):
            found += 1
            yield item
        elif isinstance(item, dict):
            stack.extend(reversed(list(item.values())))
        elif isinstance(item, (list, tuple)):
            stack.extend(reversed(item[:64]))
        elif hasattr(item, "__dict__") and not isinstance(item, type) and hasattr(item, "keys"):
            stack.extend(reversed([item[k] for k in list(item.keys())[:64]]))


def fingerprint(batch: Any) -> tuple[object, ...]:
    """A cheap summary of a batch that differs between different batches (shape, dtype, sums)."""
    parts: list[object] = []
    with torch.no_grad():
        for tensor in tensors_in(batch):
            if tensor.is_sparse or tensor.numel() == 0:
                parts.append((tuple(tensor.shape), str(tensor.dtype)))
                continue
            flat = tensor.detach().reshape(-1)
            stride = max(1, flat.numel() // 64)
            numeric = flat if not flat.is_complex() else torch.view_as_real(flat)
            parts.append(
                (
                    tuple(tensor.shape),
                    str(tensor.dtype),
                    float(numeric.double().sum()),
                    float(numeric[::stride][:64].double().abs().sum()),
                )
            )
    return tuple(parts)


class LoaderMonitor:
    """Patches DataLoader so that every iteration is a pass the session can end."""

    def __init__(self, session: Session, *, record: bool) -> None:
        self.session = session
        self.record = record  # False: only the budget (no fingerprints, no checks)
        self.loaders: dict[int, weakref.ref[DataLoader[Any]]] = {}
        self.loader_sites: dict[int, Site | None] = {}
        self.sampler_kinds: dict[int, str] = {}
        self.batch_sizes: dict[int, int | None] = {}
        self.lengths: dict[int, int | None] = {}

    def install(self) -> None:
        patches = self.session.patches
        monitor = self
        original_init = DataLoader.__init__
        original_iter = DataLoader.__iter__
        base = dataloader_module._BaseDataLoaderIter
        original_next = base.__next__
        original_index = base._next_index

        def init(loader: DataLoader[Any], *args: Any, **kwargs: Any) -> None:
            original_init(loader, *args, **kwargs)
            monitor.loader_sites[id(loader)] = user_site()

        def iterate(loader: DataLoader[Any]) -> Any:
            iterator = original_iter(loader)
            monitor.begin(loader, iterator)
            return iterator

        def next_batch(iterator: Any) -> Any:
            running: Pass | None = getattr(iterator, "_torchwise_pass", None)
            if running is None:
                return original_next(iterator)
            if running.ended_by:
                raise StopIteration
            if monitor.session.pass_should_end(running):
                monitor.session.end_pass(running, "budget")
                raise StopIteration
            try:
                batch = original_next(iterator)
            except StopIteration:
                monitor.session.end_pass(running, "exhausted")
                raise
            monitor.yielded(running, batch)
            return batch

        def next_index(iterator: Any) -> Any:
            index = original_index(iterator)  # type: ignore[no-untyped-call]
            running: Pass | None = getattr(iterator, "_torchwise_pass", None)
            if running is not None and monitor.record and len(running.indices) < MAX_INDICES:
                if isinstance(index, (list, tuple)):
                    running.indices.extend(int(i) for i in index if isinstance(i, int))
                elif isinstance(index, int):
                    running.indices.append(index)
            return index

        patches.setattr(DataLoader, "__init__", init)
        patches.setattr(DataLoader, "__iter__", iterate)
        patches.setattr(base, "__next__", next_batch)
        patches.setattr(base, "_next_index", next_index)

    def begin(self, loader: DataLoader[Any], iterator: Any) -> None:
        session = self.session
        # a loader re-created each epoch over the same data keeps its key; an evaluation
        # loader over the training dataset (another sampler or batch size) has its own
        kind = _sampler_kind(loader)
        key = hash((id(loader.dataset), kind, loader.batch_size))
        self.loaders[key] = weakref.ref(loader)
        self.loader_sites.setdefault(id(loader), None)
        if key not in self.sampler_kinds:
            self.sampler_kinds[key] = kind
            self.batch_sizes[key] = loader.batch_size
            self.lengths[key] = _length(loader)
        for earlier in list(session.active):  # a loop that broke out of its loader
            if earlier.key == key:
                session.end_pass(earlier, "abandoned")
        started = session.start_pass(key, self.loader_sites.get(id(loader)), user_site())
        sampler = _index_sampler(loader)
        if isinstance(sampler, DistributedSampler):
            started.details["sampler_epoch"] = sampler.epoch
            started.details["sampler_shuffle"] = sampler.shuffle
        iterator._torchwise_pass = started
        weakref.finalize(iterator, session.end_pass, started, "abandoned")

    def yielded(self, running: Pass, batch: Any) -> None:
        session = self.session
        running.batches += 1
        if session.active and session.active[-1] is not running and running in session.active:
            session.active.remove(running)
            session.active.append(running)
        if self.record and len(running.fingerprints) < FINGERPRINTED:
            running.fingerprints.append(fingerprint(batch))
        session.emit("batch", running, batch)


def _index_sampler(loader: DataLoader[Any]) -> Any:
    batch_sampler = loader.batch_sampler
    return getattr(batch_sampler, "sampler", None) if batch_sampler is not None else loader.sampler


def _sampler_kind(loader: DataLoader[Any]) -> str:
    """ "sequential", "random", "distributed", "distributed-unshuffled", "iterable" or "custom"."""
    if isinstance(loader.dataset, torch.utils.data.IterableDataset):
        return "iterable"
    sampler = _index_sampler(loader)
    if isinstance(sampler, SequentialSampler):
        return "sequential"
    if isinstance(sampler, RandomSampler):
        return "random"
    if isinstance(sampler, DistributedSampler):
        return "distributed" if sampler.shuffle else "distributed-unshuffled"
    return "custom"


def _length(loader: DataLoader[Any]) -> int | None:
    try:
        return len(loader.dataset)  # type: ignore[arg-type]
    except TypeError:
        return None
