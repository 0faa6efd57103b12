"""Checkpoints and reproducibility (TW6xx): what a run leaves behind, and
whether it can be repeated or resumed."""

from __future__ import annotations

import ast

from torchwise.review import facts as F
from torchwise.review.context import Context
from torchwise.review.findings import Severity
from torchwise.review.registry import Rule, rule
from torchwise.review.rules.modules import is_module_class
from torchwise.review.rules.performance import trains

_SAVE = {"torch.save"}
#: Calls whose result is a plain container of tensors, not a module.
_NOT_MODULES = {"torch.load", "collections.OrderedDict", "copy.deepcopy"}
_PROGRESS_KEYS = {"epoch", "step", "global_step", "iteration", "iter", "steps", "epochs"}


def _state_dict_of(expr: ast.expr) -> ast.expr | None:
    """``model`` for ``model.state_dict()`` (also ``model.module.state_dict()``)."""
    if (
        isinstance(expr, ast.Call)
        and isinstance(expr.func, ast.Attribute)
        and expr.func.attr == "state_dict"
    ):
        return expr.func.value
    return None


@rule
class SaveWholeModule(Rule):
    """## What it does
    Flags `torch.save(model, path)` where `model` is an `nn.Module` (a model
    built or named as one, or `self` inside a module).

    ## Why is this bad?
    Saving the module pickles the object, which stores a reference to its
    class by import path: the checkpoint breaks as soon as the code is
    refactored or moved, and loading it needs `torch.load(weights_only=False)`,
    which executes arbitrary code from the file. A `state_dict` is plain
    tensors that `weights_only=True` loads safely into any compatible model.

    ## Example
    ```python
    import torch

    torch.save(model, "checkpoint.pt")
    ```

    ## Use instead
    ```python
    import torch

    torch.save(model.state_dict(), "checkpoint.pt")
    ```
    """

    code = "TW602"
    name = "save-whole-module"
    family = "checkpoints"
    severity = Severity.WARNING
    message = (
        "`torch.save({name}, ...)` pickles the module and its code: save `{name}.state_dict()`"
    )

    def __init__(self) -> None:
        self.plain: list[set[str]] = [set()]  # per function: names holding dicts, loads, ...

    def visit_FunctionDef(self, node: ast.FunctionDef, ctx: Context) -> None:
        self.plain.append(set())

    visit_AsyncFunctionDef = visit_FunctionDef

    def leave_function(self, function: F.FunctionFacts, ctx: Context) -> None:
        self.plain.pop()

    def visit_Assign(self, node: ast.Assign, ctx: Context) -> None:
        value = node.value
        plain = isinstance(value, (ast.Dict, ast.DictComp)) or (
            isinstance(value, ast.Call)
            and (_state_dict_of(value) is not None or ctx.call_name(value) in _NOT_MODULES)
        )
        for target in node.targets:
            name = ctx.dotted(target)
            if name is not None:
                (self.plain[-1].add if plain else self.plain[-1].discard)(name)

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        if ctx.call_name(node) not in _SAVE or not node.args:
            return
        saved = node.args[0]
        name = ctx.dotted(saved)
        if name is None or name in self.plain[-1]:
            return
        if name == "self":
            module = bool(ctx.classes) and is_module_class(ctx, ctx.classes[-1][0])
        else:
            base = (
                saved.value
                if isinstance(saved, ast.Attribute) and saved.attr == "module"
                else saved
            )
            module = ctx.kind_of(base) == F.MODULE
        if module:
            ctx.report(self, node, name=name)


def _dict_items(expr: ast.expr) -> list[tuple[str | None, ast.expr]] | None:
    """(key, value) pairs of ``{...}`` or ``dict(k=v)``; None for anything else."""
    if isinstance(expr, ast.Dict):
        if any(key is None for key in expr.keys):
            return None  # {**state}: unknown keys
        return [
            (key.value if isinstance(key, ast.Constant) and isinstance(key.value, str) else None, v)
            for key, v in zip(expr.keys, expr.values, strict=True)
        ]
    if (
        isinstance(expr, ast.Call)
        and isinstance(expr.func, ast.Name)
        and expr.func.id == "dict"
        and not expr.args
        and all(item.arg for item in expr.keywords)
    ):
        return [(item.arg, item.value) for item in expr.keywords]
    return None


