"""The process that runs the user's script: ``python -m torchwise.run.child SPEC.json``.

It does what ``python SCRIPT.py ARGS`` (or ``python -m MODULE ARGS``) would:
``sys.argv`` is the script and its arguments, ``sys.path[0]`` the script's
directory (the working directory for ``-m``), the script runs as ``__main__``
in the caller's working directory. Before that, the monitors are installed;
after it (finished, stopped by the budget, crashed or exited), they judge what
they saw and the result is written as JSON for the parent to read. Under
``torch.distributed.run`` each rank is one such process and writes its own
result (``rank<N>.json``).

:func:`execute` is the same run inside the current process, for tests and for
callers that already paid for importing torch; it restores ``sys.argv``,
``sys.path``, the working directory and the modules the script imported.
"""

from __future__ import annotations

import contextlib
import json
import os
import runpy
import signal
import sys
import tempfile
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import Any

from torchwise.errors import ExitCode
from torchwise.findings import Severity, finding_to_dict
from torchwise.run.options import RunOptions, Target
from torchwise.run.report import without_echoed_warnings
from torchwise.run.session import Session, StopRun
from torchwise.run.sites import Site, frame_site, is_user_file

#: torchwise's own files: their frames are left out of the script's traceback
_OWN = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def _rank() -> tuple[int, int]:
    try:
        return int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))
    except ValueError:
        return 0, 1


def execute(
    target: Target,
    options: RunOptions,
    *,
    workdir: str | None = None,
    rank: int = 0,
    world: int = 1,
) -> dict[str, object]:
    """Run ``target`` under the monitors in this process; the result as a JSON-able dict."""
    if workdir is None:
        with tempfile.TemporaryDirectory(prefix="torchwise-run-") as scratch:
            return execute(target, options, workdir=scratch, rank=rank, world=world)
    from torchwise.run.instrument import Instrumentation

    session = Session(options, workdir=os.path.join(workdir, f"rank{rank}"), rank=rank, world=world)
    instrumentation = Instrumentation(session)
    saved = (list(sys.argv), list(sys.path), os.getcwd(), set(sys.modules))
    exit_status: int | None = 0
    with _torch_state():
        try:
            instrumentation.install()
            exit_status = _run(target, session)
            with contextlib.suppress(StopRun):  # a judge's replay may meet the budget
                instrumentation.finish()
        finally:
            instrumentation.uninstall()
            _restore(*saved)
    return result_of(session, exit_status)


@contextlib.contextmanager
def _torch_state() -> Iterator[None]:
    """Torch's process-wide settings a script may change, restored afterwards."""
    import torch

    deterministic = torch.are_deterministic_algorithms_enabled()
    warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    cudnn = (torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark)
    dtype, threads, grad = (
        torch.get_default_dtype(),
        torch.get_num_threads(),
        torch.is_grad_enabled(),
    )
    anomaly = torch.is_anomaly_enabled()
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(deterministic, warn_only=warn_only)
        torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = cudnn
        torch.set_default_dtype(dtype)
        torch.set_num_threads(threads)
        torch.set_grad_enabled(grad)
        torch.autograd.set_detect_anomaly(anomaly)


def _restore(argv: list[str], path: list[str], cwd: str, modules: set[str]) -> None:
    sys.argv[:] = argv
    sys.path[:] = path
    os.chdir(cwd)
    for name in set(sys.modules) - modules:
        module = sys.modules.get(name)
        filename = getattr(module, "__file__", None)
        if filename and is_user_file(filename):
            del sys.modules[name]


def _run(target: Target, session: Session) -> int | None:
    """Run the script; its exit status (None when the budget stopped it)."""
    if target.module is not None:
        sys.argv[:] = [target.module, *target.args]
        sys.path[0:1] = [os.getcwd()]
    else:
        assert target.script is not None
        script = os.path.abspath(target.script)
        sys.argv[:] = [target.script, *target.args]
        sys.path[0:1] = [os.path.dirname(script)]

    def body() -> None:
        if target.module is not None:
            runpy.run_module(target.module, run_name="__main__", alter_sys=True)
        else:
            runpy.run_path(os.path.abspath(target.script or ""), run_name="__main__")

    return run_guarded(session, body)


