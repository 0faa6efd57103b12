"""TW115 unshuffled-training-loader (training).

The class docstring is its user documentation (`torchwise rules TW115`).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

from torchwise.findings import Severity
from torchwise.review.engine import facts as F
from torchwise.review.engine.context import Context
from torchwise.review.engine.syntax import constant, keyword
from torchwise.review.registry import Rule, rule
from torchwise.review.rules._loops import Effects, position
from torchwise.review.rules._util import in_test_code

#: Datasets that cannot be shuffled by a DataLoader (iterable, streamed, sharded).
_ITERABLE = re.compile(r"iter|stream|shard|wds|webdataset|pipe|generator", re.I)
_SYNTHETIC = re.compile(r"random|fake|dummy|synthetic|toy|mock", re.I)
_DEVICE_TEST = re.compile(r"cuda|gpu|accel|device|mps", re.I)


@dataclass
class _Dict:
    """What a kwargs dict holds for `shuffle`: True unconditionally, or only
    under some conditions (their texts); or a sampler, or an explicit False."""

    shuffled: bool = False
    conditions: list[str] = field(default_factory=list)
    decided: bool = False  # a sampler, or shuffle=False written out


@dataclass
class _Loader:
    node: ast.Call
    name: str
    region: int
    condition: str | None  # shuffled only when this holds


@rule
class UnshuffledTrainingLoader(Rule):
    """## What it does
    Flags a `DataLoader` without `shuffle=True` (and without a sampler) that a
    training loop iterates: a loop over it, in the same function or in a
    function of the project it is passed to, that backpropagates and steps an
    optimizer. Also a loader shuffled only when a condition holds (a GPU is
    present: `if use_cuda: kwargs.update(shuffle=True)`). Iterable, streamed
    or sharded datasets, which a `DataLoader` cannot shuffle, are left alone.

    ## Why is this bad?
    Every epoch then sees the batches in the same order, with the same
    neighbours in each batch: training converges worse and to a different
    model, especially when the data is stored sorted (by class, by length, by
    time). When shuffling depends on the device, the same script trains
    differently on a laptop and on the cluster.

    ## Example
    ```python
    from torch.utils.data import DataLoader

    loader = DataLoader(train_set, batch_size=64)
    for epoch in range(10):
        for x, y in loader:
            optimizer.zero_grad()
            criterion(model(x), y).backward()
            optimizer.step()
    ```

    ## Use instead
    ```python
    from torch.utils.data import DataLoader

    loader = DataLoader(train_set, batch_size=64, shuffle=True)
    for epoch in range(10):
        for x, y in loader:
            optimizer.zero_grad()
            criterion(model(x), y).backward()
            optimizer.step()
    ```
    """

    code = "TW115"
    name = "unshuffled-training-loader"
    family = "training"
    severity = Severity.WARNING
    message = "`{name}` is iterated for training but {why}: every epoch sees the same order"

    def __init__(self) -> None:
        self.dicts: dict[tuple[int, str], _Dict] = {}
        self.loaders: list[_Loader] = []

    # -- kwargs dicts: {"shuffle": True}, .update(...), d["shuffle"] = True ----------
    def visit_Assign(self, node: ast.Assign, ctx: Context) -> None:
        region = _region(ctx)
        for target in node.targets:
            if isinstance(target, ast.Name):
                shuffled = _dict_shuffles(node.value)
                if shuffled is not None:
                    self.dicts[(region, target.id)] = _Dict(decided=_dict_decides(node.value))
                    if shuffled:
                        self._shuffle(ctx, region, target.id)
            elif (
                isinstance(target, ast.Subscript)
                and isinstance(target.value, ast.Name)
                and constant(target.slice) == "shuffle"
                and constant(node.value) is True
            ):
                self._shuffle(ctx, region, target.value.id)

    def _shuffle(self, ctx: Context, region: int, name: str) -> None:
        known = self.dicts.setdefault((region, name), _Dict())
        if ctx.branch:
            known.conditions.append(" and ".join(test for test, _ in ctx.branch))
        else:
            known.shuffled = True

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        func = node.func
        region = _region(ctx)
        if isinstance(func, ast.Attribute) and func.attr == "update" and node.args:
            target = ctx.dotted(func.value)
            source = node.args[0]
            if target is not None and (region, target) in self.dicts:
                if _dict_decides(source) or (
                    isinstance(source, ast.Name)
                    and self.dicts.get((region, source.id), _Dict()).decided
                ):
                    self.dicts[(region, target)].decided = True
                merged = _dict_shuffles(source)
                if merged is None and isinstance(source, ast.Name):
                    other = self.dicts.get((region, source.id))
                    merged = other is not None and (other.shuffled or bool(other.conditions))
                if merged:
                    self._shuffle(ctx, region, target)
            return
        if not (ctx.call_name(node) or "").endswith("DataLoader"):
            return
        parent = ctx.parent
        if not (isinstance(parent, ast.Assign) and len(parent.targets) == 1):
            return
        name = ctx.dotted(parent.targets[0])
        if name is None or self._excused(node, ctx):
            return
        condition = self._shuffle_condition(node, region)
        if isinstance(condition, str):
            self.loaders.append(_Loader(node, name, region, condition or None))

    def _excused(self, node: ast.Call, ctx: Context) -> bool:
        if in_test_code(ctx):
            return True
        if any(keyword(node, k) is not None for k in ("sampler", "batch_sampler")):
            return True
        dataset = node.args[0] if node.args else getattr(keyword(node, "dataset"), "value", None)
        if dataset is None:
            return True
        text = ctx.text(dataset)
        if isinstance(dataset, ast.Name):
            found = ctx.lookup(dataset.id)
            origin = found.origin if found is not None else None
            text += " " + (origin or "")
        return bool(_ITERABLE.search(text) or _SYNTHETIC.search(text))

    def _shuffle_condition(self, node: ast.Call, region: int) -> str | bool:
        """False: shuffled (or unknown); "": never shuffled; else the condition."""
        shuffle = keyword(node, "shuffle")
        if shuffle is not None:
            return False  # shuffle=False written out is a decision; a variable, unknown
        if len(node.args) >= 3:
            return "" if constant(node.args[2]) is False else False
        splats = [k.value for k in node.keywords if k.arg is None]
        if not splats:
            return ""
        for splat in splats:
            known = self.dicts.get((region, splat.id)) if isinstance(splat, ast.Name) else None
            if known is None or known.shuffled or known.decided:
                return False  # built elsewhere, shuffled, sampled or decided: not ours to judge
            device_only = [c for c in known.conditions if _DEVICE_TEST.search(c)]
            if device_only:
                return device_only[0]
            if known.conditions:
                return False  # shuffled under a condition about something else
        return ""

    # -- which loaders train --------------------------------------------------------
    def leave_function(self, function: F.FunctionFacts, ctx: Context) -> None:
        self._judge(id(function), function.calls, function.loops, ctx)

    def leave_module(self, module: F.ModuleFacts, ctx: Context) -> None:
        inside = {call for function in module.functions for call in function.calls}
        calls = [call for call in module.calls if call not in inside]
        self._judge(0, calls, module.loops, ctx, module)

    def _judge(
        self,
        region: int,
        calls: list[F.CallEvent],
        loops: list[F.LoopFacts],
        ctx: Context,
        module: F.ModuleFacts | None = None,
    ) -> None:
        loaders = [loader for loader in self.loaders if loader.region == region]
        if not loaders:
            return
        effects = Effects(module or ctx.module, ctx)
        for loader in loaders:
            created = position(loader.node)
            trained = any(
                loop.iterated == loader.name
                and position(loop.node) > created
                and effects.region_does(loop.calls, "step")
                and (effects.region_does(loop.calls, "backward") or _learns(loop))
                for loop in loops
            ) or any(
                position(call.node) > created and _passes_to_training(call, loader.name, ctx)
                for call in calls
            )
            if not trained:
                continue
            why = (
                f"is shuffled only when `{loader.condition}`"
                if loader.condition
                else "is not shuffled (no `shuffle=True`, no sampler)"
            )
            ctx.report(self, loader.node, name=loader.name, why=why)


def _learns(loop: F.LoopFacts) -> bool:
    from torchwise.review.engine.effects import learns

    return any(learns(call) for call in loop.calls)


def _passes_to_training(call: F.CallEvent, name: str, ctx: Context) -> bool:
    function = ctx.project.function(call.target)
    if function is None:
        return False
    params = [p for p in function.params if p not in {"self", "cls"}]
    for param, arg in zip(params, call.node.args, strict=False):
        if ctx.dotted(arg) == name and ctx.project.trains_over(call.target, param):
            return True
    for item in call.node.keywords:
        passed = item.arg is not None and ctx.dotted(item.value) == name
        if passed and ctx.project.trains_over(call.target, item.arg or ""):
            return True
    return False


def _region(ctx: Context) -> int:
    return id(ctx.function) if ctx.function is not None else 0


def _dict_decides(value: ast.expr) -> bool:
    """A dict literal (or ``dict(...)``) naming a sampler, or ``shuffle=False``."""
    if isinstance(value, ast.Dict):
        pairs = [(constant(k), v) for k, v in zip(value.keys, value.values, strict=True) if k]
    elif (
        isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "dict"
    ):
        pairs = [(item.arg, item.value) for item in value.keywords]
    else:
        return False
    return any(
        key in {"sampler", "batch_sampler"} or (key == "shuffle" and constant(item) is False)
        for key, item in pairs
    )


def _dict_shuffles(value: ast.expr) -> bool | None:
    """For a dict literal or ``dict(...)``: whether it sets shuffle=True (None: not a dict)."""
    if isinstance(value, ast.Dict):
        return any(
            constant(key) == "shuffle" and constant(item) is True
            for key, item in zip(value.keys, value.values, strict=True)
            if key is not None
        )
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "dict":
        item = keyword(value, "shuffle")
        return item is not None and constant(item.value) is True
    return None
