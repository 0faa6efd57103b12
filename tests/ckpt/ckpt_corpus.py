"""Benign and hostile checkpoints, built on the fly (shared by tests/ckpt and bench/ckpt_scan.py).

Every hostile payload is harmless: it creates a marker file. Each one is a real
payload (``python bench/ckpt_scan.py --live`` proves it, in a throwaway process),
so "the marker never appears" in the tests means our code never ran it.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import pathlib
import pickle
import struct
import subprocess
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

#: every payload technique build_hostile() produces, in order
TECHNIQUES = [
    "os.system",
    "subprocess.call",
    "builtins.eval",
    "builtins.exec",
    "builtins.open",
    "timeit.timeit (setup)",
    "runpy._run_code",
    "pickle.loads (nested payload)",
    "functools.partial, then called",
    "legacy format (object pickle)",
    "getattr chain on __import__",
    "__import__ + operator.methodcaller",
    "importlib.import_module",
    "STACK_GLOBAL through the memo",
    "dotted attribute walk from torch",
    "Python 2 __builtin__.eval",
    "protocol 0 INST",
    "protocol 1 OBJ (subprocess.Popen)",
    "plain pickle, protocol 5",
    "second pickle in the zip",
    "pickle under a non-.pkl name",
    "nested archive",
    "legacy format (magic-number slot)",
    "payload in Lightning hyper_parameters",
]
BENIGN_KINDS = [
    "state dict",
    "training checkpoint",
    "Lightning checkpoint",
    "NumPy arrays",
    "argparse.Namespace",
    "legacy format",
    "protocol 4",
    "tied and strided tensors",
    "safetensors",
    "sharded (safetensors)",
    "sharded (.bin)",
    "plain pickle of data",
]


@dataclass
class TrainState:
    """A user class pickled into a checkpoint: not on any allowlist, loadable with --allow."""

    step: int
    ema: torch.Tensor


@dataclass
class Hostile:
    technique: str
    path: Path
    #: a substring of the global every scanner should name
    culprit: str
    #: how a victim triggers it: "torch.load", "pickle.load", or "member:<name>" of a zip
    trigger: str = "torch.load"


# --- a tiny pickle assembler for payloads no Python object pickles to ----------------


def u(text: str) -> bytes:
    """BINUNICODE."""
    data = text.encode()
    return b"X" + struct.pack("<I", len(data)) + data


def su(text: str) -> bytes:
    """SHORT_BINUNICODE (protocol 4)."""
    data = text.encode()
    return b"\x8c" + bytes([len(data)]) + data


def glob(module: str, name: str) -> bytes:
    return f"c{module}\n{name}\n".encode()


PROTO2, PROTO4 = b"\x80\x02", b"\x80\x04"
TUPLE1, TUPLE2, REDUCE, STOP, MARK, TUPLE = b"\x85", b"\x86", b"R", b".", b"(", b"t"
MEMOIZE, STACK_GLOBAL, POP, EMPTY_DICT, SETITEM = b"\x94", b"\x93", b"0", b"}", b"s"


def call(func: bytes, *args: bytes) -> bytes:
    return func + MARK + b"".join(args) + TUPLE + REDUCE


# --- containers ---------------------------------------------------------------------


def torch_zip(path: Path, data_pkl: bytes, extra: dict[str, bytes] | None = None) -> Path:
    """A torch zip checkpoint whose data.pkl is ``data_pkl`` (what torch.load unpickles)."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        z.writestr("archive/data.pkl", data_pkl)
        z.writestr("archive/byteorder", "little")
        for name, data in (extra or {}).items():
            z.writestr(name, data)
        z.writestr("archive/version", "3\n")
    return path


def with_member(path: Path, name: str, data: bytes) -> Path:
    with zipfile.ZipFile(path, "a") as z:
        z.writestr(name, data)
    return path


