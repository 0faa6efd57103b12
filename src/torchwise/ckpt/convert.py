"""``torchwise ckpt convert``: a checkpoint to safetensors, only once it is proven safe.

The file is scanned first; it is loaded with ``torch.load(weights_only=True)``
only when the scan finds nothing unsafe (known-benign objects such as NumPy
arrays, and globals the user names with ``--allow``, are passed to
``torch.serialization.safe_globals``). Nested training checkpoints are flattened
to dotted keys (or split per top-level section), tensors that are the same view
of one storage are written once with their aliases in the metadata, and every
written tensor is read back and compared byte for byte.
"""

from __future__ import annotations

import importlib
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from torchwise.ckpt.policy import SAFE
from torchwise.ckpt.reader import read_container
from torchwise.ckpt.scan import scan
from torchwise.errors import TorchwiseError

if TYPE_CHECKING:
    import torch


@dataclass
class ConvertResult:
    source: str
    outputs: list[str]
    #: tensors written (each storage view once)
    tensors: int
    #: alias key -> the key it was written under (tied weights, repeated references)
    aliases: dict[str, str] = field(default_factory=dict)
    #: keys that were non-contiguous and were written contiguous
    made_contiguous: list[str] = field(default_factory=list)
    #: keys that overlapped another tensor's storage and were written as their own copy
    copied_views: list[str] = field(default_factory=list)
    #: non-tensor values (epoch, hyperparameters) stored as JSON in the metadata
    extras: list[str] = field(default_factory=list)
    #: keys read back and found identical (dtype, shape and every byte)
    verified: int = 0
    bytes_written: int = 0


def convert(
    path: str | Path,
    out: str | Path,
    *,
    allow: Iterable[str] = (),
    split: bool = False,
    force: bool = False,
) -> ConvertResult:
    """Convert ``path`` to safetensors at ``out`` (``out``-<section> files with ``split``)."""

    source, target = Path(path), Path(out)
    allowed = set(allow)
    report = scan(source, allow=allowed)
    for f in report.files:
        if f.verdict == "error":
            raise TorchwiseError(f"{f.path}: {f.error}", hint="nothing was converted")
        unsafe = sorted({x.global_name or x.rule for x in f.findings if x.severity != "warning"})
        if unsafe:
            raise TorchwiseError(
                f"{f.path} is not safe to load: it references {', '.join(unsafe)}",
                hint="run `torchwise ckpt scan` for the evidence; if you trust these, "
                "pass --allow module.Name for each",
            )
    extra_globals = sorted({g for f in report.files for g in f.globals} - SAFE)
    value = _load(source, _safe_objects(extra_globals))
    sections = _sections(value, split)
    outputs = {name: _output_path(target, name) for name in sections}
    for out_path in outputs.values():
        if out_path.exists() and not force:
            raise TorchwiseError(f"{out_path} exists", hint="pass --force to overwrite it")
        if out_path.resolve() == source.resolve():
            raise TorchwiseError("the output would overwrite the input")
    result = ConvertResult(str(source), [str(p) for p in outputs.values()], 0)
    for name, (section_value, root_extras) in sections.items():
        tensors, extras = _flatten(section_value, name if split else "")
        extras.update(root_extras)
        written = _dedupe(tensors, result)
        metadata = {
            "format": "pt",
            "torchwise.source": source.name,
            "torchwise.aliases": json.dumps(
                {a: c for a, c in result.aliases.items() if a in tensors}
            ),
            "torchwise.extra": json.dumps(extras, default=repr),
        }
        result.extras += [k for k in extras if k not in result.extras]
        _write(written, outputs[name], metadata)
        result.tensors += len(written)
        result.bytes_written += outputs[name].stat().st_size
        result.verified += _verify(tensors, outputs[name])
    return result


def _safe_objects(names: list[str]) -> list[Any]:
    objects = [_import(name) for name in names]
    if any(name.startswith("numpy.") for name in names):
        import numpy as np

        # ndarray pickles BUILD a dtype instance, whose class (numpy.dtypes.Float32DType)
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


def _load(source: Path, extra: list[Any]) -> Any:
    import torch

    container = read_container(source)
    parts = [(c.path, c.format) for c in container.children] or [(source, container.format)]
    loaded: dict[str, Any] = {}
    for file, fmt in parts:
        if fmt == "safetensors":
            from safetensors.torch import load_file

            part: Any = load_file(str(file))
        else:
            with torch.serialization.safe_globals(extra):
                try:
                    part = torch.load(file, map_location="cpu", weights_only=True)
                except Exception as exc:
                    raise TorchwiseError(
                        f"{file}: torch.load(weights_only=True) failed: {_torch_reason(exc)}",
                        hint="nothing was converted",
                    ) from None
        if not container.children:
            return part
        loaded.update(part)  # shards of one state dict
    return loaded


def _torch_reason(exc: Exception) -> str:
    # torch's message is a page long; the line after "WeightsUnpickler error:" is the reason.
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    for i, line in enumerate(lines):
        if "WeightsUnpickler error" in line:
            rest = line.split("WeightsUnpickler error:", 1)[1].strip()
            return rest or (lines[i + 1] if i + 1 < len(lines) else line)
    return lines[0] if lines else type(exc).__name__