def run_guarded(session: Session, body: Callable[[], object]) -> int | None:
    """Call ``body`` (the user's code) as Python would run a script: its exit status
    (None when the budget stopped it); a crash or a failing exit is a finding."""
    import torch

    anomaly = torch.autograd.set_detect_anomaly(True) if session.options.detect_anomaly else None
    try:
        body()
    except StopRun as stop:
        session.stopped_by = session.stopped_by or stop.reason
        return None
    except SystemExit as exit_:
        status = _status(exit_.code)
        if status:
            _report_exit(session, exit_, status)
        return status
    except KeyboardInterrupt:
        session.stopped_by = "interrupted"
        return int(ExitCode.INTERRUPTED)
    except BaseException as exc:  # the user's code raised: that is a finding
        if _read_past_the_budget(session, exc):
            session.stopped_by = session.stopped_by or "the training pass's steps"
            return None
        _report_crash(session, exc)
        return 1
    finally:
        if anomaly is not None:
            torch.autograd.set_detect_anomaly(False)
    return 0


def _read_past_the_budget(session: Session, exc: BaseException) -> bool:
    """Whether ``exc`` is the script reading on from a loader the budget ended.

    A script that draws batches with ``next()`` from an endless loader (an
    iterable dataset, or a generator over one: ``X, Y = next(batches)``) expects
    it never to end, so the end of a pass by the budget reaches it as
    ``StopIteration`` (or, through a generator, PEP 479's ``RuntimeError``). That
    is the budget stopping the run, not a crash of the script's.
    """
    stop = exc if isinstance(exc, StopIteration) else None
    if isinstance(exc, RuntimeError) and isinstance(exc.__cause__, StopIteration):
        stop = exc.__cause__
    last = session.last_ended
    return stop is not None and last is not None and last.ended_by == "budget"