@rule
class CheckpointWithoutOptimizer(Rule):
    """## What it does
    Flags `torch.save({...})` of a resumable checkpoint (a dict holding a
    model's `state_dict()`, in a file that trains or next to an `epoch`/`step`
    entry) that has no optimizer state, in a file that does not save the
    optimizer's `state_dict()` on its own either.

    ## Why is this bad?
    Resuming from it restarts the optimizer from scratch: Adam's moment
    estimates and SGD's momentum are lost, and the learning-rate warm-up
    effectively repeats, so the resumed run diverges from an uninterrupted one
    (often with a loss spike).

    ## Example
    ```python
    import torch

    torch.save({"epoch": epoch, "model": model.state_dict()}, "last.pt")
    ```

    ## Use instead
    ```python
    import torch

    torch.save(
        {"epoch": epoch, "model": model.state_dict(), "optimizer": optimizer.state_dict()},
        "last.pt",
    )
    ```
    """

    code = "TW603"
    name = "checkpoint-without-optimizer"
    family = "checkpoints"
    severity = Severity.WARNING
    message = "checkpoint saves the model but not the optimizer: resuming resets its state"

    def __init__(self) -> None:
        self.candidates: list[tuple[ast.Call, bool]] = []  # (call, has a progress key)
        self.saves_optimizer = False

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        if ctx.call_name(node) not in _SAVE or not node.args:
            return
        saved = node.args[0]
        source = _state_dict_of(saved)
        if source is not None and ctx.kind_of(source) == F.OPTIMIZER:
            self.saves_optimizer = True  # torch.save(optimizer.state_dict(), ...)
            return
        items = _dict_items(saved)
        if items is None:
            return
        has_model = has_optimizer = progress = False
        for key, value in items:
            owner = _state_dict_of(value)
            kind = None if owner is None else ctx.kind_of(owner)
            optimizer_key = key is not None and ("optim" in key.lower() or key.lower() == "opt")
            if optimizer_key or kind == F.OPTIMIZER:
                has_optimizer = True
            elif kind == F.MODULE or (owner is not None and ctx.dotted(owner) == "self"):
                has_model = True
            progress = progress or (key is not None and key.lower() in _PROGRESS_KEYS)
        if has_model and not has_optimizer:
            self.candidates.append((node, progress))

    def leave_module(self, module: F.ModuleFacts, ctx: Context) -> None:
        if self.saves_optimizer:
            return
        file_trains = trains(module.calls)
        for call, progress in self.candidates:
            if progress or file_trains:
                ctx.report(self, call)


_SEEDING_WORDS = ("seed",)


@rule
class UnseededTrainingScript(Rule):
    """## What it does
    Flags a training script (a file with an `if __name__ == "__main__":` entry
    point and a loop that calls `backward()` and steps an optimizer) that
    never seeds its random number generators: no `torch.manual_seed`,
    `random.seed`, `np.random.seed`, `seed_everything`, `set_seed` or any
    other call whose name mentions `seed`. Reported once, at the first
    training loop.

    ## Why is this bad?
    Weight initialisation, data shuffling, augmentation and dropout then
    differ on every run: results cannot be reproduced, two runs cannot be
    compared fairly, and a bug that appears once may never appear again.

    ## Example
    ```python
    import torch

    def main():
        for x, y in loader:
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()

    if __name__ == "__main__":
        main()
    ```

    ## Use instead
    ```python
    import torch

    def main():
        torch.manual_seed(0)
        for x, y in loader:
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()

    if __name__ == "__main__":
        main()
    ```
    """

    code = "TW604"
    name = "unseeded-training-script"
    family = "checkpoints"
    severity = Severity.WARNING
    message = "this training script never seeds its random generators: runs are not reproducible"

    def __init__(self) -> None:
        self.entry_point = False

    def visit_If(self, node: ast.If, ctx: Context) -> None:
        test = node.test
        if (
            not ctx.functions
            and isinstance(test, ast.Compare)
            and isinstance(test.left, ast.Name)
            and test.left.id == "__name__"
        ):
            self.entry_point = True

    def leave_module(self, module: F.ModuleFacts, ctx: Context) -> None:
        if not self.entry_point:
            return
        for call in module.calls:
            name = call.qualname or call.method or _called_name(call.node)
            if name and any(word in name.lower() for word in _SEEDING_WORDS):
                return
        loops = [*module.loops, *(loop for f in module.functions for loop in f.loops)]
        training = [loop for loop in loops if _trains(loop)]
        if training:
            first = min(training, key=lambda loop: getattr(loop.node, "lineno", 0))
            ctx.report(self, _loop_header(first.node))


def _called_name(call: ast.Call) -> str | None:
    func = call.func
    return func.id if isinstance(func, ast.Name) else None


def _trains(loop: F.LoopFacts) -> bool:
    backward = any(call.method == "backward" for call in loop.calls)
    step = any(
        call.method == "step" and call.receiver_kind in {F.OPTIMIZER, F.SCALER}
        for call in loop.calls
    )
    return backward and step


def _loop_header(node: ast.AST) -> ast.AST:
    """A node spanning the ``for``/``while`` keyword, not the whole loop body."""
    line, col = node.lineno, node.col_offset  # type: ignore[attr-defined]
    width = 5 if isinstance(node, ast.While) else 3
    return ast.Pass(lineno=line, col_offset=col, end_lineno=line, end_col_offset=col + width)
