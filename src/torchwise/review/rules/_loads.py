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
from torchwise.review.engine.syntax import file_name, file_template, keyword, text_file_template
from torchwise.review.index.records import SaveFact
from torchwise.review.rules._util import shown_path

WEIGHTS_ONLY_DEFAULT = (2, 6)
#: Saved kinds that weights_only=True refuses, as the message names them.
REFUSED = {
    "module": "a pickled nn.Module",
    "optimizer": "a pickled optimizer object",
    "namespace": "an argparse.Namespace",
    "array": "a NumPy array",
    "config": "a configuration object (yacs CfgNode, OmegaConf, EasyDict)",
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
    template = None if path is None else file_template(path)
    for where, save in ctx.project.saves():
        same_file = (
            (name is not None and save.file_name == name)
            or (text is not None and where == ctx.path and save.path_text == text)
            or (template is not None and saved_template(save) == template)
        )
        if not same_file and not same_format(sorted(load.keys), save):
            continue
        refused = payload_refused(save)
        if refused is not None:
            return f"{refused} (written by `torch.save` at {_where(where, save, ctx)})"
    return None


#: Keys so common that reading one says nothing about which checkpoint it is.
_GENERIC_KEYS = frozenset(
    {"model", "state_dict", "net", "params", "weights", "module", "model_state_dict"}
)


def same_format(keys: list[str], save: SaveFact) -> bool:
    """Whether a load that reads ``keys`` reads what ``save`` writes, when no
    file name links them: it reads only keys the save writes, and more than
    one generic key (``"model"`` alone could be anyone's checkpoint)."""
    if not keys or not save.keys or not set(keys) <= set(save.keys):
        return False
    return len(keys) >= 2 or keys[0] not in _GENERIC_KEYS


def payload_refused(save: SaveFact) -> str | None:
    """What in the payload ``weights_only=True`` refuses, if anything. The
    unpickler stops at the first global outside its allowlist, so one refused
    value anywhere fails the whole file, whatever key the load reads."""
    if save.whole in REFUSED:
        return REFUSED[save.whole]
    refused = sorted(key for key, kind in save.keys.items() if kind in REFUSED)
    if refused:
        return f"{REFUSED[save.keys[refused[0]]]} under {refused[0]!r}"
    return None


def saved_template(save: SaveFact) -> str | None:
    return text_file_template(save.path_text)


def _where(path: str, save: SaveFact, ctx: Context) -> str:
    return f"line {save.line}" if path == ctx.path else f"{shown_path(path, ctx)}:{save.line}"


def explicit_weights_only(call: ast.Call) -> ast.expr | None:
    item = keyword(call, "weights_only")
    return None if item is None else item.value


def _path_argument(call: ast.Call) -> ast.expr | None:
    return call.args[0] if call.args else getattr(keyword(call, "f"), "value", None)