def _sections(value: Any, split: bool) -> dict[str, tuple[Any, dict[str, Any]]]:
    """Output name -> (value, root-level non-tensor extras to record with it)."""
    if not split:
        return {"": (value, {})}
    if not isinstance(value, dict):
        raise TorchwiseError("--split needs a checkpoint whose top level is a dict")
    with_tensors = {str(k): v for k, v in value.items() if _has_tensor(v)}
    if not with_tensors:
        raise TorchwiseError("the checkpoint holds no tensors")
    root = {str(k): _plain(v) for k, v in value.items() if str(k) not in with_tensors}
    return {k: (v, root) for k, v in with_tensors.items()}


def _has_tensor(value: Any) -> bool:
    import torch

    if isinstance(value, torch.Tensor):
        return True
    if isinstance(value, dict):
        return any(_has_tensor(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(_has_tensor(v) for v in value)
    return False


def _output_path(target: Path, section: str) -> Path:
    if not section:
        return target
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in section)
    return target.with_name(f"{target.stem}-{safe}{target.suffix or '.safetensors'}")


def _flatten(value: Any, prefix: str) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    import numpy as np
    import torch

    tensors: dict[str, torch.Tensor] = {}
    extras: dict[str, Any] = {}

    def walk(obj: Any, key: str) -> None:
        if isinstance(obj, torch.Tensor):
            tensors[key] = obj.detach()
        elif isinstance(obj, np.ndarray) and obj.dtype.kind in "biufc":
            tensors[key] = torch.from_numpy(np.ascontiguousarray(obj))
        elif isinstance(obj, dict):
            if not obj:
                extras[key] = {}
            for k, v in obj.items():
                walk(v, f"{key}.{k}" if key else str(k))
        elif isinstance(obj, (list, tuple)) and _has_tensor(obj):
            for i, v in enumerate(obj):
                walk(v, f"{key}.{i}" if key else str(i))
        elif hasattr(obj, "__dict__") and not isinstance(obj, type) and _has_tensor(vars(obj)):
            # argparse.Namespace or a class the user allowed: its attributes, dotted.
            walk(vars(obj), key)
        else:
            extras[key or "<root>"] = _plain(obj)

    walk(value, prefix)
    return tensors, extras


def _plain(value: Any) -> Any:
    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        return repr(value)


def _dedupe(tensors: dict[str, torch.Tensor], result: ConvertResult) -> dict[str, torch.Tensor]:
    """One entry per storage view; safetensors cannot store aliasing or strided tensors."""
    import torch

    written: dict[str, torch.Tensor] = {}
    views: dict[tuple[Any, ...], str] = {}
    storages: dict[int, str] = {}
    for key, tensor in tensors.items():
        if tensor.layout != torch.strided or tensor.is_quantized or tensor.is_meta:
            raise TorchwiseError(
                f"{key} is a {'quantized' if tensor.is_quantized else str(tensor.layout)} tensor",
                hint="safetensors stores dense tensors only; dequantize or densify it first",
            )
        ptr = tensor.untyped_storage().data_ptr()
        ident = (ptr, tensor.storage_offset(), tuple(tensor.shape), tensor.stride(), tensor.dtype)
        if tensor.numel() > 0 and ident in views:
            result.aliases[key] = views[ident]
            continue
        views[ident] = key
        if tensor.numel() > 0 and ptr in storages:
            result.copied_views.append(key)  # a different view of a storage already written
            tensor = tensor.clone()
        storages.setdefault(ptr, key)
        if not tensor.is_contiguous():
            result.made_contiguous.append(key)
        written[key] = tensor.contiguous()
    return written


def _write(tensors: dict[str, torch.Tensor], out: Path, metadata: dict[str, str]) -> None:
    from safetensors.torch import save_file

    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(out.name + ".partial")
    save_file(tensors, str(partial), metadata=metadata)
    os.replace(partial, out)  # never leave a half-written file under the real name


def _verify(expected: dict[str, torch.Tensor], out: Path) -> int:
    import torch
    from safetensors.torch import load_file

    back = load_file(str(out))
    aliases = json.loads(_metadata(out).get("torchwise.aliases", "{}"))
    checked = 0
    for key, tensor in expected.items():
        stored = back.get(aliases.get(key, key))
        ok = (
            stored is not None
            and stored.dtype == tensor.dtype
            and stored.shape == tensor.shape
            and torch.equal(_bytes(stored), _bytes(tensor))
        )
        if not ok:
            out.unlink()
            raise TorchwiseError(f"round trip failed for {key}; {out} was removed")
        checked += 1
    return checked


def _bytes(tensor: torch.Tensor) -> torch.Tensor:
    import torch

    # Compare bytes, not values: NaN != NaN, and -0.0 == 0.0, would mislead torch.equal.
    flat = tensor.detach().cpu().contiguous().reshape(-1)
    return flat.view(torch.uint8) if flat.numel() else flat.to(torch.uint8)


def _metadata(out: Path) -> dict[str, str]:
    from safetensors import safe_open

    with safe_open(str(out), framework="pt") as handle:
        return dict(handle.metadata() or {})
