"""The audit runs the program: the project's training command under ``torchwise run``.

Reading finds what a pattern shows; running shows what the program does. The
audit takes the first training command the project gives (its README, its
Makefile, its scripts), turns the launcher into ``torchwise run``'s options
(``torchrun --nproc_per_node=N`` becomes ``--nproc``, capped at 2 ranks;
``accelerate launch`` and ``python -m torch.distributed.launch`` likewise),
and runs the script for a bounded number of steps and seconds, with the
stand-ins for data, weights and GPUs, each said in a note. A command that is a
shell script or another program is not run, and the report says why.

The script runs in a copy of the project (without version control,
environments and files over 64 MiB), so what it writes (checkpoints, logs)
never lands in the project. It executes the project's own code, as building its
models does: ``--no-run`` skips it, ``--no-import`` skips every execution.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from torchwise.errors import TorchwiseError
from torchwise.findings import Finding
from torchwise.project.schema import FindingRow, ProjectCommand, ProjectKnowledge, RunSummary

#: The budget of an audit's run: one short epoch, on at most two ranks.
RUN_STEPS = 3
RUN_EPOCHS = 1
MAX_RANKS = 2
_ENV_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_PYTHON = re.compile(r"^(?:.*/)?python(?:\d+(?:\.\d+)?)?$")
#: Files larger than this are not copied for the run (datasets, big checkpoints).
COPY_FILE_LIMIT = 64 * 2**20
SKIPPED_DIRS = frozenset(
    {".git", ".hg", ".svn", "__pycache__", ".venv", "venv", "env", ".tox", ".nox",
     "node_modules", ".mypy_cache", ".pytest_cache", ".ruff_cache", ".torchwise_cache"}
)  # fmt: skip
LAUNCHER_MODULES = (["torch.distributed.run"], ["torch.distributed.launch"])
_NPROC = ("--nproc_per_node", "--nproc-per-node", "--num_processes", "--num-processes")


@dataclass(frozen=True)
class Launch:
    """What ``torchwise run`` needs from a command line."""

    script: str | None
    module: str | None
    args: tuple[str, ...]
    nproc: int
    env: dict[str, str]


class NotRunnable(Exception):
    """The command is not a Python training script this audit can run; the message says why."""


def training_command(knowledge: ProjectKnowledge) -> ProjectCommand | None:
    """The first command the project gives for training, or a training script with no arguments."""
    for command in knowledge.commands:
        if command.purpose == "train":
            return command
    scripts = knowledge.layout.training_scripts
    if scripts:
        return ProjectCommand(
            purpose="train",
            command=f"python {scripts[0]}",
            source=f"{scripts[0]} (a training script; the project gives no command)",
        )
    return None


def parse_launch(command: str) -> Launch:
    """The script, arguments and ranks of a ``python``/``torchrun``/``accelerate`` command line."""
    try:
        words = shlex.split(command, comments=True)
    except ValueError as error:
        raise NotRunnable(f"the command does not parse as a shell line ({error})") from error
    env: dict[str, str] = {}
    while words and _ENV_ASSIGNMENT.match(words[0]):
        name, value = words.pop(0).split("=", 1)
        env[name] = value
    if not words:
        raise NotRunnable("the command is empty")
    program = words.pop(0)
    nproc = 1
    launcher_module = words[:1] == ["-m"] and words[1:2] in LAUNCHER_MODULES
    if program in ("torchrun", "accelerate") or (_PYTHON.match(program) and launcher_module):
        if program == "accelerate":
            if not words or words[0] != "launch":
                raise NotRunnable(f"'accelerate {' '.join(words[:1])}' is not a launch")
            words = words[1:]
        elif program != "torchrun":
            words = words[2:]
        nproc, words = _launcher_options(words)
    elif _PYTHON.match(program):
        while words and words[0].startswith("-") and words[0] != "-m":
            words.pop(0)  # interpreter flags: -u, -O, -W...
    else:
        words.insert(0, program)  # `./train.py`, `train.py`: the script itself
    if not words:
        raise NotRunnable("the command names no script")
    if words[0] == "-m":
        if len(words) < 2:
            raise NotRunnable("'-m' names no module")
        return Launch(None, words[1], tuple(words[2:]), nproc, env)
    script = words[0]
    if not script.endswith(".py"):
        raise NotRunnable(f"'{script}' is not a Python script (a shell script or a program)")
    return Launch(script, None, tuple(words[1:]), nproc, env)


def _launcher_options(words: list[str]) -> tuple[int, list[str]]:
    """Skip a launcher's own options (up to the script or ``-m``); the ranks per node."""
    nproc = 1
    index = 0
    while index < len(words):
        word = words[index]
        if word == "-m" or not word.startswith("-"):
            break
        name, _, value = word.partition("=")
        takes_value = not value and index + 1 < len(words) and not words[index + 1].startswith("-")
        if takes_value and name not in ("--standalone", "--use_env", "--use-env", "--multi_gpu"):
            value = words[index + 1]
            index += 1
        if name in _NPROC and value.isdigit():
            nproc = int(value)
        index += 1
    return nproc, words[index:]


