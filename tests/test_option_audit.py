"""Every option of every command, given each bad value its type admits (issue 26).

The cases are derived from the click command tree: every parameter of every command
gets the bad values its type admits (a bogus choice, a number out of range, malformed
or not finite, a missing path, a directory for a file, an unreadable file, an output
whose parent is a file, ...), plus the bad values its meaning admits (a malformed
input spec, an unknown check id, a reversed range), from :data:`STRING_BAD`. A new
command or option without an entry fails :func:`test_every_parameter_is_audited`.

Each case must end in one ``error:`` line (plus ``hint:`` lines) and exit 2, never a
traceback or an internal error, and before any work: the library's expensive entry
points (measuring a model, running doctor's checks, tune's search, generating tests,
walking a project, serving MCP) are replaced by tripwires that fail the case if a bad
value gets that far. The budget is that set of steps, not a clock.
"""

from __future__ import annotations

import dataclasses
import importlib
import math
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner, Result

from torchwise.cli import COMMANDS, app


class ReachedWork(BaseException):
    """A bad value got past validation into the work (a BaseException: nothing catches it)."""


#: The library's expensive entry points: no bad value may reach one.
TRIPWIRES = {
    "torchwise.model.summary.summarize": "measuring the model",
    "torchwise.model.scaling.scaling": "measuring its scaling",
    "torchwise.doc.run.document": "measuring the docstrings",
    "torchwise.doctor.api.Context": "running doctor's checks",
    "torchwise.testgen.generate.measure": "measuring the model for its tests",
    "torchwise.tune.api.Search": "tune's search",
    "torchwise.tune.api.scan_loader": "timing the DataLoader",
    "torchwise.review.review_paths": "reviewing the files",
    "torchwise.review.review_text": "reviewing stdin",
    "torchwise.project.audit.scan_project": "walking the project",
    "torchwise.project.gather_knowledge": "reading the project",
    "torchwise.agents.install.install": "writing the agent files",
    "mcp.server.MCPServer.run": "serving MCP",
    "torchwise.run.run_script": "running the script",
    "torchwise.server.build_server": "serving the editor",
}

NET = """\
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self, hidden=4):
        super().__init__()
        self.fc = nn.Linear(hidden, 2)

    def forward(self, x):
        return self.fc(x)


def make_inputs():
    return torch.randn(2, 4)
"""


@dataclasses.dataclass(frozen=True)
class Base:
    """A valid invocation of a command: it reaches a tripwire or succeeds."""

    positional: tuple[str, ...] = ()
    options: tuple[str, ...] = ()


_MODEL = Base(("net.py:Net",), ("--input", "f32[2,4]"))
BASE: dict[str, Base] = {
    "review": Base(("train.py",), ("--no-cache",)),
    "rules": Base(),
    "inspect": _MODEL,
    "doc": _MODEL,
    "doctor": _MODEL,
    "ckpt inspect": Base(("state.pt",)),
    "ckpt scan": Base(("state.pt",)),
    "ckpt convert": Base(("state.pt",), ("-o", "out.safetensors")),
    "tests": Base(("net.py:Net",), ("--input", "f32[2,4]", "-o", "tests/test_net.py")),
    "tune": Base(("net.py:Net",), ("--input", "f32[8,4]")),
    "project": Base((".",)),
    "mcp": Base((), ("--root", ".")),
    "agents install": Base((), ("--root", ".")),
    "run": Base(("train.py",)),
    "server": Base(),
}

#: Options that stand in for another of the base invocation: their cases leave it out
#: (``--inputs-from`` replaces ``--input``; both together are a conflict of their own).
STANDS_FOR = {"--inputs-from": "--input"}

#: What a path parameter is for, which decides the bad values it admits.
PATH_ROLES: dict[str, str] = {
    "review PATHS": "inputs",
    "review --config": "input-file",
    "review --stdin-filename": "stdin-name",
    "project PATH": "input-dir",
    "mcp --root": "input-dir",
    "agents install --root": "input-dir",
    "ckpt inspect PATH": "input-file",
    "ckpt scan PATHS": "inputs",
    "ckpt convert PATH": "input-file",
    "run SCRIPT": "input-script",
    "tune --train-script": "input-script",
    "ckpt convert --output": "output-file",
    "doc --markdown": "output-file",
    "tests --output": "output-file",
    "--output": "output-file",  # every report's -o
    "--config": "config-start",  # the model commands' --config
}

_UNKNOWN_RULE = [("an unknown rule", ["XX999"])]
_MODEL_TARGET = [
    ("a missing file", ["nope.py:Net"]),
    ("a missing class", ["net.py:Nope"]),
    ("a malformed target", ["net.py:"]),
]
_LOSS = [("an unknown loss", ["bogus"])]
_CHECK_IDS = [("an unknown check", ["bogus"])]
_GLOBAL_NAME = [("not a global name", ["not a name"])]
_BEYOND_RANK = [("a dim beyond the input's rank", ["5"])]
_BUDGET = [("a negative limit", ["-1"])]

