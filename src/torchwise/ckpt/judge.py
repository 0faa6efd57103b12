"""Turn what the loaders' routes found into findings: each global, anomaly, trick and budget.

Every pickle any loader would unpickle is judged the same way, whoever unpickles
it (and so is one no modelled loader reaches, fail-closed): each global it
imports by :func:`torchwise.ckpt.policy.classify`, each anomaly the machine
recorded, an object-dtype NumPy scalar (a raw pointer to older NumPy), and a
budget reached before its end ("too large to vet": the loader would go on
where the scan stopped). Each finding names the loaders that would run it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from torchwise.ckpt.evidence import caller_index, numpy_object_scalars, render
from torchwise.ckpt.formats.container import Container, PickleMember, Trick
from torchwise.ckpt.policy import Verdict, classify

#: findings kept per global and pickle (a bomb repeats one global a million times)
MAX_PER_GLOBAL = 5
_TRICK_RULES = {
    "too-large": "too-large-to-vet",
    "torchscript": "torchscript-code",
    "native-code": "native-code",
    "bad-checksum": "archive-checksum",
}
_SEVERITY_RULE = {
    Verdict.WARNING: ("warning", "non-tensor-object"),
    Verdict.UNSAFE: ("unsafe", "unsafe-global"),
    Verdict.DANGEROUS: ("dangerous", "dangerous-global"),
}


@dataclass
class Finding:
    #: dangerous, unsafe or warning
    severity: str
    #: dangerous-global, unsafe-global, non-tensor-object, malformed-pickle, torchscript-code,
    #: archive-confusion, too-large-to-vet, native-code, archive-checksum
    rule: str
    global_name: str | None
    reason: str
    member: str
    offset: int
    #: the call the unpickler would make, e.g. ``posix.system('touch /tmp/x')``
    call: str | None = None
    #: the loaders that would run it (empty: present in the file, but no modelled loader
    #: unpickles it; judged all the same)
    loaders: list[str] = field(default_factory=list)


@dataclass
class Judgement:
    findings: list[Finding] = field(default_factory=list)
    #: every global referenced, with how often
    globals: dict[str, int] = field(default_factory=dict)
    members: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)


def judge_container(container: Container, out: Judgement, allowed: frozenset[str]) -> None:
    for trick in container.tricks:
        out.findings.append(_trick_finding(trick))
    for kind, count in container.unlisted.items():
        out.note(f"{count:,} more findings of the kind {kind} are not listed")
    for member in container.pickles:
        out.members.append(member.name)
        judge_pickle(member, out, allowed)
    for note in container.notes:
        out.note(note)


def _trick_finding(trick: Trick) -> Finding:
    rule = _TRICK_RULES.get(trick.kind, "archive-confusion")
    return Finding(
        trick.severity, rule, None, trick.message, trick.where, trick.offset,
        loaders=list(trick.loaders),
    )  # fmt: skip


def judge_pickle(member: PickleMember, out: Judgement, allowed: frozenset[str]) -> None:
    pickle = member.result
    loaders = list(member.loaders)
    callers = caller_index(pickle.calls)
    per_global: dict[str, int] = {}
    counts = out.globals
    for glob in pickle.globals:
        name = glob.qualname
        seen = counts.get(name, 0)
        counts[name] = seen + 1
        if per_global.get(name, 0) >= MAX_PER_GLOBAL:
            continue  # a bomb repeats one global: its first findings say it all
        verdict = classify(name)
        if verdict.note:
            out.note(verdict.note)
        if verdict.verdict is Verdict.SAFE or name in allowed:
            per_global[name] = MAX_PER_GLOBAL if seen > 64 else 0  # safe: stop re-classifying
            continue
        per_global[name] = per_global.get(name, 0) + 1
        severity, rule = _SEVERITY_RULE[verdict.verdict]
        call = callers.get(id(glob))
        out.findings.append(
            Finding(
                severity,
                rule,
                name,
                verdict.reason,
                member.name,
                glob.offset,
                render(call) if call is not None else None,
                loaders,
            )
        )
    for anomaly in pickle.anomalies:
        out.findings.append(
            Finding(
                "unsafe",
                "malformed-pickle",
                None,
                f"{anomaly.message}: no pickler emits this, and the scan cannot vet it",
                member.name,
                anomaly.offset,
                loaders=loaders,
            )
        )
    for call in numpy_object_scalars(pickle.calls):
        out.findings.append(
            Finding(
                "unsafe",
                "malformed-pickle",
                "numpy.core.multiarray.scalar",
                "a NumPy scalar of object dtype: older NumPy reads a raw object pointer from "
                "the pickle's bytes",
                member.name,
                call.offset,
                render(call),
                loaders,
            )
        )
    stop = pickle.stop
    if stop is not None and stop.kind == "budget":
        who = ", ".join(loaders) or "a loader"
        out.findings.append(
            Finding(
                "unsafe",
                "too-large-to-vet",
                None,
                f"{stop.message}; {who} would go on unpickling what the scan did not see "
                "(raise the limit with the --max-* flags to vet it)",
                member.name,
                stop.offset,
                loaders=loaders,
            )
        )
