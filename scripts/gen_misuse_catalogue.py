# ruff: noqa: E501  (the tables of areas and messages read best one entry a line)
"""torch's own misuse messages, and who anticipates each: docs/misuse-catalogue.md.

    python scripts/gen_misuse_catalogue.py [--cache ~/.cache/torchwise-wheels] [--version 2.13]

Reads one torch release's Python sources (the wheel the contract generator
cached; nothing is imported) and lists every ``raise`` and every
``warnings.warn`` in the areas where user code goes wrong: ``nn`` (modules,
functional, init, utils, parallel), ``optim`` and its schedulers,
``utils.data``, ``amp``, ``distributed`` (the c10d front end and DDP) and
``serialization``. Each site is classified:

- **review**: torchwise review reports it before the code runs. The contract
  generator read the site's condition as a test of the public callable's own
  arguments (TW423 for a raise, TW424 for a warning, TW425 for a
  deprecation, evaluated on what each call writes), or a dedicated rule
  covers the message (the table ``DEDICATED`` below).
- **run**: only values a program computes can trigger it (shapes, devices,
  tensor contents, the state of an object); ``torchwise run`` reports the
  raise as the crash it is (TWR001), or the warning (TWR002), at the user's
  line, when the steps it runs reach it.
- **out of scope**, with the reason: an abstract method's
  ``NotImplementedError``, TorchScript/FX/ONNX/export internals, or torch's
  own consistency checks ("internal", "should not happen").

Writes ``docs/misuse-catalogue.md`` (summary and coverage) and
``docs/misuse-catalogue.csv`` (every site).
"""

from __future__ import annotations

import argparse
import ast
import csv
import json
import re
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from contracts.sources import releases, source_files

DOCS = Path(__file__).parent.parent / "docs"

#: Area -> module prefixes (the files of the release that belong to it).
AREAS = {
    "nn": ("torch.nn.modules", "torch.nn.init", "torch.nn.parameter", "torch.nn.utils", "torch.nn.parallel"),
    "functional": ("torch.nn.functional",),
    "optim": ("torch.optim.optimizer", "torch.optim.sgd", "torch.optim.adam", "torch.optim.adamw",
              "torch.optim.rmsprop", "torch.optim.adagrad", "torch.optim.adadelta", "torch.optim.adamax",
              "torch.optim.nadam", "torch.optim.radam", "torch.optim.rprop", "torch.optim.asgd",
              "torch.optim.lbfgs", "torch.optim.sparse_adam", "torch.optim.swa_utils"),
    "lr_scheduler": ("torch.optim.lr_scheduler",),
    "utils.data": ("torch.utils.data",),
    "amp": ("torch.amp", "torch.cuda.amp", "torch.cpu.amp"),
    "distributed": ("torch.distributed.distributed_c10d", "torch.distributed.run", "torch.distributed.launch",
                    "torch.nn.parallel.distributed"),
    "serialization": ("torch.serialization", "torch._weights_only_unpickler"),
}  # fmt: skip

#: Messages a dedicated review rule covers (a substring of torch's message -> the rule).
DEDICATED = {
    "mutually exclusive with shuffle": "TW112",
    "Implicit dimension choice": "TW128",
    "Weights only load failed": "TW416",
    "weights_only": "TW301",
    "use_reentrant": "TW411",
    "size_average and reduce args will be deprecated": "TW405",
    "nn.functional.sigmoid is deprecated": "TW404",
    "nn.functional.tanh is deprecated": "TW404",
    "upsample": "TW412",
    "torch.nn.utils.clip_grad_norm is now deprecated": "TW410",
    "lr_scheduler.step()` before `optimizer.step()": "TW103",
    "Detected call of `lr_scheduler.step()` before `optimizer.step()`": "TW103",
    "torch.cuda.amp": "TW401",
    "torch.cpu.amp": "TW401",
    "The epoch parameter in `scheduler.step()`": "TW425",
    "Using a target size": "TW704",
    "Using a non-full backward hook": "TW425",
}
_OUT_OF_SCOPE = [
    (re.compile(r"script|jit|torchscript|onnx|fx\b|symbolic|export|dynamo|compile", re.I), "TorchScript, FX, ONNX and export internals"),
    (re.compile(r"internal|should not happen|should never|unreachable|bug in|please report|please file", re.I), "torch's own consistency check"),
]  # fmt: skip


