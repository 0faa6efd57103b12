"""One public name across the releases: ``torchwise rules torch.optim.lr_scheduler.OneCycleLR``.

What the contract tables know of a name, in the order a reader asks: in which
releases it exists, what it refers to, how its signature changed (parameters
added and removed, release by release), what it deprecates, and the checks
its own source makes on its arguments.
"""

from __future__ import annotations

from typing import Any

from torchwise.review.contracts import Contracts, describe, library_of
from torchwise.review.contracts.guards import render
from torchwise.review.contracts.model import Signature


def history(name: str, contracts: Contracts | None = None) -> dict[str, Any] | None:
    """The record of ``name``; None when no table covers it."""
    contracts = contracts or Contracts()
    library = library_of(name)
    status = contracts.status(name)
    if library is None or status is None:
        return None
    releases = contracts.releases(library)
    api = contracts.api(name)
    record: dict[str, Any] = {
        "name": name,
        "library": library,
        "releases": f"{releases[0]}-{releases[-1]}",
        "present": describe(releases, status.present),
        "missing": describe(releases, status.missing),
        "unknown": describe(releases, status.unknown),
        "definitions": [],
    }
    for mask, key in api.targets if api is not None else []:
        definition = contracts.definition(key) if key else None
        entry: dict[str, Any] = {"key": key, "releases": describe(releases, mask)}
        if definition is not None:
            entry["kind"] = definition.kind
            entry["signatures"] = [
                {
                    "releases": describe(releases, variant_mask & mask),
                    "overloads": [signature.render() for signature in overloads],
                }
                for variant_mask, overloads in definition.signatures
                if variant_mask & mask
            ]
            entry["changes"] = _changes(definition.signatures, mask, releases)
            entry["deprecations"] = [
                {"releases": describe(releases, item.releases & mask), "message": item.message}
                for item in definition.deprecations
                if item.releases & mask
            ]
            entry["checks"] = [
                {
                    "releases": describe(releases, guard.releases & mask),
                    "raises": guard.raises,
                    "warns": guard.warns,
                    "message": render(guard.message, {}).strip().split("\n", 1)[0][:200],
                }
                for guard in definition.guards
                if guard.releases & mask
            ]
        record["definitions"].append(entry)
    return record


def _changes(
    signatures: list[tuple[int, tuple[Signature, ...]]], mask: int, releases: tuple[str, ...]
) -> list[str]:
    """Parameters added and removed, release by release."""
    by_release: list[set[str] | None] = []
    for index in range(len(releases)):
        names: set[str] | None = None
        if mask >> index & 1:
            for variant_mask, overloads in signatures:
                if variant_mask >> index & 1:
                    names = {param.name for signature in overloads for param in signature.params}
        by_release.append(names)
    changes = []
    previous: set[str] | None = None
    for index, names in enumerate(by_release):
        if names is not None and previous is not None and names != previous:
            added, removed = sorted(names - previous), sorted(previous - names)
            parts = [f"+{name}" for name in added] + [f"-{name}" for name in removed]
            changes.append(f"{releases[index]}: {' '.join(parts)}")
        if names is not None:
            previous = names
    return changes


def render_history(record: dict[str, Any]) -> str:
    lines = [f"# {record['name']}", ""]
    lines.append(f"{record['library']} releases read: {record['releases']}.")
    lines.append(f"Exists in: {record['present'] or 'none'}.")
    if record["missing"]:
        lines.append(f"Missing in: {record['missing']}.")
    if record["unknown"]:
        lines.append(
            f"Not known (a module that answers names it does not list): {record['unknown']}."
        )
    for entry in record["definitions"]:
        lines += ["", f"## {entry['key']} ({entry.get('kind', 'value')}), in {entry['releases']}"]
        for signature in entry.get("signatures", []):
            shown = " | ".join(signature["overloads"]) or "(no signature in the stubs)"
            lines.append(f"- {signature['releases']}: {shown[:400]}")
        if entry.get("changes"):
            lines += ["", "Parameters: " + "; ".join(entry["changes"])]
        for item in entry.get("deprecations", []):
            lines.append(f"- deprecated in {item['releases']}: {item['message'][:200]}")
        checks = entry.get("checks", [])
        if checks:
            lines += ["", "Checks on its arguments:"]
            for check in checks[:20]:
                what = (
                    f"raises {check['raises']}" if check["raises"] else f"warns ({check['warns']})"
                )
                lines.append(f"- {check['releases']}: {what}: {check['message']}")
            if len(checks) > 20:
                lines.append(f"- ... and {len(checks) - 20} more")
    return "\n".join(lines)
