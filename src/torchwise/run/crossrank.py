"""The checks that compare ranks (TWR601, TWR602, TWR603, TWR606), run in the parent.

Each rank of a ``--nproc`` run writes what it saw (its training passes' sample
indices, fingerprints of its parameters after the first steps, its
``torch.save`` paths) into its result, and every collective call into
``collectives.rank<N>.jsonl`` as it happens, so a rank that never returns from
one still says where it waits. This module reads them after the run, with no
torch: what only shows across ranks is judged here.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from torchwise.findings import Finding, Severity
from torchwise.run.catalog import get_check
from torchwise.run.options import RunOptions
from torchwise.run.sites import Site

#: ranks whose batches share this fraction of their samples see "the same data"
OVERLAP = 0.5
#: relative difference between two ranks' parameter sums that is not rounding
PARAMETER_TOLERANCE = 1e-5


def _finding(code: str, site: Site | None, message: str, evidence: dict[str, object]) -> Finding:
    check = get_check(code)
    assert check is not None
    site = site or Site("<unknown>", 1)
    return Finding(
        code=code,
        message=message,
        path=site.path,
        line=site.line,
        column=site.column,
        end_line=site.end_line or site.line,
        end_column=site.end_column or site.column,
        severity=check.severity,
        data={k: str(v) for k, v in evidence.items()},
    )


def _site(data: Any) -> Site | None:
    return Site.from_json(data) if isinstance(data, dict) else None


def judge(
    findings: list[Finding],
    results: list[dict[str, Any]],
    out: Path,
    options: RunOptions,
    *,
    world: int,
    timed_out: bool,
) -> list[Finding]:
    """``findings`` plus what comparing the ``world`` ranks' records shows."""
    facts = {int(r.get("rank", 0)): r.get("facts", {}) for r in results}
    added: list[Finding] = []
    added += _overlapping_batches(facts)
    added += _diverging_parameters(facts)
    added += _stuck_collectives(out, facts, options, world=world, timed_out=timed_out)
    added += _saves_on_every_rank(facts)
    added += _metrics_differ(facts)
    taken = {(f.code, f.path, f.line) for f in findings}
    merged = findings + [f for f in added if (f.code, f.path, f.line) not in taken]
    return sorted(_consequences_folded(merged), key=lambda f: f.sort_key())


#: what a crash says when it is the consequence of another finding
#: what gloo says when a collective's partner never came (or went away)
_TIMEOUT_SIGNS = ("Timed out", "timed out", "Connection closed", "Connection reset")
_CONSEQUENCES = {
    "TWR603": ("gloo", *_TIMEOUT_SIGNS),
    "TWR604": ("Expected to have finished reduction",),
}


def _consequences_folded(findings: list[Finding]) -> list[Finding]:
    """A crash another finding explains becomes that finding's evidence (as within a rank)."""
    kept = list(findings)
    for code, signs in _CONSEQUENCES.items():
        cause = next((f for f in kept if f.code == code and f.severity is Severity.ERROR), None)
        if cause is None:
            continue
        for crash in [f for f in kept if f.code == "TWR001"]:
            if any(sign in crash.message for sign in signs):
                kept.remove(crash)
                cause.data.setdefault("then", crash.message.removeprefix("the script ")[:300])
        if code == "TWR604":  # unreduced gradients make the ranks' parameters differ too
            kept = [f for f in kept if f.code != "TWR602"]
    return kept


def _overlapping_batches(facts: dict[int, dict[str, Any]]) -> list[Finding]:
    if not any(f.get("ddp") for f in facts.values()) or 0 not in facts:
        return []
    first = facts[0].get("passes", [])
    for rank, other in sorted(facts.items()):
        if rank == 0:
            continue
        for mine, theirs in zip(first, other.get("passes", []), strict=False):
            shared, total = _shared(mine, theirs)
            if total and shared / total >= OVERLAP:
                return [
                    _finding(
                        "TWR601",
                        _site(mine.get("loader")),
                        f"ranks 0 and {rank} train on the same samples ({shared} of {total} "
                        "in their first batches): the DataLoader needs a DistributedSampler, "
                        "or every rank repeats the others' work",
                        {"shared samples": f"{shared} of {total}"},
                    )
                ]
    return []


