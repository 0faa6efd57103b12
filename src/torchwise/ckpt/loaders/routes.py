"""Read one file along every loader's route and gather what each would unpickle or run.

:func:`read_container` follows torch.load's route (:mod:`.torch_load`); with
``every_loader`` (what the scan asks for) it then follows ``torch.jit.load``
(:mod:`.jit_load`), ``numpy.load(allow_pickle=True)`` (:mod:`.numpy_load`),
``joblib.load`` (:mod:`.joblib_load`) and safetensors (:mod:`.safetensors_load`)
through the same bytes. Every pickle any of them unpickles ends up in
``container.pickles``, labelled with the loaders that unpickle it; the same
bytes read the same way are decoded once and carry every such loader.
``container.routes`` says, per loader, whether it reads the file or why not.

One :class:`~torchwise.ckpt.budgets.Meter` counts the work on the whole file,
over every route: a budget reached on one route makes the file "too large to
vet" (it is never a reason to stop judging the others).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from torchwise.ckpt.budgets import DEFAULT_BUDGETS, BudgetExceeded, Budgets, Meter
from torchwise.ckpt.formats.container import Container, TrackedFile
from torchwise.ckpt.loaders.jit_load import read_jit_route
from torchwise.ckpt.loaders.joblib_load import read_joblib_route
from torchwise.ckpt.loaders.names import (
    JIT_LOAD,
    JOBLIB_LOAD,
    NUMPY_LOAD,
    PICKLE_LOAD,
    SAFETENSORS,
    TORCH_LOAD,
)
from torchwise.ckpt.loaders.numpy_load import read_numpy_route
from torchwise.ckpt.loaders.safetensors_load import looks_like_safetensors, read_safetensors
from torchwise.ckpt.loaders.sharded import read_sharded
from torchwise.ckpt.loaders.torch_load import read_torch_route
from torchwise.ckpt.picklevm.source import ByteStream
from torchwise.errors import TorchwiseError

Route = Callable[[Container, ByteStream, int, bytes, Meter], None]


def read_container(
    path: Path,
    budgets: Budgets = DEFAULT_BUDGETS,
    *,
    probe_storages: bool = False,
    every_loader: bool = False,
) -> Container:
    """Read ``path`` along torch.load's route (and every other loader's, ``every_loader``).

    ``probe_storages`` also decodes every zip storage that starts like a pickle
    (the scan does; inspect reads no storage byte).
    """
    if path.is_dir() or path.name.endswith(".index.json"):
        return read_sharded(path, budgets, probe_storages)
    if not path.is_file():
        raise TorchwiseError(f"{path}: no such file", hint="check the path")
    meter = Meter(budgets)
    with TrackedFile(path) as raw:
        size = path.stat().st_size
        container = Container(path, "unknown", file_size=size)
        if size == 0:
            container.reject("the file is empty")
            container.route(TORCH_LOAD, "the file is empty")
            return container
        head = raw.read(16) or b""
        _follow(
            TORCH_LOAD,
            lambda c, r, s, h, m: read_torch_route(c, r, s, h, m, probe_storages),
            container, raw, size, head, meter,
        )  # fmt: skip
        first = next((p for p in container.pickles if p.name.startswith("pickle #1 ")), None)
        stop = first.result.stop if first is not None else None
        if first is None:
            container.route(PICKLE_LOAD, "byte 0 starts no pickle")
        else:
            container.route(PICKLE_LOAD, None if stop is None else stop.message)
        if container.format == "unknown" and looks_like_safetensors(head, size):
            read_safetensors(container, raw, size)
            # torch.load itself hands a *.safetensors path to safetensors (torch >= 2.13)
            container.failure = container.routes[SAFETENSORS]
        if every_loader:
            routes: tuple[tuple[str, Route], ...] = (
                (JIT_LOAD, lambda c, r, s, h, m: read_jit_route(c, r, s, m)),
                (NUMPY_LOAD, read_numpy_route),
                (JOBLIB_LOAD, read_joblib_route),
            )
            for name, route in routes:
                _follow(name, route, container, raw, size, head, meter)
        container.read_ranges = raw.ranges
    return container


def _follow(
    name: str,
    route: Route,
    container: Container,
    raw: ByteStream,
    size: int,
    head: bytes,
    meter: Meter,
) -> None:
    if meter.exhausted:
        return  # a budget already ended the vetting: the file is too large to vet
    try:
        route(container, raw, size, head, meter)
    except BudgetExceeded as exc:
        container.trick(
            f"too large to vet on {name}'s route: {exc}", name, max(exc.offset, 0), "too-large"
        )
        container.route(name, None)  # it would go on reading what the scan did not
