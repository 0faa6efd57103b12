"""The canonical training loop, and each recommendation as a small diff against it.

Advice is only actionable as code. The loop below is what :mod:`torchwise.tune.step`
measures, written with the user's names (model class, optimizer and its
arguments, loss, loader); a knob is an edit of one of its slots, and a
recommendation is the unified diff between the loop before and after its edits.
Every rendered loop is valid Python (tests parse each one).
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

_INDENT = "    "


@dataclass(frozen=True)
class Loop:
    """The slots of the canonical loop, each a tuple of source lines."""

    imports: tuple[str, ...] = ("import torch",)
    setup: tuple[str, ...] = ('device = "cpu"',)
    model: tuple[str, ...] = ("model = Net().to(device)",)
    optimizer: tuple[str, ...] = ("optimizer = torch.optim.AdamW(model.parameters())",)
    loader: tuple[str, ...] = ("loader = torch.utils.data.DataLoader(dataset, batch_size=32)",)
    extras: tuple[str, ...] = ()
    header: str = "for inputs, target in loader:"
    to_device: tuple[str, ...] = ("inputs, target = inputs.to(device), target.to(device)",)
    zero_grad: tuple[str, ...] = ("optimizer.zero_grad()",)
    contexts: tuple[str, ...] = ()
    forward: tuple[str, ...] = (
        "output = model(inputs)",
        "loss = torch.nn.functional.cross_entropy(output, target)",
    )
    backward: tuple[str, ...] = ("loss.backward()",)
    step: tuple[str, ...] = ("optimizer.step()",)
    #: replaces the whole ``for`` statement (CUDA graphs restructure the loop)
    body_override: tuple[str, ...] | None = None

    def render(self) -> str:
        lines = [*self.imports, "", *self.setup, *self.model, *self.optimizer, *self.loader]
        lines += [*self.extras, ""]
        if self.body_override is not None:
            lines += self.body_override
            return "\n".join(lines) + "\n"
        lines.append(self.header)
        lines += [_INDENT + line for line in (*self.to_device, *self.zero_grad)]
        depth = 1
        for context in self.contexts:
            lines.append(_INDENT * depth + f"with {context}:")
            depth += 1
        lines += [_INDENT * depth + line for line in self.forward]
        lines += [_INDENT + line for line in (*self.backward, *self.step)]
        return "\n".join(lines) + "\n"

    def replace(self, **changes: object) -> Loop:
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]


Edit = Callable[[Loop], Loop]


def canonical_loop(
    *,
    device: str,
    model_call: str,
    optimizer_call: str,
    loss_line: str,
    loader_line: str,
    forward_call: str = "model(inputs)",
    header: str = "for inputs, target in loader:",
    to_device: tuple[str, ...] = ("inputs, target = inputs.to(device), target.to(device)",),
) -> Loop:
    """The loop for a workload, e.g. ``model_call="Net()"``, ``loss_line="loss = ..."``."""
    return Loop(
        setup=(f'device = "{device}"',),
        model=(f"model = {model_call}.to(device)",),
        optimizer=(f"optimizer = {optimizer_call}",),
        loader=(loader_line,),
        header=header,
        to_device=to_device,
        forward=(f"output = {forward_call}", loss_line),
    )


def apply(loop: Loop, edits: Sequence[Edit]) -> Loop:
    for edit in edits:
        loop = edit(loop)
    return loop


def diff(before: Loop, after: Loop, *, name: str = "train.py") -> str:
    """A unified diff with one line of context, as a reviewer reads it."""
    lines = difflib.unified_diff(
        before.render().splitlines(keepends=True),
        after.render().splitlines(keepends=True),
        fromfile=f"a/{name}",
        tofile=f"b/{name}",
        n=1,
    )
    return "".join(lines)


# -- edits shared by the knobs -------------------------------------------------------


def add_setup(*lines: str) -> Edit:
    return lambda loop: loop.replace(setup=(*loop.setup, *lines))


def add_call_kwargs(slot: str, **kwargs: object) -> Edit:
    """Add keyword arguments to the last call on the first line of ``slot``.

    ``optimizer = torch.optim.AdamW(model.parameters(), lr=0.001)`` + ``fused=True``
    -> ``...(model.parameters(), lr=0.001, fused=True)``; an existing keyword of
    the same name is replaced.
    """

    def edit(loop: Loop) -> Loop:
        lines = list(getattr(loop, slot))
        lines[0] = _with_kwargs(lines[0], kwargs)
        return loop.replace(**{slot: tuple(lines)})

    return edit


def _with_kwargs(line: str, kwargs: dict[str, object]) -> str:
    code, hash_, comment = line.partition("  #")
    close = code.rstrip().rfind(")")
    open_ = _matching_open(code, close)
    inner = code[open_ + 1 : close]
    parts = [p.strip() for p in _split_args(inner) if p.strip()]
    parts = [p for p in parts if p.split("=", 1)[0].strip() not in kwargs]
    parts += [f"{k}={v!r}" for k, v in kwargs.items()]
    rebuilt = code[: open_ + 1] + ", ".join(parts) + code[close:]
    return rebuilt + (hash_ + comment if hash_ else "")


def _matching_open(code: str, close: int) -> int:
    depth = 0
    for index in range(close, -1, -1):
        if code[index] == ")":
            depth += 1
        elif code[index] == "(":
            depth -= 1
            if depth == 0:
                return index
    raise ValueError(f"unbalanced call: {code!r}")


def _split_args(text: str) -> list[str]:
    parts, depth, current = [], 0, ""
    for char in text:
        depth += char in "([{"
        depth -= char in ")]}"
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    parts.append(current)
    return parts
