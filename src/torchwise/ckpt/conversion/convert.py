"""``torchwise ckpt convert``: to safetensors, only once proven safe, and losing nothing.

1. The file is scanned (:mod:`.scan`); anything unsafe is refused unless each global
   is named with ``--allow``.
2. torch rebuilds it with ``torch.load(weights_only=True)``, on the meta device for a
   torch zip, so no tensor data is read yet (:mod:`.convert_plan`).
3. Tensors are streamed one at a time into the safetensors file (:mod:`.stwriter`);
   the structure around them (epochs, param groups, integer optimizer keys, tuples,
   hyperparameter namespaces) goes into the metadata as typed JSON
   (:mod:`.typedjson`), so :func:`torchwise.ckpt.conversion.restore.load_converted` rebuilds
   the original object. Tensors safetensors cannot hold are refused, or with
   ``--split`` stored as their parts; values without a JSON form are refused, or
   with ``--drop-non-tensor`` left out and listed.
4. The file is written under a temporary name, read back byte for byte, and only
   then renamed into place.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from torchwise.ckpt.budgets import DEFAULT_BUDGETS, Budgets
from torchwise.ckpt.conversion.loading import load_for_conversion
from torchwise.ckpt.conversion.plan import Section, flatten, metadata
from torchwise.ckpt.conversion.verify import check_structure
from torchwise.ckpt.policy import WEIGHTS_ONLY, check_allowed
from torchwise.ckpt.scan import scan_file
from torchwise.errors import OutputError, TorchwiseError


@dataclass(frozen=True)
class ConvertOptions:
    allow: frozenset[str] = frozenset()
    #: store tensors safetensors cannot hold as their parts, with a note
    split: bool = False
    #: leave out (and list) values without a JSON form instead of refusing
    drop_non_tensor: bool = False
    #: one file per top-level section that holds tensors
    per_section: bool = False
    force: bool = False
    budgets: Budgets = DEFAULT_BUDGETS


@dataclass
class ConvertResult:
    source: str
    outputs: list[str]
    #: tensors written (a tensor referenced twice is written once)
    tensors: int
    #: alias key -> the key it was written under (tied weights)
    aliases: dict[str, str] = field(default_factory=dict)
    made_contiguous: list[str] = field(default_factory=list)
    #: other views of a storage already written, stored as their own copies
    copied_views: list[str] = field(default_factory=list)
    #: top-level non-tensor values kept in the typed-JSON structure
    extras: list[str] = field(default_factory=list)
    #: values left out with --drop-non-tensor
    dropped: list[str] = field(default_factory=list)
    #: part key -> how a tensor safetensors cannot hold was stored (--split)
    split: dict[str, str] = field(default_factory=dict)
    verified: int = 0
    bytes_written: int = 0
    #: the largest buffer held while writing (a chunk, or a strided tensor's storage span)
    peak_buffer: int = 0
    #: tensors were read one at a time from the file (not loaded whole)
    streamed: bool = False
    notes: list[str] = field(default_factory=list)


def convert(
    path: str | Path,
    out: str | Path,
    options: ConvertOptions | None = None,
    progress: Callable[[int, str], None] | None = None,
    **kwargs: Any,
) -> ConvertResult:
    """Convert ``path`` to safetensors at ``out`` (``out``-<section> files with ``per_section``).

    Keyword arguments are :class:`ConvertOptions` fields (``convert(p, o, split=True)``).
    """
    options = options or ConvertOptions(**kwargs)
    source, target = Path(path), Path(out)
    _check_output(source, target, options.force)
    extra_globals = _vet(source, options)
    from torchwise.deps import require

    require("torch", purpose="ckpt convert")
    require("safetensors", purpose="ckpt convert")
    loaded = load_for_conversion(source, extra_globals, options.budgets, options.split)
    sections = _sections(loaded.value, options)
    outputs = {name: _output_path(target, name) for name in sections}
    for out_path in outputs.values():
        _check_output(source, out_path, options.force)
    result = ConvertResult(str(source), [str(p) for p in outputs.values()], 0)
    result.streamed, result.notes = loaded.streamed, loaded.notes
    plans = {
        name: flatten(value, prefix, options.split, options.drop_non_tensor, loaded.streamed)
        for name, (value, prefix) in sections.items()
    }
    for name, section in plans.items():
        _write_section(section, source, outputs[name], loaded, result, progress)
    return result


def _vet(source: Path, options: ConvertOptions) -> list[Any]:
    """Scan first; the objects weights_only loading needs beyond its own allowlist."""
    report = scan_file(source, check_allowed(options.allow), options.budgets)
    if report.verdict == "error":
        raise TorchwiseError(f"{source}: {report.error}", hint="nothing was converted")
    unsafe = sorted({f.global_name or f.rule for f in report.findings if f.severity != "warning"})
    if unsafe:
        raise TorchwiseError(
            f"{source} is not safe to load: {', '.join(unsafe[:6])}",
            hint="run `torchwise ckpt scan` for the evidence; if you trust these globals, "
            "pass --allow module.Name for each",
        )
    return _safe_objects(sorted(set(report.globals) - WEIGHTS_ONLY))


def _check_output(source: Path, out: Path, force: bool) -> None:
    if out.is_dir():
        raise OutputError(f"cannot write {out}: it is a directory, not a .safetensors file")
    if out.exists() and out.resolve() == source.resolve():
        raise OutputError(f"{out} is the input file", hint="write the safetensors elsewhere")
    if out.exists() and not force:
        raise OutputError(f"{out} exists", hint="pass --force to overwrite it")
    parent = out.parent if str(out.parent) else Path(".")
    existing = next((p for p in (parent, *parent.parents) if p.exists()), Path("."))
    if not existing.is_dir() or not os.access(existing, os.W_OK):
        raise OutputError(f"cannot write {out}: {existing} is not a writable directory")


def _sections(value: Any, options: ConvertOptions) -> dict[str, tuple[Any, str]]:
    """Output name -> (value, key prefix)."""
    if not options.per_section:
        return {"": (value, "")}
    if not isinstance(value, dict):
        raise TorchwiseError("--per-section needs a checkpoint whose top level is a dict")
    import torch

    def has_tensor(root: Any) -> bool:
        stack, seen = [root], set()
        while stack:
            obj = stack.pop()
            if isinstance(obj, torch.Tensor):
                return True
            if id(obj) in seen:
                continue
            seen.add(id(obj))
            if isinstance(obj, dict):
                stack.extend(obj.values())
            elif isinstance(obj, (list, tuple)):
                stack.extend(obj)
        return False

    sections = {str(k): (v, str(k)) for k, v in value.items() if has_tensor(v)}
    if not sections:
        raise TorchwiseError("the checkpoint holds no tensors")
    rest = {k: v for k, v in value.items() if str(k) not in sections}
    first = next(iter(sections))
    sections[first] = ({**rest, first: sections[first][0]}, "")  # the rest rides with the first
    return sections


def _output_path(target: Path, section: str) -> Path:
    if not section:
        return target
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in section)
    return target.with_name(f"{target.stem}-{safe}{target.suffix or '.safetensors'}")


def _write_section(
    section: Section,
    source: Path,
    out: Path,
    loaded: Any,
    result: ConvertResult,
    progress: Callable[[int, str], None] | None,
) -> None:
    from torchwise.ckpt.conversion import stwriter

    meta = metadata(section, source)
    partial = out.with_name(out.name + ".partial")
    swap = loaded.byteorder != sys.byteorder
    try:
        # Inside the try: a parent that cannot be created (e.g. under /proc, or a
        # read-only mount when running as root) is the user's path, not our bug.
        out.parent.mkdir(parents=True, exist_ok=True)
        with partial.open("wb") as handle:
            digests, peak = stwriter.write(
                handle, section.items, meta, swap_bytes=swap, progress=progress
            )
        result.verified += stwriter.verify(partial, section.items, digests)
        check_structure(section.value, _written_structure(partial), section)
    except OSError as exc:
        partial.unlink(missing_ok=True)
        raise OutputError(f"cannot write {out}: {exc.strerror or exc}") from None
    except ValueError as exc:
        partial.unlink(missing_ok=True)
        raise TorchwiseError(f"{exc}; nothing was written to {out}") from None
    os.replace(partial, out)  # never leave a half-written file under the real name
    result.tensors += len(section.items)
    result.bytes_written += out.stat().st_size
    result.peak_buffer = max(result.peak_buffer, peak)
    result.aliases.update(section.aliases)
    result.made_contiguous += section.made_contiguous
    result.copied_views += section.copied_views
    result.extras += [k for k in section.extras if k not in result.extras]
    result.dropped += section.dropped
    result.split.update({key: info["note"] for key, info in section.split.items()})


def _written_structure(path: Path) -> str:
    """The structure JSON as it sits in the written file's metadata."""
    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as handle:
        return str((handle.metadata() or {})["torchwise.structure"])


def _safe_objects(names: list[str]) -> list[Any]:
    objects = [_import(name) for name in names]
    if any(name.startswith("numpy.") for name in names):
        import numpy as np

        # ndarray pickles BUILD a dtype instance whose class (numpy.dtypes.Float32DType)
        # the pickle never names; weights_only needs it allowlisted too.
        objects += [type(np.dtype(code)) for code in "?bBhHiIlLqQefdgFDG"]
    return objects


def _import(qualname: str) -> Any:
    # Only reached for globals the scan calls benign or the user allowed by name.
    module_name, _, attr = qualname.rpartition(".")
    while module_name:
        try:
            obj: Any = importlib.import_module(module_name)
            break
        except ImportError:
            module_name, _, head = module_name.rpartition(".")
            attr = f"{head}.{attr}"
    else:
        raise TorchwiseError(f"cannot import {qualname}, which the checkpoint needs")
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise TorchwiseError(f"cannot import {qualname}, which the checkpoint needs") from None
    return obj
