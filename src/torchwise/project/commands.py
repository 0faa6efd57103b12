"""The commands a project documents, what each is for and does, and where to run it.

Found where people write them down: Makefile targets, ``[project.scripts]``, README
code blocks (fenced, indented, one-line fences, ``> python x.py`` quotes and inline
spans), CI ``run:`` steps, shell scripts (with the commands they run) and notebook
cells (``!python train.py``). Each command keeps the ``file:line`` it came from, the
directory to run it from, and the project's own words for what it does.

A command's purpose comes from, in order: the script it runs (``prepare_data.py``),
the whole command (``torchrun``, ``--sample-only``), the words that introduce it (a
comment, the sentence before the block, the section's heading), and last what the
script is (a file that trains is a training run; any other project script is a
``run``). A ``test.py`` given a trained model is an evaluation, not a test suite.
"""

from __future__ import annotations

import re
import shlex
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from torchwise.project.files import read_text
from torchwise.project.schema import ProjectCommand, Purpose

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

#: Purpose -> words that mark it, checked in this order (a "test" of an export is a test).
_PURPOSES: tuple[tuple[Purpose, re.Pattern[str]], ...] = (
    # "test" as a word, not as a directory of data ("images/test/16077.jpg" is an input).
    (
        "test",
        re.compile(
            r"\b(pytest|unittest|tox|nox)\b|(^|\s)tests?(\s|/|$)|(^|[\s/_])tests?(_\w*)?\.py"
        ),
    ),
    (
        "profile",
        re.compile(r"\b(profile|profiler|profiling|bench|benchmark\w*|torch\.utils\.bottleneck)\b"),
    ),
    (
        "export",
        re.compile(r"\b(export|onnx|torchscript|jit|trace|quantiz\w*)\b|export\w*\.py"),
    ),
    (
        # converting someone's weights into the project's format prepares them (stylegan2's
        # convert_weight.py); converting to ONNX or TorchScript is an export, checked first
        "prepare",
        re.compile(
            r"\b(prepare|preprocess\w*|download\w*|convert\w*|lmdb|tokeniz\w*|make_dataset"
            r"|build_dataset|wget|gdown)\b"
            r"|(prepare|preprocess|download|convert)\w*\.(py|sh)|\bcreate\b.*\bdatasets?\b"
        ),
    ),
    (
        "evaluate",
        re.compile(
            r"\b(eval|evaluate|evaluation|validate|validation|inference|infer|predict\w*|sample"
            r"|sampling|generate|generation)\b"
            r"|(eval|evaluate|predict|sample|demo|generate|infer\w*)\w*\.py"
        ),
    ),
    (
        "train",
        re.compile(
            r"\b(train|training|fit|finetune|fine-tune|pretrain)\b|(train|finetune|pretrain)\w*\.py"
            r"|\btorchrun\b|distributed\.launch|accelerate launch|deepspeed\b"
        ),
    ),
)
#: Commands kept per purpose: the Makefile's and scripts' first, then the docs' first ones.
MAX_PER_PURPOSE = 8
#: READMEs read down to this depth (``examples/mnist/README.md`` is depth 2).
MAX_README_DEPTH = 2
#: A shell line worth reporting starts with one of these programs.
_RUNNERS = re.compile(
    r"^(python[0-9.]*|torchrun|accelerate|deepspeed|pytest|make|bash|sh|\./\S+\.sh|lightning|"
    r"uv run|poetry run|pdm run|hatch run|tox|nox|jupyter|torchwise|[\w-]+\.py"
    r"|wget|gdown)\b"  # the downloads a README tells to run first
)
#: A test script given a trained model evaluates it (CRAFT's ``test.py --trained_model``).
_GIVEN_A_MODEL = re.compile(r"(model|weight|ckpt|checkpoint|pretrained|resume)\w*[= ]|\.pth?\b")
_COMMENT = re.compile(r"\s+#.*$")
_HELP = re.compile(r"\s(-h|--help)$")
_CD = re.compile(r"^cd\s+(\S+)\s*(?:&&|;)\s*(.*)$")


#: In prose, "test" is a test run only in these words ("you can test the directions" is not).
_PROSE_TEST = re.compile(r"\b(pytest|unittest|unit tests?|test suite|run the tests|tests pass)\b")


def purpose_of(text: str, *, prose: bool = False) -> Purpose | None:
    """The purpose ``text`` names (a command, a target name, or with ``prose`` a sentence)."""
    lower = text.lower()
    for purpose, pattern in _PURPOSES:
        if purpose == "test" and prose:
            if _PROSE_TEST.search(lower):
                return purpose
            continue
        if pattern.search(lower):
            return purpose
    return None


