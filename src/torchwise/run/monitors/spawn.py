"""``torch.multiprocessing.spawn``: each spawned process runs under the checks too.

Many DDP scripts start their ranks themselves, with ``mp.spawn(main, args,
nprocs=world_size)``, instead of under torchrun. Without this monitor the run
would watch only the parent, which does nothing but wait. Here ``spawn`` and
``start_processes`` start each process as ``python -m torchwise.run.spawned``,
which installs the monitors (the distributed ones too, as one rank of
``nprocs``) *before* it prepares the process the way multiprocessing's spawn
start method does (same ``sys.argv``, ``sys.path``, working directory, the
script re-imported as ``__mp_main__``), then calls ``fn(i, *args)``. Each
process writes its result into ``spawn<N>/rank<i>.json`` beside the parent's,
and the parent's run compares them as it compares torchrun's ranks.

What the script sees is what torch gives it: ``join=True`` returns ``None`` once
every process ended; ``join=False`` returns a context whose ``join()`` says
whether they all did. A process that fails ends the others (as torch does) and
stops the parent's run there (its crash is reported by the process itself,
with its line). ``fn`` and ``args`` must pickle, as they must for torch.
"""

from __future__ import annotations

import contextlib
import importlib
import multiprocessing.spawn
import os
import pickle
import signal
import subprocess
import sys
import time
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any

import torch.multiprocessing

from torchwise.run.session import Session, StopRun
from torchwise.run.sites import is_user_file, user_site

#: seconds the other processes get to write their results once one has failed
GRACE_SECONDS = 10.0
#: seconds between looks at the processes while joining them
POLL_SECONDS = 0.05


class SpawnedProcesses:
    """What ``spawn(..., join=False)`` returns: the processes of one call."""

    def __init__(self, processes: list[subprocess.Popen[bytes]]) -> None:
        self.processes = processes

    def pids(self) -> list[int]:
        return [process.pid for process in self.processes]

    def join(self, timeout: float | None = None) -> bool:
        """Whether every process has ended (waits up to ``timeout`` seconds).

        A process that ended with a failing status ends the others, which
        write their results, and stops the run (StopRun) as torch's
        ``ProcessRaisedException`` would stop the script.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            failed = self._wait(deadline)
        except BaseException:  # the parent's time limit or an interrupt: end them too
            self._end_all()
            raise
        if failed is None:
            return all(process.poll() is not None for process in self.processes)
        self._end_all()
        index, status = failed
        raise StopRun(f"spawned process {index} ended with status {status}")

    def _wait(self, deadline: float | None) -> tuple[int, int] | None:
        """Until every process ended, one failed or ``deadline``; the failed one."""
        while True:
            failed = self._failed()
            if failed is not None or all(p.poll() is not None for p in self.processes):
                return failed
            if deadline is not None and time.monotonic() >= deadline:
                return None
            time.sleep(POLL_SECONDS)

    def _failed(self) -> tuple[int, int] | None:
        for index, process in enumerate(self.processes):
            status = process.poll()
            if status not in (None, 0):
                return index, status
        return None

    def _end_all(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    process.send_signal(signal.SIGTERM)
        for process in self.processes:
            try:
                process.wait(timeout=GRACE_SECONDS)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


class SpawnMonitor:
    """Replaces ``torch.multiprocessing.spawn`` and ``start_processes``.

    In a rank of a ``--nproc`` run, spawning ranks of its own would start
    ``nproc * nprocs`` processes that fight over one rendezvous: the call raises
    a clear error (reported at the script's line) instead.
    """

    def __init__(self, session: Session) -> None:
        self.session = session
        self.calls = 0

    def install(self) -> None:
        module = importlib.import_module("torch.multiprocessing.spawn")
        patches = self.session.patches
        for owner in (torch.multiprocessing, module):
            patches.setattr(owner, "spawn", self._spawn)
            patches.setattr(owner, "start_processes", self._spawn)
        patches.setattr(BaseProcess, "start", self._process_start(BaseProcess.start))

    def _process_start(self, original: Any) -> Any:
        """``Process.start`` that says when the script itself starts a process (the
        pytorch.org tutorial's ranks): what it runs is not followed, so the report
        must not read as if it were (DataLoader workers, started by torch, are not
        the script's)."""
        session = self.session

        def start(process: BaseProcess) -> None:
            if is_user_file(sys._getframe(1).f_code.co_filename):
                session.note(
                    "the script started a process with multiprocessing.Process: torchwise "
                    "run follows ranks started by torch.multiprocessing.spawn or by --nproc "
                    "(torchrun), so what that process ran was not checked"
                )
            original(process)

        return start

    def _spawn(
        self,
        fn: Any,
        args: tuple[Any, ...] = (),
        nprocs: int = 1,
        join: bool = True,
        daemon: bool = False,
        start_method: str = "spawn",
    ) -> SpawnedProcesses | None:
        if self.session.world > 1:
            raise RuntimeError(
                "torchwise run: a rank cannot start ranks of its own with "
                "torch.multiprocessing.spawn; run a script that spawns its ranks "
                "without --nproc (each spawned process is then checked as a rank)"
            )
        group = self.start(fn, tuple(args), int(nprocs))
        if not join:
            return group
        while not group.join():
            pass
        return None

    def start(self, fn: Any, args: tuple[Any, ...], nprocs: int) -> SpawnedProcesses:
        """Start ``nprocs`` processes that each run ``fn(i, *args)`` under the checks."""
        self.calls += 1
        directory = Path(self.session.workdir).parent / f"spawn{self.calls}"
        directory.mkdir(parents=True, exist_ok=True)
        preparation = multiprocessing.spawn.get_preparation_data("SpawnProcess")
        # multiprocessing pickles its authkey only for its own children
        preparation["authkey"] = bytes(preparation["authkey"])
        seeded = self.session.seeded_at
        site = user_site()
        spec = {
            "preparation": preparation,
            "parent_seed": seeded.to_json() if seeded is not None else None,
            "spawn_site": site.to_json() if site is not None else None,
            "payload": pickle.dumps((fn, args)),  # pickles fn as torch's spawn would
            "options": self.session.options.to_json(),
            "world": nprocs,
            "call": self.calls,
        }
        path = directory / "spec.pickle"
        path.write_bytes(pickle.dumps(spec))
        options = self.session.options
        self.session.note(
            f"torch.multiprocessing.spawn started {nprocs} process(es); each ran under the checks"
        )
        if nprocs == 1 and options.as_cuda and not options.gpus:
            self.session.note(
                "mp.spawn started one process: the simulated machine has one GPU; "
                "--gpus N simulates N (for scripts that spawn one process per GPU)"
            )
        command = [sys.executable, "-m", "torchwise.run.spawned", str(path)]
        processes = [
            subprocess.Popen([*command, str(index)], env=dict(os.environ))
            for index in range(nprocs)
        ]
        return SpawnedProcesses(processes)
