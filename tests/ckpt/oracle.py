"""The oracle: load each file under every loader, in child processes, and see what runs.

Each case's payload only creates a marker file in one directory (the folder of the
``marker`` passed in; any file appearing there counts, so several cases can name
their own markers). A child
process loads every file with every loader in turn (torch.load with and without
``weights_only``, torch.jit.load, numpy.load(allow_pickle=True) reading every
.npz member, joblib.load, pickle.load in a loop) and reports, per loader,
whether the marker appeared and what the loader returned or raised. The scanner
is then held to that, never to anyone's reading of the loaders' source. Nothing
here runs in the test process itself.

A file that kills its child (a crash in a C extension) or hangs it past
``per_file`` seconds is recorded as such, and the rest go on in a fresh child.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

LOADERS = (
    "torch.load",
    "torch.load(weights_only=True)",
    "torch.jit.load",
    "numpy.load(allow_pickle=True)",
    "joblib.load",
    "pickle.load",
)

_CHILD = r"""
import io, json, os, pickle, sys, warnings
warnings.simplefilter("ignore")
import numpy
import torch
try:
    import joblib
except ImportError:
    joblib = None

def numpy_load(path):
    value = numpy.load(path, allow_pickle=True)
    if isinstance(value, numpy.lib.npyio.NpzFile):
        return [value[name] for name in value.files]
    return value

def pickle_loop(path):
    out = []
    with open(path, "rb") as handle:
        while True:
            try:
                out.append(pickle.load(handle))
            except EOFError:
                return out

LOAD = {
    "torch.load": lambda p: torch.load(p, weights_only=False, map_location="cpu"),
    "torch.load(weights_only=True)": lambda p: torch.load(p, weights_only=True, map_location="cpu"),
    "torch.jit.load": lambda p: torch.jit.load(p, map_location="cpu"),
    "numpy.load(allow_pickle=True)": numpy_load,
    "joblib.load": (lambda p: joblib.load(p)) if joblib else None,
    "pickle.load": pickle_loop,
}
markers = sys.argv[1]

def ran():
    return bool(os.listdir(markers))

def clear():
    for name in os.listdir(markers):
        os.remove(os.path.join(markers, name))

for line in sys.stdin:
    path, loaders = json.loads(line)
    for loader in loaders:
        print(json.dumps(["start", path, loader]), flush=True)
        clear()
        load = LOAD[loader]
        if load is None:
            outcome = "skipped: joblib is not installed"
        else:
            try:
                value = load(path)
                outcome = "loaded " + type(value).__name__
            except BaseException as exc:
                text = str(exc).strip().splitlines()
                outcome = f"{type(exc).__name__}: {text[0][:160] if text else ''}"
        print(json.dumps([path, loader, ran(), outcome]), flush=True)
"""


@dataclass
class Outcome:
    #: loader -> the marker appeared
    ran: dict[str, bool] = field(default_factory=dict)
    #: loader -> "loaded dict", "RuntimeError: ...", "the process died", "hung"
    result: dict[str, str] = field(default_factory=dict)

    @property
    def runs_under(self) -> set[str]:
        return {loader for loader, ran in self.ran.items() if ran}

    def loads(self, loader: str) -> bool:
        return self.result.get(loader, "").startswith("loaded")


def load_everywhere(
    files: dict[str, Path],
    marker: Path,
    loaders: tuple[str, ...] = LOADERS,
    per_file: float = 60,
) -> dict[str, Outcome]:
    """Load every file with every loader in child processes (cwd: the marker's folder)."""
    marker.parent.mkdir(parents=True, exist_ok=True)
    outcomes = {name: Outcome() for name in files}
    by_path = {str(path): name for name, path in files.items()}
    todo = [(str(path), loader) for path in files.values() for loader in loaders]
    while todo:
        done = _run_child(todo, marker, by_path, outcomes, per_file)
        todo = todo[done:]
    return outcomes


def _run_child(
    todo: list[tuple[str, str]],
    marker: Path,
    by_path: dict[str, str],
    outcomes: dict[str, Outcome],
    per_file: float,
) -> int:
    """Run one child over ``todo`` (in order); return how many entries it settled."""
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    proc = subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(marker.parent)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        cwd=marker.parent,
        env=env,
    )
    assert proc.stdin is not None and proc.stdout is not None
    grouped: dict[str, list[str]] = {}
    for path, loader in todo:
        grouped.setdefault(path, []).append(loader)
    lines: queue.Queue[str | None] = queue.Queue()
    stdin, stdout = proc.stdin, proc.stdout

    def feed() -> None:  # its own thread: a pipe holds 64 KiB, the list can be longer
        try:
            stdin.write("".join(json.dumps([p, ls]) + "\n" for p, ls in grouped.items()))
            stdin.close()
        except OSError:
            pass  # the child died; its outcome is read below

    def pump() -> None:
        for line in stdout:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    threading.Thread(target=feed, daemon=True).start()
    settled = 0
    current: tuple[str, str] | None = None
    deadline = time.monotonic() + per_file
    while settled < len(todo):
        try:
            line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            line = None
            proc.kill()
        if line is None:
            state = "hung" if proc.poll() is None or proc.returncode < 0 else "died"
            proc.kill()
            proc.wait()
            if state == "died":
                state = f"the process died (exit {proc.returncode})"
            stuck = current or todo[settled]  # died before it started one: blame the next
            name = by_path[stuck[0]]
            outcomes[name].ran[stuck[1]] = any(marker.parent.iterdir())
            outcomes[name].result[stuck[1]] = state
            return settled + 1
        entry = json.loads(line)
        if entry[0] == "start":
            current, deadline = (entry[1], entry[2]), time.monotonic() + per_file
            continue
        path, loader, ran, outcome = entry
        outcomes[by_path[path]].ran[loader] = ran
        outcomes[by_path[path]].result[loader] = outcome
        settled += 1
        current = None
    proc.wait()
    return settled
