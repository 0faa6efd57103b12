"""What a model does differently in ``train()`` and ``eval()`` mode, by module.

Found by looking at the module tree, not by running: dropout layers with
``p > 0``, normalisation layers that track running statistics, ``RReLU``,
recurrent and attention layers with internal dropout, PyTorch's fused
transformer fast path, and user modules whose ``forward`` reads
``self.training``. For those, each use is evaluated on the module where it can
be (``dropout_p=self.dropout if self.training else 0`` says ``0.1`` in train,
``0`` in eval, and nothing at all when ``self.dropout`` is 0); others show the
line of code and where it is. Each kind is one line naming the modules it
applies to; a model with no difference gets no lines.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

#: Modules listed per line before "and N more".
SHOWN = 3


def _names(names: list[str]) -> str:
    quoted = [f"``{n}``" for n in names[:SHOWN]]
    more = len(names) - SHOWN
    return ", ".join(quoted) + (f" and {more} more" if more > 0 else "")


def _forward_tree(module: torch.nn.Module) -> tuple[ast.AST, str, int] | None:
    """The parsed source of the class's own ``forward``, its file and first line."""
    cls = type(module)
    if cls.__module__.startswith("torch."):
        return None
    forward = cls.forward
    try:
        source, line = inspect.getsourcelines(forward)
        tree = ast.parse(textwrap.dedent("".join(source)))
        filename = inspect.getsourcefile(forward) or "?"
    except (OSError, TypeError, SyntaxError):
        return None
    return tree, filename, line


def _is_training_flag(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Attribute)
        and node.attr == "training"
        and isinstance(node.value, ast.Name)
        and node.value.id == "self"
    )


def _tests_training(node: ast.AST) -> bool | None:
    """True for ``self.training``, False for ``not self.training``, None otherwise."""
    if _is_training_flag(node):
        return True
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return False if _is_training_flag(node.operand) else None
    return None


#: What a branch value may be for torchwise to evaluate it: constants and ``self`` attributes.
_SIMPLE = (ast.Constant, ast.Attribute, ast.Name, ast.UnaryOp, ast.USub, ast.UAdd, ast.Load)


def _value(node: ast.AST, module: torch.nn.Module) -> tuple[bool, Any]:
    """Evaluate a constant or ``self.x.y`` expression on the module; (False, None) otherwise."""
    if not all(isinstance(n, _SIMPLE) for n in ast.walk(node)):
        return False, None
    names = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
    if names - {"self"}:
        return False, None
    try:
        code = compile(ast.Expression(node), "<branch>", "eval")  # type: ignore[arg-type]
        return True, eval(code, {"__builtins__": {}}, {"self": module})
    except Exception:
        return False, None


def _dropout_p(call: ast.Call) -> ast.AST | None:
    """The ``p`` of ``F.dropout(x, p, training=...)`` (positional or keyword)."""
    for keyword in call.keywords:
        if keyword.arg == "p":
            return keyword.value
    return call.args[1] if len(call.args) > 1 else None


def training_branches(module: torch.nn.Module) -> list[str]:
    """What the class's own ``forward`` does differently in train and eval, one phrase
    each, leaving out branches whose two sides are equal on this module
    (``dropout_p=self.dropout if self.training else 0`` with ``self.dropout == 0``)."""
    found = _forward_tree(module)
    if found is None:
        return []
    tree, filename, first_line = found
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    phrases: list[str] = []
    for node in ast.walk(tree):
        if not _is_training_flag(node):
            continue
        parent = parents.get(node)
        if isinstance(parent, ast.UnaryOp):
            node, parent = parent, parents.get(parent)
        where = f"{Path(filename).name}:{first_line + node.lineno - 1}"  # type: ignore[attr-defined]
        phrase = _describe(node, parent, parents, module)
        if phrase == "":
            continue  # both sides equal: nothing changes
        shown = parent if isinstance(parent, ast.IfExp) else _statement(node, parents)
        phrases.append(phrase or f"``{ast.unparse(shown)}`` ({where})")
    return phrases


