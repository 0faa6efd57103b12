"""What ``torch.load`` calls load, for TW301 and TW416.

Since torch 2.6 ``torch.load`` defaults to ``weights_only=True`` and refuses
anything but tensors, containers and primitives. A load is known to fail when
the code treats what it loaded as an ``nn.Module`` or an optimizer (calls it,
puts it in eval mode, steps it, passes it where the project uses a module), or
when the project's own ``torch.save`` writes such an object (or an
``argparse.Namespace``, or a NumPy array) to the same file name or under a key
the load reads.
"""

from __future__ import annotations

import ast

from torchwise.review.engine import facts as F
from torchwise.review.engine.context import Context
from torchwise.review.engine.syntax import file_name, keyword
from torchwise.review.index.records import SaveFact

WEIGHTS_ONLY_DEFAULT = (2, 6)
#: Saved kinds that weights_only=True refuses, as the message names them.
REFUSED = {
    "module": "a pickled nn.Module",
    "optimizer": "a pickled optimizer object",
    "namespace": "an argparse.Namespace",
    "array": "a NumPy array",
}


def runs_on_weights_only_default(ctx: Context) -> bool:
    """Whether the project may run on torch >= 2.6 (it does unless it pins below)."""
    return ctx.project.torch_range.allows(WEIGHTS_ONLY_DEFAULT)


def refused_content(load: F.LoadFacts, ctx: Context) -> str | None:
    """What the loaded file holds that ``weights_only=True`` refuses, if known."""
    if "module" in load.uses:
        return REFUSED["module"]
    if "optimizer" in load.uses:
        return REFUSED["optimizer"]
    path = _path_argument(load.node)
    name = file_name(path)
    text = None if path is None else ctx.text(path)
    for where, save in ctx.project.saves():
        same_file = (name is not None and save.file_name == name) or (
            text is not None and where == ctx.path and save.path_text == text
        )
        shown = _where(where, save, ctx)
        if same_file and save.whole in REFUSED:
            return f"{REFUSED[save.whole]} (written by `torch.save` at {shown})"
        if same_file or name is None or save.file_name is None:
            for key in sorted(load.keys):  # a set: sorted, so the message is stable
                kind = save.keys.get(key)
                if kind in REFUSED:
                    return f"{REFUSED[kind]} (saved under {key!r} by `torch.save` at {shown})"
    return None


def _where(path: str, save: SaveFact, ctx: Context) -> str:
    return f"line {save.line}" if path == ctx.path else f"{path}:{save.line}"


def explicit_weights_only(call: ast.Call) -> ast.expr | None:
    item = keyword(call, "weights_only")
    return None if item is None else item.value


def _path_argument(call: ast.Call) -> ast.expr | None:
    return call.args[0] if call.args else getattr(keyword(call, "f"), "value", None)
