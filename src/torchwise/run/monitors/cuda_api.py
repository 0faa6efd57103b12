"""The ``torch.cuda`` a script sees under ``--as-cuda``: a GPU that is not there.

``torch.cuda.is_available()`` answers True and the device queries describe one
simulated device per rank (``set_device`` is honoured); what would talk to a
driver (streams, events, synchronisation, memory statistics, seeding) does the
CPU's equivalent or nothing. Autocast on ``"cuda"`` is disabled rather than
emulated: dtypes do not change where devices would fail. Anything a script needs
that is not here fails as it does on a CPU build, and the run reports it.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch

from torchwise.run.session import Patches

GIB = 1024**3
NAME = "Simulated GPU (torchwise run --as-cuda)"


@dataclass(frozen=True)
class _Properties:
    name: str = NAME
    major: int = 9
    minor: int = 0
    total_memory: int = 80 * GIB
    multi_processor_count: int = 132
    is_integrated: bool = False
    is_multi_gpu_board: bool = False
    L2_cache_size: int = 50 * 1024**2  # torch's own attribute name
    uuid: str = "00000000-0000-0000-0000-000000000000"


class _Event:
    """``torch.cuda.Event``: wall-clock timing on the host."""

    def __init__(self, enable_timing: bool = False, **_: Any) -> None:
        self.time: float | None = None

    def record(self, stream: Any = None) -> None:
        self.time = time.perf_counter()

    def synchronize(self) -> None:
        pass

    def wait(self, stream: Any = None) -> None:
        pass

    def query(self) -> bool:
        return True

    def elapsed_time(self, end: _Event) -> float:
        return ((end.time or 0.0) - (self.time or 0.0)) * 1000.0


class _Stream:
    """``torch.cuda.Stream``: work on the host is already ordered."""

    def __init__(self, device: Any = None, priority: int = 0, **_: Any) -> None:
        self.device = device
        self.priority = priority

    def wait_stream(self, stream: Any) -> None:
        pass

    def wait_event(self, event: Any) -> None:
        pass

    def record_event(self, event: _Event | None = None) -> _Event:
        recorded = event or _Event()
        recorded.record()
        return recorded

    def synchronize(self) -> None:
        pass

    def query(self) -> bool:
        return True

    def __enter__(self) -> _Stream:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


@contextlib.contextmanager
def _context(*args: Any, **kwargs: Any) -> Iterator[None]:
    yield


class SimulatedCuda:
    """Installs the fake ``torch.cuda`` surface; ``current`` is the simulated device index."""

    def __init__(self, patches: Patches, count: int, current: int) -> None:
        self.patches = patches
        self.count = max(1, count)
        self.current = current

    def device_index(self, device: Any) -> int:
        """The index of ``device`` ("cuda:1", torch.device, int); the current one if none."""
        if isinstance(device, int):
            return device
        if isinstance(device, str):
            device = torch.device(device)
        if isinstance(device, torch.device) and device.index is not None:
            return int(device.index)
        return self.current

    def install(self) -> None:
        cuda = torch.cuda
        simulated = self

        def set_device(device: Any) -> None:
            simulated.current = simulated.device_index(device)

        stream = _Stream()
        constants: dict[str, Any] = {
            "is_available": lambda: True,
            "is_initialized": lambda: True,
            "init": lambda: None,
            "device_count": lambda: simulated.count,
            "current_device": lambda: simulated.current,
            "set_device": set_device,
            "get_device_name": lambda device=None: NAME,
            "get_device_properties": lambda device=None: _Properties(),
            "get_device_capability": lambda device=None: (9, 0),
            "get_arch_list": lambda: ["sm_90"],
            "is_bf16_supported": lambda *a, **k: True,
            "synchronize": lambda device=None: None,
            "empty_cache": lambda: None,
            "ipc_collect": lambda: None,
            "memory_allocated": lambda device=None: 0,
            "max_memory_allocated": lambda device=None: 0,
            "memory_reserved": lambda device=None: 0,
            "max_memory_reserved": lambda device=None: 0,
            "reset_peak_memory_stats": lambda device=None: None,
            "reset_max_memory_allocated": lambda device=None: None,
            "memory_summary": lambda *a, **k: "",
            "mem_get_info": lambda device=None: (80 * GIB, 80 * GIB),
            "manual_seed": lambda seed: None,
            "manual_seed_all": lambda seed: None,
            "seed": lambda: None,
            "seed_all": lambda: None,
            "Event": _Event,
            "Stream": _Stream,
            "current_stream": lambda device=None: stream,
            "default_stream": lambda device=None: stream,
            "stream": lambda s=None: contextlib.nullcontext(s),
            # torch's optimizers ask before each step (2.11's Adam and AdamW do, and
            # raised "CUDA driver version is insufficient" on a host without one)
            "is_current_stream_capturing": lambda: False,
            "device": _context,
            "device_of": _context,
        }
        for name, value in constants.items():
            self.patches.setattr(cuda, name, value)
        self.patches.setattr(torch.cuda.graphs, "is_current_stream_capturing", lambda: False)
        self.patches.setattr(torch.backends.cudnn, "is_available", lambda: True)
        autocast = torch.amp.autocast_mode.autocast
        original_init = autocast.__init__

        def init(self: Any, device_type: str, *args: Any, **kwargs: Any) -> None:
            if device_type == "cuda":  # no fp16 on the host: keep float32, keep the devices
                device_type, kwargs["enabled"] = "cpu", False
                args = ()
                kwargs.pop("dtype", None)
            original_init(self, device_type, *args, **kwargs)

        self.patches.setattr(autocast, "__init__", init)