def _script_purpose(script: str) -> Purpose | None:
    """What a script's name says (``convert_caffe_pretrain.py``: words split at ``_``)."""
    name = script.rsplit("/", 1)[-1]
    stem, dot, suffix = name.rpartition(".")
    words = re.sub(r"[_-]+", " ", stem)
    return purpose_of(f"{words}{dot}{suffix}") or purpose_of(name)


def script_of(command: str) -> str | None:
    """The project file a command runs: ``train.py``, ``scripts/x.sh``, ``-m pkg.mod``."""
    try:
        words = shlex.split(command)
    except ValueError:
        words = command.split()
    for index, word in enumerate(words):
        if word == "-m" and index + 1 < len(words) and not words[index + 1].startswith("torch."):
            return words[index + 1].replace(".", "/") + ".py"
        if word.endswith((".py", ".sh")) and not word.startswith("-"):
            return word.removeprefix("./")
    return None


@dataclass
class Context:
    """Where a command was written and the words around it."""

    source: str  # file:line
    cwd: str = "."  # the directory the docs mean it to run from
    words: tuple[str, ...] = ()  # comment, sentence before it, heading: nearest first


@dataclass
class Collector:
    """The commands found so far, judged against the project's files."""

    root: Path
    python: frozenset[str] = frozenset()  # the project's .py and .sh files (relative)
    trains: frozenset[str] = frozenset()  # the .py files that train
    downloads: frozenset[str] = frozenset()  # the .py files that download or unpack data
    found: list[ProjectCommand] = field(default_factory=list)

    def add(self, command: str, where: Context) -> None:
        trailing = _COMMENT.search(command)
        words = where.words
        if trailing is not None:  # `python main.py --tied  # Train a tied LSTM` speaks first
            words = (trailing.group(0).strip(" #"), *words)
        command = _COMMENT.sub("", command).strip()
        cwd, command = self._cwd(command, where.cwd)
        if " && " in command:  # `python an4.py && cd ..`: each part, in its directory
            for part in command.split(" && "):
                if re.fullmatch(r"cd\s+\S+", part.strip()):
                    cwd = _join(cwd, part.split()[1])
                else:
                    self.add(part, Context(where.source, cwd, words))
            return
        if not _RUNNERS.match(command) or _HELP.search(command) or len(command) > 300:
            return
        script = script_of(command)
        if script is not None and script.rsplit("/", 1)[-1] == "setup.py":
            return  # packaging (setup.py install), not one of the project's own runs
        located = self._locate(script, cwd) if script else None
        if located is not None:
            cwd = located
        purpose = self._purpose(command, script, words, cwd)
        if purpose is None:
            return
        if any(c.command == command and c.purpose == purpose for c in self.found):
            return
        description = next((_clean(w) for w in words if _clean(w)), None)
        self.found.append(
            ProjectCommand(
                purpose=purpose,
                command=command,
                source=where.source,
                cwd=cwd,
                description=description,
            )
        )

    def purpose_for(self, command: str, cwd: str = ".") -> Purpose | None:
        """What ``command`` is for, by the script it runs and what that script does."""
        cwd, command = self._cwd(command, cwd)
        script = script_of(command)
        located = self._locate(script, cwd) if script else None
        return self._purpose(command, script, (), located or cwd)

    def knows(self, script: str, cwd: str) -> bool:
        """Whether ``script`` (as written in ``cwd``'s docs) is one of the project's files."""
        return self._locate(script, cwd) is not None

    def _cwd(self, command: str, cwd: str) -> tuple[str, str]:
        match = _CD.match(command)
        if match is None:
            return cwd, command
        return _join(cwd, match.group(1)), match.group(2).strip()

    def _locate(self, script: str, cwd: str) -> str | None:
        """The directory the script is run from: ``cwd`` when it is there, else the one
        directory of the project that has it (pygcn's README says ``python train.py``
        for ``pygcn/train.py``)."""
        if _join(cwd, script) in self.python:
            return cwd
        if "/" in script:
            return None
        homes = sorted(str(PurePosixPath(p).parent) for p in self.python if p.endswith(script))
        homes = [h for h in homes if _join(h, script) in self.python]
        return homes[0] if len(homes) == 1 else None

    def _purpose(
        self, command: str, script: str | None, words: Sequence[str], cwd: str
    ) -> Purpose | None:
        purpose = (_script_purpose(script) if script else None) or purpose_of(command)
        runs_tests = re.search(r"\b(pytest|unittest|tox|nox)\b", command)
        if purpose == "test" and not runs_tests and _GIVEN_A_MODEL.search(command):
            purpose = "evaluate"
        for text in words:
            purpose = purpose or purpose_of(text, prose=True)
        if purpose is None and script is not None:
            # what the script does: it trains, or it fetches and prepares data, or else
            path = _join(cwd, script)
            if path in self.trains:
                purpose = "train"
            elif path in self.downloads:
                purpose = "prepare"
            elif path in self.python:
                purpose = "run"
        return purpose


