"""``run_script``: run a user's script under the monitors, in a child process, and report.

The script runs in its own process (``python -m torchwise.run.child``), started
in the caller's working directory with the caller's environment, so it sees
exactly what ``python SCRIPT.py ARGS`` would. A child process also means that a
script that calls ``os._exit``, forks DataLoader workers or hangs cannot take the
caller with it: the time limit sends SIGTERM (which the child turns into the
end of the budget, so its findings are still written), then SIGKILL to the
whole process group. With ``nproc > 1`` the child runs under
``torch.distributed.run`` (one process per rank) and the cross-rank checks
compare what each rank recorded.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from torchwise.errors import TorchwiseError
from torchwise.findings import Finding, Severity
from torchwise.run.needs import IN_PLACE_ERROR
from torchwise.run.options import RunOptions, Target
from torchwise.run.report import RunReport, merge

#: seconds between SIGTERM and SIGKILL at the time limit
GRACE_SECONDS = 10.0
_SRC = str(Path(__file__).resolve().parents[2])


def check_target(script: str | os.PathLike[str] | None, module: str | None) -> Target:
    """The target, or a clear error for a path that is not a Python script."""
    if (script is None) == (module is None):
        raise TorchwiseError("give a script path or -m MODULE (one of them)")
    if module is not None:
        if not all(part.isidentifier() for part in module.split(".")):
            raise TorchwiseError(f"{module!r} is not a module name", hint="e.g. -m package.train")
        if not _findable(module.partition(".")[0]):
            raise TorchwiseError(
                f"no module named {module.partition('.')[0]!r} here or on the Python path",
                hint="run from the directory that holds the package",
            )
        return Target(None, module, ())
    path = Path(str(script))
    if not path.exists():
        raise TorchwiseError(f"{path} does not exist")
    if path.is_dir():
        main = path / "__main__.py"
        if not main.is_file():
            raise TorchwiseError(f"{path} is a directory without __main__.py")
        path = main
    elif path.suffix not in (".py", ".pyw", ""):
        raise TorchwiseError(f"{path} is not a Python script", hint="torchwise run runs .py files")
    try:
        with open(path, "rb") as handle:
            handle.read(1)
    except OSError as exc:
        raise TorchwiseError(f"cannot read {path}: {exc.strerror or exc}") from None
    return Target(str(path), None, ())


def _findable(top: str) -> bool:
    """Whether ``python -m`` run here could import the top-level package ``top``
    (the working directory, then the path), without importing anything."""
    if Path(top).is_dir() or Path(f"{top}.py").is_file():
        return True
    return importlib.util.find_spec(top) is not None


def run_script(
    script: str | os.PathLike[str] | None = None,
    args: Sequence[str] = (),
    *,
    module: str | None = None,
    options: RunOptions | None = None,
    python: str | None = None,
    cwd: str | os.PathLike[str] | None = None,
) -> RunReport:
    """Run ``script`` (or ``-m module``) with ``args`` under the checks; the findings.

    The script runs in ``cwd`` (default: this process's working directory).

    Example::

        report = run_script("train.py", ["--epochs", "3"], options=RunOptions(steps=5))
        report.exit_code     # 0 clean, 1 a warning or an error
        report.findings      # torchwise.findings.Finding, with the user's file:line
    """
    options = options or RunOptions()
    if script is not None and cwd is not None and not Path(str(script)).is_absolute():
        script = Path(cwd) / str(script)
    target = check_target(script, module)
    target = Target(target.script, target.module, tuple(args))
    started = time.perf_counter()
    unparsable = _syntax_error(target)
    if unparsable is not None:
        # Python would stop before the first line: so does the run, at Python's place.
        return RunReport(
            target=str(target.script),
            args=tuple(args),
            options=options,
            findings=[unparsable],
            stopped_by="the script does not parse",
            wall_seconds=time.perf_counter() - started,
        )
    with tempfile.TemporaryDirectory(prefix="torchwise-run-") as out:
        spec = _write_spec(Path(out), target, options)
        output, stopped = _launch(spec, options, python or sys.executable, cwd)
        results = _results(Path(out))
        findings = merge(results)
        if options.nproc > 1:
            from torchwise.run.crossrank import judge

            findings = judge(
                findings, results, Path(out), options, world=options.nproc, timed_out=bool(stopped)
            )
        spawned = _spawned(Path(out), options, timed_out=bool(stopped))
        findings = _joined(findings, [f for group, _ in spawned for f in group])
        results += [rank for _, ranks in spawned for rank in ranks]
    if options.nproc == 1 and not options.detect_anomaly and _in_place_crash(findings):
        findings = _in_place_rerun(findings, target, options, python or sys.executable, cwd)
    if not results and not stopped:
        raise TorchwiseError(
            "the run ended without a result: the script's process died",
            hint="see the script's output above; TORCHWISE_DEBUG=1 keeps more detail",
        )
    label = f"-m {target.module}" if target.module else str(target.script)
    return RunReport(
        target=label,
        args=tuple(args),
        options=options,
        findings=findings,
        ranks=[{k: v for k, v in r.items() if k != "findings"} for r in results],
        stopped_by=stopped,
        output=output,
        wall_seconds=time.perf_counter() - started,
    )


#: Code that uses CUDA when it is there: `.cuda()`, `"cuda"`, `torch.cuda.*`.
_USES_CUDA = re.compile(rb"\.cuda\(|[\"']cuda(:\d+)?[\"']|torch\.cuda\.|\bcuda\b")
#: At most this many project files are read to tell whether a script uses CUDA.
_CUDA_SCAN_FILES = 400


def machine_has_cuda() -> bool:
    """Whether this machine has an NVIDIA GPU, asked without importing torch."""
    return shutil.which("nvidia-smi") is not None or Path("/proc/driver/nvidia/version").exists()


def uses_cuda(target: Target) -> bool:
    """Whether the script (or module) would use CUDA where it is available: its
    own code, or the project files it imports (followed from its directory,
    as Python would find them), mentions it. Other scripts beside it do not
    count."""
    entry: Path | None
    if target.script is not None:
        entry = Path(target.script).resolve()
        root = entry.parent
    else:
        assert target.module is not None
        root = Path.cwd()
        entry = _module_file(root, target.module)
    if entry is None:
        return False
    pending: list[Path] = [entry]
    seen: set[Path] = set()
    while pending and len(seen) < _CUDA_SCAN_FILES:
        path = pending.pop()
        if path in seen:
            continue
        seen.add(path)
        try:
            source = path.read_bytes()
        except OSError:
            continue
        if _USES_CUDA.search(source):
            return True
        pending.extend(_local_imports(source, path, root))
    return False


def _local_imports(source: bytes, path: Path, root: Path) -> list[Path]:
    """The project files a file imports (absolute imports from ``root``,
    relative ones from its package); libraries are left out."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    found = []
    for node in ast.walk(tree):
        names: list[str] = []
        base = root
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = path.parent
                for _ in range(node.level - 1):
                    base = base.parent
            stem = node.module or ""
            names = [f"{stem}.{alias.name}" if stem else alias.name for alias in node.names]
            if stem:
                names.append(stem)
        for name in names:
            found.extend(_existing(base, name))
    return found


def _existing(base: Path, dotted: str) -> list[Path]:
    parts = [part for part in dotted.split(".") if part]
    if not parts:
        return []
    candidate = base.joinpath(*parts)
    return [
        path for path in (candidate.with_suffix(".py"), candidate / "__init__.py") if path.is_file()
    ]


def _module_file(root: Path, module: str) -> Path | None:
    files = _existing(root, module)
    if not files:
        return None
    package_main = files[0].parent / "__main__.py"
    return package_main if files[0].name == "__init__.py" and package_main.is_file() else files[0]


def simulates_gpu_by_default(target: Target) -> bool:
    """Whether a run of ``target`` simulates a GPU unless told otherwise: this
    machine has none, and the script would use one where it is available (the
    device errors it would hit there are the first bugs an expert looks for)."""
    return not machine_has_cuda() and uses_cuda(target)


def _syntax_error(target: Target) -> Finding | None:
    """The script's syntax error, found by compiling it as Python would, before
    anything runs; None when it compiles. A module (``-m``) is looked for where
    ``python -m`` looks first, the working directory, without importing its
    packages (a module found elsewhere is Python's to report)."""
    if target.script is not None:
        path: Path | None = Path(target.script)
    else:
        path = _module_file(Path.cwd(), target.module or "")
    if path is None:
        return None
    try:
        source = path.read_bytes()
        compile(source, str(path), "exec", dont_inherit=True)
    except SyntaxError as error:
        line = error.lineno or 1
        column = error.offset or 1
        kind = type(error).__name__
        return Finding(
            code="TWR001",
            message=f"the script does not parse: {kind}: {error.msg}",
            path=str(path.resolve()),
            line=line,
            column=column,
            end_line=error.end_lineno or line,
            end_column=error.end_offset or column,
            severity=Severity.ERROR,
            data={"exception": kind, "step": "0"},
        )
    except (OSError, ValueError):
        return None  # unreadable or a null byte: Python's own error says it, at run time
    return None


def _results(directory: Path) -> list[dict[str, Any]]:
    return [
        json.loads(path.read_text(encoding="utf-8"))
        for path in sorted(directory.glob("rank*.json"))
    ]


def _spawned(
    out: Path, options: RunOptions, *, timed_out: bool
) -> list[tuple[list[Finding], list[dict[str, Any]]]]:
    """Per ``torch.multiprocessing.spawn`` call of the script: its processes' findings,
    compared across them as torchrun's ranks are, and their results."""
    from torchwise.run.crossrank import judge

    groups = []
    for directory in sorted(out.glob("spawn*"), key=lambda d: int(d.name[5:] or 0)):
        ranks = _results(directory)
        findings = merge(ranks)
        if len(ranks) > 1:
            world = max(int(r.get("world", 1)) for r in ranks)
            findings = judge(findings, ranks, directory, options, world=world, timed_out=timed_out)
        groups.append((findings, ranks))
    return groups


def _joined(first: list[Finding], second: list[Finding]) -> list[Finding]:
    """Both lists, one finding per code and place (the first list's, when both have it)."""
    taken = {(f.code, f.path, f.line) for f in first}
    joined = first + [f for f in second if (f.code, f.path, f.line) not in taken]
    return sorted(joined, key=lambda f: f.sort_key())


def _command(spec: Path, options: RunOptions, python: str) -> list[str]:
    child = ["-m", "torchwise.run.child", str(spec)]
    if options.nproc == 1:
        return [python, *child]
    return [
        python, "-m", "torch.distributed.run", "--standalone", "--nnodes=1",
        f"--nproc-per-node={options.nproc}", "--max-restarts=0", *child,
    ]  # fmt: skip


def _environment(options: RunOptions) -> dict[str, str]:
    env = dict(os.environ)
    paths = [_SRC, *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    env.setdefault("PYTHONUNBUFFERED", "1")
    if options.nproc > 1:
        env.setdefault("OMP_NUM_THREADS", "1")
    env.update(options.extra_env)
    return env


def _write_spec(out: Path, target: Target, options: RunOptions) -> Path:
    """The child's instructions: what to run, how, and where to write its results."""
    spec = out / "spec.json"
    spec.write_text(
        json.dumps({"target": target.to_json(), "options": options.to_json(), "out": str(out)}),
        encoding="utf-8",
    )
    return spec


def _in_place_crash(findings: list[Finding]) -> bool:
    return any(f.code == "TWR001" and IN_PLACE_ERROR in f.message for f in findings)


def _in_place_rerun(
    findings: list[Finding],
    target: Target,
    options: RunOptions,
    python: str,
    cwd: str | os.PathLike[str] | None,
) -> list[Finding]:
    """torch's in-place error names an operation, not a line: run the script once more
    under anomaly detection, which keeps each node's forward traceback, and report the
    crash at the user's line that made the tensor changed in place afterwards."""
    again = dataclasses.replace(
        options, detect_anomaly=True, script_output="capture", steps=1, epochs=1
    )
    with tempfile.TemporaryDirectory(prefix="torchwise-run-") as out:
        _launch(_write_spec(Path(out), target, again), again, python, cwd)
        located = [
            f for f in merge(_results(Path(out)))
            if f.code == "TWR001" and f.message.startswith("a tensor that autograd saved")
        ]  # fmt: skip
    if not located:
        return findings
    found = located[0]
    found.data["found by"] = "running the script again under torch.autograd.detect_anomaly"
    kept = [f for f in findings if not (f.code == "TWR001" and IN_PLACE_ERROR in f.message)]
    return sorted([*kept, found], key=lambda f: f.sort_key())


def _launch(
    spec: Path, options: RunOptions, python: str, cwd: str | os.PathLike[str] | None
) -> tuple[str, str]:
    """Run the child; (captured output, why it was stopped or "")."""
    streams: dict[str, Any] = {}
    if options.script_output == "capture":
        streams = {"stdout": subprocess.PIPE, "stderr": subprocess.STDOUT}
    elif options.script_output == "stderr":
        streams = {"stdout": sys.stderr.fileno() if _has_fileno(sys.stderr) else None}
    process = subprocess.Popen(
        _command(spec, options, python),
        env=_environment(options),
        cwd=cwd,
        start_new_session=True,
        text=True,
        **streams,
    )
    with _terminated_as_exception():
        return _wait(process, options)


@contextlib.contextmanager
def _terminated_as_exception() -> Iterator[None]:
    """SIGTERM and SIGHUP raise ``SystemExit`` while the child runs (in the main
    thread), so the child's process group, in a session of its own, is killed
    with this process instead of running on orphaned (``timeout 900 torchwise
    run ...`` sends SIGTERM, which by default ends Python without cleanup)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def terminate(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)

    saved = {signum: signal.signal(signum, terminate) for signum in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for signum, handler in saved.items():
            signal.signal(signum, handler)


def _wait(process: subprocess.Popen[str], options: RunOptions) -> tuple[str, str]:
    try:
        output, _ = process.communicate(timeout=options.timeout)
        return output or "", ""
    except subprocess.TimeoutExpired:
        _signal_group(process, signal.SIGTERM)
        try:
            output, _ = process.communicate(timeout=GRACE_SECONDS)
        except subprocess.TimeoutExpired:
            _signal_group(process, signal.SIGKILL)
            output, _ = process.communicate()
        return output or "", f"the time limit of {options.timeout:g} s"
    except BaseException:
        _signal_group(process, signal.SIGKILL)
        process.wait()
        raise


def _has_fileno(stream: Any) -> bool:
    try:
        stream.fileno()
    except (AttributeError, OSError, ValueError):
        return False
    return True


def _signal_group(process: subprocess.Popen[str], signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signum)
