"""TW615 best-checkpoint-chosen-on-test-split (checkpoints).

The class docstring is its user documentation (`torchwise rules TW615`).
"""

from __future__ import annotations

import ast
import re

from torchwise.findings import Severity
from torchwise.review.engine.context import Context
from torchwise.review.engine.dispatch import subtree
from torchwise.review.registry import Rule, rule

#: Names of the test split (not a validation split).
_TEST_NAME = re.compile(r"(^|_)test(_|$)|^test|testloader|testset", re.IGNORECASE)
_VALIDATION_NAME = re.compile(r"val|valid|dev|holdout", re.IGNORECASE)
_BEST = re.compile(r"best", re.IGNORECASE)
#: Calls that keep a checkpoint.
_SAVES = re.compile(r"(^|\.)(save|save_checkpoint|save_model|save_pretrained|copyfile)$")


@rule
class BestCheckpointChosenOnTestSplit(Rule):
    """## What it does
    Flags `if score > best:` that keeps a checkpoint (`torch.save`,
    `save_checkpoint`, ...) where `score` was computed on the test split: the
    loader passed to the evaluation that produced it is built from a dataset
    made with `train=False` or `split="test"`, or is named for the test set
    (`test_loader`), and no validation split is involved.

    ## Why is this bad?
    Choosing the epoch whose test accuracy is highest, then reporting that
    test accuracy, tunes the model on the test set: the number is optimistic
    (by about the spread of the per-epoch scores), and it is not comparable
    with results selected on a validation split. Hold out part of the
    training data for selection and report the test split once.

    ## Example
    ```python
    import torch
    from torch.utils.data import DataLoader
    from torchvision.datasets import CIFAR10

    test_loader = DataLoader(CIFAR10("data", train=False), batch_size=256)
    best_acc = 0.0
    for epoch in range(100):
        train(model, train_loader)
        test_acc = evaluate(model, test_loader)
        if test_acc > best_acc:
            best_acc = test_acc
            torch.save(model.state_dict(), "best.pth")
    ```

    ## Use instead
    ```python
    import torch
    from torch.utils.data import DataLoader, random_split
    from torchvision.datasets import CIFAR10

    train_set, val_set = random_split(CIFAR10("data", train=True), [45000, 5000])
    val_loader = DataLoader(val_set, batch_size=256)
    best_acc = 0.0
    for epoch in range(100):
        train(model, train_loader)
        val_acc = evaluate(model, val_loader)
        if val_acc > best_acc:
            best_acc = val_acc
            torch.save(model.state_dict(), "best.pth")
    ```
    """

    code = "TW615"
    name = "best-checkpoint-chosen-on-test-split"
    family = "checkpoints"
    severity = Severity.WARNING
    impact = "results"
    message = (
        "the best checkpoint is chosen by `{score}`, computed on the test split "
        "(`{loader}`, line {loader_line}): the test score it reports is then tuned on "
        "the test set; select on a validation split"
    )

    def visit_If(self, node: ast.If, ctx: Context) -> None:
        score = _compared_with_best(node.test)
        if score is None or not _keeps_a_checkpoint(node, ctx):
            return
        scope = ctx.function.node if ctx.function is not None else ctx.module.node
        assigned = _last_assignment(scope, score, node.lineno)
        if assigned is None:
            return
        loaders: list[ast.expr]
        if isinstance(assigned.value, ast.Call):  # `acc = evaluate(model, test_loader)`
            loaders = [
                arg for arg in assigned.value.args if isinstance(arg, (ast.Name, ast.Attribute))
            ]
        else:  # `acc = 100 * correct / total` after `for x, y in testloader:`
            loaders = _iterated_loaders(scope, node.lineno)
        texts = [ctx.text(arg) for arg in loaders]
        if any(_VALIDATION_NAME.search(text) for text in texts):
            return
        for loader, text in zip(loaders, texts, strict=True):
            line = _test_split(loader, text, scope, assigned.lineno, ctx)
            if line is not None:
                ctx.report(self, node, score=score, loader=text, loader_line=str(line))
                return