def _join(directory: str, relative: str) -> str:
    joined = PurePosixPath(directory) / relative
    parts: list[str] = []
    for part in joined.parts:
        if part == "..":
            if parts:
                parts.pop()
        elif part != ".":
            parts.append(part)
    return "/".join(parts) or "."


def _clean(text: str) -> str:
    """Words that introduce a command, as a short plain description: Markdown marks out,
    and of a long paragraph its last sentence (the one that leads into the command)."""
    text = text.strip().lstrip("#>*-").strip()
    text = re.sub(r"`([^`]+)`", r"\1", text)
    text = re.sub(r"\*\*([^*]+)\*\*", r"\1", text)
    if len(text) > 120:
        sentences = [s for s in re.split(r"(?<=[.!?])\s+", text) if s.strip()]
        text = sentences[-1] if sentences else text
    text = text.rstrip(":").strip()
    return text if len(text) <= 120 else text[:117] + "..."


def shell_lines(lines: list[tuple[int, str]]) -> list[tuple[int, str, str]]:
    """Join backslash continuations and drop prompts; keep the first line's number and
    the comment right above the command (``# Start training with:`` says what a bare
    ``python main.py`` is for). A ``cd DIR`` line applies to the commands after it."""
    joined: list[tuple[int, str, str]] = []
    pending: tuple[int, str] | None = None
    comment = ""
    directory = ""
    for number, raw in lines:
        line = raw.strip()
        for prompt in ("$ ", "> ", "% ", "!"):
            if line.startswith(prompt):
                line = line[len(prompt) :].strip()
        if pending is not None:
            line = f"{pending[1]} {line}"
            number = pending[0]
            pending = None
        if line.endswith("\\"):
            pending = (number, line[:-1].strip())
            continue
        if re.fullmatch(r"cd\s+\S+", line):
            directory = line.split()[1]
        elif line.startswith("#"):
            comment = line
        elif line:
            command = " ".join(line.split())
            joined.append(
                (number, f"cd {directory} && {command}" if directory else command, comment)
            )
            comment = ""
        else:
            comment = ""  # a blank line ends what a comment speaks for
    if pending is not None:
        joined.append((*pending, comment))
    return joined


def from_makefile(path: Path, relative: str) -> list[ProjectCommand]:
    """``make TARGET`` for each target whose name or recipe says what it is for."""
    text = read_text(path) or ""
    found: list[ProjectCommand] = []
    target: tuple[str, int] | None = None
    recipe: list[str] = []

    def flush() -> None:
        if target is None or target[0].startswith(".") or "%" in target[0]:
            return
        purpose = purpose_of(target[0].replace("-", " ").replace("_", " "))
        purpose = purpose or purpose_of(" ".join(recipe))
        if purpose is not None:
            found.append(
                ProjectCommand(
                    purpose=purpose,
                    command=f"make {target[0]}",
                    source=f"{relative}:{target[1]}",
                    description="; ".join(recipe[:2])[:120] or None,
                )
            )

    for number, line in enumerate(text.splitlines(), 1):
        match = re.match(r"^([A-Za-z0-9_.-]+)\s*:(?!=)", line)
        if match:
            flush()
            target, recipe = (match.group(1), number), []
        elif line.startswith("\t") and target is not None:
            recipe.append(line.strip())
    flush()
    return found


def from_pyproject_scripts(path: Path, relative: str) -> list[ProjectCommand]:
    text = read_text(path)
    if text is None:
        return []
    try:
        scripts = tomllib.loads(text).get("project", {}).get("scripts", {}) or {}
    except tomllib.TOMLDecodeError:
        return []
    found = []
    for name, entry in scripts.items():
        purpose = purpose_of(f"{name.replace('-', ' ')} {entry}")
        if purpose is not None:
            line = next((n for n, t in enumerate(text.splitlines(), 1) if t.startswith(name)), 1)
            found.append(
                ProjectCommand(
                    purpose=purpose,
                    command=name,
                    source=f"{relative}:{line}",
                    description=f"runs {entry}",
                )
            )
    return found
