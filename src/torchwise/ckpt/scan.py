"""``torchwise ckpt scan``: is this checkpoint safe to load? An allowlist, with evidence.

Every global that any pickle in the file references (every pickle of a zip,
nested archives, all five legacy pickles, stacked pickles) is classified by
:mod:`torchwise.ckpt.policy`. Each finding carries the global, the pickle
member, the opcode offset and, when the arguments are literals, the call the
unpickler would make.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from torchwise.ckpt.pickle_vm import Anomaly, Call, Global, PersistentRef, PickleResult
from torchwise.ckpt.policy import Verdict, classify
from torchwise.ckpt.reader import Container, read_container
from torchwise.errors import ExitCode, TorchwiseError

#: suffixes a directory scan picks up
CHECKPOINT_SUFFIXES = frozenset(
    {".pt", ".pth", ".bin", ".ckpt", ".pkl", ".pickle", ".safetensors", ".tar", ".model", ".pyt"}
)
_MAX_PER_GLOBAL = 5


@dataclass
class Finding:
    #: dangerous, unsafe or warning
    severity: str
    #: dangerous-global, unsafe-global, non-tensor-object, malformed-pickle, torchscript-code
    rule: str
    global_name: str | None
    reason: str
    member: str
    offset: int
    #: the call the unpickler would make, e.g. ``posix.system('touch /tmp/x')``
    call: str | None = None


@dataclass
class FileScan:
    path: str
    format: str
    #: safe, warning, unsafe or error
    verdict: str
    findings: list[Finding] = field(default_factory=list)
    #: every global referenced, with how often
    globals: dict[str, int] = field(default_factory=dict)
    members: list[str] = field(default_factory=list)
    error: str | None = None


@dataclass
class ScanReport:
    files: list[FileScan]

    @property
    def exit_code(self) -> ExitCode:
        verdicts = {f.verdict for f in self.files}
        if "unsafe" in verdicts:
            return ExitCode.FINDINGS
        if "error" in verdicts:
            return ExitCode.ERROR
        return ExitCode.OK

    def to_json(self) -> dict[str, Any]:
        return {"files": [asdict(f) for f in self.files], "exit_code": int(self.exit_code)}


def scan(paths: str | Path | Sequence[str | Path], allow: Iterable[str] = ()) -> ScanReport:
    """Scan files or directories; ``allow`` names globals (``module.Name``) to accept."""
    targets = [paths] if isinstance(paths, (str, Path)) else list(paths)
    allowed = frozenset(allow)
    files: list[FileScan] = []
    for target in targets:
        for path in _expand(Path(target)):
            files.append(scan_file(path, allowed))
    return ScanReport(files)


def _expand(path: Path) -> list[Path]:
    if not path.is_dir():
        return [path]
    found = sorted(
        p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in CHECKPOINT_SUFFIXES
    )
    if not found:
        raise TorchwiseError(
            f"{path}: no checkpoint files (*{', *'.join(sorted(CHECKPOINT_SUFFIXES))})",
            hint="pass the file itself if it has another extension",
        )
    return found


def scan_file(path: Path, allowed: frozenset[str] = frozenset()) -> FileScan:
    try:
        container = read_container(path)
    except TorchwiseError as exc:
        return FileScan(str(path), "unknown", "error", error=exc.message)
    except OSError as exc:
        return FileScan(str(path), "unknown", "error", error=f"cannot read {path}: {exc}")
    result = FileScan(str(path), container.format, "safe")
    _judge_container(container, result, allowed)
    severities = {f.severity for f in result.findings}
    if severities & {"dangerous", "unsafe"}:
        result.verdict = "unsafe"  # even when the file is also broken: the payload runs first
    elif result.error is not None:
        result.verdict = "error"
    elif "warning" in severities:
        result.verdict = "warning"
    return result


def _judge_container(container: Container, result: FileScan, allowed: frozenset[str]) -> None:
    for member in container.pickles:
        result.members.append(member.name)
        _judge_pickle(member.result, member.name, result, allowed)
    for failure in container.errors:
        result.members.append(failure.name)
        _judge_pickle(failure.error.partial, failure.name, result, allowed)
        result.error = result.error or f"{failure.name}: {failure.error}"
    if container.problems and result.error is None:
        result.error = container.problems[0]
    if container.format == "torchscript":
        result.findings.append(
            Finding(
                "warning",
                "torchscript-code",
                None,
                "TorchScript archive: torch.jit.load compiles and runs the code/ it contains",
                str(container.path),
                0,
            )
        )
    for child in container.children:
        _judge_container(child, result, allowed)


def _judge_pickle(
    pickle: PickleResult, member: str, out: FileScan, allowed: frozenset[str]
) -> None:
    callers = _caller_index(pickle.calls)
    per_global: dict[str, int] = {}
    for glob in pickle.globals:
        name = glob.qualname
        out.globals[name] = out.globals.get(name, 0) + 1
        raw = f"{glob.module}.{glob.name}"
        verdict = max(classify(name), classify(raw), key=lambda c: c.verdict)
        if verdict.verdict is Verdict.SAFE or name in allowed:
            continue
        per_global[name] = per_global.get(name, 0) + 1
        if per_global[name] > _MAX_PER_GLOBAL:
            continue
        severity, rule = {
            Verdict.WARNING: ("warning", "non-tensor-object"),
            Verdict.UNSAFE: ("unsafe", "unsafe-global"),
            Verdict.DANGEROUS: ("dangerous", "dangerous-global"),
        }[verdict.verdict]
        call = callers.get(id(glob))
        out.findings.append(
            Finding(
                severity,
                rule,
                name,
                verdict.reason,
                member,
                glob.offset,
                render(call) if call is not None else None,
            )
        )
    for anomaly in pickle.anomalies:
        out.findings.append(_anomaly(anomaly, member))


def _anomaly(anomaly: Anomaly, member: str) -> Finding:
    return Finding(
        "unsafe",
        "malformed-pickle",
        None,
        f"{anomaly.message}: no pickler emits this",
        member,
        anomaly.offset,
    )


def _caller_index(calls: list[Call]) -> dict[int, Call]:
    """id(global) -> the outermost call built on it (``getattr(os, 'system')('ls')``)."""
    by_func = {id(c.func): c for c in reversed(calls)}
    index: dict[int, Call] = {}
    for call in calls:
        if isinstance(call.func, Global) and id(call.func) not in index:
            outer = call
            while id(outer) in by_func:
                outer = by_func[id(outer)]
            index[id(call.func)] = outer
    # Globals used only as arguments (getattr(__import__('os'), ...)): the call holding them.
    for call in calls:
        for arg in call.args if isinstance(call.args, tuple) else ():
            if isinstance(arg, Global) and id(arg) not in index:
                index[id(arg)] = call
    return index


def render(obj: Any, depth: int = 0) -> str:
    """A short, literal rendering of a symbolic value, for evidence."""
    if depth > 4:
        return "..."
    if isinstance(obj, Global):
        return obj.qualname
    if isinstance(obj, Call):
        args = obj.args if isinstance(obj.args, (tuple, list)) else (obj.args,)
        inner = ", ".join(render(a, depth + 1) for a in args[:6])
        text = f"{render(obj.func, depth + 1)}({inner}{', ...' if len(args) > 6 else ''})"
        return text if len(text) < 400 else text[:397] + "..."
    if isinstance(obj, (str, bytes)):
        text = repr(obj)
        return text if len(text) < 200 else text[:197] + "..."
    if isinstance(obj, tuple):
        items = ", ".join(render(a, depth + 1) for a in obj[:6])
        return f"({items}{',' if len(obj) == 1 else ''})"
    if isinstance(obj, list):
        return f"[{', '.join(render(a, depth + 1) for a in obj[:6])}]"
    if isinstance(obj, dict):
        pairs = list(obj.items())[:6]
        return (
            "{"
            + ", ".join(f"{render(k, depth + 1)}: {render(v, depth + 1)}" for k, v in pairs)
            + "}"
        )
    if isinstance(obj, PersistentRef):
        return "<persistent id>"
    if obj is None or isinstance(obj, (int, float, bool)):
        return repr(obj)
    return f"<{type(obj).__name__}>"
