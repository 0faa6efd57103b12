"""Where a project writes its commands down: READMEs, CI files, shell scripts, notebooks.

Each reader hands every candidate command to a :class:`~torchwise.project.commands.Collector`
with its context (the ``file:line``, the directory the text means it to run from, the
words that introduce it); the collector judges what it is for and where it runs.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath

from torchwise.project.commands import (
    MAX_PER_PURPOSE,
    MAX_README_DEPTH,
    Collector,
    Context,
    from_makefile,
    from_pyproject_scripts,
    purpose_of,
    script_of,
    shell_lines,
)
from torchwise.project.files import read_text
from torchwise.project.schema import ProjectCommand

#: How commands are listed: what a newcomer looks for first.
PURPOSE_ORDER = ("train", "evaluate", "test", "export", "profile", "prepare", "run")

#: An inline code span that runs a script: `python predict.py -i image.jpg`.
_INLINE_RUN = re.compile(r"`((?:python[0-9.]*|torchrun) [^`]*?\.py\b[^`]*)`")
#: "Run `train.py`": a bare script named as the thing to run.
_INLINE_SCRIPT = re.compile(r"\b[Rr]un (?:the )?`(?:\./)?([\w/.-]+\.py)`")
_FENCE = re.compile(r"^\s*(```|~~~)\s*([\w+-]*)")
_ONE_LINE_FENCE = re.compile(r"^\s*```\s*([^`]+?)\s*```\s*$")
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$")
_QUOTED = re.compile(r"^\s*>\s*((?:python[0-9.]*|torchrun|bash|sh|accelerate|deepspeed)\s.*)$")
_SHELL_LANGS = {"", "bash", "sh", "shell", "console", "zsh", "shell-session", "text", "cmd"}


def _directory(relative: str) -> str:
    return str(PurePosixPath(relative).parent)


def _sentence_with(text: str, span: str) -> str:
    """The sentence of ``text`` that contains the inline command ``span``, without it:
    "... that runs on the CPU with no downloads (`python train.py --epochs 1`)."."""
    for sentence in re.split(r"(?<=[.!?])\s+", text):
        if f"`{span}`" in sentence:
            sentence = re.sub(r"\(?`" + re.escape(span) + r"`\)?", "", sentence)
            return " ".join(sentence.split()).rstrip(" .,;:")
    return ""


def from_markdown(collector: Collector, path: Path, relative: str) -> None:
    """Commands in a README: shell code blocks, one-line fences, ``> python x.py`` quotes,
    indented ``python x.py`` lines and inline spans; run from the README's directory."""
    text = read_text(path) or ""
    cwd = _directory(relative)
    heading = ""
    paragraph: list[str] = []  # the text before a block: "First create lmdb datasets:"
    previous: list[str] = []  # the paragraph before a blank line, until other text comes
    in_block = shell = False
    block: list[tuple[int, str]] = []
    opened_after = ""
    for number, line in enumerate(text.splitlines(), 1):
        prose = " ".join(paragraph or previous)
        fence = _FENCE.match(line)
        one_line = _ONE_LINE_FENCE.match(line) if not in_block else None
        if one_line is not None:  # ```python train.py```
            inline: tuple[str, ...] = (prose, heading)
            collector.add(one_line.group(1), Context(f"{relative}:{number}", cwd, inline))
            continue
        if fence and not in_block:
            in_block, shell, block = True, fence.group(2).lower() in _SHELL_LANGS, []
            opened_after = prose
        elif fence:
            if shell:
                for at, command, comment in shell_lines(block):
                    around: tuple[str, ...] = (comment, opened_after, heading)
                    collector.add(command, Context(f"{relative}:{at}", cwd, around))
            in_block = False
            paragraph, previous = [], []
        elif in_block:
            block.append((number, line))
        elif (title := _HEADING.match(line)) is not None:
            heading, paragraph, previous = title.group(1), [], []
        elif (quoted := _QUOTED.match(line)) is not None:
            collector.add(quoted.group(1), Context(f"{relative}:{number}", cwd, (prose, heading)))
        elif line.startswith("    ") and line.strip().startswith(("python ", "torchrun ")):
            command = " ".join(line.split())
            collector.add(command, Context(f"{relative}:{number}", cwd, (prose, heading)))
        elif not line.strip():
            previous, paragraph = paragraph or previous, []
        else:
            paragraph.append(line.strip())
            said = " ".join(paragraph)
            for span in _INLINE_RUN.findall(line):
                words = (_sentence_with(said, span), heading)
                collector.add(" ".join(span.split()), Context(f"{relative}:{number}", cwd, words))
            for script in _INLINE_SCRIPT.findall(line):
                if collector.knows(script, cwd):  # only a script the project has
                    words = (_sentence_with(said, script) or line, heading)
                    collector.add(f"python {script}", Context(f"{relative}:{number}", cwd, words))


