"""What a model does differently in ``train()`` and ``eval()`` mode, by module.

Found by looking at the module tree, not by running: dropout layers with
``p > 0``, normalisation layers that track running statistics, ``RReLU``,
recurrent and attention layers with internal dropout, PyTorch's fused
transformer fast path, and user modules whose ``forward`` reads
``self.training``. Each kind is one line naming the modules it applies to.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

#: Modules listed per line before "and N more".
SHOWN = 3


def _names(names: list[str]) -> str:
    quoted = [f"``{n}``" for n in names[:SHOWN]]
    more = len(names) - SHOWN
    return ", ".join(quoted) + (f" and {more} more" if more > 0 else "")


def _reads_training_flag(module: torch.nn.Module) -> bool:
    """Does the class's own ``forward`` read ``self.training`` (in code, not in prose)?"""
    if type(module).__module__.startswith("torch."):
        return False
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(type(module).forward)))
    except (OSError, TypeError, SyntaxError):
        return False
    return any(
        isinstance(node, ast.Attribute)
        and node.attr == "training"
        and isinstance(node.value, ast.Name)
        and node.value.id == "self"
        for node in ast.walk(tree)
    )


def mode_differences(model: torch.nn.Module) -> list[str]:
    """One line per kind of train/eval difference; a single line when there is none."""
    from torch import nn
    from torch.nn.modules.batchnorm import _BatchNorm
    from torch.nn.modules.dropout import _DropoutNd
    from torch.nn.modules.instancenorm import _InstanceNorm

    kinds: dict[str, list[str]] = {}
    probabilities: dict[str, set[float]] = {}
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
        elif isinstance(module, nn.RNNBase) and module.dropout > 0 and module.num_layers > 1:
            kinds.setdefault("rnn_dropout", []).append(label)
        if isinstance(module, nn.TransformerEncoderLayer | nn.TransformerEncoder):
            kinds.setdefault("fastpath", []).append(label)
        if _reads_training_flag(module):
            kinds.setdefault("flag", []).append(label)
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
        "attn_dropout": "train mode drops attention weights; eval mode does not",
        "rnn_dropout": "train mode applies dropout between stacked layers",
        "fastpath": "eval mode under ``torch.no_grad()`` may take PyTorch's fused fast path "
        "(same math, different kernels)",
        "flag": "``forward`` branches on ``self.training``",
    }
    titles = {"norm": "Normalisation", "rrelu": "RReLU", "attn_dropout": "Attention dropout",
              "rnn_dropout": "Recurrent dropout", "fastpath": "Transformer layers",
              "flag": "Custom code"}  # fmt: skip
    for kind, text in texts.items():
        if kind in kinds:
            lines.append(f"- {titles[kind]} ({_names(kinds[kind])}): {text}.")
    if not lines:
        return ["Identical: no dropout, running statistics or ``self.training`` branches."]
    return lines