def _shared(mine: dict[str, Any], theirs: dict[str, Any]) -> tuple[int, int]:
    indices, others = mine.get("indices", []), theirs.get("indices", [])
    count = min(len(indices), len(others))
    if count:
        return len(set(indices[:count]) & set(others[:count])), count
    prints, other_prints = mine.get("fingerprints", []), theirs.get("fingerprints", [])
    count = min(len(prints), len(other_prints))
    return sum(1 for a, b in zip(prints, other_prints, strict=False) if a == b), count


def _diverging_parameters(facts: dict[int, dict[str, Any]]) -> list[Finding]:
    reference = facts.get(0, {}).get("params", {})
    for step in sorted(reference, key=int):
        for rank, other in sorted(facts.items()):
            theirs = other.get("params", {}).get(step)
            if rank == 0 or not theirs:
                continue
            worst = _worst(reference[step], theirs)
            if worst is not None:
                name, difference = worst
                return [
                    _finding(
                        "TWR602",
                        _site(facts[0].get("step_site")),
                        f"after optimizer step {step} the parameters differ between ranks 0 "
                        f"and {rank} ({name} by {difference:.2g}, relative): the gradients "
                        "are not averaged (the model that trains is not the DDP-wrapped one, "
                        "or the update depends on the rank)",
                        {"parameter": name, "relative difference": f"{difference:.3g}"},
                    )
                ]
    return []


def _worst(mine: dict[str, Any], theirs: dict[str, Any]) -> tuple[str, float] | None:
    worst: tuple[str, float] | None = None
    for name, (total, magnitude) in mine.items():
        if name not in theirs:
            continue
        other_total, other_magnitude = theirs[name]
        scale = max(abs(magnitude), abs(other_magnitude), 1e-12)
        difference = max(abs(total - other_total), abs(magnitude - other_magnitude)) / scale
        if difference > PARAMETER_TOLERANCE and (worst is None or difference > worst[1]):
            worst = (name, difference)
    return worst


def _events(out: Path, rank: int) -> list[dict[str, Any]]:
    path = out / f"collectives.rank{rank}.jsonl"
    if not path.is_file():
        return []
    events = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            events.append(json.loads(line))
        except ValueError:
            continue  # a line cut off when the rank was killed
    return events


def _where(events: list[dict[str, Any]], fact: dict[str, Any]) -> tuple[str, Site | None]:
    """What a rank was doing at the end: waiting in a collective, crashed or done."""
    if events and events[-1]["phase"] in ("enter", "raised"):
        last = events[-1]
        verb = "waits in" if last["phase"] == "enter" else "gave up in"
        return f"{verb} {last['op']} (its collective #{last['seq']})", _site(last.get("site"))
    crash = fact.get("crash")
    if crash and _timed_out(fact):
        return (
            "timed out in a collective torch runs itself (DDP's gradient all-reduce or "
            "buffer broadcast)",
            _site(crash.get("site")),
        )
    if crash:
        return f"raised {crash['error']}", _site(crash.get("site"))
    calls = sum(1 for e in events if e["phase"] == "exit")
    return f"finished after {calls} collective call(s)", None


def _stuck_collectives(
    out: Path,
    facts: dict[int, dict[str, Any]],
    options: RunOptions,
    *,
    world: int,
    timed_out: bool,
) -> list[Finding]:
    ranks = sorted(set(range(world)) | set(facts))
    logs = {rank: _events(out, rank) for rank in ranks}
    stuck = [r for r in ranks if logs[r] and logs[r][-1]["phase"] in ("enter", "raised")]
    # a rank that timed out with no logged collective open waited in one of torch's own,
    # unless another rank crashed first (then the wait is that crash's consequence)
    crashed = [r for r in ranks if facts.get(r, {}).get("crash") and not _timed_out(facts[r])]
    if not crashed:
        stuck += [r for r in ranks if r not in stuck and _timed_out(facts.get(r, {}))]
    mismatch = _first_mismatch(logs)
    if not stuck and mismatch is None:
        return []
    waiting = stuck[0] if stuck else mismatch[0] if mismatch else 0
    described = []
    sites: list[Site | None] = []
    for rank in ranks:
        doing, site = _where(logs[rank], facts.get(rank, {}))
        described.append(f"rank {rank} {doing}" + (f" at {site.label}" if site else ""))
        sites.append(site)
    site = sites[ranks.index(waiting)] or next((s for s in sites if s), None)
    reason = (
        "the run hit its time limit"
        if timed_out
        else (f"gloo's time limit of {options.collective_timeout:g} s")
    )
    return [
        _finding(
            "TWR603",
            site,
            "the ranks do not call the same collectives: "
            + "; ".join(described)
            + " (on NCCL this hangs until the watchdog kills the job)",
            {"ended by": reason, **({"first mismatch": mismatch[1]} if mismatch else {})},
        )
    ]