def _iterated_loaders(scope: ast.AST, before: int) -> list[ast.expr]:
    """What the ``for`` loops above line ``before`` iterate (through ``enumerate``)."""
    found: list[ast.expr] = []
    for node in subtree(scope):
        if not isinstance(node, ast.For) or node.lineno >= before:
            continue
        iterated = node.iter
        if isinstance(iterated, ast.Call) and iterated.args:
            iterated = iterated.args[0]  # enumerate(loader), tqdm(loader)
        if isinstance(iterated, (ast.Name, ast.Attribute)):
            found.append(iterated)
    return found


def _compared_with_best(test: ast.expr) -> str | None:
    """``score`` of ``score > best_acc`` (either side, any order comparison)."""
    if not isinstance(test, ast.Compare) or len(test.ops) != 1:
        return None
    if not isinstance(test.ops[0], (ast.Gt, ast.GtE, ast.Lt, ast.LtE)):
        return None
    left, right = test.left, test.comparators[0]
    names = [n.id if isinstance(n, ast.Name) else None for n in (left, right)]
    texts = [ast.unparse(n) for n in (left, right)]
    if _BEST.search(texts[1]) and names[0] is not None and not _BEST.search(texts[0]):
        return names[0]
    if _BEST.search(texts[0]) and names[1] is not None and not _BEST.search(texts[1]):
        return names[1]
    return None


def _keeps_a_checkpoint(node: ast.If, ctx: Context) -> bool:
    for child in subtree(ast.Module(body=node.body, type_ignores=[])):
        if isinstance(child, ast.Call):
            name = ctx.call_name(child) or ctx.text(child.func)
            if _SAVES.search(name):
                return True
        if isinstance(child, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "is_best" for t in child.targets
        ):
            return True
    return False


def _last_assignment(scope: ast.AST, name: str, before: int) -> ast.Assign | None:
    """The last ``name = ...`` (or ``name, ... = ...``) above line ``before``."""
    found: ast.Assign | None = None
    for node in subtree(scope):
        if not isinstance(node, ast.Assign) or node.lineno >= before:
            continue
        targets = [
            element
            for target in node.targets
            for element in (target.elts if isinstance(target, ast.Tuple) else [target])
        ]
        named = any(isinstance(t, ast.Name) and t.id == name for t in targets)
        if named and (found is None or node.lineno > found.lineno):
            found = node
    return found


def _module_level(module: ast.AST) -> ast.Module:
    """The module's own statements, without the bodies of its functions and
    classes (whose names are theirs)."""
    body = module.body if isinstance(module, ast.Module) else []
    return ast.Module(
        body=[
            statement
            for statement in body
            if not isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
        ],
        type_ignores=[],
    )


def _test_split(loader: ast.expr, text: str, scope: ast.AST, used: int, ctx: Context) -> int | None:
    """The line that builds ``loader`` from the test split, or names it so: in
    the scope, the assignment that reaches its use on line ``used`` (a later
    ``logits = log(test_embs)`` is another value); in the module, any."""
    module = _module_level(ctx.module.node)
    places = (scope,) if scope is ctx.module.node else (scope, module)
    for where in places:
        if not isinstance(loader, ast.Name):
            break
        before = used if where is scope else 10**9
        assigned = _last_assignment(where, loader.id, before)
        if assigned is None or not isinstance(assigned.value, ast.Call):
            continue
        call = assigned.value
        dataset = call.args[0] if call.args else None
        if _split_is_test(call):
            return assigned.lineno
        if isinstance(dataset, ast.Call) and _split_is_test(dataset):
            return assigned.lineno
        if isinstance(dataset, ast.Name):
            made = _last_assignment(where, dataset.id, 10**9) or _last_assignment(
                module, dataset.id, 10**9
            )
            if made is not None and isinstance(made.value, ast.Call):
                if _split_is_test(made.value):
                    return made.lineno
                if _VALIDATION_NAME.search(ast.unparse(made.value)):
                    return None
            if _TEST_NAME.search(dataset.id) and not _VALIDATION_NAME.search(dataset.id):
                return assigned.lineno
        if _TEST_NAME.search(loader.id):
            return assigned.lineno
    return None


def _split_is_test(call: ast.Call) -> bool:
    """``CIFAR10(..., train=False)``, ``load_dataset(..., split="test")``."""
    for item in call.keywords:
        value = item.value
        if item.arg == "train" and isinstance(value, ast.Constant) and value.value is False:
            return True
        literal = value.value if isinstance(value, ast.Constant) else None
        if item.arg in {"split", "subset", "mode"} and str(literal).lower() == "test":
            return True
    return False