def _statement(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> ast.AST:
    """The innermost statement containing ``node`` (an ``if`` shows only its test)."""
    current = node
    while not isinstance(current, ast.stmt) and current in parents:
        current = parents[current]
    if isinstance(current, ast.If | ast.While):
        return current.test
    return current


def _describe(
    node: ast.AST, parent: ast.AST | None, parents: dict[ast.AST, ast.AST], module: Any
) -> str | None:
    """A phrase for one use of the flag; "" when nothing changes; None when it cannot say."""
    if isinstance(parent, ast.IfExp) and parent.test is node:
        train, evaluation = (parent.body, parent.orelse)
        if _tests_training(node) is False:
            train, evaluation = evaluation, train
        known_train, value_train = _value(train, module)
        known_eval, value_eval = _value(evaluation, module)
        if not (known_train and known_eval):
            return None
        if value_train == value_eval:
            return ""
        holder = parents.get(parent)
        label = ""
        if isinstance(holder, ast.keyword) and holder.arg:
            label = f"{holder.arg}="  # dropout_p=... if self.training else 0
        elif isinstance(holder, ast.Assign) and isinstance(holder.targets[0], ast.Name):
            label = f"{holder.targets[0].id}="  # p = ... if self.training else 0.0
        return f"``{label}{value_train!r}`` in train, ``{label}{value_eval!r}`` in eval"
    if isinstance(parent, ast.keyword) and parent.arg == "training":
        call = parents.get(parent)
        if isinstance(call, ast.Call) and "dropout" in ast.unparse(call.func).lower():
            p_node = _dropout_p(call)
            known, p = _value(p_node, module) if p_node is not None else (True, 0.5)
            if known and p == 0:
                return ""
            p_text = f"p={p!r}" if known else f"p=``{ast.unparse(p_node)}``"  # type: ignore[arg-type]
            return f"``{ast.unparse(call.func)}`` drops activations with {p_text} in train only"
    return None


def mode_differences(model: torch.nn.Module) -> list[str]:
    """One line per kind of train/eval difference; none when nothing changes (the
    ``Train and eval`` section is then left out)."""
    from torch import nn
    from torch.nn.modules.batchnorm import _BatchNorm
    from torch.nn.modules.dropout import _DropoutNd
    from torch.nn.modules.instancenorm import _InstanceNorm

    kinds: dict[str, list[str]] = {}
    probabilities: dict[str, set[float]] = {}
    rates: dict[str, set[float]] = {}  # dropout inside attention and recurrent layers
    #: (class name, what changes) -> the modules of that class
    branches: dict[tuple[str, str], list[str]] = {}
    for name, module in model.named_modules():
        label = name or type(module).__name__
        if isinstance(module, _DropoutNd) and module.p > 0:
            kind = type(module).__name__
            kinds.setdefault(kind, []).append(label)
            probabilities.setdefault(kind, set()).add(module.p)
        elif isinstance(module, _BatchNorm | _InstanceNorm) and module.track_running_stats:
            kinds.setdefault("norm", []).append(label)
        elif isinstance(module, nn.RReLU):
            kinds.setdefault("rrelu", []).append(label)
        elif isinstance(module, nn.MultiheadAttention) and module.dropout > 0:
            kinds.setdefault("attn_dropout", []).append(label)
            rates.setdefault("attn_dropout", set()).add(module.dropout)
        elif isinstance(module, nn.RNNBase) and module.dropout > 0 and module.num_layers > 1:
            kinds.setdefault("rnn_dropout", []).append(label)
            rates.setdefault("rnn_dropout", set()).add(module.dropout)
        if isinstance(module, nn.TransformerEncoderLayer | nn.TransformerEncoder):
            kinds.setdefault("fastpath", []).append(label)
        for phrase in training_branches(module):
            branches.setdefault((type(module).__name__, phrase), []).append(label)
    lines = []
    for kind, names in kinds.items():
        if kind in probabilities:
            ps = ", ".join(f"{p:g}" for p in sorted(probabilities[kind]))
            lines.append(
                f"- {kind} ({_names(names)}): train mode zeroes activations with p={ps} and "
                "rescales the rest by 1/(1-p); eval mode passes them through."
            )
    texts = {
        "norm": "train mode normalises with the batch's statistics and updates the running "
        "mean/var buffers; eval mode uses the stored running statistics",
        "rrelu": "train mode draws random negative slopes; eval mode uses their mean",
        "attn_dropout": "train mode drops attention weights with p={p}; eval mode does not",
        "rnn_dropout": "train mode applies dropout with p={p} between stacked layers; eval "
        "mode does not",
        "fastpath": "eval mode under ``torch.no_grad()`` may take PyTorch's fused fast path "
        "(same math, different kernels)",
    }
    titles = {"norm": "Normalisation", "rrelu": "RReLU", "attn_dropout": "Attention dropout",
              "rnn_dropout": "Recurrent dropout", "fastpath": "Transformer layers"}  # fmt: skip
    for kind, text in texts.items():
        if kind in kinds:
            p = ", ".join(f"{rate:g}" for rate in sorted(rates.get(kind, ())))
            lines.append(f"- {titles[kind]} ({_names(kinds[kind])}): {text.format(p=p)}.")
    for (class_name, phrase), names in branches.items():
        lines.append(f"- {class_name} ({_names(names)}): {phrase}.")
    return lines