def _timed_out(fact: dict[str, Any]) -> bool:
    """Whether the rank's crash was a collective that its partners never joined."""
    crash = fact.get("crash") or {}
    error = str(crash.get("error", ""))
    return "gloo" in error.lower() and any(sign in error for sign in _TIMEOUT_SIGNS)


def _first_mismatch(logs: dict[int, list[dict[str, Any]]]) -> tuple[int, str] | None:
    """The first collective number at which two ranks called different operations."""
    calls = {r: [e for e in events if e["phase"] == "enter"] for r, events in logs.items()}
    if len(calls) < 2:
        return None
    for number in range(min(len(c) for c in calls.values())):
        ops = {r: c[number]["op"] for r, c in calls.items()}
        if len(set(ops.values())) > 1:
            text = ", ".join(f"rank {r}: {op}" for r, op in sorted(ops.items()))
            return (min(ops), f"collective #{number + 1}: {text}")
    return None


def _saves_on_every_rank(facts: dict[int, dict[str, Any]]) -> list[Finding]:
    by_path: dict[str, list[tuple[int, Site | None]]] = {}
    for rank, fact in facts.items():
        for save in fact.get("saves", []):
            by_path.setdefault(save["path"], []).append((rank, _site(save.get("site"))))
    for path, savers in sorted(by_path.items()):
        ranks = sorted({rank for rank, _ in savers})
        if len(ranks) >= 2:
            return [
                _finding(
                    "TWR606",
                    savers[0][1],
                    f"ranks {', '.join(map(str, ranks))} all write {Path(path).name}: the "
                    "same file written by every rank at once can end up corrupt (save on "
                    "rank 0 only, then barrier)",
                    {"path": path},
                )
            ]
    return []


#: a number after a metric's name: "loss: 2.31", "val_acc=0.812", "mean train loss 2.3e-1"
_METRIC = re.compile(
    r"(?i)\b([a-z_ ]*?(?:loss|acc|accuracy|ppl|perplexity|f1|auc|mae|mse|rmse|bleu|reward"
    r"|iou|dice|score|error))\b[^0-9a-z+-]{0,4}([-+]?\d+\.\d+(?:e[-+]?\d+)?)"
)
#: relative difference between two ranks' values that rounding to the printed digits can't make
_DIFFERENT = 1e-3


def _metrics_differ(facts: dict[int, dict[str, Any]]) -> list[Finding]:
    """TWR608: the same line prints a metric on every rank, and the ranks' values differ:
    each reports its own shard's value, none the global one."""
    by_site: dict[tuple[str, int], dict[int, list[dict[str, Any]]]] = {}
    for rank, fact in facts.items():
        for line in fact.get("reported", []):
            site = line.get("site") or {}
            key = (str(site.get("path")), int(site.get("line", 0)))
            by_site.setdefault(key, {}).setdefault(rank, []).append(line)
    found: list[Finding] = []
    for lines_by_rank in by_site.values():
        if len(lines_by_rank) < 2:
            continue
        ranks = sorted(lines_by_rank)
        first, other = lines_by_rank[ranks[0]], lines_by_rank[ranks[1]]
        for mine, theirs in zip(first, other, strict=False):
            metric = _differing_metric(str(mine["text"]), str(theirs["text"]))
            if metric is None:
                continue
            name, a, b = metric
            found.append(
                _finding(
                    "TWR608",
                    _site(mine.get("site")),
                    f"every rank reports its own {name.strip()} here (rank {ranks[0]}: {a}, "
                    f"rank {ranks[1]}: {b}): each is one shard's value, not the global one; "
                    "all_reduce it (then report on rank 0)",
                    {f"rank {ranks[0]}": mine["text"], f"rank {ranks[1]}": theirs["text"]},
                )
            )
            break
    return found


def _differing_metric(mine: str, theirs: str) -> tuple[str, str, str] | None:
    ours = _METRIC.findall(mine)
    others = _METRIC.findall(theirs)
    if not ours or len(ours) != len(others):
        return None
    for (name, a), (other_name, b) in zip(ours, others, strict=True):
        if name != other_name:
            return None
        x, y = float(a), float(b)
        if abs(x - y) > _DIFFERENT * max(abs(x), abs(y), 1e-12):
            return name, a, b
    return None