#: Bad values a parameter's meaning admits, beyond what its type gives: "COMMAND --opt"
#: or "--opt" for every command that has it.
STRING_BAD: dict[str, list[tuple[str, list[str]]]] = {
    "review --select": _UNKNOWN_RULE,
    "review --extend-select": _UNKNOWN_RULE,
    "review --ignore": _UNKNOWN_RULE,
    "review --min-torch-version": [("a malformed version", ["two.x"])],
    "rules CODE": _UNKNOWN_RULE,
    "TARGET": _MODEL_TARGET,
    "--input": [("a malformed spec", ["f32[2,"]), ("an unknown dtype", ["x32[2,4]"])],
    "--init-kwargs": [("malformed JSON", ["{bad"]), ("not a JSON object", ["[1]"])],
    "--build": [("a malformed expression", ["Net("])],
    "--batch-dim": _BEYOND_RANK,
    "--inputs-from": [
        ("not FILE.py:FN", ["net.py"]),
        ("a missing file", ["nope.py:make_inputs"]),
        ("a missing function", ["net.py:nope"]),
        ("not a function", ["net.py:nn"]),
        ("a function that returns no inputs", ["net.py:Net"]),  # a model, not its inputs
    ],
    "inspect --scaling": [("a malformed size", ["x=abc"]), ("an unknown dim", ["nodim=2,4"])],
    "doctor --target-spec": [
        ("a malformed spec", ["f32["]),
        ("a batch other than the input's", ["i64[3]<2"]),
    ],
    "doctor --loss": _LOSS,
    "doctor --checks": _CHECK_IDS,
    "doctor --causal": _BEYOND_RANK,
    "tests --loss": _LOSS,
    "tests --checks": _CHECK_IDS,
    "tests --causal": _BEYOND_RANK,
    "tune --loss": _LOSS,
    "tune --optimizer": [
        ("an unknown optimizer", ["bogus"]),
        ("a malformed argument", ["adamw:lr=x"]),
    ],
    "tune --loader": [("a missing file", ["nope.py:make_loader"])],
    "tune --knobs": [("an unknown knob", ["bogus"])],
    "tune --skip": [("an unknown knob", ["bogus"])],
    "tune --compile-backend": [("an unknown backend", ["bogus"])],
    "tune --memory-budget": [("a malformed size", ["lots"]), ("a negative size", ["-1GB"])],
    "tune --lr-range": [("a reversed range", ["10", "1e-7"])],
    "project --doctor": _CHECK_IDS,
    "agents install --command": [("an unclosed quote", ["'torchwise"]), ("nothing", [""])],
    "ckpt scan --allow": _GLOBAL_NAME,
    "ckpt convert --allow": _GLOBAL_NAME,
    "--max-bytes": _BUDGET,
    "--max-opcodes": _BUDGET,
    "--max-memo": _BUDGET,
    "--max-depth": _BUDGET,
    "--max-seconds": _BUDGET,
    "run -m": [("a missing module", ["no_such_module_for_the_audit"])],
    "run SCRIPT_ARGS": [],  # any words: they are the script's own arguments
    "run --explain": [("an unknown check", ["TWR999"])],
}

#: Combinations of valid values that contradict each other.
_BOTH_INPUTS = ("--input and --inputs-from", ["--inputs-from", "net.py:make_inputs"])
CONFLICTS: dict[str, list[tuple[str, list[str]]]] = {
    "inspect": [_BOTH_INPUTS],
    "doctor": [_BOTH_INPUTS],
    "tune": [_BOTH_INPUTS],
    "review": [
        ("--stdin-filename without PATH -", ["--stdin-filename", "x.py"]),
        ("- with other paths", ["-", "--stdin-filename", "x.py"]),  # and train.py
        ("--quiet and --verbose", ["-q", "-v"]),
    ],
    "doc": [("--write and --check", ["--write", "--check"]), _BOTH_INPUTS],
    "tests": [("--check and --force", ["--check", "--force"]), _BOTH_INPUTS],
}

#: What an OSError's line says: "cannot read PATH: reason" / "cannot write PATH: reason".
OS_ERROR_START = {
    "an unreadable file": "error: cannot read ",
    "a parent that is a file": "error: cannot write ",
    "a place nothing can be written": "error: cannot write ",
}


def _leaf_commands() -> Iterator[tuple[str, click.Command]]:
    context = click.Context(app)
    for name in COMMANDS:
        command = app.get_command(context, name)
        assert command is not None
        if isinstance(command, click.Group):
            for sub, leaf in command.commands.items():
                yield f"{name} {sub}", leaf
        else:
            yield name, command


