"""The differential run at scale: generated opcode programs against torch.load itself.

Draws ``--batches`` batches of ``--size`` pickle programs from the hypothesis
strategies in tests/ckpt/programs.py (the test suite draws one small batch),
wraps each as a plain pickle file or as a torch zip's data.pkl, loads every file
with ``torch.load(weights_only=False)`` in a child process (each payload only
creates a marker file in a temporary directory), and scans it. Reports:

- payloads that ran under torch.load, and how many the scan called unsafe (must be all);
- agreement on where decoding stops (the C unpickler got through the pickle exactly
  when the scan saw it complete), over the programs whose frames do not make that
  buffering-dependent;
- false alarms: data-only, well-formed programs the scan did not call safe.

    python bench/ckpt_differential.py [--batches 40] [--size 60] [--seed 0]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "ckpt"))

from differential import torch_outcomes, write_cases  # noqa: E402
from hypothesis import HealthCheck, given, seed, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from programs import Program, programs  # noqa: E402
from test_ckpt_differential import generated_files  # noqa: E402

from torchwise.ckpt.loaders.routes import read_container  # noqa: E402
from torchwise.ckpt.scan import scan_file  # noqa: E402

TALLY = {"programs": 0, "ran": 0, "ran_unsafe": 0, "compared": 0, "agree": 0, "clean": 0,
         "clean_safe": 0, "zip": 0}  # fmt: skip
MISSES: list[str] = []
NOT_SAFE: dict[str, int] = {}  # why well-formed data-only programs were not called safe


def run_batch(batch: list[Program]) -> None:
    with tempfile.TemporaryDirectory(prefix="ckpt-diff-") as tmp:
        root = Path(tmp)
        cases, zipped = generated_files(root, batch)
        outcomes = torch_outcomes(root, write_cases(root, cases))
        for case, program in zip(cases, batch, strict=True):
            path, outcome = root / f"{case.name}.pt", outcomes[case.name]
            scanned = scan_file(path)
            verdict = scanned.verdict
            TALLY["programs"] += 1
            TALLY["zip"] += zipped[case.name]
            if outcome.ran:
                TALLY["ran"] += 1
                TALLY["ran_unsafe"] += verdict == "unsafe"
                if verdict != "unsafe":
                    MISSES.append(f"{program} -> {verdict}")
            data = read_container(path).data
            if data is None or not any("FRAME" in a.message for a in data.result.anomalies):
                ours = data is not None and data.result.complete and not data.result.torch_stop
                theirs = outcome.torch.startswith("loaded") or "Invalid magic" in outcome.torch
                TALLY["compared"] += 1
                TALLY["agree"] += ours == theirs
            if not program.payload and not program.broken:
                TALLY["clean"] += 1
                TALLY["clean_safe"] += verdict == "safe"
                if verdict != "safe":
                    why = scanned.findings[0].reason if scanned.findings else scanned.error
                    key = (why or verdict).split(":")[0]
                    NOT_SAFE[key] = NOT_SAFE.get(key, 0) + 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=40)
    parser.add_argument("--size", type=int, default=60)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    @seed(args.seed)
    @settings(max_examples=args.batches, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))  # fmt: skip
    @given(st.lists(programs(), min_size=args.size, max_size=args.size))
    def explore(batch: list[Program]) -> None:
        run_batch(batch)

    start = time.perf_counter()
    explore()
    took = time.perf_counter() - start
    t = TALLY
    print(f"{t['programs']} generated programs ({t['zip']} as a zip's data.pkl, the rest as "
          f"plain pickle files), {took:.0f} s")  # fmt: skip
    print(f"- payload ran under torch.load: {t['ran']}; scanned unsafe: {t['ran_unsafe']}")
    print(f"- where decoding stops agrees with the C unpickler: {t['agree']}/{t['compared']}")
    print(f"- well-formed data-only programs scanned safe: {t['clean_safe']}/{t['clean']}")
    for why, count in sorted(NOT_SAFE.items(), key=lambda kv: -kv[1]):
        print(f"  not safe ({count}): {why}")
    for miss in MISSES[:10]:
        print("  MISSED:", miss)
    if MISSES:
        sys.exit(1)


if __name__ == "__main__":
    main()