def legacy(objects: list[bytes]) -> bytes:
    """The legacy torch format: magic, protocol, sys_info, object, storage keys (no storages)."""
    return b"".join(objects)


def _legacy_header() -> list[bytes]:
    sys_info = {"protocol_version": 1001, "little_endian": True, "type_sizes": {"int": 4}}
    magic = pickle.dumps(0x1950A86A20F9469CFC6C, protocol=2)
    return [magic, pickle.dumps(1001, protocol=2), pickle.dumps(sys_info, protocol=2)]


class _Reduce:
    """Pickles as ``func(*args)``: the classic __reduce__ payload."""

    def __init__(self, func: Callable[..., Any], *args: Any) -> None:
        self.func, self.args = func, args

    def __reduce__(self) -> tuple[Any, ...]:
        return self.func, self.args


def _model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.Flatten(), nn.Linear(4, 2))


# --- hostile ------------------------------------------------------------------------


def build_hostile(root: Path, marker: Path) -> list[Hostile]:
    """One checkpoint per payload technique; each would create ``marker`` if loaded."""
    root.mkdir(parents=True, exist_ok=True)
    sh = f"touch {marker}"
    py = f"open({str(marker)!r}, 'w').close()"
    weights = {"weight": torch.ones(2, 2)}
    out: list[Hostile] = []

    def save(technique: str, name: str, obj: Any, culprit: str, **kw: Any) -> None:
        path = root / name
        torch.save({**weights, "x": obj}, path, **kw)
        out.append(Hostile(technique, path, culprit))

    def raw(
        technique: str, name: str, data: bytes, culprit: str, trigger: str, as_zip: bool = True
    ) -> None:
        path = root / name
        if trigger == "torch.load" and as_zip:
            torch_zip(path, data)
        else:
            path.write_bytes(data)
        out.append(Hostile(technique, path, culprit, trigger))

    save("os.system", "os_system.pt", _Reduce(os.system, sh), "system")
    save(
        "subprocess.call",
        "subprocess.pt",
        _Reduce(subprocess.call, ["touch", str(marker)]),
        "subprocess",
    )
    save("builtins.eval", "eval.pt", _Reduce(eval, py), "eval")
    save("builtins.exec", "exec.pt", _Reduce(exec, py), "exec")
    save("builtins.open", "open.pt", _Reduce(open, str(marker), "w"), "open")
    import runpy
    import time
    import timeit

    save(
        "timeit.timeit (setup)",
        "timeit.pt",
        _Reduce(timeit.timeit, "pass", py, time.perf_counter, 1),
        "timeit",
    )
    save("runpy._run_code", "runpy.pt", _Reduce(runpy._run_code, py, {}), "runpy")
    save(
        "pickle.loads (nested payload)",
        "nested_pickle.pt",
        _Reduce(pickle.loads, pickle.dumps(_Reduce(os.system, sh))),
        "pickle",
    )
    partial = call(glob("functools", "partial"), glob("os", "system"), u(sh)) + b")" + REDUCE
    raw(
        "functools.partial, then called",
        "partial.pt",
        PROTO2 + partial + STOP,
        "functools",
        "torch.load",
    )
    save(
        "legacy format (object pickle)",
        "legacy_object.pt",
        _Reduce(os.system, sh),
        "system",
        _use_new_zipfile_serialization=False,
    )
    builtins_getattr, builtins_import = glob("builtins", "getattr"), glob("builtins", "__import__")
    chain = call(call(builtins_getattr, call(builtins_import, u("os")), u("system")), u(sh))
    raw(
        "getattr chain on __import__",
        "getattr_chain.pt",
        PROTO2 + chain + STOP,
        "getattr",
        "torch.load",
    )
    caller = call(glob("operator", "methodcaller"), u("system"), u(sh))
    via_import = call(caller, call(builtins_import, u("os")))
    raw(
        "__import__ + operator.methodcaller",
        "methodcaller.pt",
        PROTO2 + via_import + STOP,
        "__import__",
        "torch.load",
    )
    importlib_chain = call(
        call(builtins_getattr, call(glob("importlib", "import_module"), u("os")), u("system")),
        u(sh),
    )
    raw(
        "importlib.import_module",
        "importlib.pt",
        PROTO2 + importlib_chain + STOP,
        "importlib",
        "torch.load",
    )
    # Module and name reach STACK_GLOBAL only through the memo.
    memo = (
        PROTO4
        + su("posix")
        + MEMOIZE
        + POP
        + su("system")
        + MEMOIZE
        + POP
        + b"h\x00h\x01"
        + STACK_GLOBAL
        + su(sh)
        + TUPLE1
        + REDUCE
        + STOP
    )
    raw("STACK_GLOBAL through the memo", "memo_stack_global.pt", memo, "system", "torch.load")
    # An allowlisted top-level module, then an attribute walk (protocol 4 dotted names).
    walk = PROTO4 + su("torch") + su("serialization.os.system") + STACK_GLOBAL
    raw(
        "dotted attribute walk from torch",
        "dotted_walk.pt",
        walk + su(sh) + TUPLE1 + REDUCE + STOP,
        "system",
        "torch.load",
    )
    raw(
        "Python 2 __builtin__.eval",
        "py2_builtin.pkl",
        PROTO2 + call(glob("__builtin__", "eval"), u(py)) + STOP,
        "eval",
        "pickle.load",
    )
    raw(
        "protocol 0 INST",
        "proto0_inst.pkl",
        f"(S'{sh}'\nios\nsystem\n.".encode(),
        "system",
        "pickle.load",
    )
    obj = MARK + glob("subprocess", "Popen") + MARK + u("touch") + u(str(marker)) + b"l" + b"o"
    raw("protocol 1 OBJ (subprocess.Popen)", "proto1_obj.pkl", obj + STOP, "Popen", "pickle.load")
    raw(
        "plain pickle, protocol 5",
        "plain_p5.pkl",
        pickle.dumps({"x": _Reduce(os.system, sh)}, protocol=5),
        "system",
        "pickle.load",
    )
    # Payloads outside data.pkl: what torch.load reads is clean, the other members are not.
    payload = pickle.dumps(_Reduce(os.system, sh), protocol=2)
    second = torch_zip(root / "second_pickle.pt", pickle.dumps({"w": 1}, protocol=2))
    out.append(
        Hostile(
            "second pickle in the zip",
            with_member(second, "archive/extra.pkl", payload),
            "system",
            "member:archive/extra.pkl",
        )
    )
    odd = root / "odd_member_name.pt"
    torch.save(weights, odd)
    with_member(odd, "archive/data/999", payload)
    out.append(Hostile("pickle under a non-.pkl name", odd, "system", "member:archive/data/999"))
    inner = io.BytesIO()
    torch.save({**weights, "x": _Reduce(os.system, sh)}, inner)
    nested = torch_zip(
        root / "nested_zip.pt",
        pickle.dumps({"w": 1}, protocol=2),
        {"archive/extra/inner.pt": inner.getvalue()},
    )
    out.append(Hostile("nested archive", nested, "system", "member:archive/extra/inner.pt"))
    magic_payload = pickle.dumps(_Reduce(os.system, sh), protocol=2)
    rest = [*_legacy_header()[1:], pickle.dumps({}, protocol=2), pickle.dumps([], protocol=2)]
    raw(
        "legacy format (magic-number slot)",
        "legacy_magic.pt",
        legacy([magic_payload, *rest]),
        "system",
        "torch.load",
        as_zip=False,
    )
    hparams = {
        "state_dict": weights,
        "hyper_parameters": {"lr": _Reduce(os.system, sh)},
        "epoch": 1,
        "global_step": 10,
        "pytorch-lightning_version": "2.4.0",
    }
    torch.save(hparams, root / "lightning.ckpt")
    out.append(Hostile("payload in Lightning hyper_parameters", root / "lightning.ckpt", "system"))
    return out


