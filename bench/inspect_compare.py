"""torchwise inspect against torchinfo, fvcore, ptflops and FlopCounterMode, in one run.

For every zoo model: each tool's parameter count and forward MACs beside the
published figures, and each tool's time as a ratio to a bare CPU forward of the
same model (eval, no_grad, batch 1). torchwise runs on the meta device (its
default); the peers need a real CPU model. Times are medians of --repeat runs.
Llama-7B/70B are measured by torchwise only (the peers would need 27/276 GB).

    python bench/inspect_compare.py [--repeat 3] [--models resnet50,gpt2]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import statistics
import subprocess
import sys
import time
import warnings
from collections.abc import Callable
from typing import Any

import torch

from torchwise.model import summarize
from torchwise.target import resolve_target

# (zoo name, inputs used here, published params, published MACs at these inputs or None)
# Published MACs: torchvision's model cards ("GFLOPS", which are MACs). Transformers
# have no published figure at these sequence lengths; the hand arithmetic is in
# tests/model/test_flops_acceptance.py.
MODELS: list[tuple[str, list[str], int, int | None]] = [
    ("resnet18", [], 11_689_512, 1_814_073_344),
    ("resnet50", [], 25_557_032, 4_089_184_256),
    ("mobilenet_v2", [], 3_504_872, 300_774_272),
    ("vit_b_16", [], 86_567_656, 17_563_828_224),
    ("gpt2", ["i64[batch=1,seq=128]<50257"], 124_439_808, 16_114_089_984),
    ("bert_base", ["i64[1,128]<30522", "attention_mask=bool[1,128]"], 109_482_240, None),
    ("llama-tiny", [], 123_712, None),
    ("llama-7b", [], 6_738_415_616, None),
    ("llama-70b", [], 68_976_648_192, None),
]
META_ONLY = {"llama-7b", "llama-70b"}


def median_time(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    times, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def quiet(fn: Callable[[], Any]) -> Callable[[], Any]:
    def run() -> Any:
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            with contextlib.redirect_stderr(io.StringIO()):
                return fn()

    return run


def cli_run(name: str) -> tuple[float, int, tuple[int, int]]:
    """The whole CLI in a fresh process (import, build, both passes): time and peak RSS."""
    # The child reports its own peak RSS: RUSAGE_CHILDREN would include the memory
    # of this (forked) benchmark process.
    code = (
        "import resource, sys\n"
        "from torchwise.cli import main\n"
        "try:\n"
        f"    main(['inspect', 'zoo:{name}', '--format', 'json'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)\n"
    )
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    seconds = time.perf_counter() - start
    rss_kib = int(done.stderr.strip().splitlines()[-1])
    data = json.loads(done.stdout)
    return seconds, rss_kib * 1024, (data["total_params"], data["macs_forward"])


def tool_torchwise(name: str, inputs: list[str]) -> Callable[[], tuple[int, int]]:
    target = resolve_target(f"zoo:{name}", inputs=inputs, device="meta")

    def run() -> tuple[int, int]:
        s = summarize(target.model, target.args, target.kwargs, estimate_training=False)
        return s.total_params, s.macs_forward

    return run


def peers(
    model: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> dict[str, Callable[[], tuple[Any, Any]]]:
    tools: dict[str, Callable[[], tuple[Any, Any]]] = {}

    def torchinfo_run() -> tuple[Any, Any]:
        import torchinfo

        stats = torchinfo.summary(model, input_data=list(args), verbose=0, mode="eval", **kwargs)
        return stats.total_params, stats.total_mult_adds

    def fvcore_run() -> tuple[Any, Any]:
        from fvcore.nn import FlopCountAnalysis, parameter_count

        if kwargs:
            return parameter_count(model)[""], "n/a (no keyword inputs)"
        analysis = FlopCountAnalysis(model, args)
        analysis.unsupported_ops_warnings(False).uncalled_modules_warnings(False)
        return parameter_count(model)[""], analysis.total()

    def ptflops_run() -> tuple[Any, Any]:
        import inspect as pyinspect

        from ptflops import get_model_complexity_info

        names = list(pyinspect.signature(model.forward).parameters)
        feed = {**dict(zip(names, args, strict=False)), **kwargs}
        macs, params = get_model_complexity_info(
            model, (1,), input_constructor=lambda _: feed, as_strings=False,
            print_per_layer_stat=False, verbose=False,
        )  # fmt: skip
        return params, macs

    def flop_counter_run() -> tuple[Any, Any]:
        from torch.utils.flop_counter import FlopCounterMode

        with torch.no_grad(), FlopCounterMode(display=False) as counter:
            model(*args, **kwargs)
        return "-", counter.get_total_flops() // 2

    tools["torchinfo"] = torchinfo_run
    tools["fvcore"] = fvcore_run
    tools["ptflops"] = ptflops_run
    tools["FlopCounterMode"] = flop_counter_run
    return tools


def fmt(value: Any, published: int | None, *, count: bool = False) -> str:
    if isinstance(value, float) and value.is_integer():
        value = int(value)  # fvcore reports counts as floats
    if not isinstance(value, int):
        return str(value)
    if count or value < 1e8:
        text = f"{value:,}"
    elif value >= 1e12:
        text = f"{value / 1e12:.3f}T"
    else:
        text = f"{value / 1e9:.3f}G"
    if published is not None:
        text += " ✓" if value == published else f" ({value / published:.2f}x)"
    return text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--models", default=",".join(m[0] for m in MODELS))
    options = parser.parse_args()
    wanted = options.models.split(",")
    torch.manual_seed(0)
    print("| Model | Tool | Params | Forward MACs | Time / bare forward |")
    print("|---|---|---:|---:|---:|")
    for name, inputs, params_pub, macs_pub in MODELS:
        if name not in wanted:
            continue
        published_macs = fmt(macs_pub, None) if macs_pub else "-"
        print(f"| **{name}** | published | {params_pub:,} | {published_macs} | |")
        if name in META_ONLY:
            seconds, rss, (params, macs) = cli_run(name)
            gib = params_pub * 4 / 2**30
            cells = [fmt(params, params_pub, count=True), fmt(macs, macs_pub)]
            cells.append(f"{seconds:.1f} s, {rss / 2**20:.0f} MiB RSS (weights: {gib:.0f} GiB)")
            print("| | `torchwise inspect` CLI (meta) | " + " | ".join(cells) + " |")
            continue
        target = resolve_target(f"zoo:{name}", inputs=inputs, device="cpu")
        model, args, kwargs = target.model.eval(), target.args, target.kwargs

        def bare(
            model: torch.nn.Module = model,
            args: tuple[Any, ...] = args,
            kwargs: dict[str, Any] = kwargs,
        ) -> None:
            with torch.no_grad():
                model(*args, **kwargs)

        bare()  # warm-up: first-call allocations and kernel selection
        base, _ = median_time(bare, max(options.repeat, 3))
        rows = {"torchwise (meta)": tool_torchwise(name, inputs), **peers(model, args, kwargs)}
        for tool, run in rows.items():
            try:
                seconds, (params, macs) = median_time(quiet(run), options.repeat)
                ratio = f"{seconds / base:.2f}x" if isinstance(macs, (int, float)) else "-"
                cells = [fmt(params, params_pub, count=True), fmt(macs, macs_pub), ratio]
            except Exception as exc:  # a peer failing is a result, not a crash
                cells = ["failed", f"{type(exc).__name__}", "-"]
            print(f"| | {tool} | " + " | ".join(cells) + " |")
        print(f"| | bare forward (CPU) | | | {base * 1000:.0f} ms |")


if __name__ == "__main__":
    main()
