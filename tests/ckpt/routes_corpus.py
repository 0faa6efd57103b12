"""Files built against each loader's route: hostile, benign and malformed.

Hostile files carry a payload that only creates the marker file, hidden where
one loader finds it and a scanner that reads only torch.load's route does not:
a TorchScript archive torch.jit.load finds (names in another case, a zip
appended to a pickle, a flatbuffer module), an ``.npy`` object array, an
``.npz`` member, joblib's compressed forms and the array data it reads from
the stream, a torch zip whose end record sits where miniz still finds it, an
extra field miniz never reads. ``runs`` is the loader the case is built for;
the oracle (:mod:`oracle`) proves it, the tests then hold the scanner to it.

Benign files are what real loaders produce (and ``weights_only`` loads where it
can); malformed ones are bombs and broken structures a scan must answer fast.
Everything is built byte by byte here (no loader runs in the test process).
"""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import pickle
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path

from craft import PROTO2, PROTO4, STOP, Entry, build_zip, glob, payload_pickle, su, torch_entries

HOSTILE, BENIGN, MALFORMED = "hostile", "benign", "malformed"


@dataclass
class RouteCase:
    name: str
    data: bytes
    kind: str
    #: the loader the payload is built to run under (hostile), or "" (benign, malformed)
    runs: str = ""
    what: str = ""


# --- TorchScript -----------------------------------------------------------------------

_TS_CODE = """class M(Module):
  __parameters__ = []
  __buffers__ = []
  training : bool
  _is_full_backward_hook : Optional[bool]
  x : int
  def forward(self: __torch__.M,
    x: Tensor) -> Tensor:
    return x
  def __getstate__(self: __torch__.M) -> Tuple[int, bool]:
    return (self.x, self.training)
  def __setstate__(self: __torch__.M,
    state: Tuple[int, bool]) -> NoneType:
    self.x = (state)[0]
    self.training = (state)[1]
    _0 = torch.from_file("@MARKER@", True, 1)
    self.x = torch.numel(_0)
    return None
"""
_TS_DATA = b"\x80\x02c__torch__\nM\nq\x00)\x81K\x01\x88\x86q\x01bq\x02."


def torchscript_entries(
    marker: str, constants: bytes = b"constants.pkl", folder: bytes = b"ts/"
) -> list[Entry]:
    """A TorchScript archive whose module's __setstate__ creates ``marker`` (torch.from_file
    with shared=True creates the file). ``folder``: the other members' folder (the first
    member's is ``ts/``)."""
    code = _TS_CODE.replace("@MARKER@", marker).encode()
    return [
        Entry(b"ts/data.pkl", _TS_DATA),
        Entry(folder + b"code/__torch__.py", code),
        Entry(folder + constants, b"\x80\x02)."),
        Entry(folder + b"version", b"3\n"),
        Entry(folder + b"byteorder", b"little"),
    ]


def shifted_zip(entries: list[Entry], prefix: bytes) -> bytes:
    """A zip whose offsets count ``prefix`` bytes before it (a zip appended to a file)."""
    return build_zip(entries, prefix=prefix)


# --- NumPy -------------------------------------------------------------------------------


