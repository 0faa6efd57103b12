"""Checking a reference or a call against the released contracts (TW421-TW425).

The project's declared torch range picks the releases that matter: a name
that exists in none of them is removed (or not yet added) for this project,
whatever the newest release says; a project that pins ``torch==1.13`` is not
told about 2.0's removals. Nothing declared: from the default minimum
(``DEFAULT_MIN_TORCH``) to the newest release the tables know.

torchvision, torchaudio and torchtext releases are each built for one torch
release (their wheels require it exactly); a companion library's releases
that matter are those built for a torch release in the range.
"""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass

from torchwise.review.contracts import Contracts, describe, library_of
from torchwise.review.contracts.guards import UNKNOWN, evaluate, holds, render
from torchwise.review.contracts.model import (
    POSITIONAL,
    POSITIONAL_ONLY,
    Definition,
    Guard,
    Signature,
)
from torchwise.review.engine.context import Context
from torchwise.review.rules._deprecated import (
    ACTIVATION_ALIASES,
    AMP_RENAMES,
    CHECKPOINTS,
    CLIP_GRAD_NORM,
    is_loss,
)
from torchwise.review.rules._deprecated_moved import MOVED, UPSAMPLE, WEIGHT_NORM
from torchwise.review.rules._deprecated_tensor import DEPRECATED, REMOVED
from torchwise.review.settings import DEFAULT_MIN_TORCH

#: Exceptions whose handler makes the guarded code deliberate compatibility code.
COMPAT_EXCEPTIONS = frozenset(
    {
        "ImportError",
        "ModuleNotFoundError",
        "AttributeError",
        "TypeError",
        "Exception",
        "BaseException",
    }
)


def minimum_torch(ctx: Context) -> tuple[int, int]:
    """The oldest torch the code must run on: configured, else declared, else the default."""
    configured = None if ctx.settings is None else ctx.settings.min_torch_version
    if configured is not None:
        return configured
    declared = ctx.project.torch_range.minimum
    return declared if declared is not None else DEFAULT_MIN_TORCH


@functools.cache
def tables() -> Contracts:
    """The contract tables, opened once per process (read-only)."""
    return Contracts()


def _version(text: str) -> tuple[int, int]:
    major, _, minor = text.partition(".")
    return int(major), int(minor or 0)


@dataclass(frozen=True)
class Range:
    """The releases of one library a file must run on."""

    library: str
    releases: tuple[str, ...]
    mask: int
    declared: bool  # the project (or the configuration) states its range

    def describe(self, mask: int) -> str:
        return describe(self.releases, mask)

    def first(self, mask: int) -> str | None:
        for index, release in enumerate(self.releases):
            if mask >> index & 1:
                return release
        return None

    def last(self, mask: int) -> str | None:
        found = None
        for index, release in enumerate(self.releases):
            if mask >> index & 1:
                found = release
        return found


class _Ranges:
    """Per file: each library's range, worked out once."""

    def __init__(self) -> None:
        self.found: dict[str, Range | None] = {}


def declared_range(ctx: Context, library: str) -> Range | None:
    """The releases of ``library`` the file's project declares it runs on."""
    ranges = ctx.helper(_Ranges).found
    if library not in ranges:
        ranges[library] = _declared_range(ctx, library)
    return ranges[library]


def _declared_range(ctx: Context, library: str) -> Range | None:
    contracts = tables()
    releases = contracts.releases(library)
    if not releases:
        return None
    minimum = minimum_torch(ctx)
    below = ctx.project.torch_range.below
    configured = ctx.settings is not None and ctx.settings.min_torch_version is not None
    declared = configured or ctx.project.torch_range.source is not None
    torch_versions = contracts.torch_releases(library)
    mask = 0
    for index, release in enumerate(releases):
        built_for = torch_versions[index] if torch_versions else release
        if built_for is None:
            continue  # a companion release that names no torch: not placed in the range
        version = _version(built_for)
        if version >= minimum and (below is None or version < below):
            mask |= 1 << index
    return Range(library, releases, mask, declared)


def in_try_body(ctx: Context, node: ast.AST, catching: frozenset[str] = COMPAT_EXCEPTIONS) -> bool:
    """Whether the node sits in the body of a ``try`` whose handlers catch one
    of ``catching``: ``try: from torch._six import inf`` / ``except
    ImportError: from math import inf`` tries the old name on purpose."""
    parents = list(ctx.parents)
    for index, parent in enumerate(parents):
        if not isinstance(parent, ast.Try):
            continue
        child = parents[index + 1] if index + 1 < len(parents) else node
        if child not in parent.body:
            continue
        for handler in parent.handlers:
            if handler.type is None:
                return True
            types = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
            names = {(ctx.dotted(item) or "").rsplit(".", 1)[-1] for item in types}
            if names & catching:
                return True
    return False


def literal(node: ast.AST) -> object:
    """The value a call writes out (``0.5``, ``-1``, ``(3, 3)``, ``"mean"``), or a sentinel."""
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return _UNKNOWN


_UNKNOWN = object()


@dataclass(frozen=True)
class Bound:
    """A call's arguments put to one signature's parameters."""

    values: dict[str, object]  # known values, defaults included
    passed: frozenset[str]  # parameters the call gives (known or not)


