"""How busy the rest of the machine was: the cores other processes used while we measured.

On the shared 2-core development machine another engineer's job holds one core
for a minute or two at a time and then stops. A 2-thread step is then another
step: the slow-loader MLP's went from 24 ms to 244 ms, the conv net's from 13 ms
to 1.2 s (OpenMP threads waiting for a core), while one-thread steps hardly
change. Load averages smooth that over minutes; this reads /proc/stat (Linux).
"""

from __future__ import annotations

import os
import time

#: Below this many cores the others count as idle, above ``HELD`` as holding a core.
IDLE, HELD = 0.25, 0.75


def _busy_s() -> float:
    """CPU seconds every process on the machine has used since boot (/proc/stat)."""
    with open("/proc/stat") as f:
        ticks = [int(x) for x in f.readline().split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = ticks[:8]
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


class Others:
    """Cores the machine's other processes used since :meth:`reset` (ours taken out)."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        times = os.times()
        self.busy, self.ours, self.wall = _busy_s(), times.user + times.system, time.perf_counter()

    def cores(self) -> float:
        times = os.times()
        ours = times.user + times.system - self.ours
        return (_busy_s() - self.busy - ours) / max(time.perf_counter() - self.wall, 1e-9)


def regime(cores: float) -> str | None:
    """ "idle", "held" (another job on a core), or None in between (a change mid-way)."""
    if cores < IDLE:
        return "idle"
    if cores > HELD:
        return "held"
    return None