def run_training(root: Path, knowledge: ProjectKnowledge, timeout: float) -> RunSummary | None:
    """Run the project's training command for a few steps; None when it gives none."""
    command = training_command(knowledge)
    if command is None:
        return None
    summary = RunSummary(command=command.command, source=command.source, cwd=command.cwd)
    started = time.perf_counter()
    try:
        launch = parse_launch(command.command)
    except NotRunnable as reason:
        summary.error = f"not run: {reason}"
        return summary
    summary.error = _run(root, command, launch, timeout, summary)
    summary.seconds = round(time.perf_counter() - started, 2)
    return summary


def _run(
    root: Path, command: ProjectCommand, launch: Launch, timeout: float, summary: RunSummary
) -> str | None:
    if launch.script is not None and not (root / command.cwd / launch.script).is_file():
        return f"not run: {launch.script} is not in {command.cwd or '.'}"
    with tempfile.TemporaryDirectory(prefix="torchwise-audit-run-") as scratch:
        copy = Path(scratch) / root.resolve().name
        left_out = copy_project(root, copy)
        if left_out:
            shown = ", ".join(left_out[:3]) + (" ..." if len(left_out) > 3 else "")
            summary.notes.append(
                f"ran in a copy of the project; {len(left_out)} file(s) over "
                f"{COPY_FILE_LIMIT // 2**20} MiB were left out of it: {shown}"
            )
        else:
            summary.notes.append("ran in a copy of the project: nothing in it was written")
        return _run_in(copy, command, launch, timeout, summary)


def copy_project(root: Path, destination: Path) -> list[str]:
    """Copy the project for the run to write into (its checkpoints, logs, caches), without
    version control, environments, caches and files over :data:`COPY_FILE_LIMIT`, which
    are listed (relative paths) in the result. Links are copied as links' targets' content
    only when small: a run never writes through a link into the project."""
    left_out: list[str] = []

    def ignore(directory: str, names: list[str]) -> set[str]:
        skipped = {name for name in names if name in SKIPPED_DIRS}
        for name in names:
            path = Path(directory) / name
            if name in skipped or not path.is_file():
                continue
            try:
                size = path.stat().st_size
            except OSError:
                skipped.add(name)
                continue
            if size > COPY_FILE_LIMIT:
                skipped.add(name)
                left_out.append(path.relative_to(root).as_posix())
        return skipped

    shutil.copytree(root, destination, symlinks=False, ignore=ignore, dirs_exist_ok=True)
    return left_out


def _run_in(
    root: Path, command: ProjectCommand, launch: Launch, timeout: float, summary: RunSummary
) -> str | None:
    from torchwise.run import RunOptions, check_target, run_script, simulates_gpu_by_default

    cwd = (root / command.cwd).resolve()
    script = str(cwd / launch.script) if launch.script is not None else None
    with _working_directory(cwd):  # a module is found from where the command runs
        try:
            target = check_target(script, launch.module)
        except TorchwiseError as error:
            return f"not run: {error}"
        as_cuda = simulates_gpu_by_default(target)
    if as_cuda:
        summary.notes.append(
            "ran as on a GPU (simulated): this machine has none and the script uses CUDA"
        )
    options = RunOptions(
        steps=RUN_STEPS,
        epochs=RUN_EPOCHS,
        nproc=min(launch.nproc, MAX_RANKS),
        as_cuda=as_cuda,
        timeout=timeout,
        script_output="capture",  # kept out of the audit's own output
        extra_env=launch.env,
    )
    try:
        report = run_script(
            launch.script, launch.args, module=launch.module, options=options, cwd=cwd
        )
    except TorchwiseError as error:
        return f"could not run: {error}"
    summary.ran = report.describe_run().replace(f"{root}{os.sep}", "")  # the copy's path
    summary.exit_status = int(report.exit_code)
    notes = report.summary()["notes"]
    summary.notes += [str(note) for note in notes] if isinstance(notes, list) else []
    summary.findings = [_row(finding, root) for finding in report.findings]
    return None


@contextlib.contextmanager
def _working_directory(directory: Path) -> Iterator[None]:
    before = os.getcwd()
    os.chdir(directory)
    try:
        yield
    finally:
        os.chdir(before)


def _row(finding: Finding, root: Path) -> FindingRow:
    from torchwise.run import get_check

    check = get_check(finding.code)
    path = finding.path
    with contextlib.suppress(ValueError, OSError):
        path = Path(path).resolve().relative_to(root.resolve()).as_posix()
    return FindingRow(
        code=finding.code,
        rule=check.name if check else finding.code,
        family=check.family if check else "run",
        severity=finding.severity.value,
        path=path,
        line=finding.line,
        column=finding.column,
        message=finding.message,
    )
