"""``torchwise run --as-cuda`` against a real GPU: does the simulation predict what the GPU does?

Each case is a small training script with a device bug and its fixed version.
Every script runs twice: for real on the GPU (``python script.py``), where the
buggy one should crash and the fixed one finish, and under ``torchwise run
--as-cuda`` with no GPU visible (``CUDA_VISIBLE_DEVICES=``), where the buggy one
should get an error finding at the line the GPU crashed on and the fixed one
none. The table says, per script, whether the two agree.

Run it on a machine with CUDA (torch 2.11 or later, no torchwise install):

    PYTHONPATH=src python3 bench/gpu_run.py --out DIR

It writes DIR/gpu_run.json and prints the table; it runs the scripts in
parallel and takes well under 90 seconds. Without a GPU the real runs are
marked "no GPU" and only the simulated column is filled.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import textwrap
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"

HEADER = """\
import torch
from torch import nn

torch.manual_seed(0)
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
"""


@dataclass(frozen=True)
class Case:
    name: str
    buggy: str  # the script body after HEADER; the bug is on the line marked "# BUG"
    fixed: str
    expected: str  # the finding code the simulation should report for the buggy one
    #: the GPU raises in the backward, not at the marked line of the forward
    raises_in_backward: bool = False


CASES = (
    Case(
        "input-not-moved",
        """\
model = nn.Linear(4, 2).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    x, y = torch.randn(8, 4), torch.randint(0, 2, (8,), device=device)
    loss = nn.functional.cross_entropy(model(x), y)  # BUG
    opt.zero_grad(); loss.backward(); opt.step()
""",
        """\
model = nn.Linear(4, 2).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    x, y = torch.randn(8, 4), torch.randint(0, 2, (8,), device=device)
    loss = nn.functional.cross_entropy(model(x.to(device)), y)
    opt.zero_grad(); loss.backward(); opt.step()
""",
        "TWR401",
    ),
    Case(
        "labels-not-moved",
        """\
model = nn.Linear(4, 3).to(device)
opt = torch.optim.Adam(model.parameters())
for step in range(3):
    x, y = torch.randn(8, 4).to(device), torch.randint(0, 3, (8,))
    loss = nn.functional.cross_entropy(model(x), y)  # BUG
    opt.zero_grad(); loss.backward(); opt.step()
""",
        """\
model = nn.Linear(4, 3).to(device)
opt = torch.optim.Adam(model.parameters())
for step in range(3):
    x, y = torch.randn(8, 4).to(device), torch.randint(0, 3, (8,))
    loss = nn.functional.cross_entropy(model(x), y.to(device))
    opt.zero_grad(); loss.backward(); opt.step()
""",
        "TWR401",
    ),
    Case(
        "hidden-state-on-cpu",
        """\
class RNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.cell = nn.GRUCell(4, 8)
        self.out = nn.Linear(8, 2)

    def forward(self, x):
        h = torch.zeros(x.size(0), 8)
        for t in range(x.size(1)):
            h = self.cell(x[:, t], h)  # BUG
        return self.out(h)

model = RNN().to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    x, y = torch.randn(8, 5, 4, device=device), torch.randint(0, 2, (8,), device=device)
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad(); loss.backward(); opt.step()
""",
        """\
class RNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.cell = nn.GRUCell(4, 8)
        self.out = nn.Linear(8, 2)

    def forward(self, x):
        h = torch.zeros(x.size(0), 8, device=x.device)
        for t in range(x.size(1)):
            h = self.cell(x[:, t], h)
        return self.out(h)

model = RNN().to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    x, y = torch.randn(8, 5, 4, device=device), torch.randint(0, 2, (8,), device=device)
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad(); loss.backward(); opt.step()
""",
        "TWR401",
    ),
    Case(
        "mask-not-a-buffer",
        """\
