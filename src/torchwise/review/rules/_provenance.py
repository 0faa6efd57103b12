"""Where a loaded file comes from, as far as the code shows (TW301).

A file is the project's own only when the project's ``torch.save`` provably
writes it: the loaded path ends in a file name a save writes
(``os.path.join(args.out, "checkpoint.pth")``), or is the very expression a
save in the same file writes to. Everything else may come from someone else,
and the code often says so: a URL or a download, the command line
(``args.resume``), a configuration (``cfg.MODEL.WEIGHTS``), the environment,
or a parameter whose callers pass one of those. A path the code builds from
parts takes the most telling part's origin.
"""

from __future__ import annotations

import ast
import fnmatch
import re
from dataclasses import dataclass
from pathlib import Path

from torchwise.review.engine.context import Context
from torchwise.review.engine.dispatch import subtree
from torchwise.review.engine.syntax import (
    file_name,
    file_template,
    path_template,
    text_file_template,
)

OWN = "own"
DOWNLOAD = "download"
COMMAND_LINE = "command line"
CONFIGURATION = "configuration"
ENVIRONMENT = "environment"
PARAMETER = "parameter"
LITERAL = "literal"
UNKNOWN = "unknown"
#: Origins that name someone else's file outright.
EXTERNAL = frozenset({DOWNLOAD, COMMAND_LINE, CONFIGURATION, ENVIRONMENT})

#: Names that hold parsed command-line options, and configurations.
_COMMAND_LINE_ROOTS = frozenset(
    {"args", "opt", "opts", "options", "flags", "FLAGS", "cmd_args", "cli_args", "parsed_args"}
)
_CONFIGURATION_ROOTS = frozenset(
    {
        "cfg",
        "config",
        "conf",
        "configs",
        "hparams",
        "hp",
        "hps",
        "params",
        "hyperparams",
        "settings",
        "C",
    }
)
#: Calls that fetch a file from the network.
_DOWNLOADS = re.compile(
    r"(hf_hub_download|download_url_to_file|urlretrieve|cached_download|snapshot_download|"
    r"get_file|download\w*|cached_path|fetch\w*|load_state_dict_from_url)$"
)
#: Path-building calls whose origin is their arguments'.
_PATH_CALLS = frozenset(
    {
        "join",
        "joinpath",
        "Path",
        "PurePath",
        "str",
        "expanduser",
        "abspath",
        "realpath",
        "normpath",
        "format",
        "resolve",
        "fspath",
    }
)
_RANK = {
    DOWNLOAD: 6,
    COMMAND_LINE: 5,
    CONFIGURATION: 4,
    ENVIRONMENT: 4,
    PARAMETER: 3,
    LITERAL: 2,
    UNKNOWN: 1,
    OWN: 0,
}
_DEPTH = 4


@dataclass(frozen=True)
class Provenance:
    kind: str
    evidence: str  # what shows it: "`args.resume`"

    def describe(self) -> str:
        if self.kind == DOWNLOAD:
            return f"the file is downloaded ({self.evidence})"
        if self.kind in (COMMAND_LINE, CONFIGURATION, ENVIRONMENT):
            return f"the path comes from the {self.kind} ({self.evidence})"
        if self.kind == PARAMETER:
            return f"the path is {self.evidence}"
        if self.kind == LITERAL:
            return f"{self.evidence} is not a file this project writes"
        return "the project does not provably write this file itself"


def provenance(path: ast.AST | None, ctx: Context) -> Provenance:
    """Where the file at ``path`` (a load's argument) comes from."""
    if path is None:
        return Provenance(UNKNOWN, "")
    own = _own(path, ctx)
    if own is not None:
        return own
    return _origin(path, ctx, 0)


def _own(path: ast.AST, ctx: Context) -> Provenance | None:
    name = file_name(path)
    text = ctx.text(path)
    template = file_template(path)
    for where, save in ctx.project.saves():
        shown = f"{Path(where).name}:{save.line}"
        if name is not None and save.file_name == name:
            return Provenance(OWN, f"`torch.save` writes `{name}` at {shown}")
        if save.path_text == text and (where == ctx.path or _attribute(text)):
            return Provenance(OWN, f"`torch.save` writes `{text}` at {shown}")
        saved = text_file_template(save.path_text)
        if template is not None and saved == template:
            return Provenance(OWN, f"`torch.save` writes `{template}` at {shown}")
        if (
            name is not None
            and saved is not None
            and fnmatch.fnmatch(name, saved.replace("{}", "*"))
        ):
            return Provenance(OWN, f"`torch.save` writes `{saved}` at {shown}")
    return None


def _attribute(text: str) -> bool:
    """``config.checkpoint_path``: an attribute path means the same file in
    every file of the project (a bare name may be a different local)."""
    return re.fullmatch(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)+", text) is not None