def _status(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def _crash_site(exc: BaseException) -> Site | None:
    frame: FrameType | None = None
    tb = exc.__traceback__
    while tb is not None:
        if is_user_file(tb.tb_frame.f_code.co_filename):
            frame = tb.tb_frame
            line = tb.tb_lineno
        tb = tb.tb_next
    if frame is None:
        return None
    site = frame_site(frame)
    return Site(site.path, line, function=site.function)


def _print_user_traceback(exc: BaseException) -> None:
    """The traceback Python would print, from the script's first frame on."""
    frames = traceback.extract_tb(exc.__traceback__)
    first = next((i for i, f in enumerate(frames) if is_user_file(f.filename)), 0)
    shown = [f for f in frames[first:] if not f.filename.startswith(_OWN)]
    lines = ["Traceback (most recent call last):\n", *traceback.format_list(shown)]
    lines += traceback.format_exception_only(type(exc), exc)
    sys.stderr.write("".join(lines))
    sys.stderr.flush()


def _report_crash(session: Session, exc: BaseException) -> None:
    from torchwise.errors import exception_line
    from torchwise.run.needs import needs_of

    _print_user_traceback(exc)
    site = _crash_site(exc)
    session.crash = (site, exception_line(exc))
    message = f"the script raised {exception_line(exc)}"
    saved_at = session.facts.get("in_place_saved_at")
    if isinstance(saved_at, dict):  # found under anomaly detection (see api._in_place_rerun)
        made = Site.from_json(saved_at)
        message = (
            f"a tensor that autograd saved at {made.label} is changed in place afterwards, "
            f"so the backward at line {site.line if site else '?'} raises: "
            f"{exception_line(exc)}"
        )
        site = made
    explained = "(torchwise:" in str(exc)  # a stand-in that could not serve said why already
    needs = None
    if session.steps == 0 and not explained:
        needs = needs_of(exc, simulated_gpu=session.options.as_cuda)
    if needs is not None:  # it never trained: say what it lacked, and what would serve
        message = f"{message.rstrip('.')}; {needs}"
    severity = None
    guessed = [n for n in session.notes if n.startswith("stand-in data") and _guessed(n)]
    if session.steps == 0 and (explained or guessed):
        # Stopped before training on data whose shape torchwise guessed: the crash may be
        # the stand-in's, not the script's, and it is not reported as the script's bug.
        severity = Severity.INFO
        if not explained:
            message = (
                f"the run stopped before its first step on stand-in data whose items or "
                f"columns were guessed, so this may be the stand-in's limit, not a bug: "
                f"{exception_line(exc)} (run with the real data, or a small sample of it)"
            )
    session.report(
        "TWR001",
        site,
        message,
        severity=severity,
        evidence={"step": session.steps, "exception": type(exc).__name__},
    )


def _guessed(note: str) -> bool:
    """A stand-in that guessed what the data items hold (a Dataset's items shaped from the
    model, a dataset's columns unknown), by the words its note uses. An image folder's
    unknown class count is not such a guess: its items are the script's own transforms of
    real-sized images."""
    from torchwise.run.needs import GUESSED_COLUMNS, GUESSED_ITEMS

    return GUESSED_ITEMS in note or GUESSED_COLUMNS in note


def _report_exit(session: Session, exit_: SystemExit, status: int) -> None:
    site = _crash_site(exit_)
    session.report(
        "TWR001",
        site,
        f"the script exited with status {status}",
        evidence={"step": session.steps},
    )


def result_of(session: Session, exit_status: int | None) -> dict[str, object]:
    """What the parent reads of one process's run (``rank<N>.json``)."""
    findings = _merged(session)
    passes = session.passes
    times = sorted(session.step_times)
    return {
        "rank": session.rank,
        "world": session.world,
        "exit_status": exit_status,
        "stopped_by": session.stopped_by,
        "steps": session.steps,
        "backwards": session.backwards,
        "training_passes": sum(1 for p in passes if p.training),
        "evaluation_passes": sum(
            1 for p in passes if not p.backwards and p.batches and not p.details.get("extra")
        ),
        "median_step_seconds": times[len(times) // 2] if times else None,
        "notes": session.notes,
        "facts": session.facts,
        "findings": [finding_to_dict(f) for f in findings],
    }


def _merged(session: Session) -> list[Any]:
    """The findings; a crash at a line another finding explains joins that finding."""
    findings = list(session.findings.values())
    crash = next((f for f in findings if f.code == "TWR001"), None)
    if crash is not None:
        explained = [
            f for f in findings
            if f is not crash and f.path == crash.path and f.line == crash.line
            and f.severity is Severity.ERROR
        ]  # fmt: skip
        if explained:
            findings.remove(crash)
            first = explained[0]
            first.data["then"] = crash.message.removeprefix("the script ")
    return sorted(without_echoed_warnings(findings), key=lambda f: f.sort_key())


def stop_on_signal(reason: str = "the time limit") -> None:
    """SIGTERM (the parent's time limit) ends the script as the budget would."""

    def handler(signum: int, frame: FrameType | None) -> None:
        raise StopRun(reason)

    signal.signal(signal.SIGTERM, handler)


def release_process_group() -> None:
    """Destroy the process group a stopped script left behind: gloo's threads, still
    running when the interpreter exits, abort the process (status -6)."""
    import torch.distributed as dist

    with contextlib.suppress(Exception):
        if dist.is_available() and dist.is_initialized():
            dist.destroy_process_group()


def main(argv: list[str] | None = None) -> int:
    arguments = sys.argv[1:] if argv is None else argv
    spec = json.loads(Path(arguments[0]).read_text(encoding="utf-8"))
    target = Target.from_json(spec["target"])
    options = RunOptions.from_json(spec["options"])
    out = Path(spec["out"])
    rank, world = _rank()
    stop_on_signal()
    result = execute(target, options, workdir=str(out), rank=rank, world=world)
    (out / f"rank{rank}.json").write_text(json.dumps(result), encoding="utf-8")
    release_process_group()
    status = result["exit_status"]
    return status if isinstance(status, int) else 0


if __name__ == "__main__":
    sys.exit(main())
