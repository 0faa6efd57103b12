"""Seeds that do not reach what they should (TWR501, TWR502).

- TWR501: ``torch.manual_seed`` is called after the model's parameters were
  initialised, and the first optimizer step still finds those initial values
  (nothing loaded over them): the run's starting weights are not seeded. The
  values are compared, so a model built first and then loaded from a checkpoint
  is not flagged.
- TWR502: a dataset that holds its own random generator (``random.Random``,
  ``numpy.random.RandomState`` or ``Generator``) is copied into every
  DataLoader worker with the same state. A worker-init hook added after the
  script's own reads each worker's generator state (after the script's
  ``worker_init_fn`` ran) and writes it to the run's directory; two workers, or
  two epochs, that start from the same state draw the same numbers.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import weakref
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.utils.data import DataLoader, get_worker_info

from torchwise.run.monitors.loader import LoaderMonitor
from torchwise.run.monitors.modules import ModuleMonitor
from torchwise.run.session import Session
from torchwise.run.sites import Site, user_site

#: attribute depth searched for generators in a dataset
_DEPTH = 2


def _generators(value: Any, prefix: str, depth: int) -> list[tuple[str, Any]]:
    """(name, generator) for the random generators ``value`` holds."""
    found: list[tuple[str, Any]] = []
    if depth < 0 or not hasattr(value, "__dict__") or isinstance(value, (type, nn.Module)):
        return found
    for name, held in list(vars(value).items())[:64]:
        qualified = f"{prefix}.{name}" if prefix else name
        if _is_generator(held):
            found.append((qualified, held))
        elif isinstance(held, (list, tuple)):
            for index, item in enumerate(held[:16]):
                found += _generators(item, f"{qualified}[{index}]", depth - 1)
        else:
            found += _generators(held, qualified, depth - 1)
    return found


def _is_generator(value: Any) -> bool:
    if isinstance(value, random.Random):
        return True
    kind = type(value)
    return kind.__module__.startswith("numpy.random") and kind.__name__ in (
        "RandomState",
        "Generator",
    )


def _state_digest(generator: Any) -> str:
    if isinstance(generator, random.Random):
        state: Any = generator.getstate()
    elif type(generator).__name__ == "RandomState":
        kind, keys, position, *_ = generator.get_state()
        state = (kind, keys.tobytes(), position)
    else:
        state = generator.bit_generator.state
    return hashlib.sha1(repr(state).encode()).hexdigest()[:16]


class ReproMonitor:
    """Watches seeding, parameter creation and the DataLoader workers' generators."""

    def __init__(self, session: Session, modules: ModuleMonitor, loaders: LoaderMonitor) -> None:
        self.session = session
        self.modules = modules
        self.loaders = loaders
        #: parameters created before the first seed: id -> weak reference
        self._early: dict[int, weakref.ref[torch.Tensor]] = {}
        self.dataset_inits: dict[int, Any] = {}
        self._at_seed: dict[int, tuple[float, float]] = {}
        self._checked = False
        self.workers_dir = Path(session.workdir) / "workers"

    def install(self) -> None:
        patches = self.session.patches
        monitor = self
        original_new = nn.Parameter.__new__

        def new(cls: type, data: Any = None, requires_grad: bool = True) -> Any:
            parameter: torch.Tensor = original_new(cls, data, requires_grad)
            if monitor.session.seeded_at is None:
                monitor._early[id(parameter)] = weakref.ref(parameter)
            return parameter

        patches.setattr(nn.Parameter, "__new__", new)
        for owner in (torch, torch.random):
            patches.setattr(owner, "manual_seed", self._seeding(owner.manual_seed))
        original_init = DataLoader.__init__

        def init(loader: DataLoader[Any], *args: Any, **kwargs: Any) -> None:
            original_init(loader, *args, **kwargs)
            monitor.dataset_inits[id(loader)] = type(loader.dataset).__init__
            if loader.num_workers > 0:
                user_init = loader.worker_init_fn
                loader.worker_init_fn = _WorkerProbe(
                    user_init, str(monitor.workers_dir), id(loader)
                )

        patches.setattr(DataLoader, "__init__", init)
        self.session.listen("step_pre", self._first_step)

    def _seeding(self, original: Any) -> Any:
        monitor = self

        def manual_seed(seed: Any) -> Any:
            if monitor.session.seeded_at is None and not monitor.session.replaying:
                monitor.session.seeded_at = user_site()
                for key, ref in list(monitor._early.items()):
                    parameter: torch.Tensor | None = ref()
                    if parameter is not None:
                        monitor._at_seed[key] = _summary(parameter)
            return original(seed)

        return manual_seed

    def _first_step(self, optimizer: Any) -> None:
        if self._checked or self.session.seeded_at is None:
            return
        self._checked = True
        unseeded = []
        for group in optimizer.param_groups:
            for parameter in group["params"]:
                before = self._at_seed.get(id(parameter))
                ref = self._early.get(id(parameter))
                early = ref is not None and ref() is parameter
                if before is not None and early and _summary(parameter) == before:
                    unseeded.append(parameter)
        if not unseeded:
            return
        owners = self.modules.parameter_owners()
        names = [owners.get(id(p), ("?", 0))[0] for p in unseeded]
        self.session.report(
            "TWR501",
            self.session.seeded_at,
            f"torch.manual_seed runs after the model's {len(unseeded)} parameter(s) were "
            "initialised: the starting weights differ from run to run (seed first, then build)",
            evidence={"parameters": ", ".join(names[:4]) + (", ..." if len(names) > 4 else "")},
        )

    def finish(self) -> None:
        if not self.workers_dir.is_dir():
            return
        records = []
        for path in sorted(self.workers_dir.glob("*.json")):
            try:
                records.append(json.loads(path.read_text(encoding="utf-8")))
            except (OSError, ValueError):
                continue
        by_generator: dict[tuple[int, str], list[dict[str, Any]]] = {}
        for record in records:
            for name, digest in record["generators"].items():
                by_generator.setdefault((record["loader"], name), []).append(
                    {**record, "digest": digest}
                )
        for (loader_id, name), seen in by_generator.items():
            digests = [r["digest"] for r in seen]
            if len(digests) < 2 or len(set(digests)) == len(digests):
                continue
            same = len(digests) - len(set(digests)) + 1
            site = _attribute_site(self.dataset_inits.get(loader_id), name)
            self.session.report(
                "TWR502",
                site or self.loaders.loader_sites.get(loader_id),
                f"the dataset's generator `{name}` starts in the same state in {same} of "
                f"{len(digests)} DataLoader workers (or epochs): they draw the same random "
                "numbers (seed it per worker in worker_init_fn, or use torch's generator)",
                evidence={"workers and epochs seen": len(digests)},
            )