def npy(descr: str, shape: tuple[int, ...], data: bytes) -> bytes:
    header = repr({"descr": descr, "fortran_order": False, "shape": shape}).encode()
    header += b" " * (-(10 + len(header) + 1) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header + data


def npz(members: dict[str, bytes]) -> bytes:
    import zipfile

    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return out.getvalue()


# --- joblib ------------------------------------------------------------------------------

_DTYPE_I1 = (
    glob("numpy", "dtype") + b"(X\x02\x00\x00\x00i1\x89\x88tR"
    + b"(K\x03X\x01\x00\x00\x00|NNNJ\xff\xff\xff\xffJ\xff\xff\xff\xffK\x00tb"
)  # fmt: skip


def joblib_wrapper(nbytes: int, aligned: bool) -> bytes:
    """Opcodes that build a NumpyArrayWrapper for ``nbytes`` int8 elements (then BUILD).

    joblib's BUILD reads the array's bytes from the stream right after this.
    """
    state = (
        b"}(" + su("subclass") + glob("numpy", "ndarray") + su("shape")
        + b"J" + struct.pack("<i", nbytes) + b"\x85" + su("order") + su("C")
        + su("dtype") + _DTYPE_I1 + su("allow_mmap") + b"\x89"
    )  # fmt: skip
    if aligned:
        state += su("numpy_array_alignment_bytes") + b"K\x10"
    return glob("joblib.numpy_pickle", "NumpyArrayWrapper") + b")\x81" + state + b"ub"


def joblib_array_hides_payload(marker: str) -> bytes:
    """joblib skips two bytes of "array data": a STOP and an invalid opcode to every other
    unpickler (so nothing after them is a pickle). The payload after them runs only under
    joblib."""
    touch = glob("builtins", "open") + b"(V" + marker.encode() + b"\nVw\ntR0"
    return PROTO4 + joblib_wrapper(2, aligned=False) + b".\xff" + touch + b"N."


def joblib_object_array(marker: str) -> bytes:
    """An object-dtype array: joblib unpickles a nested pickle right after the BUILD."""
    dtype_o = _DTYPE_I1.replace(b"i1", b"O8").replace(b"K\x00tb", b"K?tb")
    wrapper = joblib_wrapper(1, aligned=False).replace(_DTYPE_I1, dtype_o)
    return PROTO4 + wrapper + payload_pickle(marker, PROTO2) + b"0N."


def zf(payload: bytes) -> bytes:
    """joblib's pre-0.10 format: ZF, the length in hexadecimal, then zlib."""
    return b"ZF" + f"{len(payload):#x}".ljust(19).encode() + zlib.compress(payload)


# --- the cases ---------------------------------------------------------------------------


def route_cases(marker: str, flatbuffer: bytes | None = None) -> list[RouteCase]:
    """Every case; ``flatbuffer``: a flatbuffer module whose __setstate__ creates the marker
    (torch builds it: :func:`flatbuffer_module`), left out when None."""
    payload = payload_pickle(marker)
    benign = pickle.dumps({"w": [1, 2]}, protocol=2)
    ts = torchscript_entries(marker)
    upper = torchscript_entries(marker, b"CONSTANTS.PKL")
    other_case = torchscript_entries(marker, folder=b"TS/")
    odd_extra = Entry(b"archive/x", b"y", extra=b"\x01\x00\xff")
    # big enough that miniz's backward search does not step below byte 0 first
    padded = torch_entries(payload, b"archive", Entry(b"archive/pad", b"\0" * 100_000))
    cases = [
        RouteCase("torchscript archive", build_zip(ts), HOSTILE, "torch.load",
                  "torch.load hands a TorchScript zip to torch.jit.load"),
        RouteCase("torchscript CONSTANTS.PKL", build_zip(upper), HOSTILE, "torch.jit.load",
                  "jit's lookup ignores case, torch.load's does not"),
        RouteCase("torchscript after a pickle", shifted_zip(ts, benign), HOSTILE, "torch.jit.load",
                  "torch.load unpickles byte 0; torch.jit.load finds the zip from the end"),
        RouteCase("torchscript folder in other case", build_zip(other_case), HOSTILE,
                  "torch.jit.load", "getAllRecords throws (torch.load fails); jit never calls it"),
        RouteCase("torchscript in other case after a pickle", shifted_zip(other_case, benign),
                  HOSTILE, "torch.jit.load", "both at once"),
        RouteCase("npy object array", npy("|O", (1,), payload), HOSTILE,
                  "numpy.load(allow_pickle=True)", "the data of an object array is a pickle"),
        RouteCase("npz object member", npz({"a.npy": npy("|O", (1,), payload)}), HOSTILE,
                  "numpy.load(allow_pickle=True)", "an .npz member read with read_array"),
        RouteCase("joblib zlib", zlib.compress(payload), HOSTILE, "joblib.load",
                  "zlib-compressed: no pickle at byte 0"),
        RouteCase("joblib gzip", gzip.compress(payload), HOSTILE, "joblib.load", "gzip"),
        RouteCase("joblib bz2", bz2.compress(payload), HOSTILE, "joblib.load", "bz2"),
        RouteCase("joblib xz", lzma.compress(payload), HOSTILE, "joblib.load", "xz"),
        RouteCase("joblib lzma", lzma.compress(payload, lzma.FORMAT_ALONE), HOSTILE,
                  "joblib.load", "lzma (alone)"),
        RouteCase("joblib ZF", zf(payload), HOSTILE, "joblib.load", "joblib's pre-0.10 format"),
        RouteCase("joblib array data hides the payload", joblib_array_hides_payload(marker),
                  HOSTILE, "joblib.load", "STOP to pickle.load, array data to joblib"),
        RouteCase("joblib object array", joblib_object_array(marker), HOSTILE, "joblib.load",
                  "a nested pickle after the wrapper's BUILD"),
        RouteCase("zip end record 66 KB from the end", build_zip(padded, tail=b"\0" * 66_000),
                  HOSTILE, "torch.load", "miniz searches up to ~68 KiB back; 64 KiB ones stop"),
        RouteCase("zip broken extra field miniz never reads",
                  build_zip(torch_entries(payload, b"archive", odd_extra)),
                  HOSTILE, "torch.load", "miniz parses extra fields only for zip64 values"),
        RouteCase("pickle after a benign pickle", benign + payload, HOSTILE, "pickle.load",
                  "a pickle.load loop reads the second"),
    ]  # fmt: skip
    if flatbuffer is not None:
        what = "PTMF at byte 4: checked before the zip signature"
        jit = "torch.jit.load"
        cases.append(RouteCase("torchscript flatbuffer", flatbuffer, HOSTILE, jit, what))
    return cases + benign_cases() + malformed_cases()


def benign_cases() -> list[RouteCase]:
    deep = PROTO2 + b"](" * 3000 + b"N" + b"K\x01e" * 3000 + STOP
    shared = PROTO2 + b"]q\x00" + b"(h\x00h\x00lq\x00" * 60 + STOP  # 2**60 paths via the memo
    return [
        RouteCase("deep nesting", build_zip(torch_entries(deep)), BENIGN,
                  what="3,000 nested lists (weights_only loads millions)"),
        RouteCase("shared-reference DAG", build_zip(torch_entries(shared)), BENIGN,
                  what="each list holds the previous one twice: 2**60 paths, 61 lists"),
        RouteCase("npy numbers", npy("<f4", (3,), struct.pack("<3f", 1, 2, 3)), BENIGN),
        RouteCase("npz numbers", npz({"a.npy": npy("<i8", (2,), struct.pack("<2q", 1, 2))}),
                  BENIGN),
        RouteCase("joblib array", PROTO4 + joblib_wrapper(3, aligned=True) + b"\x02\xff\xff"
                  + b"\x01\x02\x03.", BENIGN, what="joblib 1.x: padding, then the data"),
        RouteCase("joblib zlib array", zlib.compress(PROTO4 + joblib_wrapper(2, aligned=False)
                  + b"\x01\x02."), BENIGN),
    ]  # fmt: skip


#: malformed cases too slow to hand to every real loader in the test suite (bench/ runs them)
HEAVY = frozenset({"zlib bomb"})


def malformed_cases() -> list[RouteCase]:
    fan = [Entry(b"a/x", b"PK\x03\x04" + b"\0" * 64)] * 200
    return [
        RouteCase("zlib bomb", zlib.compress(b"\x80\x02" + b"N" * (64 << 20)), MALFORMED,
                  what="64 MiB of NONE opcodes behind joblib's zlib prefix"),
        RouteCase("truncated TorchScript", build_zip(torchscript_entries("x"))[:300], MALFORMED),
        RouteCase("npy header lies", b"\x93NUMPY\x01\x00\xff\xff{", MALFORMED),
        RouteCase("zip fan-out", build_zip(fan), MALFORMED,
                  what="200 entries that are one local header"),
        RouteCase("zip end record beyond miniz's reach", build_zip(
            torch_entries(payload_pickle("x")), tail=b"\0" * 5_000), MALFORMED,
            what="a small file whose end record is 5 KB from the end: miniz steps below byte 0"),
    ]  # fmt: skip


def flatbuffer_module(marker: str) -> bytes:
    """A flatbuffer TorchScript module whose __setstate__ creates ``marker`` (needs torch)."""
    import importlib.util
    import sys
    import tempfile

    import torch

    source = (
        "import torch\nfrom typing import Tuple\n"
        "class M(torch.nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n        self.x = 1\n"
        "    def forward(self, x):\n        return x\n"
        "    @torch.jit.export\n"
        "    def __getstate__(self) -> Tuple[int, bool]:\n"
        "        return (self.x, self.training)\n"
        "    @torch.jit.export\n"
        "    def __setstate__(self, state: Tuple[int, bool]) -> None:\n"
        "        self.x = state[0]\n        self.training = state[1]\n"
        f"        self.x = torch.from_file({marker!r}, True, 1).numel()\n"
    )
    with tempfile.TemporaryDirectory() as tmp:
        module_path = Path(tmp) / "tw_flatbuffer_module.py"
        module_path.write_text(source)
        spec = importlib.util.spec_from_file_location("tw_flatbuffer_module", module_path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        try:
            scripted = torch.jit.script(module.M())
            out = Path(tmp) / "module.ff"
            torch.jit.save_jit_module_to_flatbuffer(scripted, str(out))
            return out.read_bytes()
        finally:
            del sys.modules[spec.name]
