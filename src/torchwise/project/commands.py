"""The commands a project documents for training, testing, evaluating, exporting, profiling.

Found where people write them down: Makefile targets, ``[project.scripts]``,
shell code blocks in the README, CI workflow ``run:`` steps and shell scripts.
Each command keeps the ``file:line`` it came from so an agent can check it.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

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
        re.compile(r"\b(export|onnx|torchscript|jit|trace|convert|quantiz\w*)\b|export\w*\.py"),
    ),
    (
        "evaluate",
        re.compile(
            r"\b(eval|evaluate|evaluation|validate|validation|inference|predict|sample)\b"
            r"|(eval|evaluate|predict|sample)\w*\.py"
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
#: A shell line worth reporting starts with one of these programs.
_RUNNERS = re.compile(
    r"^(python[0-9.]*|torchrun|accelerate|deepspeed|pytest|make|bash|sh|\./\S+\.sh|lightning|"
    r"uv run|poetry run|pdm run|hatch run|tox|nox|jupyter|torchwise|[\w-]+\.py)\b"
)


def purpose_of(text: str) -> Purpose | None:
    lower = text.lower()
    for purpose, pattern in _PURPOSES:
        if pattern.search(lower):
            return purpose
    return None


def _shell_lines(lines: list[tuple[int, str]]) -> list[tuple[int, str, str]]:
    """Join backslash continuations and drop prompts; keep the first line's number and
    the comment right above the command (``# Start training with:`` says what a bare
    ``python main.py`` is for)."""
    joined: list[tuple[int, str, str]] = []
    pending: tuple[int, str] | None = None
    comment = ""
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
        if line.startswith("#"):
            comment = line
        elif line:
            joined.append((number, " ".join(line.split()), comment))
            comment = ""
        else:
            comment = ""  # a blank line ends what a comment speaks for
    if pending is not None:
        joined.append((*pending, comment))
    return joined


_COMMENT = re.compile(r"\s+#.*$")
_HELP = re.compile(r"\s(-h|--help)$")


def _add(found: list[ProjectCommand], command: str, source: str, context: str = "") -> None:
    # A comment on the command's own line speaks for it first (`python main.py --tied
    # # Train a tied LSTM`), then the one right above it.
    trailing = _COMMENT.search(command)
    if trailing is not None:
        context = f"{trailing.group(0)} {context}"
    command = _COMMENT.sub("", command).strip()
    if not _RUNNERS.match(command) or _HELP.search(command):
        return
    purpose = purpose_of(command) or (purpose_of(context) if context else None)
    if purpose is None or len(command) > 300:
        return
    if any(c.command == command and c.purpose == purpose for c in found):
        return
    found.append(ProjectCommand(purpose=purpose, command=command, source=source))


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
                    purpose=purpose, command=f"make {target[0]}", source=f"{relative}:{target[1]}"
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
            found.append(ProjectCommand(purpose=purpose, command=name, source=f"{relative}:{line}"))
    return found


#: An inline code span that runs a script: `python predict.py -i image.jpg`.
_INLINE_RUN = re.compile(r"`((?:python[0-9.]*|torchrun) [^`]*?\.py\b[^`]*)`")
_FENCE = re.compile(r"^\s*(```|~~~)\s*([\w+-]*)")
_SHELL_LANGS = {"", "bash", "sh", "shell", "console", "zsh", "shell-session", "text", "cmd"}


def from_markdown(path: Path, relative: str) -> list[ProjectCommand]:
    """Commands in the README's shell code blocks (and indented ``python x.py`` lines)."""
    text = read_text(path) or ""
    found: list[ProjectCommand] = []
    in_block = shell = False
    block: list[tuple[int, str]] = []
    for number, line in enumerate(text.splitlines(), 1):
        fence = _FENCE.match(line)
        if fence and not in_block:
            in_block, shell, block = True, fence.group(2).lower() in _SHELL_LANGS, []
        elif fence:
            if shell:
                for at, command, comment in _shell_lines(block):
                    _add(found, command, f"{relative}:{at}", comment)
            in_block = False
        elif in_block:
            block.append((number, line))
        elif line.startswith("    ") and line.strip().startswith(("python ", "torchrun ")):
            _add(found, " ".join(line.split()), f"{relative}:{number}")
        else:
            for span in _INLINE_RUN.findall(line):
                _add(found, " ".join(span.split()), f"{relative}:{number}")
    return found


