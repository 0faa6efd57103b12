"""``write_tests``: one call that generates a model's test module, and writes or checks it.

Writing follows the rules for anything torchwise puts in a user's project: only
where asked (``output``), never over an existing file unless ``force``, never
inside site-packages, only text that compiles, and atomically (a crash leaves the
old file or none, never half of one). ``check`` writes nothing: it compares the
file with what would be generated now.
"""

from __future__ import annotations

import difflib
import os
import sysconfig
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from torchwise.console import check_writable
from torchwise.deps import require_torch
from torchwise.errors import OutputError, TorchwiseError
from torchwise.target import TargetRequest
from torchwise.testgen.generate import Request, generate
from torchwise.testgen.result import GeneratedTests


def write_tests(
    target: str | TargetRequest,
    *,
    inputs: Sequence[str] = (),
    init_kwargs: str | Mapping[str, Any] | None = None,
    build: str | None = None,
    batch_dim: int | None = None,
    config_start: str | Path | None = None,
    output: str | Path | None = None,
    force: bool = False,
    check: bool = False,
    checks: Sequence[str] | None = None,
    causal_dim: int | None = None,
    loss: str = "auto",
    on_start: Callable[[str], None] | None = None,
) -> GeneratedTests:
    """Generate a pytest module for ``target``'s model (a target as every model command
    takes it: ``model.py:Net``, ``hf:GPT2LMHeadModel``, a configured name, ...), or for
    the model a :class:`~torchwise.target.TargetRequest` names (then ``inputs``,
    ``init_kwargs``, ``build``, ``batch_dim`` and ``config_start`` are its own).

    Without ``output`` nothing is written: the result holds the text, and ``path`` says
    where it is meant to live (``<tests dir>/test_<model>.py``; its imports are relative
    to that place). With ``output`` the file is written there, refusing to replace an
    existing file unless ``force``; with ``check`` as well, nothing is written and
    ``status`` says whether the file there is ``"fresh"``, ``"stale"`` (see ``diff``) or
    ``"missing"``. ``checks`` limits the doctor checks considered; ``causal_dim`` says
    the model is causal along that input dim (measured when not given); ``loss`` is
    doctor's loss. The result lists every test and check with why it is in or out.

    Every argument is checked before any work, the ones that need the model (a causal
    dim beyond the inputs' rank) as soon as it is built; ``on_start`` then gets one
    line saying what the work is, so a front end announces it only for valid input.
    """
    require_torch("torchwise tests")
    from torchwise.doctor import select
    from torchwise.losses import check_loss

    if check and output is None:
        raise TorchwiseError("check compares with a file: give the output path to compare with")
    dim = target.batch_dim if isinstance(target, TargetRequest) else batch_dim
    if dim is not None and dim < 0:
        raise TorchwiseError(f"batch_dim must be 0 or more, not {dim}")
    if checks is not None:
        select(checks)
    check_loss(loss)
    out_path = Path(output) if output is not None else None
    if out_path is not None:
        _refuse_unsafe(out_path, replacing=not check and not force)
        if not check:
            check_writable(out_path)  # before the measuring, not after it
    if isinstance(target, str):
        start = Path(config_start) if config_start else None
        target = TargetRequest(target, tuple(inputs), init_kwargs, build, "auto", batch_dim, start)
    request = Request(
        model=target,
        checks=tuple(checks) if checks is not None else None,
        causal_dim=causal_dim,
        loss=loss,
    )
    result = generate(request, out_path, on_start=on_start)
    if out_path is None:
        return result
    if check:
        return _compared(result, out_path)
    _write_atomic(out_path, result.text)
    result.status = "written"
    return result


def _refuse_unsafe(path: Path, *, replacing: bool) -> None:
    resolved = path.resolve()
    if resolved.is_dir():
        raise OutputError(f"{path} is a directory", hint="give a file name: -o tests/test_net.py")
    if _inside_installed_packages(resolved):
        raise OutputError(
            f"refusing to write {path}: it is inside an installed package (site-packages)",
            hint="write the tests into your own project, e.g. -o tests/test_model.py",
        )
    if replacing and resolved.exists():
        raise OutputError(
            f"{path} exists; not replacing it",
            hint="pass --force to replace it, or --check to compare it with a fresh generation",
        )


def _inside_installed_packages(path: Path) -> bool:
    if {"site-packages", "dist-packages"} & set(path.parts):
        return True
    roots = {sysconfig.get_paths()[key] for key in ("purelib", "platlib")}
    return any(path.is_relative_to(Path(root).resolve()) for root in roots if root)


def _write_atomic(path: Path, text: str) -> None:
    compile(text, str(path), "exec")  # never write a module that does not parse
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        try:
            with os.fdopen(handle, "w", encoding="utf-8", newline="\n") as stream:
                stream.write(text)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError as exc:
        raise OutputError(f"cannot write {path}: {exc.strerror or exc}") from None


def _compared(result: GeneratedTests, path: Path) -> GeneratedTests:
    if not path.is_file():
        result.status = "missing"
        return result
    current = path.read_text(encoding="utf-8")
    if current == result.text:
        result.status = "fresh"
        return result
    result.status = "stale"
    shown = _display(path)
    result.diff = "".join(
        difflib.unified_diff(
            current.splitlines(keepends=True),
            result.text.splitlines(keepends=True),
            fromfile=f"{shown} (on disk)",
            tofile=f"{shown} (generated now)",
        )
    )
    return result


def _display(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)