def _strongest(found: list[Provenance]) -> Provenance:
    if not found:
        return Provenance(UNKNOWN, "")
    return max(found, key=lambda item: _RANK[item.kind])


def _origin(node: ast.AST, ctx: Context, depth: int) -> Provenance:
    if depth > _DEPTH:
        return Provenance(UNKNOWN, "")
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        if node.value.startswith(("http://", "https://", "s3://", "gs://", "hf://")):
            return Provenance(DOWNLOAD, f"`{node.value[:80]}`")
        return Provenance(LITERAL, f"`{node.value[:80]}`")
    if isinstance(node, (ast.Attribute, ast.Subscript)):
        return _chain(node, ctx, depth)
    if isinstance(node, ast.Call):
        return _call(node, ctx, depth)
    if isinstance(node, ast.JoinedStr):
        return _strongest(
            [
                _origin(item.value, ctx, depth + 1)
                for item in node.values
                if isinstance(item, ast.FormattedValue)
            ]
        )
    if isinstance(node, ast.BinOp):
        return _strongest([_origin(node.left, ctx, depth + 1), _origin(node.right, ctx, depth + 1)])
    if isinstance(node, ast.Name):
        return _name(node, ctx, depth)
    return Provenance(UNKNOWN, "")


def _chain(node: ast.Attribute | ast.Subscript, ctx: Context, depth: int) -> Provenance:
    text = ctx.text(node)
    root: ast.AST = node
    parts: list[str] = []
    while isinstance(root, (ast.Attribute, ast.Subscript)):
        if isinstance(root, ast.Attribute):
            parts.append(root.attr)
        root = root.value
    if isinstance(root, ast.Name):
        names = [root.id, *reversed(parts)]
        if names[0] == "self" and len(names) > 1:
            names = names[1:]  # self.args.resume, self.cfg.weights
        head = names[0]
        if head in _COMMAND_LINE_ROOTS:
            return Provenance(COMMAND_LINE, f"`{text}`")
        if head in _CONFIGURATION_ROOTS or head.endswith(("_cfg", "_config", "_args", "_opt")):
            kind = COMMAND_LINE if head.endswith(("_args", "_opt")) else CONFIGURATION
            return Provenance(kind, f"`{text}`")
        qualname = ctx.qualname(root) or ""
        if qualname == "sys" and parts[-1:] == ["argv"]:
            return Provenance(COMMAND_LINE, f"`{text}`")
        if qualname == "os" and "environ" in parts:
            return Provenance(ENVIRONMENT, f"`{text}`")
    if isinstance(node, ast.Subscript):
        return _origin(node.value, ctx, depth + 1)
    return Provenance(UNKNOWN, "")


def _call(node: ast.Call, ctx: Context, depth: int) -> Provenance:
    name = ctx.call_name(node) or ctx.text(node.func)
    last = name.rsplit(".", 1)[-1]
    if last in ("glob", "iglob", "rglob"):
        return _globbed(node, ctx)
    if last in ("sorted", "max", "min", "list", "next", "reversed") and node.args:
        return _origin(node.args[0], ctx, depth + 1)  # `sorted(glob(...))[-1]`
    if _DOWNLOADS.search(last):
        return Provenance(DOWNLOAD, f"`{ctx.text(node.func)}(...)`")
    if name in ("os.getenv", "os.environ.get"):
        return Provenance(ENVIRONMENT, f"`{ctx.text(node)[:80]}`")
    if name == "input" or name.endswith("input"):
        return Provenance(COMMAND_LINE, f"`{ctx.text(node)[:80]}`")
    if last in _PATH_CALLS or (isinstance(node.func, ast.Attribute) and last in ("get", "replace")):
        parts: list[ast.AST] = [*node.args, *(item.value for item in node.keywords)]
        if isinstance(node.func, ast.Attribute) and last in ("format", "get", "replace", "resolve"):
            parts.append(node.func.value)
        return _strongest([_origin(part, ctx, depth + 1) for part in parts])
    return Provenance(UNKNOWN, "")


def _globbed(node: ast.Call, ctx: Context) -> Provenance:
    """``glob(os.path.join(out, "ckpt-*.pth"))``: the project's own files when a
    save writes names the pattern matches."""
    pattern = node.args[-1] if node.args else None
    text = path_template(pattern) if pattern is not None else None
    if text is None:
        return Provenance(UNKNOWN, "")
    wanted = text.replace("\\", "/").rsplit("/", 1)[-1].replace("{}", "*")
    for where, save in ctx.project.saves():
        names = [save.file_name, text_file_template(save.path_text)]
        for name in names:
            if name and fnmatch.fnmatch(name.replace("{}", "0"), wanted):
                return Provenance(
                    OWN, f"`torch.save` writes `{name}` at {Path(where).name}:{save.line}"
                )
    return Provenance(UNKNOWN, "")