class _WorkerProbe:
    """Runs the script's worker_init_fn, then records the dataset's generator states."""

    def __init__(self, user: Any, directory: str, loader_id: int) -> None:
        self.user = user
        self.directory = directory
        self.loader_id = loader_id

    def __call__(self, worker_id: int) -> None:
        if self.user is not None:
            self.user(worker_id)
        info = get_worker_info()
        if info is None:
            return
        found = _generators(info.dataset, "", _DEPTH)
        if not found:
            return
        os.makedirs(self.directory, exist_ok=True)
        record = {
            "loader": self.loader_id,
            "worker": worker_id,
            "pid": os.getpid(),
            "dataset_class": f"{type(info.dataset).__module__}:{type(info.dataset).__qualname__}",
            "generators": {name: _state_digest(gen) for name, gen in found},
        }
        path = Path(self.directory) / f"{os.getpid()}-{worker_id}.json"
        path.write_text(json.dumps(record), encoding="utf-8")


def _summary(parameter: torch.Tensor) -> tuple[float, float]:
    with torch.no_grad():
        flat = parameter.detach().reshape(-1).double()
        return (float(flat.sum()), float(flat[: min(8, flat.numel())].abs().sum()))


def _attribute_site(init: Any, name: str) -> Site | None:
    """The line of ``self.<name> = ...`` in the dataset class's ``__init__``."""
    import inspect

    from torchwise.run.sites import assignment_line

    code = getattr(inspect.unwrap(init), "__code__", None) if init is not None else None
    if code is None:
        return None
    line = assignment_line(code, name.split(".")[0].split("[")[0], before=10**9)
    return Site(os.path.abspath(code.co_filename), line) if line else None