# --- benign -------------------------------------------------------------------------


def build_benign(root: Path, payload_mib: float = 0) -> dict[str, Path]:
    """One checkpoint per benign kind; ``payload_mib`` adds a large tensor to the state dict."""
    root.mkdir(parents=True, exist_ok=True)
    model = _model()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    model(torch.randn(2, 3, 3, 3)).sum().backward()
    opt.step()
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1)
    state = model.state_dict()
    if payload_mib:
        state["big"] = torch.zeros(int(payload_mib * 2**18))  # f32: 4 bytes each
    out: dict[str, Path] = {}

    def save(kind: str, name: str, obj: Any, **kw: Any) -> None:
        out[kind] = root / name
        torch.save(obj, out[kind], **kw)

    save("state dict", "state_dict.pt", state)
    save(
        "training checkpoint",
        "train.pt",
        {
            "model": state,
            "optimizer": opt.state_dict(),
            "scheduler": sched.state_dict(),
            "epoch": 3,
            "loss": 0.25,
        },
    )
    save(
        "Lightning checkpoint",
        "lightning.ckpt",
        {
            "epoch": 2,
            "global_step": 40,
            "pytorch-lightning_version": "2.4.0",
            "state_dict": {f"model.{k}": v for k, v in state.items()},
            "optimizer_states": [opt.state_dict()],
            "lr_schedulers": [sched.state_dict()],
            "callbacks": {},
            "loops": {},
            "hyper_parameters": {"lr": 1e-3, "hidden": [4, 2]},
        },
    )
    save("NumPy arrays", "numpy.pt", {"model": state, "mean": np.arange(3.0), "seed": np.int64(7)})
    save(
        "argparse.Namespace",
        "namespace.pt",
        {"model": state, "args": argparse.Namespace(lr=0.1, data=pathlib.PurePosixPath("/data"))},
    )
    save("legacy format", "legacy.pt", state, _use_new_zipfile_serialization=False)
    save("protocol 4", "proto4.pt", state, pickle_protocol=4)
    lin = nn.Linear(4, 4)
    tied = {
        "embed.weight": lin.weight,
        "head.weight": lin.weight,
        "rows": lin.weight[1:],
        "transposed": lin.weight.t(),
        "half": torch.ones(3, dtype=torch.bfloat16),
    }
    save("tied and strided tensors", "tied.pt", tied)
    from safetensors.torch import save_file

    out["safetensors"] = root / "model.safetensors"
    save_file({k: v.contiguous() for k, v in state.items()}, out["safetensors"], {"format": "pt"})
    out["sharded (safetensors)"] = _sharded(root / "sharded_st", state, "safetensors")
    out["sharded (.bin)"] = _sharded(root / "sharded_bin", state, "bin")
    (root / "vocab.pkl").write_bytes(pickle.dumps({"tokens": ["a", "b"], "ids": (1, 2)}, 4))
    out["plain pickle of data"] = root / "vocab.pkl"
    return out


def _sharded(root: Path, state: dict[str, torch.Tensor], kind: str) -> Path:
    from safetensors.torch import save_file

    root.mkdir(exist_ok=True)
    keys = list(state)
    halves = [keys[: len(keys) // 2], keys[len(keys) // 2 :]]
    weight_map: dict[str, str] = {}
    stem = "model" if kind == "safetensors" else "pytorch_model"
    for i, part in enumerate(halves, 1):
        name = f"{stem}-{i:05d}-of-00002.{kind}"
        tensors = {k: state[k].contiguous() for k in part}
        if kind == "safetensors":
            save_file(tensors, root / name)
        else:
            torch.save(tensors, root / name)
        weight_map.update(dict.fromkeys(part, name))
    total = sum(t.numel() * t.element_size() for t in state.values())
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    (root / f"{stem}.{kind}.index.json").write_text(json.dumps(index))
    return root
