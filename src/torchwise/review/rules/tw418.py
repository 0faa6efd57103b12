"""TW418 removed-api (deprecated).

The class docstring is its user documentation (`torchwise rules TW418`).
"""

from __future__ import annotations

import ast

from torchwise.findings import Applicability, Edit, Fix, Severity
from torchwise.review.engine import facts as F
from torchwise.review.engine.context import Context
from torchwise.review.engine.syntax import keyword
from torchwise.review.registry import Rule, rule
from torchwise.review.rules._util import in_compat_code, rename_attribute

#: torchtext's pre-0.9 API, moved to torchtext.legacy in 0.9 and deleted in 0.12.
_TORCHTEXT_LEGACY = frozenset(
    {
        "Field", "RawField", "NestedField", "LabelField", "ReversibleField", "SubwordField",
        "Iterator", "BucketIterator", "BPTTIterator", "Dataset", "TabularDataset", "Example",
        "Batch", "Pipeline", "interleave_keys",
    }
)  # fmt: skip
_TORCHTEXT_LEGACY_DATASETS = frozenset(
    {"TranslationDataset", "LanguageModelingDataset", "SequenceTaggingDataset", "TabularDataset"}
)
#: Removed names and what replaced them (None: nothing to rename to).
_REMOVED = {
    "torchvision.transforms.Scale": "torchvision.transforms.Resize",
    "torchvision.transforms.RandomSizedCrop": "torchvision.transforms.RandomResizedCrop",
    "torch.onnx._export": "torch.onnx.export",
    "scipy.misc.imread": None,
    "scipy.misc.imresize": None,
    "scipy.misc.imsave": None,
    "scipy.misc.imrotate": None,
    "numpy.float": "float",
    "numpy.int": "int",
    "numpy.object": "object",
    "numpy.str": "str",
}
_VARIABLE = frozenset({"torch.autograd.Variable", "torch.autograd.variable.Variable"})
#: The keywords ``Variable`` accepts (``volatile`` is ignored, with a warning).
_VARIABLE_KEYWORDS = frozenset({"requires_grad", "volatile"})
_LEGACY_CPU_CONSTRUCTORS = frozenset(
    f"torch.{name}Tensor"
    for name in (
        "Float",
        "Double",
        "Half",
        "BFloat16",
        "Long",
        "Int",
        "Short",
        "Char",
        "Byte",
        "Bool",
    )
)
_REMOVED_LAST = frozenset(name.rsplit(".", 1)[-1] for name in _REMOVED)
_RENAMES = {
    "torchvision.transforms.Scale": "Resize",
    "torchvision.transforms.RandomSizedCrop": "RandomResizedCrop",
}
_WHEN = {
    "torchvision": "torchvision 0.15",
    "torch.onnx": "torch 2.0",
    "scipy": "SciPy 1.3",
    "numpy": "NumPy 1.24",
}


