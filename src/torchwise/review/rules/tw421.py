"""TW421 missing-in-declared-range (deprecated).

The class docstring is its user documentation (`torchwise rules TW421`).
"""

from __future__ import annotations

import ast

from torchwise.findings import Severity
from torchwise.review.contracts import library_of
from torchwise.review.engine.context import Context
from torchwise.review.registry import Rule, rule
from torchwise.review.rules._contracts import Range, declared_range, in_try_body, tables
from torchwise.review.rules._util import in_compat_code

#: Names other rules report with a rename or a port (TW402, TW418): said once.
_REPORTED_ELSEWHERE = frozenset(
    {
        "torch.solve",
        "torch.lstsq",
        "torch.symeig",
        "torch.eig",
        "torch.matrix_rank",
        "torch._six",
        "torch.onnx._export",
        "torchvision.transforms.Scale",
        "torchvision.transforms.RandomSizedCrop",
    }
)
_REPORTED_PREFIXES = ("torch._six.", "torchtext.legacy", "torchtext.data.", "torchtext.datasets.")


@rule
class MissingInDeclaredRange(Rule):
    """## What it does
    Flags an import or a use of a torch, torchvision, torchaudio or torchtext
    name that does not exist in releases the project says it runs on: removed
    (`torch.cuda.amp` names, `torch.nn.modules.module._addindent`,
    `torchvision.models.utils`), kept only as a stub that raises on every call,
    or added after the oldest release the project declares (`torch.compile` in
    a project that declares `torch>=1.8`).

    The releases come from the project's packaging files (`requirements.txt`,
    `pyproject.toml`, `setup.py`, `setup.cfg`) or `min-torch-version`; with
    nothing declared, from 2.4 to the newest release. What exists in each
    release is read from the released wheels themselves
    (`torchwise rules torch.NAME` prints a name's history). Code that tests
    the version, uses `hasattr`, or sits in a `try` whose handler catches
    `ImportError`/`AttributeError` is compatibility code on purpose and is not
    reported.

    ## Why is this bad?
    The line raises `ImportError` or `AttributeError` (or the stub's
    `RuntimeError`) on those releases: for a removed name, on every install
    newer than the removal; for a name added later, for every user on the
    older releases the project still claims to support. An error when the
    name is gone from a release in range; a warning when it is newer than the
    declared minimum (the declaration may be what is wrong).

    ## Example
    ```python
    from torch._utils import _accumulate   # removed in torch 2.0
    ```

    ## Use instead
    ```python
    from itertools import accumulate
    ```
    """

    code = "TW421"
    name = "missing-in-declared-range"
    family = "deprecated"
    severity = Severity.ERROR
    impact = "crash"
    message = "{what}"
    needs_text = ("torch",)

    def visit_Import(self, node: ast.Import, ctx: Context) -> None:
        for alias in node.names:
            self._check(node, alias.name, ctx)

    def visit_ImportFrom(self, node: ast.ImportFrom, ctx: Context) -> None:
        module = node.module or ""
        if node.level or library_of(module) is None:
            return
        if not self._check(node, module, ctx):
            return
        for alias in node.names:
            if alias.name != "*":
                self._check(node, f"{module}.{alias.name}", ctx)

    def visit_Attribute(self, node: ast.Attribute, ctx: Context) -> None:
        parent = ctx.parent
        if isinstance(parent, ast.Attribute) and parent.value is node:
            return  # only the whole chain: `torch.cuda.amp.autocast`, once
        if isinstance(node.ctx, ast.Store):
            return
        qualname = ctx.qualname(node)
        if qualname is not None and library_of(qualname) is not None:
            self._check(node, qualname, ctx)

    def _check(self, node: ast.AST, name: str, ctx: Context) -> bool:
        """Report ``name`` if it is missing in range; False when reported (so an
        import's names are not reported again under a missing module)."""
        library = library_of(name)
        if library is None or name in _REPORTED_ELSEWHERE or name.startswith(_REPORTED_PREFIXES):
            return True
        contracts = tables()
        status = contracts.status(name)
        span = declared_range(ctx, library)
        if status is None or span is None or not status.present or not span.mask:
            return True
        what = self._removed(name, status.present, status.missing, span) or self._stub(name, span)
        severity = None
        if what is None:
            what = self._added_later(name, status.present, status.missing, span)
            severity = Severity.WARNING
        if what is None or in_compat_code(ctx) or in_try_body(ctx, node):
            return True
        ctx.report(self, node, severity=severity, what=what)
        return False

    def _removed(self, name: str, present: int, missing: int, span: Range) -> str | None:
        gone = missing & ~_before(present)
        if not gone & span.mask:
            return None
        removed_at = (gone & -gone).bit_length() - 1
        last = span.last(present & ((1 << removed_at) - 1))
        return (
            f"`{name}` was removed in {span.library} {span.releases[removed_at]} (last in "
            f"{last}): it does not exist in {span.library} {span.describe(gone & span.mask)}, "
            f"which {_declared(span)}"
        )

    def _stub(self, name: str, span: Range) -> str | None:
        """A name kept only to raise on every call (``torch.symeig`` in 1.13)."""
        api = tables().api(name)
        if api is None:
            return None
        for mask, key in api.targets:
            definition = tables().definition(key) if key else None
            if definition is None:
                continue
            for guard in definition.guards:
                always = guard.when == ["const", True] and guard.raises is not None
                releases = guard.releases & mask & span.mask
                if always and releases:
                    text = "".join(part for part in guard.message if isinstance(part, str)).strip()
                    first_line = text.split("\n", 1)[0][:200]
                    return (
                        f"`{name}` raises {guard.raises} on every call in {span.library} "
                        f'{span.describe(releases)} ("{first_line}"), which {_declared(span)}'
                    )
        return None

    def _added_later(self, name: str, present: int, missing: int, span: Range) -> str | None:
        early = missing & span.mask & _before(present)
        if not early or not span.declared:
            return None
        return (
            f"`{name}` was added in {span.library} {span.first(present)}: it does not exist in "
            f"{span.library} {span.describe(early)}, which {_declared(span)}"
        )


def _before(present: int) -> int:
    """The releases before the first one that has the name."""
    return (present & -present) - 1


def _declared(span: Range) -> str:
    if span.declared:
        return "the project declares it supports"
    return "this project may run on (nothing declared: from the default minimum)"
