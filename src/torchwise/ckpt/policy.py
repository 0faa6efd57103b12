"""The allowlist: which globals a checkpoint pickle may reference.

The allowlist is ``weights_only``'s: ``torch._weights_only_unpickler._get_allowed_globals``
(torch 2.13) as static data, so scanning never imports torch, plus four inert
builtins (:data:`INERT`) that Python's own pickler writes for plain data. Names
are judged as the unpickler imports them: Python 2 names (``__builtin__``,
``copy_reg``) are mapped for protocols < 3, exactly as ``Unpickler(fix_imports=True)``
maps them, and not otherwise. Anything not listed is unsafe; the denylist below
only chooses the wording ("known dangerous" plus why), it never makes something
safe. Known-benign non-tensor objects (NumPy arrays, ``argparse.Namespace``) are
warnings: exit 0, but weights_only loading needs them allowlisted.
"""

from __future__ import annotations

import enum
import functools
from collections.abc import Iterable
from dataclasses import dataclass

from torchwise.errors import TorchwiseError


class Verdict(enum.IntEnum):
    """Ordered by severity so ``max()`` picks the worst."""

    SAFE = 0
    WARNING = 1
    UNSAFE = 2
    DANGEROUS = 3


def _words(text: str) -> list[str]:
    return text.split()


@dataclass(frozen=True)
class Classification:
    verdict: Verdict
    reason: str
    #: said about a safe global that torch.load(weights_only=True) still refuses
    note: str | None = None


_DTYPES = _words(
    "float32 float64 float16 bfloat16 complex32 complex64 complex128 bool uint8 int8 int16 int32 "
    "int64 uint16 uint32 uint64 qint8 quint8 qint32 quint4x2 quint2x4 float8_e4m3fn float8_e5m2 "
    "float8_e4m3fnuz float8_e5m2fnuz float8_e8m0fnu float4_e2m1fn_x2 bits8 bits16 bits1x8 "
    "bits2x4 bits4x2 int1 int2 int3 int4 int5 int6 int7 uint1 uint2 uint3 uint4 uint5 uint6 uint7"
)
_TYPES = _words(
    "BFloat16 Bool Byte Char ComplexDouble ComplexFloat Double Float Half Int Long Short"
)
_NO_COMPLEX = [t for t in _TYPES if not t.startswith("Complex")]
_NO_COMPLEX_BOOL = [t for t in _NO_COMPLEX if t != "Bool"]
_QSTORAGES = _words("QInt32 QInt8 QUInt2x4 QUInt4x2 QUInt8")
_REBUILD = _words(
    "_rebuild_tensor _rebuild_tensor_v2 _rebuild_tensor_v3 _rebuild_parameter "
    "_rebuild_parameter_with_state _rebuild_qtensor _rebuild_sparse_tensor "
    "_rebuild_meta_tensor_no_storage _rebuild_wrapper_subclass _rebuild_nested_tensor "
    "_rebuild_device_tensor_from_numpy _rebuild_device_tensor_from_cpu_tensor"
)
_QSCHEMES = _words(
    "per_tensor_affine per_tensor_symmetric per_channel_affine per_channel_symmetric "
    "per_channel_affine_float_qparams"
)


def _weights_only_names() -> frozenset[str]:
    """``torch._weights_only_unpickler._get_allowed_globals()`` of torch 2.13, as data.

    A test compares it with the installed torch's, so an upgrade that changes the
    allowlist fails loudly instead of drifting.
    """
    names = {
        "collections.OrderedDict",
        "collections.Counter",
        "torch.nn.parameter.Parameter",
        "torch.serialization._get_layout",
        "torch.Size",
        "torch.Tensor",
        "torch.device",
        "_codecs.encode",
        "builtins.bytearray",
        "builtins.set",
        "builtins.complex",
        "torch.storage.TypedStorage",
        "torch.storage.UntypedStorage",
        "torch._tensor._rebuild_from_type_v2",
    }
    names.update(f"torch.{d}" for d in _DTYPES)
    names.update(f"torch.{q}" for q in _QSCHEMES)
    names.update(f"torch._utils.{f}" for f in _REBUILD)
    names.update(f"torch.{t}Storage" for t in _TYPES)
    names.update(f"torch.{q}Storage" for q in _QSTORAGES)
    names.update(f"torch.cuda.{t}Storage" for t in _TYPES)
    names.update(f"torch.{t}Tensor" for t in _NO_COMPLEX)
    names.update(f"torch.cuda.{t}Tensor" for t in _NO_COMPLEX)
    names.update(f"torch.sparse.{t}Tensor" for t in _NO_COMPLEX_BOOL)
    names.update(f"torch.cuda.sparse.{t}Tensor" for t in _NO_COMPLEX_BOOL)
    return frozenset(names)


#: exactly what torch.load(weights_only=True) admits by default
WEIGHTS_ONLY: frozenset[str] = _weights_only_names()

