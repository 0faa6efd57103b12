"""Recommendations as diffs against the user's own training script (``--train-script``).

The script is parsed, never run. Its training loop is found by what it does: the
``for`` loop that calls ``<loss>.backward()``; in it, the optimizer's ``step()``
and ``zero_grad()``, the forward (the first statement that calls the model) and
the loss (the assignment to the name ``backward()`` is called on); outside it,
the optimizer's constructor (a ``torch.optim`` class, or the object ``step()`` is
called on), the DataLoader's, the model's assignment (the name the forward
calls) and the last top-level import. Each knob is an edit at those anchors.
A knob whose anchors are missing, or that restructures the loop (CUDA graphs,
checkpointing inside ``forward``), is shown as a pattern against the canonical
loop instead, and the diff says so.
"""

from __future__ import annotations

import ast
import difflib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from torchwise.errors import TorchwiseError
from torchwise.tune.anchors import Anchors, find_anchors
from torchwise.tune.knobs import Knob
from torchwise.tune.loop import Loop, apply, diff

Lines = list[str]


# -- edits -----------------------------------------------------------------------


def _indent_of(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def _insert(lines: Lines, after: int, new: Sequence[str], like: int | None = None) -> Lines:
    pad = _indent_of(lines[like if like is not None else after])
    return [*lines[: after + 1], *(pad + n for n in new), *lines[after + 1 :]]


def _add_kwargs(lines: Lines, call: ast.Call | None, kwargs: dict[str, object]) -> Lines | None:
    if call is None or call.end_lineno is None or call.end_col_offset is None:
        return None
    row, col = call.end_lineno - 1, call.end_col_offset - 1  # the closing parenthesis
    existing = {k.arg for k in call.keywords}
    added = [f"{k}={v!r}" for k, v in kwargs.items() if k not in existing]
    if not added:
        return lines
    has_args = bool(call.args or call.keywords)
    text = lines[row]
    insert = (", " if has_args else "") + ", ".join(added)
    return [*lines[:row], text[:col] + insert + text[col:], *lines[row + 1 :]]


def _setup(*new: str) -> ScriptEdit:
    def edit(lines: Lines, a: Anchors) -> Lines | None:
        after = a.last_import if a.last_import is not None else -1
        return [*lines[: after + 1], *new, *lines[after + 1 :]]

    return edit


def _wrap_forward(context: str) -> ScriptEdit:
    def edit(lines: Lines, a: Anchors) -> Lines | None:
        if a.forward is None:
            return None
        start, end = a.forward
        pad = _indent_of(lines[start])
        head = lines[start].strip()
        if head.startswith("with ") and "autocast" in head and head.endswith(":"):
            # already under autocast: change its precision rather than nest another
            return [*lines[:start], f"{pad}with {context}:", *lines[start + 1 :]]
        body = ["    " + line if line.strip() else line for line in lines[start : end + 1]]
        return [*lines[:start], f"{pad}with {context}:", *body, *lines[end + 1 :]]

    return edit


def _fp16(lines: Lines, a: Anchors) -> Lines | None:
    wrapped = _wrap_forward('torch.autocast("cuda", dtype=torch.float16)')(lines, a)
    if wrapped is None:
        return None
    b = find_anchors_lines(wrapped)
    if b.backward is None or b.step is None or b.optimizer_stmt is None or not b.optimizer_name:
        return None
    out = list(wrapped)
    out[b.backward] = re.sub(
        r"(\w[\w.]*)\.backward\(", r"scaler.scale(\1).backward(", out[b.backward]
    )
    name = re.escape(b.optimizer_name)
    pad = _indent_of(out[b.step])
    out[b.step] = re.sub(rf"\b{name}\.step\(\)", f"scaler.step({b.optimizer_name})", out[b.step])
    out = [*out[: b.step + 1], pad + "scaler.update()", *out[b.step + 1 :]]
    return _insert(out, b.optimizer_stmt, ['scaler = torch.amp.GradScaler("cuda")'])


def find_anchors_lines(lines: Lines) -> Anchors:
    return find_anchors("\n".join(lines) + "\n")


def _after_model(line: Callable[[str], str]) -> ScriptEdit:
    def edit(lines: Lines, a: Anchors) -> Lines | None:
        if a.model_stmt is None or a.model_name is None:
            return None
        return _insert(lines, a.model_stmt, [line(a.model_name)])

    return edit


def _channels_last(lines: Lines, a: Anchors) -> Lines | None:
    cl = "memory_format=torch.channels_last"
    if a.forward is None or a.input_name is None or not a.input_name.isidentifier():
        return None
    out = _after_model(lambda m: f"{m} = {m}.to({cl})")(lines, a)
    if out is None:
        return None
    b = find_anchors_lines(out)
    assert b.forward is not None
    start = b.forward[0]
    pad = _indent_of(out[start])
    return [*out[:start], f"{pad}{a.input_name} = {a.input_name}.to({cl})", *out[start:]]


def _zero_grad_in_place(lines: Lines, a: Anchors) -> Lines | None:
    if a.zero_grad is None:
        return None
    out = list(lines)
    out[a.zero_grad] = re.sub(r"zero_grad\(\s*\)", "zero_grad(set_to_none=False)", out[a.zero_grad])
    return out


def _pinned(lines: Lines, a: Anchors) -> Lines | None:
    out = _add_kwargs(lines, a.loader_call, {"pin_memory": True})
    if out is None or a.loop is None:
        return None
    start, end = a.loop
    for row in range(start, end + 1):
        out[row] = re.sub(
            r"\.to\(([^()]*?)\)",
            lambda m: (
                m.group(0)
                if "non_blocking" in m.group(1)
                else f".to({m.group(1)}, non_blocking=True)"
            ),
            out[row],
        )
    return out


ScriptEdit = Callable[[Lines, Anchors], "Lines | None"]

_DEFAULT_LOADER = {"num_workers": 0, "pin_memory": False, "persistent_workers": False}


def script_edit(knob: Knob) -> ScriptEdit | None:
    """The edit of the user's script for ``knob``, or None to show it as a pattern."""
    c = knob.changes
    if "threads" in c:
        return _setup(f"torch.set_num_threads({c['threads']})")
    if c.get("tf32"):
        return _setup(
            'torch.backends.cuda.matmul.fp32_precision = "tf32"',
            'torch.backends.cudnn.conv.fp32_precision = "tf32"',
        )
    if c.get("cudnn_benchmark"):
        return _setup("torch.backends.cudnn.benchmark = True")
    if c.get("autocast") == "bf16":
        return None  # the device is the script's: :meth:`TrainScript._edit`
    if c.get("autocast") == "fp16":
        return _fp16
    impl = c.get("optimizer_impl")
    if impl in ("fused", "foreach"):
        return lambda lines, a: _add_kwargs(lines, a.optimizer_call, {impl: True})
    if c.get("set_to_none") is False:
        return _zero_grad_in_place
    if c.get("channels_last"):
        return _channels_last
    if c.get("compile"):
        backend = c.get("compile_backend", "inductor")
        arg = "" if backend == "inductor" else f', backend="{backend}"'
        return _after_model(lambda m: f"{m} = torch.compile({m}{arg})")
    if c.get("pinned"):
        return _pinned
    if c.get("loader") is not None:
        kwargs = {k: v for k, v in c["loader"].kwargs().items() if _DEFAULT_LOADER.get(k) != v}
        kwargs = {k: v for k, v in kwargs.items() if v is not None}
        return lambda lines, a: _add_kwargs(lines, a.loader_call, kwargs)
    return None


@dataclass(frozen=True)
class TrainScript:
    """The user's training script and the device its loop trains on."""

    path: Path
    source: str
    device: str = "cpu"

    def _edit(self, knob: Knob) -> ScriptEdit | None:
        if knob.changes.get("autocast") == "bf16":
            return _wrap_forward(f'torch.autocast("{self.device}", dtype=torch.bfloat16)')
        return script_edit(knob)

    def _apply(self, lines: Lines, knob: Knob) -> Lines | None:
        edit = self._edit(knob)
        if edit is None:
            return None
        try:
            return edit(lines, find_anchors_lines(lines))
        except SyntaxError:
            return None

    def _diff(self, before: Lines, after: Lines) -> str:
        name = self.path.as_posix().lstrip("/")
        return "".join(
            difflib.unified_diff(
                [line + "\n" for line in before],
                [line + "\n" for line in after],
                fromfile=f"a/{name}",
                tofile=f"b/{name}",
                n=1,
            )
        )

    def diffs(self, knobs: Sequence[Knob], *, fallback: Loop) -> list[str]:
        """Each knob's diff against the script with the earlier ones applied."""
        out, lines, loop = [], self.source.splitlines(), fallback
        for knob in knobs:
            after = self._apply(lines, knob)
            if after is None:
                pattern = apply(loop, knob.edits)
                out.append(_pattern_note(knob, self.path) + diff(loop, pattern, name="pattern.py"))
                loop = pattern
                continue
            out.append(self._diff(lines, after))
            lines = after
        return out

    def combined_diff(self, knobs: Sequence[Knob], *, fallback: Loop) -> str:
        lines, patterns = self.source.splitlines(), []
        for knob in knobs:
            after = self._apply(lines, knob)
            if after is None:
                patterns.append(knob)
            else:
                lines = after
        text = self._diff(self.source.splitlines(), lines)
        if patterns:
            edits = [e for k in patterns for e in k.edits]
            text += _pattern_note(patterns[0], self.path, several=len(patterns) > 1)
            text += diff(fallback, apply(fallback, edits), name="pattern.py")
        return text


def _pattern_note(knob: Knob, path: Path, *, several: bool = False) -> str:
    what = "these changes" if several else knob.id
    return (
        f"# {what}: shown as a pattern against the canonical loop: {path}'s loop has no "
        "place for it that torchwise could find (or it restructures the loop)\n"
    )


def read_train_script(path: str | Path, device: str = "cpu") -> TrainScript:
    """The script at ``path``, checked to parse and to hold a training loop."""
    file = Path(path)
    try:
        source = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise TorchwiseError(
            f"cannot read {file}: {reason}", hint="--train-script names the training script"
        ) from None
    try:
        anchors = find_anchors(source)
    except SyntaxError as exc:
        raise TorchwiseError(
            f"--train-script: {file} is not valid Python (line {exc.lineno}: {exc.msg})"
        ) from None
    if anchors.backward is None:
        raise TorchwiseError(
            f"--train-script: {file} has no training loop torchwise can find "
            "(a for/while loop calling loss.backward())",
            hint="name the script that holds your training loop",
        )
    return TrainScript(file, source, device)