def from_ci(path: Path, relative: str) -> list[ProjectCommand]:
    """``run:`` steps of GitHub/GitLab-style YAML, read line by line (no YAML parser needed)."""
    text = read_text(path) or ""
    lines = text.splitlines()
    found: list[ProjectCommand] = []
    index = 0
    while index < len(lines):
        line = lines[index]
        match = re.match(r"^(\s*)(?:-\s+)?(run|script|command)\s*:\s*(.*)$", line)
        index += 1
        if match is None:
            continue
        indent, value = len(match.group(1)), match.group(3).strip()
        if value and value[0] not in "|>":
            for at, command, _ in _shell_lines([(index, value.strip("'\""))]):
                _add(found, command, f"{relative}:{at}")
            continue
        block: list[tuple[int, str]] = []
        while index < len(lines) and (
            not lines[index].strip() or len(lines[index]) - len(lines[index].lstrip()) > indent
        ):
            text_line = lines[index].strip()
            block.append((index + 1, text_line[2:] if text_line.startswith("- ") else text_line))
            index += 1
        for at, command, _ in _shell_lines(block):
            _add(found, command, f"{relative}:{at}")
    return found


def from_shell_script(relative: str) -> list[ProjectCommand]:
    """A top-level or scripts/ shell script named for its purpose runs as ``bash PATH``."""
    name = relative.rsplit("/", 1)[-1].removesuffix(".sh").replace("_", " ").replace("-", " ")
    purpose = purpose_of(name)
    if purpose is None:
        return []
    return [ProjectCommand(purpose=purpose, command=f"bash {relative}", source=relative)]


def is_ci_file(relative: str) -> bool:
    return (
        relative.startswith((".github/workflows/", ".circleci/"))
        and relative.endswith((".yml", ".yaml"))
    ) or relative in (
        ".gitlab-ci.yml",
        "azure-pipelines.yml",
        ".travis.yml",
        "bitbucket-pipelines.yml",
    )


def find_commands(root: Path, files: list[str]) -> list[ProjectCommand]:
    """Every documented command, Makefile first, then scripts, README, CI, shell scripts."""
    found: list[ProjectCommand] = []
    ordered = sorted(files, key=lambda p: (p.count("/"), p))
    for relative in ordered:
        name = relative.rsplit("/", 1)[-1]
        path = root / relative
        depth = relative.count("/")
        if name in ("Makefile", "makefile", "GNUmakefile") and depth == 0:
            found.extend(from_makefile(path, relative))
        elif name == "pyproject.toml" and depth == 0:
            found.extend(from_pyproject_scripts(path, relative))
        elif name.lower().startswith("readme") and name.lower().endswith((".md", ".rst", ".txt")):
            if depth <= 1:
                for command in from_markdown(path, relative):
                    if all(c.command != command.command for c in found):
                        found.append(command)
        elif is_ci_file(relative):
            for command in from_ci(path, relative):
                if all(c.command != command.command for c in found):
                    found.append(command)
        elif name.endswith(".sh") and (depth == 0 or relative.startswith("scripts/")):
            found.extend(from_shell_script(relative))
    order = {"train": 0, "evaluate": 1, "test": 2, "export": 3, "profile": 4}
    kept: list[ProjectCommand] = []
    for command in sorted(found, key=lambda c: order[c.purpose]):  # stable: sources stay in order
        if sum(c.purpose == command.purpose for c in kept) < MAX_PER_PURPOSE:
            kept.append(command)
    return kept