_REFUSED = (
    "torch.load(weights_only=True) refuses it unless you allowlist it with "
    "torch.serialization.add_safe_globals"
)
#: builtins that only build plain data from plain arguments and run no code of their own.
#: Python's pickler writes them for frozensets, ranges, slices and empty bytes; weights_only
#: loading refuses them, the scan does not (and says so).
INERT: dict[str, str] = {
    "builtins.frozenset": "a frozenset",
    "builtins.range": "a range",
    "builtins.slice": "a slice",
    "builtins.bytes": "a bytes value (protocols < 3 write empty bytes this way)",
}
SAFE: frozenset[str] = WEIGHTS_ONLY | frozenset(INERT)

_NUMPY = "NumPy value: not a tensor; torch.load(weights_only=True) rejects it unless allowlisted"
_PATH = "a filesystem path object: inert data, but not a tensor"
_CONFIG = "a configuration object: inert data, but not a tensor"
_LIGHTNING = "Lightning's AttributeDict (a dict subclass); loading it imports Lightning"

#: Known-benign, non-tensor objects: allowed, but reported so nobody is surprised.
WARNING: dict[str, str] = {
    **{
        f"{mod}.{name}": _NUMPY
        for mod in ("numpy.core.multiarray", "numpy._core.multiarray")
        for name in ("_reconstruct", "scalar")
    },
    "numpy.ndarray": _NUMPY,
    "numpy.dtype": _NUMPY,
    **{
        f"numpy.dtypes.{k}DType": _NUMPY
        for k in _words(
            "Float64 Float32 Float16 Int64 Int32 Int16 Int8 UInt64 UInt32 UInt16 UInt8 Bool "
            "Complex64 Complex128"
        )
    },
    "argparse.Namespace": "argparse.Namespace of hyperparameters: inert data, but not a tensor",
    **{
        f"pathlib.{k}": _PATH
        for k in _words("Path PosixPath WindowsPath PurePath PurePosixPath PureWindowsPath")
    },
    **{
        f"datetime.{k}": "a datetime value: inert data"
        for k in _words("datetime date time timedelta timezone")
    },
    "collections.defaultdict": "a defaultdict: its factory is judged separately",
    "collections.deque": "a deque: inert data",
    "decimal.Decimal": "a Decimal: inert data",
    "fractions.Fraction": "a Fraction: inert data",
    "uuid.UUID": "a UUID: inert data",
    "typing.Any": _CONFIG,
    "copyreg._reconstructor": "protocol 0-1 construction of the class beside it (judged on "
    "its own)",
    "builtins.object": "the base class argument of copyreg._reconstructor",
    **{
        f"omegaconf.{k}": _CONFIG
        for k in _words(
            "dictconfig.DictConfig listconfig.ListConfig base.ContainerMetadata base.Metadata "
            "nodes.AnyNode nodes.StringNode nodes.IntegerNode nodes.FloatNode nodes.BooleanNode"
        )
    },
    "pytorch_lightning.utilities.parsing.AttributeDict": _LIGHTNING,
    "lightning.fabric.utilities.data.AttributeDict": _LIGHTNING,
    "lightning_fabric.utilities.data.AttributeDict": _LIGHTNING,
    **{
        f"{prefix}joblib.numpy_pickle.NumpyArrayWrapper": "joblib's stand-in for a NumPy array "
        "(joblib reads the array's data from the stream after it, and so does the scan)"
        for prefix in ("", "sklearn.externals.")
    },
}