def _label(param: click.Parameter) -> str:
    if isinstance(param, click.Argument):
        return param.human_readable_name
    return max(param.opts, key=len)


def _lookup(table: dict[str, Any], name: str, label: str) -> Any:
    return table.get(f"{name} {label}", table.get(label))


def _type_bad(param: click.Parameter) -> list[tuple[str, list[str]]]:
    """The bad values a parameter's click type admits."""
    kind = param.type
    if isinstance(kind, click.Choice):
        return [("a bogus choice", ["bogus"])]
    if isinstance(kind, (click.IntRange, click.FloatRange)):
        cases = [("a malformed number", ["abc"])]
        low, high = kind.min, kind.max
        integer = isinstance(kind, click.IntRange)
        if low is not None:
            below = low if kind.min_open else low - (1 if integer else 0.5)
            cases.append(("a number below the range", [str(below)]))
        if high is not None:
            above = high if kind.max_open else high + (1 if integer else 0.5)
            cases.append(("a number above the range", [str(above)]))
        if not integer:
            cases.append(("not a number", ["nan"]))
        return cases
    if isinstance(kind, click.types.IntParamType):
        return [("a malformed number", ["abc"]), ("a fraction", ["1.5"])]
    if isinstance(kind, click.types.FloatParamType):
        return [("a malformed number", ["abc"]), ("not a number", ["nan"])]
    return []


_PATH_BAD: dict[str, list[tuple[str, list[str]]]] = {
    "inputs": [("a missing path", ["nope.py"]), ("an unreadable file", ["unreadable.py"])],
    "input-file": [
        ("a missing file", ["nope.pt"]),
        ("a directory for a file", ["somedir"]),
        ("an unreadable file", ["unreadable.pt"]),
    ],
    "input-script": [
        ("a missing file", ["nope.py"]),
        ("a directory for a file", ["somedir"]),
        ("an unreadable file", ["unreadable.py"]),
    ],
    "input-dir": [("a missing directory", ["nope"]), ("a file for a directory", ["net.py"])],
    "output-file": [
        ("a directory for a file", ["somedir"]),
        ("a parent that is a file", ["net.py/out.txt"]),
        ("a place nothing can be written", ["/proc/torchwise-audit/out.txt"]),
    ],
    "config-start": [("a missing path", ["nope"])],
    "stdin-name": [],  # its one bad use is a combination: see CONFLICTS
}


def bad_values(name: str, param: click.Parameter) -> list[tuple[str, list[str]]] | None:
    """Every bad value of ``param``; None when nothing says what they are (a gap)."""
    if isinstance(param, click.Option) and param.is_flag:
        return []  # a flag takes no value; its contradictions are in CONFLICTS
    label = _label(param)
    role = _lookup(PATH_ROLES, name, label)
    cases = _type_bad(param)
    if role is not None:
        cases += _PATH_BAD[role]
    extra = _lookup(STRING_BAD, name, label)
    if extra is not None:
        cases += extra
    if name in ("inspect", "doctor", "tune") and label == "--device":
        import torch

        if not torch.cuda.is_available():
            cases.append(("cuda on a machine without CUDA", ["cuda"]))
    if not cases and role is None and extra is None:
        return None
    return cases


@dataclasses.dataclass(frozen=True)
class Case:
    command: str
    argv: tuple[str, ...]
    id: str


def _without(options: tuple[str, ...], param: click.Parameter) -> list[str]:
    """``options`` without ``param``'s occurrences (and their values)."""
    kept: list[str] = []
    skip = 0
    for word in options:
        if skip:
            skip -= 1
            continue
        if isinstance(param, click.Option) and word in param.opts:
            skip = param.nargs
            continue
        kept.append(word)
    return kept


def _option(command: click.Command, flag: str) -> click.Parameter:
    return next(p for p in command.params if isinstance(p, click.Option) and flag in p.opts)


def _cases() -> list[Case]:
    cases = []
    for name, command in _leaf_commands():
        base = BASE[name]
        for param in command.params:
            for what, value in bad_values(name, param) or []:
                label = _label(param)
                if param.nargs > 1 and len(value) == 1:
                    value = value * param.nargs  # --lr-range abc abc
                if isinstance(param, click.Argument):
                    argv = [*value, *base.options]
                else:
                    flag = max(param.opts, key=len)
                    options = _without(base.options, param)
                    if flag in STANDS_FOR:
                        options = _without(tuple(options), _option(command, STANDS_FOR[flag]))
                    argv = [*base.positional, *options, flag, *value]
                cases.append(Case(name, tuple(argv), f"{name} {label}: {what}"))
        for what, words in CONFLICTS.get(name, []):
            argv = [*base.positional, *base.options, *words]
            cases.append(Case(name, tuple(argv), f"{name}: {what}"))
    return cases


