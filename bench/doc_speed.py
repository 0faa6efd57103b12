"""How long `torchwise doc` takes, against a bare forward and torchinfo.summary.

No peer writes docstrings; the nearest thing people paste into docs is a
torchinfo table, so that is the comparison. Each figure is the median of
REPEATS runs in one process (imports excluded); ratios are to a bare CPU
forward at the same input. `torchwise doc` here includes the symbolic-shape
experiments, the summaries, FLOP scaling and running the Example.

    .venv/bin/python bench/doc_speed.py
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import torch

from torchwise.doc.generate import document
from torchwise.target import resolve_target

REPEATS = 3
CASES = [
    ("examples/cifar_project/model.py:CifarNet", ["f32[8,3,32,32]"]),
    ("zoo:resnet18", ["f32[batch=1,3,224,224]"]),
    ("zoo:gpt2", ["i64[batch=1,seq=64]<50257"]),
]


def median_time(call: Callable[[], object]) -> float:
    times = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    try:
        import torchinfo
    except ImportError:  # the bench extra is not installed
        torchinfo = None
    print(f"{'model':<12} {'forward s':>10} {'torchinfo s':>12} {'doc s':>8} {'doc/fwd':>8}")
    for target, inputs in CASES:
        doc_rt = resolve_target(target, inputs=inputs, device="meta")
        cpu = resolve_target(target, inputs=inputs, device="cpu")
        model = cpu.model.eval()

        def forward(model: torch.nn.Module = model, args: tuple[object, ...] = cpu.args) -> None:
            with torch.no_grad():
                model(*args)

        fwd = median_time(forward)
        info = float("nan")
        if torchinfo is not None:
            data = list(cpu.args)
            info = median_time(
                lambda m=model, d=data: torchinfo.summary(m, input_data=d, verbose=0)
            )
        doc = median_time(lambda rt=doc_rt, t=target: document(t, rt))
        name = target.rpartition(":")[2]
        print(f"{name:<12} {fwd:>10.3f} {info:>12.3f} {doc:>8.2f} {doc / fwd:>8.1f}")


if __name__ == "__main__":
    main()
