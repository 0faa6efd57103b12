"""Peak memory of ``torchwise ckpt convert`` on a 2 GiB checkpoint, beside torch.load + save_file.

Writes a 2 GiB torch.save checkpoint (a 512 MiB tensor, five 256 MiB tensors and a
transposed 256 MiB one), then converts it to safetensors three ways, each in its own
process: ``torchwise.ckpt.convert`` (streamed, verified), ``torch.load`` followed by
``safetensors.torch.save_file`` (the usual recipe), and the same with
``torch.load(mmap=True)``. For each: peak RSS, RSS before the work began (Python,
torch and safetensors imported), the difference against the largest tensor, and
wall time. The files are deleted at the end.

    python bench/ckpt_convert.py [--mib 2048] [--dir /tmp]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_BUILD = r"""
import sys, torch
mib = int(sys.argv[2])
big = mib // 4                     # the largest tensor: a quarter of the file
rest = (mib - big) // 6            # five contiguous tensors and one transposed
state = {"big": torch.empty(big << 18)}
for i in range(5):
    state[f"layer{i}"] = torch.empty(rest << 18)
state["transposed"] = torch.empty(1024, rest << 8).t()
torch.save(state, sys.argv[1])
"""

_RUN = r"""
import json, sys, time
import torch, safetensors.torch
from torchwise.ckpt import convert
def rss():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
how, src, out = sys.argv[1:4]
before = rss()
start = time.perf_counter()
if how == "torchwise":
    convert(src, out, force=True)
else:
    state = torch.load(src, weights_only=True, mmap=how.endswith("mmap"))
    safetensors.torch.save_file({k: v.contiguous() for k, v in state.items()}, out)
took = time.perf_counter() - start
hwm = [l for l in open("/proc/self/status") if l.startswith("VmHWM")][0].split()[1]
print(json.dumps({"before": before, "peak": int(hwm) * 1024, "seconds": took}))
"""

METHODS = {
    "torchwise ckpt convert": "torchwise",
    "torch.load + save_file": "torch",
    "torch.load(mmap=True) + save_file": "torch-mmap",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=2048, help="checkpoint size in MiB")
    parser.add_argument("--dir", type=Path, default=None, help="where to write the files")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ckpt-convert-", dir=args.dir) as tmp:
        src, out = Path(tmp) / "big.pt", Path(tmp) / "big.safetensors"
        subprocess.run([sys.executable, "-c", _BUILD, str(src), str(args.mib)], check=True)
        largest = (args.mib // 4) << 20
        print(f"checkpoint: {src.stat().st_size / 2**30:.2f} GiB, largest tensor "
              f"{largest >> 20} MiB; peak RSS of each way, each in its own process\n")  # fmt: skip
        print("| way | peak RSS | RSS before | peak - before | / largest tensor | wall |")
        print("|---|---|---|---|---|---|")
        for label, how in METHODS.items():
            start = time.perf_counter()
            done = subprocess.run(
                [sys.executable, "-c", _RUN, how, str(src), str(out)],
                capture_output=True, text=True, check=True,
            )  # fmt: skip
            wall = time.perf_counter() - start
            stats = json.loads(done.stdout.strip().splitlines()[-1])
            extra = stats["peak"] - stats["before"]
            peak, before = stats["peak"] / 2**20, stats["before"] / 2**20
            print(f"| {label} | {peak:,.0f} MiB | {before:,.0f} MiB | {extra / 2**20:,.0f} MiB "
                  f"| {extra / largest:.2f}x | {wall:.1f} s |")  # fmt: skip
            out.unlink(missing_ok=True)


if __name__ == "__main__":
    main()