def _name(node: ast.Name, ctx: Context, depth: int) -> Provenance:
    function = _enclosing_function(ctx)
    if (
        function is not None
        and node.id in _parameters(function)
        and not _reassigned(function, node.id)
    ):
        return _parameter(node.id, function, ctx, depth)
    if node.id in _COMMAND_LINE_ROOTS:
        return Provenance(COMMAND_LINE, f"`{node.id}`")
    assigned = _assignment(node.id, function, ctx)
    if assigned is not None and depth < _DEPTH:
        own = _own(assigned, ctx)
        if own is not None:
            return own
        return _origin(assigned, ctx, depth + 1)
    return Provenance(UNKNOWN, "")


def _enclosing_function(ctx: Context) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    for parent in reversed(ctx.parents):
        if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return parent
    return None


def _parameters(function: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    arguments = function.args
    return [item.arg for item in [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]]


def _reassigned(function: ast.FunctionDef | ast.AsyncFunctionDef, name: str) -> bool:
    return any(
        isinstance(node, ast.Name) and node.id == name and isinstance(node.ctx, ast.Store)
        for node in subtree(function)
    )


def _assignment(name: str, function: ast.AST | None, ctx: Context) -> ast.AST | None:
    """The value of the one plain assignment to ``name`` in its scope."""
    scope = function if function is not None else ctx.module.node
    found: list[ast.AST] = []
    for node in subtree(scope):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
            targets = [node.target]
        value = getattr(node, "value", None)
        if value is not None and any(
            isinstance(target, ast.Name) and target.id == name for target in targets
        ):
            found.append(value)
    return found[0] if len(found) == 1 else None


def _parameter(
    name: str, function: ast.FunctionDef | ast.AsyncFunctionDef, ctx: Context, depth: int
) -> Provenance:
    """What the project's call sites pass for a parameter, followed up the call
    graph while callers only hand on a parameter of their own."""
    facts = ctx.function
    target = None if facts is None else facts.target
    found = [] if target is None else _passed(target, name, ctx, depth, set())
    owner = function.name
    if not found:
        return Provenance(
            PARAMETER, f"`{name}`, a parameter of `{owner}`, whatever its callers pass"
        )
    if all(item.kind == OWN for item in found):
        return found[0]
    strongest = _strongest(found)
    if strongest.kind in (UNKNOWN, LITERAL, OWN):
        shown = strongest.evidence or "its callers"
        return Provenance(PARAMETER, f"`{name}`, a parameter of `{owner}` ({shown})")
    return Provenance(strongest.kind, f"`{name}` of `{owner}`, given {strongest.evidence}")


def _passed(target: str, name: str, ctx: Context, depth: int, seen: set[str]) -> list[Provenance]:
    """The origins of what each call site of ``target`` passes as ``name``."""
    if depth > _DEPTH or f"{target}:{name}" in seen:
        return []
    seen.add(f"{target}:{name}")
    fact = ctx.project.function(target)
    if fact is None:
        return []
    params = [param for param in fact.params if param not in ("self", "cls")]
    found: list[Provenance] = []
    own_names = {save.file_name for _, save in ctx.project.saves() if save.file_name}
    for site in ctx.project.callers(target):
        passed = dict(zip(params, site.fact.args, strict=False))
        passed.update(site.fact.keywords)
        arg = passed.get(name)
        if arg is None:
            continue
        where = f"{Path(site.path).name}:{site.fact.line}"
        if isinstance(arg.literal, str):
            literal_name = arg.literal.replace("\\", "/").rsplit("/", 1)[-1]
            if literal_name in own_names:
                found.append(Provenance(OWN, f"`{arg.literal}` at {where}"))
            elif arg.literal.startswith(("http://", "https://")):
                found.append(Provenance(DOWNLOAD, f"`{arg.literal[:80]}` at {where}"))
            else:
                found.append(Provenance(LITERAL, f"`{arg.literal[:80]}` at {where}"))
            continue
        passed_name = arg.name or ""
        parts = passed_name.split(".")
        head = parts[1] if parts[0] == "self" and len(parts) > 1 else parts[0]
        caller = ctx.project.function(site.caller)
        if head in _COMMAND_LINE_ROOTS:
            found.append(Provenance(COMMAND_LINE, f"`{passed_name}` at {where}"))
        elif head in _CONFIGURATION_ROOTS:
            found.append(Provenance(CONFIGURATION, f"`{passed_name}` at {where}"))
        elif caller is not None and "." not in passed_name and passed_name in caller.params:
            further = _passed(site.caller, passed_name, ctx, depth + 1, seen)
            found.extend(further or [Provenance(UNKNOWN, f"`{passed_name}` at {where}")])
        else:
            found.append(Provenance(UNKNOWN, f"`{passed_name or '...'}` at {where}"))
    return found
