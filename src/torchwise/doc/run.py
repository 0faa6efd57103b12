"""The ``torchwise doc`` workflow: resolve, measure, then print, write, check or diff.

Returns text instead of printing so that the command stays a thin shell and
tests can call it directly. ``--write`` refuses files in site-packages and
torchwise's own zoo. ``--check`` and ``--diff`` never write; ``--write``
writes only when something changed, atomically, and only a file that
re-parses with exactly the generated docstrings.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from torchwise.console import write_output
from torchwise.doc import source as docsource
from torchwise.doc.generate import ModelDoc, document, require_source
from torchwise.errors import ExitCode, OutputError, TorchwiseError

if TYPE_CHECKING:
    from torchwise.console import Console
    from torchwise.target import TargetRequest


def _display(path: Path) -> Path:
    try:
        return path.resolve().relative_to(Path.cwd().resolve())
    except ValueError:
        return path


def _printed(doc: ModelDoc) -> str:
    where = f" ({_display(doc.source)})" if doc.source else ""
    parts = []
    for target, text in doc.docstrings.items():
        indented = "\n".join(("    " + line) if line else "" for line in text.splitlines())
        parts.append(f"# {target.label()}{where}\n    '''{indented.lstrip()}\n    '''\n")
    return "\n".join(parts)


def _installed_or_ours(path: Path) -> str | None:
    """Why ``path`` is not the user's to edit: an installed package or torchwise itself."""
    import torchwise

    resolved = path.resolve()
    parts = resolved.parts
    if "site-packages" in parts or "dist-packages" in parts:
        where = "site-packages" if "site-packages" in parts else "dist-packages"
        return f"it is inside {where} (an installed package, not your source)"
    if resolved.is_relative_to(Path(torchwise.__file__).resolve().parent):
        return "it is torchwise's own source (a built-in reference model)"
    return None


def _check_writable(path: Path) -> None:
    """One clear error now if the page cannot be written later (a directory, /proc)."""
    if path.is_dir():
        raise OutputError(
            f"cannot write {path}: it is a directory",
            hint="give the page's file name, e.g. --markdown docs/models/net.md",
        )
    existing = next((p for p in [path.parent, *path.parent.parents] if p.exists()), Path("."))
    try:
        with tempfile.TemporaryFile(dir=existing):
            pass
    except OSError as exc:
        raise OutputError(f"cannot write {path}: {exc.strerror or exc}") from None


def run_doc(
    request: TargetRequest,
    *,
    action: str | None = None,
    markdown: Path | None = None,
    console: Console | None = None,
) -> tuple[int, str, str]:
    """Run ``torchwise doc`` on the model ``request`` names; returns (exit code, stdout
    text, stderr text).

    The hints repeat the command-line words that name the model again
    (``request.command_words()``); ``console`` shows progress while the shape
    experiments run. Exit codes: 0 done or fresh; 1 ``--check`` found stale docs or
    ``--diff`` would change something (as ``review --diff``); errors raise.
    """
    target, config_start = request.target, request.config_start
    again = request.command_words()
    if action == "write" and target.startswith("zoo:"):
        # The zoo's source is torchwise's own installed code, not the user's.
        raise TorchwiseError(
            f"{target} is a built-in reference model; --write edits only your own source",
            hint="use --diff or --markdown PATH to see or publish its documentation",
        )
    if markdown is not None and action != "check":
        _check_writable(markdown)  # before minutes of measuring, not after

    # Built for measuring: zoo models on meta (no memory); user classes are built
    # on the CPU by their own constructor, and torchwise measures a private copy.
    resolved = request.resolve(device="meta")
    if action == "write" and resolved.source_file is not None:
        refusal = _installed_or_ours(resolved.source_file)
        if refusal is not None:
            raise TorchwiseError(
                f"refusing to edit {_display(resolved.source_file)}: {refusal}",
                hint="--diff shows the docstrings, --markdown PATH writes a page of your own",
            )
        _check_writable(resolved.source_file)  # before measuring, not after
    doc = document(target, resolved, config_start=config_start, console=console)
    out: list[str] = []
    err: list[str] = [f"note: {note}" for note in [*resolved.notes, *doc.notes]]
    err.append(f"Example ran ({doc.example_device}) and printed the documented shapes.")
    code: int = ExitCode.OK
    if action is None:
        out.append(_printed(doc))
    else:
        path = require_source(doc)
        before = path.read_bytes()
        after = docsource.rewrite(before, path, doc.docstrings)
        shown = _display(path)
        diff = docsource.unified_diff(before, after, shown)
        if action == "diff":
            out.append(diff)
            err.append(f"{shown}: up to date" if not diff else f"{shown}: would change")
            if diff:
                code = ExitCode.FINDINGS
        elif action == "write":
            if after != before:
                try:
                    docsource.write_atomic(path, after)
                except OSError as exc:
                    raise OutputError(f"cannot write {shown}: {exc.strerror or exc}") from None
                err.append(f"{shown}: docstrings updated")
            else:
                err.append(f"{shown}: up to date")
        elif action == "check":
            if after != before:
                out.append(diff)
                err.append(
                    f"{shown}: documented shapes/counts are stale; "
                    f"run `torchwise doc {again} --write`"
                )
                code = ExitCode.FINDINGS
            else:
                err.append(f"{shown}: docstrings up to date")
        else:  # pragma: no cover - click restricts the values
            raise TorchwiseError(f"unknown action {action!r}")
    if markdown is not None:
        code = max(code, _markdown(doc, target, again, markdown, action, out, err))
    return code, "".join(out), "\n".join(err)


def _markdown(
    doc: ModelDoc,
    target: str,
    again: str,
    path: Path,
    action: str | None,
    out: list[str],
    err: list[str],
) -> int:
    import difflib

    from torchwise.doc.page import render_page

    page = render_page(doc, target, path, command=again)
    current = path.read_text(encoding="utf-8") if path.is_file() else None
    if current == page:
        err.append(f"{path}: up to date")
        return ExitCode.OK
    if action == "diff":
        lines = difflib.unified_diff(
            (current or "").splitlines(keepends=True), page.splitlines(keepends=True),
            f"a/{path}", f"b/{path}",
        )  # fmt: skip
        out.append("".join(lines))
        err.append(f"{path}: would change")
        return ExitCode.FINDINGS
    if action == "check":
        err.append(f"{path}: stale or missing; run `torchwise doc {again} --markdown {path}`")
        return ExitCode.FINDINGS
    write_output(path, page)
    err.append(f"{path}: written")
    return ExitCode.OK