def bind(signature: Signature, call: ast.Call) -> Bound | None:
    """The call's arguments by parameter name; None when they do not fit (or
    cannot be placed: ``*args``, ``**kwargs``)."""
    if any(isinstance(item, ast.Starred) for item in call.args) or any(
        item.arg is None for item in call.keywords
    ):
        return None
    positional = [
        param for param in signature.params if param.kind in (POSITIONAL_ONLY, POSITIONAL)
    ]
    if len(call.args) > len(positional) and not signature.var_positional:
        return None
    values: dict[str, object] = {}
    passed: set[str] = set()
    for param, argument in zip(positional, call.args, strict=False):
        passed.add(param.name)
        value = literal(argument)
        if value is not _UNKNOWN:
            values[param.name] = value
    for item in call.keywords:
        assert item.arg is not None
        if not signature.accepts_keyword(item.arg) or item.arg in passed:
            return None
        passed.add(item.arg)
        value = literal(item.value)
        if value is not _UNKNOWN:
            values[item.arg] = value
    for param in signature.params:
        if param.name in passed or param.default is None or param.default == ["?"]:
            continue
        default = evaluate(param.default, {})
        if default is not UNKNOWN:
            values[param.name] = default
    return Bound(values, frozenset(passed))


#: The keyword aliases torch's C++ argument parser accepts for every native
#: function (``numpy_compatibility_arg_names`` in
#: ``torch/csrc/utils/python_arg_parser.cpp``): ``torch.sum(x, axis=0, keepdims=True)``.
NUMPY_ALIASES = {
    "axis": "dim",
    "keepdims": "keepdim",
    "x": "input",
    "a": "input",
    "x1": "input",
    "x2": "other",
}


def call_rejections(signature: Signature, call: ast.Call, native: bool = False) -> list[str]:
    """Why a call does not fit a signature (empty when it fits or cannot be told).
    A ``native`` signature (a stub of torch's C++ functions) takes numpy's
    spellings of some keywords too."""
    if any(isinstance(item, ast.Starred) for item in call.args) or any(
        item.arg is None for item in call.keywords
    ):
        return []
    problems = []
    slots = signature.positional_slots()
    if slots is not None and len(call.args) > slots:
        problems.append(f"takes at most {slots} positional argument{'s' if slots != 1 else ''}")
    for item in call.keywords:
        assert item.arg is not None
        name = NUMPY_ALIASES.get(item.arg, item.arg) if native else item.arg
        if not signature.accepts_keyword(item.arg) and not signature.accepts_keyword(name):
            problems.append(f"has no parameter `{item.arg}`")
    return problems


def guards_that_hold(
    definition: Definition, call: ast.Call, mask: int
) -> list[tuple[Guard, int, dict[str, object]]]:
    """The definition's checks that the call's own values make true, with the
    releases (within ``mask``) in which the check holds."""
    found = []
    for guard in definition.guards:
        releases = guard.releases & mask
        if not releases:
            continue
        values = _values_for(definition, call, releases)
        if values is None:
            continue
        if holds(guard.when, values):
            found.append((guard, releases, values))
    return found


def _values_for(definition: Definition, call: ast.Call, mask: int) -> dict[str, object] | None:
    for signatures_mask, overloads in definition.signatures:
        if not signatures_mask & mask or len(overloads) != 1:
            continue
        bound = bind(overloads[0], call)
        if bound is not None:
            return bound.values
    return None


def library_name(name: str | None) -> str | None:
    return None if name is None else library_of(name)


def definitions_in_range(name: str, span: Range) -> list[tuple[int, Definition]]:
    """What ``name`` is defined as in the range's releases, with those releases."""
    api = tables().api(name)
    if api is None:
        return []
    found = []
    for mask, key in api.targets:
        releases = mask & span.mask
        definition = tables().definition(key) if key and releases else None
        if definition is not None:
            found.append((releases, definition))
    return found


def called_library_name(call: ast.Call, ctx: Context) -> tuple[str, Range] | None:
    """The library name a call resolves to and the releases in range."""
    name = ctx.call_name(call)
    library = library_name(name)
    if name is None or library is None:
        return None
    span = declared_range(ctx, library)
    if span is None or not span.mask:
        return None
    return name, span


def guard_text(guard: Guard, values: dict[str, object]) -> str:
    text = render(guard.message, values).strip()
    return text.split("\n", 1)[0][:240]


def said_elsewhere(name: str) -> bool:
    """Whether another rule reports this API's deprecation or warning with a
    fix or a sharper message (TW128, TW301, TW401-TW417): said once."""
    return name in _SAID_ELSEWHERE or is_loss(name) or name.startswith("torchvision.models.")


_SAID_ELSEWHERE = frozenset(
    {
        *AMP_RENAMES,
        *ACTIVATION_ALIASES,
        *CHECKPOINTS,
        *CLIP_GRAD_NORM,
        *MOVED,
        *UPSAMPLE,
        *WEIGHT_NORM,
        *DEPRECATED,
        *REMOVED,
        "torch.range",
        "torch.testing.assert_allclose",
        "torch.autograd.Variable",
        "torch.load",
        "torch.hub.load_state_dict_from_url",
        "torch.nn.functional.softmax",
        "torch.nn.functional.log_softmax",
        "torch.nn.functional.softmin",
        "torch.nn.Softmax",
        "torch.nn.LogSoftmax",
        "torch.nn.Softmin",
    }
)


def rejected_releases(name: str, span: Range, call: ast.Call) -> tuple[dict[str, int], int]:
    """Why the call's signature fails, with the releases (in range) it fails
    in; and the releases whose signature is known at all."""
    failing: dict[str, int] = {}
    judged = 0
    for releases, definition in definitions_in_range(name, span):
        native = definition.key.startswith("torch._C.")
        covered = 0  # a release takes its first group's signatures (``signatures_in``)
        for signatures_mask, overloads in definition.signatures:
            shared = signatures_mask & releases & ~covered  # one group: judged once
            covered |= signatures_mask
            if not shared or not overloads:
                continue
            judged |= shared
            problems = [call_rejections(signature, call, native) for signature in overloads]
            if all(problems):
                for problem in min(problems, key=len):  # the overload the call comes closest to
                    failing[problem] = failing.get(problem, 0) | shared
    return failing, judged
