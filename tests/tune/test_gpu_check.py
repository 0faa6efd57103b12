"""bench/gpu_check.py's dry run: every section's code path on CPU with tiny models, each
in its own time-boxed process, each leaving its JSON (the lead runs the real one once,
on a GPU, so it must not fail on a path no one ran)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_the_dry_run_exercises_every_section(tmp_path: Path) -> None:
    out = tmp_path / "gpu"
    done = subprocess.run(
        [
            *(sys.executable, str(ROOT / "bench" / "gpu_check.py"), "--out", str(out)),
            *("--dry-run", "--scale-boxes", "20"),  # no verdict may depend on the machine's load
        ],
        capture_output=True,
        text=True,
        timeout=3000,
        env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    runs = json.loads((out / "runs.json").read_text())
    assert set(runs) >= {"env", "memory", "resnet50", "gpt2"}
    assert all(r["exit_code"] == 0 for r in runs.values()), runs
    memory = json.loads((out / "memory.json").read_text())
    assert all("measured_peak_bytes" in row for row in memory.values()), memory
    for name in ("resnet50", "gpt2"):
        data = json.loads((out / f"{name}.json").read_text())
        assert data["sweep"][0]["label"] == "fp32 baseline" and len(data["sweep"]) > 1
        assert "statuses" in data["tune"] and "pick_vs_best" in data
        assert (out / f"tune_{name}.txt").read_text().startswith("torchwise tune:")
    assert "GPU: none (dry run" in done.stdout


def test_a_section_that_overruns_its_box_is_killed_and_the_others_stay(tmp_path: Path) -> None:
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import gpu_check
    finally:
        sys.path.pop(0)
    slow = [sys.executable, "-c", "import time; time.sleep(30)"]
    result = gpu_check.run_boxed(slow, 0.5, tmp_path / "slow.log")
    assert result["timed_out"] and result["exit_code"] is None
    crash = [sys.executable, "-c", "raise SystemExit(3)"]
    assert gpu_check.run_boxed(crash, 600, tmp_path / "crash.log")["exit_code"] == 3
    gpu_check.write_json(tmp_path / "a.json", {"x": 1})
    assert json.loads((tmp_path / "a.json").read_text()) == {"x": 1}
    lines = gpu_check.summarize(tmp_path, {"resnet50": result})
    assert lines[0].startswith("GPU: ?") and any("no results" in line for line in lines)


def test_the_other_helpers_gpu_scripts_run_with_their_out_folder(tmp_path: Path) -> None:
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import gpu_check
    finally:
        sys.path.pop(0)
    here = tmp_path / "bench"
    here.mkdir()
    (here / "gpu_doctor.py").write_text(
        "import sys, pathlib\n"
        "out = pathlib.Path(sys.argv[sys.argv.index('--out') + 1])\n"
        "(out / 'doctor.json').write_text('{}')\n"
    )
    out = tmp_path / "out"
    out.mkdir()
    seen: list[str] = []
    runs = gpu_check.run_external(
        out, 0.0, here=here, on_each=lambda name, result: seen.append(name)
    )
    assert set(runs) == {"doctor"} and seen == ["doctor"]  # no gpu_run.py: not run
    assert runs["doctor"]["exit_code"] == 0 and (out / "doctor" / "doctor.json").exists()