@dataclass
class Entry:
    area: str
    module: str
    line: int
    function: str
    kind: str  # "raise" or "warn"
    exception: str
    message: str
    verdict: str  # "review", "run", "out of scope"
    by: str  # the rule or check, or the reason


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "torchwise-wheels")
    parser.add_argument("--version", default="2.13")
    options = parser.parse_args(argv)
    (release,) = releases("torch", options.version, options.version)
    wheel = options.cache / release.filename
    stored = sorted(
        options.cache.glob(f"{release.filename}.*.json"), key=lambda path: path.stat().st_mtime
    )
    if not wheel.exists() or not stored:
        parser.error(f"run scripts/gen_contracts.py torch --cache {options.cache} first")
    sites = json.loads(stored[-1].read_text())["sites"]
    judged = {(site["module"], site["line"]): site for site in sites}
    entries = []
    for source in source_files(wheel, "torch"):
        area = _area(source.module)
        if area is None or source.stub:
            continue
        try:
            tree = ast.parse(source.text)
        except SyntaxError:
            continue
        entries.extend(_entries(area, source.module, tree, judged))
    _write(entries, release.version)
    return 0


def _area(module: str) -> str | None:
    for area, prefixes in AREAS.items():
        if any(module == prefix or module.startswith(prefix + ".") for prefix in prefixes):
            return area
    return None


def _entries(
    area: str, module: str, tree: ast.Module, judged: dict[tuple[str, int], dict[str, object]]
) -> list[Entry]:
    found = []
    for function, node in _sites(tree):
        kind, exception, message = _describe(node)
        if kind is None:
            continue
        site = judged.get((module, getattr(node, "lineno", 0)))
        verdict, by = _classify(kind, exception, message, function, site)
        line = getattr(node, "lineno", 0)
        found.append(Entry(area, module, line, function, kind, exception, message, verdict, by))
    return found


def _sites(tree: ast.Module) -> list[tuple[str, ast.AST]]:
    found: list[tuple[str, ast.AST]] = []

    def walk(node: ast.AST, scope: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                walk(child, f"{scope}.{child.name}" if scope else child.name)
                continue
            if (
                isinstance(child, ast.Raise)
                or (
                    isinstance(child, ast.Call)
                    and (_dotted(child.func) or "").endswith("warnings.warn")
                )
                or (isinstance(child, ast.Call) and _dotted(child.func) == "warn")
            ):
                found.append((scope or "<module>", child))
            walk(child, scope)

    walk(tree, "")
    return found


def _dotted(node: ast.AST) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


def _text(node: ast.AST | None) -> str:
    if node is None:
        return ""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(
            str(value.value) if isinstance(value, ast.Constant) else "{…}" for value in node.values
        )
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _text(node.left) + _text(node.right)
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "format"
    ):
        return _text(node.func.value)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
        return _text(node.left)
    return "…"


def _describe(node: ast.AST) -> tuple[str | None, str, str]:
    if isinstance(node, ast.Raise):
        exception = node.exc
        if exception is None:
            return None, "", ""  # a bare re-raise
        if isinstance(exception, ast.Call):
            name = (_dotted(exception.func) or "Exception").rsplit(".", 1)[-1]
            return "raise", name, _text(exception.args[0] if exception.args else None)
        return "raise", (_dotted(exception) or "Exception").rsplit(".", 1)[-1], ""
    assert isinstance(node, ast.Call)
    category = "UserWarning"
    if len(node.args) > 1:
        category = (_dotted(node.args[1]) or category).rsplit(".", 1)[-1]
    for item in node.keywords:
        if item.arg == "category":
            category = (_dotted(item.value) or category).rsplit(".", 1)[-1]
    return "warn", category, _text(node.args[0] if node.args else None)