def from_ci(collector: Collector, path: Path, relative: str) -> None:
    """``run:`` steps of GitHub/GitLab-style YAML, read line by line (no YAML parser needed)."""
    text = read_text(path) or ""
    lines = text.splitlines()
    index = 0
    while index < len(lines):
        line = lines[index]
        match = re.match(r"^(\s*)(?:-\s+)?(run|script|command)\s*:\s*(.*)$", line)
        index += 1
        if match is None:
            continue
        indent, value = len(match.group(1)), match.group(3).strip()
        if value and value[0] not in "|>":
            for at, command, _ in shell_lines([(index, value.strip("'\""))]):
                collector.add(command, Context(f"{relative}:{at}"))
            continue
        block: list[tuple[int, str]] = []
        while index < len(lines) and (
            not lines[index].strip() or len(lines[index]) - len(lines[index].lstrip()) > indent
        ):
            text_line = lines[index].strip()
            block.append((index + 1, text_line[2:] if text_line.startswith("- ") else text_line))
            index += 1
        for at, command, _ in shell_lines(block):
            collector.add(command, Context(f"{relative}:{at}"))


def from_shell_script(collector: Collector, path: Path, relative: str) -> ProjectCommand | None:
    """``bash PATH``, for what its name or the commands it runs say (and what their scripts
    do: LeeJunHyun's UNet.sh runs ``python3 main.py``, which trains), described by them."""
    text = read_text(path) or ""
    inner = [
        command
        for _, command, _ in shell_lines(list(enumerate(text.splitlines(), 1)))
        if re.match(r"(cd \S+ && )?(python[0-9.]*|torchrun|accelerate|deepspeed)\b", command)
    ]
    name = relative.rsplit("/", 1)[-1].removesuffix(".sh").replace("_", " ").replace("-", " ")
    purpose = purpose_of(name)
    for command in inner:
        purpose = purpose or collector.purpose_for(command)  # run from the root: bash PATH
    if purpose is None and not inner:
        return None
    description = None
    if inner:
        more = f" (and {len(inner) - 1} more)" if len(inner) > 1 else ""
        description = f"runs {inner[0][:100]}{more}"
    return ProjectCommand(
        purpose=purpose or "run", command=f"bash {relative}", source=relative,
        description=description,
    )  # fmt: skip


def from_notebook(
    collector: Collector, relative: str, shell: Sequence[tuple[int, int, str]]
) -> None:
    """The project's scripts a notebook's cells run (``!python train.py``)."""
    cwd = _directory(relative)
    for cell, line, command in shell:
        collector.add(command, Context(f"{relative}:cell {cell}:{line}", cwd))


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


def find_commands(
    root: Path,
    files: Sequence[str],
    *,
    trains: frozenset[str] = frozenset(),
    downloads: frozenset[str] = frozenset(),
    notebook_shell: Mapping[str, Sequence[tuple[int, int, str]]] | None = None,
) -> list[ProjectCommand]:
    """Every documented command: Makefile and pyproject first, then shell scripts,
    READMEs, CI files and notebooks; at most :data:`MAX_PER_PURPOSE` per purpose.

    ``trains`` and ``downloads`` are the scripts that train and that fetch data (what a
    command is for when nothing written says it)."""
    scripts = frozenset(f for f in files if f.endswith((".py", ".sh")))
    collector = Collector(root, python=scripts, trains=trains, downloads=downloads)
    first: list[ProjectCommand] = []
    ordered = sorted(files, key=lambda p: (p.count("/"), p))
    for relative in ordered:
        name = relative.rsplit("/", 1)[-1]
        path = root / relative
        depth = relative.count("/")
        if name in ("Makefile", "makefile", "GNUmakefile") and depth == 0:
            first.extend(from_makefile(path, relative))
        elif name == "pyproject.toml" and depth == 0:
            first.extend(from_pyproject_scripts(path, relative))
        elif name.endswith(".sh") and depth <= 1:
            script = from_shell_script(collector, path, relative)
            if script is not None:
                first.append(script)
    for relative in ordered:
        name = relative.rsplit("/", 1)[-1].lower()
        depth = relative.count("/")
        if name.startswith("readme") and name.endswith((".md", ".rst", ".txt", ".markdown")):
            if depth <= MAX_README_DEPTH:
                from_markdown(collector, root / relative, relative)
        elif is_ci_file(relative):
            from_ci(collector, root / relative, relative)
    for relative, shell in sorted((notebook_shell or {}).items()):
        from_notebook(collector, relative, shell)
    found = list(first)
    scripts_listed = {
        c.command.removeprefix("bash ") for c in first if c.command.startswith("bash ")
    }
    for command in collector.found:
        runs = script_of(command.command)
        if runs is not None and runs.endswith(".sh") and runs in scripts_listed:
            continue  # the README's ./train.sh is the script already listed, with what it runs
        if all(c.command != command.command for c in found):
            found.append(command)
    kept: list[ProjectCommand] = []
    for command in sorted(found, key=lambda c: PURPOSE_ORDER.index(c.purpose)):  # stable sort
        if sum(c.purpose == command.purpose for c in kept) < MAX_PER_PURPOSE:
            kept.append(command)
    return kept