class Masked(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(4, 4)
        self.mask = torch.tril(torch.ones(4, 4))

    def forward(self, x):
        return self.linear(x) * self.mask[0]  # BUG

model = Masked().to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    x = torch.randn(8, 4, device=device)
    loss = model(x).pow(2).mean()
    opt.zero_grad(); loss.backward(); opt.step()
""",
        """\
class Masked(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(4, 4)
        self.register_buffer("mask", torch.tril(torch.ones(4, 4)))

    def forward(self, x):
        return self.linear(x) * self.mask[0]

model = Masked().to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    x = torch.randn(8, 4, device=device)
    loss = model(x).pow(2).mean()
    opt.zero_grad(); loss.backward(); opt.step()
""",
        "TWR401",
    ),
    Case(
        "numpy-of-cuda-tensor",
        """\
model = nn.Linear(4, 2).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    x, y = torch.randn(8, 4, device=device), torch.randint(0, 2, (8,), device=device)
    logits = model(x)
    loss = nn.functional.cross_entropy(logits, y)
    opt.zero_grad(); loss.backward(); opt.step()
    accuracy = (logits.argmax(1) == y).float().mean().numpy()  # BUG
""",
        """\
model = nn.Linear(4, 2).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    x, y = torch.randn(8, 4, device=device), torch.randint(0, 2, (8,), device=device)
    logits = model(x)
    loss = nn.functional.cross_entropy(logits, y)
    opt.zero_grad(); loss.backward(); opt.step()
    accuracy = (logits.argmax(1) == y).float().mean().cpu().numpy()
""",
        "TWR402",
    ),
    Case(
        "cuda-index-on-cpu-table",
        """\
table = torch.randn(10, 4)
model = nn.Linear(4, 2).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    ids = torch.randint(0, 10, (8,), device=device)
    x = table[ids]  # BUG
    loss = model(x.to(device)).pow(2).mean()
    opt.zero_grad(); loss.backward(); opt.step()
""",
        """\
table = torch.randn(10, 4)
model = nn.Linear(4, 2).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    ids = torch.randint(0, 10, (8,), device=device)
    x = table[ids.cpu()]
    loss = model(x.to(device)).pow(2).mean()
    opt.zero_grad(); loss.backward(); opt.step()
""",
        "TWR401",
    ),
    Case(
        "deterministic-adaptive-pool",
        """\
torch.use_deterministic_algorithms(True)
model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU(), nn.AdaptiveAvgPool2d((2, 2)),
                      nn.Flatten(), nn.Linear(32, 2)).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    x, y = torch.randn(4, 3, 16, 16, device=device), torch.randint(0, 2, (4,), device=device)
    loss = nn.functional.cross_entropy(model(x), y)  # BUG
    opt.zero_grad(); loss.backward(); opt.step()
""",
        """\
torch.use_deterministic_algorithms(True)
model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU(), nn.AvgPool2d(7),
                      nn.Flatten(), nn.Linear(32, 2)).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    x, y = torch.randn(4, 3, 16, 16, device=device), torch.randint(0, 2, (4,), device=device)
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad(); loss.backward(); opt.step()
""",
        "TWR503",
        raises_in_backward=True,
    ),
)


def _bug_line(source: str) -> int:
    for number, line in enumerate(source.splitlines(), start=1):
        if "# BUG" in line:
            return number
    raise ValueError("no # BUG line")


def _crash_line(stderr: str, script: Path) -> int | None:
    lines = re.findall(rf'File "{re.escape(str(script))}", line (\d+)', stderr)
    return int(lines[-1]) if lines else None


def real_run(script: Path, timeout: float) -> dict[str, object]:
    """``python script.py`` on the GPU: did it crash, where, with what."""
    started = time.perf_counter()
    process = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=timeout,
        cwd=script.parent, check=False,
    )  # fmt: skip
    last = process.stderr.strip().splitlines()[-1] if process.stderr.strip() else ""
    return {
        "crashed": process.returncode != 0,
        "line": _crash_line(process.stderr, script) if process.returncode else None,
        "error": last[:200] if process.returncode else "",
        "seconds": round(time.perf_counter() - started, 2),
    }


def simulated_run(script: Path, timeout: float) -> dict[str, object]:
    """``torchwise run --as-cuda`` with no GPU visible: its error findings."""
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "PYTHONPATH": str(SRC)}
    started = time.perf_counter()
    process = subprocess.run(
        [sys.executable, "-m", "torchwise", "run", str(script), "--as-cuda", "--format",
         "json", "--quiet", "--steps", "3"],
        capture_output=True, text=True, timeout=timeout, cwd=script.parent, env=env, check=False,
    )  # fmt: skip
    try:
        findings = json.loads(process.stdout)["findings"]
    except (ValueError, KeyError):
        return {"error": (process.stderr.strip().splitlines() or ["no output"])[-1][:200]}
    errors = [f for f in findings if f["severity"] == "error"]
    return {
        "findings": [f"{f['code']}@{f['line']}" for f in findings],
        "errors": [(f["code"], f["line"]) for f in errors],
        "seconds": round(time.perf_counter() - started, 2),
    }


def judge(case: Case, buggy: bool, bug_line: int, real: dict, sim: dict) -> dict[str, object]:
    """Whether the simulation says what the GPU did (and what was meant)."""
    errors = [tuple(e) for e in sim.get("errors", [])]
    if buggy:
        predicted = (case.expected, bug_line) in errors
        where = real.get("line") == bug_line or case.raises_in_backward
        gpu = real.get("crashed") is True and where if real else None
    else:
        predicted = not errors and "error" not in sim
        gpu = real.get("crashed") is False if real else None
    return {
        "simulation_right": predicted,
        "gpu_as_meant": gpu,
        "agree": None if gpu is None else gpu == predicted,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--timeout", type=float, default=80.0)
    parser.add_argument("--jobs", type=int, default=min(8, os.cpu_count() or 2))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    import torch

    gpu = torch.cuda.is_available()
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="gpu-run-") as tmp:
        jobs = []
        for case in CASES:
            for variant, body in (("buggy", case.buggy), ("fixed", case.fixed)):
                script = Path(tmp) / f"{case.name}-{variant}" / "train.py"
                script.parent.mkdir()
                source = HEADER + textwrap.dedent(body)
                script.write_text(source)
                jobs.append((case, variant, script, _bug_line(HEADER + case.buggy)))
        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            reals = [pool.submit(real_run, j[2], args.timeout) if gpu else None for j in jobs]
            sims = [pool.submit(simulated_run, j[2], args.timeout) for j in jobs]
            rows = []
            for (case, variant, _, line), real, sim in zip(jobs, reals, sims, strict=True):
                real_result = real.result() if real is not None else {}
                sim_result = sim.result()
                rows.append({
                    "case": case.name, "variant": variant, "bug_line": line,
                    "expected": case.expected if variant == "buggy" else "none",
                    "gpu": real_result or "no GPU", "simulated": sim_result,
                    **judge(case, variant == "buggy", line, real_result, sim_result),
                })  # fmt: skip
    summary = {
        "torch": torch.__version__,
        "device": torch.cuda.get_device_name(0) if gpu else "none",
        "scripts": len(rows),
        "simulation_right": sum(1 for r in rows if r["simulation_right"]),
        "gpu_as_meant": sum(1 for r in rows if r["gpu_as_meant"]) if gpu else None,
        "agree": sum(1 for r in rows if r["agree"]) if gpu else None,
        "seconds": round(time.perf_counter() - started, 1),
    }
    (args.out / "gpu_run.json").write_text(json.dumps({"summary": summary, "rows": rows}, indent=2))
    print("| case | variant | GPU | --as-cuda on CPU | agree |\n|---|---|---|---|---|")
    for row in rows:
        real = row["gpu"]
        shown = (
            "no GPU"
            if not isinstance(real, dict)
            else (f"crash at line {real['line']}" if real["crashed"] else "ran")
        )
        sim = row["simulated"]
        simulated = sim.get("error") or (", ".join(sim["findings"]) or "clean")
        print(f"| {row['case']} | {row['variant']} | {shown} | {simulated} | {row['agree']} |")
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