def _classify(
    kind: str, exception: str, message: str, function: str, site: dict[str, object] | None
) -> tuple[str, str]:
    for fragment, rule in DEDICATED.items():
        if fragment in message:
            return "review", rule
    deprecation = (
        exception in ("FutureWarning", "DeprecationWarning") or "deprecat" in message.lower()
    )
    method = function.rsplit(".", 1)[-1]
    # `__getattr__` ends by raising: that is not a removed API that always raises.
    protocol = method.startswith("__") and method not in ("__init__", "__new__", "__call__")
    if site is not None and site.get("when") is not None and not protocol:
        if kind == "raise":
            return "review", "TW423" if site["when"] != ["const", True] else "TW421"
        return "review", "TW425" if deprecation else "TW424"
    if exception == "NotImplementedError":
        return "out of scope", "an abstract method's NotImplementedError"
    for pattern, reason in _OUT_OF_SCOPE:
        if pattern.search(message) or pattern.search(function):
            return "out of scope", reason
    if kind == "raise":
        return "run", "TWR001"
    return "run", "TWR002"


def _write(entries: list[Entry], version: str) -> None:
    DOCS.mkdir(exist_ok=True)
    with (DOCS / "misuse-catalogue.csv").open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(
            ["area", "module", "line", "function", "kind", "exception", "message", "verdict", "by"]
        )
        for entry in sorted(entries, key=lambda item: (item.area, item.module, item.line)):
            writer.writerow([entry.area, entry.module, entry.line, entry.function, entry.kind,
                             entry.exception, entry.message[:300], entry.verdict, entry.by])  # fmt: skip
    by_area: dict[str, Counter[str]] = defaultdict(Counter)
    for entry in entries:
        by_area[entry.area][entry.verdict] += 1
        by_area["all"][entry.verdict] += 1
    lines = [
        "# torch's misuse messages, and who catches each",
        "",
        f"Every `raise` and `warnings.warn` in torch {version}'s Python sources for the areas where",
        "user code goes wrong, classified by `python scripts/gen_misuse_catalogue.py` (the",
        "method is in its docstring; every site, with its verdict, is in",
        "[misuse-catalogue.csv](misuse-catalogue.csv)).",
        "",
        "- **review**: `torchwise review` reports it from the source, before anything runs: the",
        "  site's condition reads only the public callable's arguments, and review evaluates it",
        "  on what each call writes (TW421 removed, TW423 raises, TW424 warns, TW425",
        "  deprecated), or a dedicated rule covers it.",
        "- **run**: only values the program computes can trigger it (a shape, a device, a",
        "  tensor's contents, the state of an optimizer or a process group); `torchwise run`",
        "  reports it at the user's line (TWR001 for a raise, TWR002 for a warning) when the",
        "  steps it runs reach it.",
        "- **out of scope**: abstract methods, TorchScript/FX/ONNX internals, torch's own",
        "  consistency checks.",
        "",
        "| area | sites | review | run | out of scope | anticipated by review, of those in scope |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for area in [*AREAS, "all"]:
        counts = by_area.get(area, Counter())
        total = sum(counts.values())
        in_scope = counts["review"] + counts["run"]
        share = f"{100 * counts['review'] / max(in_scope, 1):.0f}%"
        label = f"**{area}**" if area == "all" else area
        lines.append(
            f"| {label} | {total} | {counts['review']} | {counts['run']} | {counts['out of scope']} | {share} |"
        )
    review = by_area["all"]["review"]
    scope = sum(by_area["all"].values()) - by_area["all"]["out of scope"]
    rules = Counter(entry.by for entry in entries if entry.verdict == "review")
    lines += [
        "",
        f"Anticipated from source (review), of the sites in scope: **{review} of {scope} "
        f"({100 * review / max(scope, 1):.0f}%)**; by rule: "
        + ", ".join(f"{rule} {count}" for rule, count in sorted(rules.items()))
        + ".",
        "",
        "Review judges a site only on the values a call writes out (literals and defaults), so",
        "a site counted here fires in review when the call passes its arguments as literals;",
        "the others need a value only the running program has, which is what `torchwise run`",
        "observes on the paths its steps reach. The review share is the figure to grow: each",
        "class of condition the contract generator learns to read moves sites from run to",
        "review.",
        "",
    ]
    (DOCS / "misuse-catalogue.md").write_text("\n".join(lines))


if __name__ == "__main__":
    raise SystemExit(main())
