"""Imported once by the worker forkserver: pay torch's first-call costs before forking.

The first ``summarize`` in a process initialises torch's fake-tensor, meta and
autograd machinery, which costs seconds; every later one costs milliseconds.
Workers are forked from the forkserver, so doing it once there makes every
model's inspection start warm. Only meta-device work runs here, which starts no
thread pools (forking after OpenMP threads exist is what is unsafe). A failure
only means the workers start cold, so it is swallowed.
"""

from __future__ import annotations

import contextlib


def warm_up() -> None:
    from torchwise.deps import import_torch

    torch = import_torch()  # its import warnings hidden: they would reach the user's stderr
    from torchwise.model import summarize

    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 4, 3),
        torch.nn.BatchNorm2d(4),
        torch.nn.ReLU(),
        torch.nn.Flatten(),
        torch.nn.Linear(4 * 6 * 6, 2),
    )
    summarize(model, (torch.empty(2, 3, 8, 8, device="meta"),), {}, device="meta")


with contextlib.suppress(Exception):
    warm_up()