CASES = _cases()


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    import torch

    monkeypatch.chdir(tmp_path)
    (tmp_path / "net.py").write_text(NET)
    (tmp_path / "train.py").write_text("import torch\nstate = torch.load('m.pt')\n")
    (tmp_path / "somedir").mkdir()
    torch.save({"fc.weight": torch.ones(2, 4)}, tmp_path / "state.pt")
    # A file no one can read, root included: reading /proc/self/mem at offset 0 fails (EIO).
    for name in ("unreadable.py", "unreadable.pt"):
        os.symlink("/proc/self/mem", tmp_path / name)
    # every module first: one imported while another's tripwire is set would keep that
    # tripwire for good in a `from ... import` (scaling.py's summarize did)
    for target in TRIPWIRES:
        _import_owner(target)
    for target, description in TRIPWIRES.items():
        module, _, attribute = target.rpartition(".")
        monkeypatch.setattr(f"{module}.{attribute}", _tripwire(description))
    return tmp_path


def _import_owner(dotted: str) -> None:
    """Import the longest module prefix of ``dotted`` (the rest are attributes)."""
    parts = dotted.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        try:
            importlib.import_module(".".join(parts[:cut]))
            return
        except ImportError:
            continue


def _tripwire(description: str) -> Any:
    def reached(*args: Any, **kwargs: Any) -> Any:
        raise ReachedWork(description)

    return reached


def invoke(command: str, argv: tuple[str, ...]) -> Result | ReachedWork:
    """The command's result, or the tripwire it reached (which CliRunner lets through)."""
    try:
        return CliRunner().invoke(app, [*command.split(), *argv])
    except ReachedWork as reached:
        return reached


def assert_rejected(result: Result | ReachedWork, case: str) -> None:
    """One error line (plus hints), exit 2, no internal error, no work done."""
    if isinstance(result, ReachedWork):
        pytest.fail(f"{case}: accepted, and reached {result} before any error")
    lines = result.stderr.splitlines()
    said = result.stderr.strip() or result.stdout.strip()
    assert result.exit_code == 2, f"{case}: exit {result.exit_code}: {said[:500]}"
    assert lines and lines[0].startswith("error: "), f"{case}: {said[:500]}"
    # after the one error line: hints, and an excerpt of the input with a caret under
    # the fault (indented), as a compiler shows it
    rest = [line for line in lines[1:] if not line.startswith("hint: ")]
    assert all(line.startswith("  ") for line in rest), f"{case}: {result.stderr}"
    assert "internal error" not in result.stderr and "Traceback" not in result.stderr


@pytest.mark.skipif(not Path("/proc/self/mem").exists(), reason="needs Linux's /proc")
@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_bad_input_is_one_error_line_before_any_work(case: Case, project: Path) -> None:
    result = invoke(case.command, case.argv)
    assert_rejected(result, case.id)
    start = OS_ERROR_START.get(case.id.rpartition(": ")[2])
    if start is not None:
        assert isinstance(result, Result) and result.stderr.startswith(start), result.stderr


@pytest.mark.parametrize("command", sorted(BASE))
def test_the_valid_base_invocation_gets_to_work(command: str, project: Path) -> None:
    """The control: without a bad value each base invocation passes validation (so a
    case fails only for its bad value)."""
    base = BASE[command]
    result = invoke(command, (*base.positional, *base.options))
    if not isinstance(result, ReachedWork):
        assert result.exit_code in (0, 1), (result.exit_code, result.output)


@pytest.mark.parametrize("command", ["inspect", "doc", "doctor", "tune"])
def test_inputs_from_in_place_of_input_gets_to_work(command: str, project: Path) -> None:
    """The control of the --inputs-from cases: a function that returns the inputs,
    given instead of --input, passes validation."""
    base, leaf = BASE[command], dict(_leaf_commands())[command]
    options = _without(base.options, _option(leaf, STANDS_FOR["--inputs-from"]))
    result = invoke(command, (*base.positional, *options, "--inputs-from", "net.py:make_inputs"))
    if not isinstance(result, ReachedWork):
        assert result.exit_code in (0, 1), (result.exit_code, result.output)


def test_every_parameter_is_audited() -> None:
    """A new command or option cannot escape: each needs a base invocation and bad values."""
    gaps = []
    for name, command in _leaf_commands():
        if name not in BASE:
            gaps.append(f"{name}: no valid base invocation in BASE")
        for param in command.params:
            if bad_values(name, param) is None:
                gaps.append(f"{name} {_label(param)}: no bad values (STRING_BAD or PATH_ROLES)")
    assert not gaps, "\n".join(gaps)


def test_nan_is_tried_on_every_float() -> None:
    floats = [c for c in CASES if c.argv[-1:] == ("nan",)]
    assert floats and all(not math.isfinite(float(c.argv[-1])) for c in floats)