@rule
class RemovedApi(Rule):
    """## What it does
    Flags APIs that no longer exist, so the line raises on a current install:
    the torchtext legacy API (`torchtext.legacy`, `torchtext.data.Field`,
    `BucketIterator`, `TranslationDataset`, `IMDB.splits`, ...),
    `backward(retain_variables=...)`, `transforms.Scale`/`RandomSizedCrop`,
    `iterator.next()` on an iterator of a loader, `torch.onnx._export`,
    `torch._six`, `scipy.misc.imread`/`imresize` and the `np.float`/`np.int`
    aliases (not `np.bool`: NumPy 2 brought it back), `torch.FloatTensor(...,
    device=...)` (a CPU-only constructor) given a device that may not be the
    CPU, `Variable(x, device=...)` (`Variable` never took a device), and
    `from_pretrained(load_in_4bit=..., quantization_config=...)` (transformers
    4.38 refuses the two together).

    ## Why is this bad?
    Each raises `ImportError`, `AttributeError` or `TypeError` on the versions
    installed today (torchtext removed its legacy API in 0.12 and is no longer
    developed; `retain_variables` became `retain_graph` in 0.2; Python 3
    iterators have no `.next()`; NumPy 1.24 removed the aliases): the script
    cannot run at all, or fails the first time the line is reached.

    ## Example
    ```python
    import torchvision.transforms as transforms

    batch = iter(loader).next()
    loss.backward(retain_variables=True)
    resize = transforms.Scale(256)
    ```

    ## Use instead
    ```python
    import torchvision.transforms as transforms

    batch = next(iter(loader))
    loss.backward(retain_graph=True)
    resize = transforms.Resize(256)
    ```

    ## Fix safety
    Safe for the renames (`retain_graph`, `Resize`, `RandomResizedCrop`,
    `next(it)`): the new name is the same operation. The torchtext, SciPy and
    `torch._six` cases need a rewrite and get no fix.
    """

    code = "TW418"
    name = "removed-api"
    family = "deprecated"
    severity = Severity.ERROR
    message = "{what}"
    fix = Applicability.SAFE

    def __init__(self) -> None:
        # `from torchtext import data` -> (import node, legacy names used through it)
        self.torchtext_modules: dict[str, tuple[ast.AST, set[str]]] = {}

    def visit_ImportFrom(self, node: ast.ImportFrom, ctx: Context) -> None:
        module = node.module or ""
        if node.level or in_compat_code(ctx):
            return
        names = {alias.name for alias in node.names}
        if module == "torchtext.legacy" or module.startswith("torchtext.legacy."):
            self._report(ctx, node, "`torchtext.legacy` was removed in torchtext 0.12")
        elif module == "torchtext.data" and names & _TORCHTEXT_LEGACY:
            legacy = ", ".join(sorted(names & _TORCHTEXT_LEGACY))
            self._report(ctx, node, f"`torchtext.data.{legacy}` was removed in torchtext 0.12")
        elif module == "torchtext.datasets" and names & _TORCHTEXT_LEGACY_DATASETS:
            legacy = ", ".join(sorted(names & _TORCHTEXT_LEGACY_DATASETS))
            self._report(ctx, node, f"`torchtext.datasets.{legacy}` was removed in torchtext 0.12")
        elif module == "torchtext" and names & {"data", "datasets"}:
            for alias in node.names:
                if alias.name in {"data", "datasets"}:
                    self.torchtext_modules[alias.asname or alias.name] = (node, set())
        elif module == "torch._six" or (module == "torch" and "_six" in names):
            self._report(ctx, node, "`torch._six` was removed in torch 2.0")

    def visit_Import(self, node: ast.Import, ctx: Context) -> None:
        if in_compat_code(ctx):
            return
        for alias in node.names:
            if alias.name == "torch._six":
                self._report(ctx, node, "`torch._six` was removed in torch 2.0")
            elif alias.name.startswith("torchtext.legacy"):
                self._report(ctx, node, "`torchtext.legacy` was removed in torchtext 0.12")

    def visit_Attribute(self, node: ast.Attribute, ctx: Context) -> None:
        if node.attr in _REMOVED_LAST:
            qualname = ctx.qualname(node)
            if qualname in _REMOVED and not in_compat_code(ctx):
                self._removed_name(node, qualname, ctx)
                return
        base = node.value
        if isinstance(base, ast.Name) and base.id in self.torchtext_modules:
            legacy = _TORCHTEXT_LEGACY if base.id == "data" else _TORCHTEXT_LEGACY_DATASETS
            parent = ctx.parent
            splits = isinstance(parent, ast.Attribute) and parent.attr == "splits"
            if node.attr in legacy or (base.id == "datasets" and splits):
                self.torchtext_modules[base.id][1].add(f"{base.id}.{node.attr}")

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        func = node.func
        if (ctx.call_name(node) or "") in _LEGACY_CPU_CONSTRUCTORS:
            self._legacy_constructor(node, ctx)
            return
        if (ctx.call_name(node) or "") in _VARIABLE:
            rejected = [k.arg for k in node.keywords if k.arg and k.arg not in _VARIABLE_KEYWORDS]
            if rejected:
                what = (
                    f"`Variable` takes no `{rejected[0]}=` (TypeError on every call): build "
                    f"the tensor with it (`torch.tensor(..., {rejected[0]}=...)`); "
                    "`Variable` is not needed"
                )
                self._report(ctx, node, what)
            return
        if not isinstance(func, ast.Attribute):
            qualname = ctx.call_name(node)
            if qualname in _REMOVED and not in_compat_code(ctx):
                self._removed_name(node, qualname, ctx)  # `Scale(...)` imported by name
            return
        if func.attr == "from_pretrained" and keyword(node, "quantization_config") is not None:
            flags = [
                k.arg
                for k in node.keywords
                if k.arg in {"load_in_4bit", "load_in_8bit"}
                and not (isinstance(k.value, ast.Constant) and not k.value.value)
            ]
            if flags:
                what = (
                    f"`from_pretrained({flags[0]}=..., quantization_config=...)` raises "
                    "ValueError on transformers >= 4.38 (the two cannot be combined): set "
                    f"`{flags[0]}` in the `BitsAndBytesConfig` only"
                )
                self._report(ctx, node, what)
            return
        if func.attr == "backward" and keyword(node, "retain_variables") is not None:
            item = keyword(node, "retain_variables")
            assert item is not None
            start = ctx.span(item)[0]
            edit = Edit(start, start + len("retain_variables"), "retain_graph")
            fix = Fix("Use `retain_graph`", (edit,), Applicability.SAFE)
            what = "`backward(retain_variables=...)` raises TypeError: it is `retain_graph`"
            self._report(ctx, node, what, fix)
        elif func.attr == "next" and not node.args and not node.keywords:
            receiver = ctx.value_of(func.value)
            if receiver is not None and receiver.kind == F.ITERATOR:
                text = ctx.text(func.value)
                fix = Fix("Call `next(...)`", (Edit(*ctx.span(node), f"next({text})"),))
                what = (
                    "`.next()` does not exist on Python 3 iterators (AttributeError): "
                    "use `next(it)`"
                )
                self._report(ctx, node, what, fix)

    def leave_module(self, module: object, ctx: Context) -> None:
        by_import: dict[ast.AST, set[str]] = {}
        for node, used in self.torchtext_modules.values():
            by_import.setdefault(node, set()).update(used)
        for node, used in by_import.items():
            if used:
                names = ", ".join(f"`{name}`" for name in sorted(used))
                self._report(ctx, node, f"{names}: the torchtext legacy API was removed in 0.12")

    def _legacy_constructor(self, node: ast.Call, ctx: Context) -> None:
        """``torch.FloatTensor(n, device=device)``: CPU-only, raises for any other device."""
        device = keyword(node, "device")
        if device is None:
            return
        value = device.value
        literal = value.value if isinstance(value, ast.Constant) else None
        if isinstance(literal, str) and literal.split(":")[0] == "cpu":
            return
        name = (ctx.call_name(node) or "").rsplit(".", 1)[-1]
        what = (
            f"`torch.{name}(..., device=...)` only builds CPU tensors: it raises RuntimeError "
            f"for `{ctx.text(value)}` unless that is the CPU; use `torch.empty(..., device=...)`"
        )
        self._report(ctx, node, what)

    def _removed_name(self, node: ast.expr, qualname: str, ctx: Context) -> None:
        when = next(v for k, v in _WHEN.items() if qualname.startswith(k))
        new = _REMOVED[qualname]
        what = f"`{qualname}` was removed in {when}" + (f": use `{new}`" if new else "")
        fix = None
        if qualname in _RENAMES and isinstance(node, ast.Attribute):
            new_name = _RENAMES[qualname]
            fix = Fix(f"Use `{new_name}`", (rename_attribute(ctx, node, new_name),))
        self._report(ctx, node, what, fix)

    def _report(self, ctx: Context, node: ast.AST, what: str, fix: Fix | None = None) -> None:
        ctx.report(self, node, fix=fix, what=what)