_RUNS_CODE = "runs arbitrary code"
#: top-level module -> why importing and calling into it is dangerous
DANGEROUS_MODULES: dict[str, str] = {
    **{
        m: "runs shell commands or touches the filesystem"
        for m in _words("os posix nt subprocess shutil pty platform commands tempfile")
    },
    **{
        m: _RUNS_CODE
        for m in _words(
            "runpy timeit code codeop pdb bdb importlib imp pkgutil zipimport ctypes cffi types "
            "marshal sys builtins_exec"
        )
    },
    **{
        m: "unpickles more data (a nested payload)"
        for m in _words("pickle _pickle cPickle dill cloudpickle joblib shelve")
    },
    **{
        m: "opens network connections"
        for m in _words(
            "socket socketserver ssl http httplib urllib urllib2 urllib3 requests ftplib smtplib "
            "telnetlib webbrowser xmlrpc asyncio"
        )
    },
    **{
        m: "starts processes or threads"
        for m in _words("multiprocessing concurrent threading _thread signal")
    },
    **{m: "installs or builds packages" for m in _words("pip setuptools distutils ensurepip venv")},
    "operator": "operator.attrgetter/methodcaller build call chains to any attribute",
    "functools": "functools.partial/reduce call whatever they are given",
}
#: builtins (also ``__builtin__``) that evaluate, import, reach attributes or open files
DANGEROUS_BUILTINS = frozenset(
    _words(
        "eval exec compile getattr setattr delattr __import__ open breakpoint input globals "
        "locals vars execfile apply file reload type exit quit help memoryview"
    )
)
_BUILTIN_REASONS = {
    "getattr": "reaches any attribute (getattr(__import__('os'), 'system'))",
    "setattr": "rewrites any attribute",
    "delattr": "deletes any attribute",
    "__import__": "imports any module",
    "open": "opens or creates files",
    "type": "builds new classes",
    "input": "reads from the terminal",
    "breakpoint": "starts a debugger",
}
_JOBLIB_FILE = (
    "joblib.load opens the file it names (a path from the pickle) and numpy.loads it with "
    "allow_pickle=True"
)
DANGEROUS_NAMES: dict[str, str] = {
    **{
        f"{prefix}joblib.numpy_pickle_compat.{name}": _JOBLIB_FILE
        for prefix in ("", "sklearn.externals.")
        for name in ("NDArrayWrapper", "ZNDArrayWrapper")
    },
    "torch.load": "loads another (unchecked) pickle",
    "torch.serialization.load": "loads another (unchecked) pickle",
    "torch.hub.load": "downloads and runs code",
    "torch.hub.load_state_dict_from_url": "downloads data",
    "torch.jit.load": "loads TorchScript code",
    "torch.utils.cpp_extension.load": "compiles and loads native code",
    "torch.utils.cpp_extension.load_inline": "compiles and loads native code",
    "numpy.load": "numpy.load(allow_pickle=True) unpickles more data",
    "numpy.testing._private.utils.runstring": "exec()s a string",
    "numpy.f2py.f2py2e.run_main": "compiles and runs code",
}
#: attribute names that are a payload wherever they appear in a dotted name
_DANGEROUS_ATTRS = frozenset(
    _words(
        "system popen popen2 spawn spawnl spawnv execv execl execve fork eval exec __import__ "
        "__builtins__ __globals__ __subclasses__ __getattribute__ getattr check_output "
        "check_call run_path run_module"
    )
)


@functools.lru_cache(maxsize=4096)
def classify(qualname: str) -> Classification:
    """Classify ``module.name`` (after Python 2 import fixing)."""
    if qualname in WEIGHTS_ONLY:
        return Classification(Verdict.SAFE, "tensor rebuilding or plain data")
    if qualname in INERT:
        return Classification(Verdict.SAFE, INERT[qualname], f"{qualname}: {_REFUSED}")
    if qualname in WARNING:
        return Classification(Verdict.WARNING, WARNING[qualname])
    if qualname in DANGEROUS_NAMES:
        return Classification(Verdict.DANGEROUS, f"known dangerous: {DANGEROUS_NAMES[qualname]}")
    parts = qualname.split(".")
    builtin = parts[0] in ("builtins", "__builtin__") and len(parts) > 1
    if builtin and parts[1] in DANGEROUS_BUILTINS:
        why = _BUILTIN_REASONS.get(parts[1], _RUNS_CODE)
        return Classification(Verdict.DANGEROUS, f"known dangerous: builtins.{parts[1]} {why}")
    if parts[0] in DANGEROUS_MODULES:
        return Classification(Verdict.DANGEROUS, f"known dangerous: {DANGEROUS_MODULES[parts[0]]}")
    hit = next((p for p in parts[1:] if p in _DANGEROUS_ATTRS), None)
    if hit is not None:
        return Classification(Verdict.DANGEROUS, f"known dangerous: reaches `{hit}`")
    if qualname.startswith("copyreg._extension_registry."):
        return Classification(
            Verdict.UNSAFE, "extension code: resolved through copyreg's registry to any callable"
        )
    if qualname.startswith("__torch__."):
        return Classification(
            Verdict.UNSAFE, "a TorchScript class: torch.jit.load compiles and runs its code/"
        )
    if qualname.startswith("torch.nn.modules.") or qualname.startswith("torch.nn."):
        return Classification(
            Verdict.UNSAFE,
            "a pickled nn.Module (torch.save(model)): loading imports and rebuilds the class; "
            "save and load the state_dict instead",
        )
    return Classification(
        Verdict.UNSAFE,
        f"not on the allowlist: loading imports {parts[0]} and calls into it",
    )


def check_allowed(names: Iterable[str]) -> frozenset[str]:
    """``--allow`` values: each a dotted ``module.Name``; anything else is a usage error."""
    checked = frozenset(names)
    for name in sorted(checked):
        parts = name.split(".")
        if len(parts) < 2 or not all(part.isidentifier() for part in parts):
            raise TorchwiseError(
                f"--allow {name!r} is not a global's name",
                hint="write it as module.Name, e.g. --allow numpy.core.multiarray._reconstruct",
            )
    return checked
