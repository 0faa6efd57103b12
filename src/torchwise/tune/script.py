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
from torchwise.tune.knobs import Knob
from torchwise.tune.loop import Loop, apply, diff

Lines = list[str]


@dataclass(frozen=True)
class Anchors:
    """Where the edits go, as 0-based line indexes into the script (None: not found)."""

    last_import: int | None
    optimizer_call: ast.Call | None
    optimizer_stmt: int | None
    optimizer_name: str | None
    loader_call: ast.Call | None
    model_stmt: int | None
    model_name: str | None
    input_name: str | None
    forward: tuple[int, int] | None  # first and last line of the forward + loss statements
    backward: int | None
    step: int | None
    zero_grad: int | None
    loop: tuple[int, int] | None


#: torch.optim's optimizer classes, as a script may name them after ``from torch.optim import``
_OPTIMIZERS = frozenset(
    {
        "SGD", "Adam", "AdamW", "Adagrad", "Adadelta", "Adamax", "NAdam", "RAdam", "RMSprop",
        "ASGD", "Rprop", "LBFGS", "SparseAdam", "Adafactor", "Muon",
    }
)  # fmt: skip


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return ""


def _method_calls(stmt: ast.AST, method: str) -> list[ast.Call]:
    return [
        n
        for n in ast.walk(stmt)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == method
    ]


def _is_optimizer(name: str) -> bool:
    return name.startswith(("torch.optim.", "optim.")) or name.split(".")[-1] in _OPTIMIZERS


def _flatten(body: Sequence[ast.stmt]) -> list[ast.stmt]:
    """Statements with those inside ``with`` blocks (autocast already there)."""
    out: list[ast.stmt] = []
    for stmt in body:
        out.append(stmt)
        if isinstance(stmt, ast.With):
            out += _flatten(stmt.body)
    return out


def _training_loop(tree: ast.Module) -> ast.For | ast.While | None:
    """The innermost loop whose own statements (not a nested loop's) call backward()."""
    loops = [
        n
        for n in ast.walk(tree)
        if isinstance(n, (ast.For, ast.While))
        and any(
            _method_calls(s, "backward")
            for s in _flatten(n.body)
            if not isinstance(s, (ast.For, ast.While))
        )
    ]
    return max(loops, key=lambda n: n.col_offset, default=None)


def _loss_name(call: ast.Call) -> str:
    """``loss.backward()`` -> loss; ``scaler.scale(loss).backward()`` -> loss."""
    receiver = call.func.value if isinstance(call.func, ast.Attribute) else call.func
    if isinstance(receiver, ast.Call) and receiver.args:
        return _dotted(receiver.args[0])
    return _dotted(receiver)


def _optimizer_step(stmt: ast.stmt) -> str | None:
    """The optimizer a statement steps: ``opt.step()``, or ``scaler.step(opt)``."""
    for call in _method_calls(stmt, "step"):
        assert isinstance(call.func, ast.Attribute)
        receiver = _dotted(call.func.value)
        if call.args and "scal" in receiver.lower():
            return _dotted(call.args[0]) or None
        if not call.args and "sched" not in receiver.lower():
            return receiver or None
    return None


def _model_name(tree: ast.Module, optimizer: str | None) -> str | None:
    """The model: whose ``.parameters()`` the optimizer is built over."""
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not _is_optimizer(_dotted(node.func)):
            continue
        for arg in node.args[:1]:
            for call in _method_calls(arg, "parameters"):
                assert isinstance(call.func, ast.Attribute)
                return _dotted(call.func.value) or None
    return None


def find_anchors(source: str) -> Anchors:
    tree = ast.parse(source)
    last_import = None
    for stmt in tree.body:
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            last_import = (stmt.end_lineno or stmt.lineno) - 1
    loop = _training_loop(tree)
    backward = step = zero_grad = forward = None
    input_name = optimizer_name = loss_name = None
    body = _flatten(loop.body) if loop is not None else []
    for stmt in body:
        calls = _method_calls(stmt, "backward")
        if calls and backward is None:
            backward, loss_name = stmt.lineno - 1, _loss_name(calls[0])
        stepped = _optimizer_step(stmt)
        if stepped is not None and step is None:
            step, optimizer_name = stmt.lineno - 1, stepped
        if _method_calls(stmt, "zero_grad") and zero_grad is None:
            zero_grad = stmt.lineno - 1
    model_name = _model_name(tree, optimizer_name)
    if loop is not None:
        forward, model_name, input_name = _forward(body, loss_name, backward, model_name)
    optimizer_call, optimizer_stmt = _constructor(tree, _is_optimizer)
    loader_call, _ = _constructor(tree, lambda name: name.endswith("DataLoader"))
    model_stmt = _assignment(tree, model_name, before=loop)
    return Anchors(
        last_import,
        optimizer_call,
        optimizer_stmt,
        optimizer_name,
        loader_call,
        model_stmt,
        model_name,
        input_name,
        forward,
        backward,
        step,
        zero_grad,
        (loop.lineno - 1, (loop.end_lineno or loop.lineno) - 1) if loop is not None else None,
    )


def _calls_of(stmt: ast.stmt) -> list[ast.Call]:
    return [n for n in ast.walk(stmt) if isinstance(n, ast.Call)]


def _forward(
    body: Sequence[ast.stmt], loss_name: str | None, backward: int | None, model: str | None
) -> tuple[tuple[int, int] | None, str | None, str | None]:
    """(first and last line of forward + loss, the model's name, the input's name).

    The forward is the first statement that calls the model (by its name when
    the optimizer's ``.parameters()`` named it, else the first plain-name call),
    the loss the assignment to the name ``backward()`` is called on; both in the
    same block, so wrapping them in a ``with`` keeps the code valid.
    """
    if loss_name is None or backward is None:
        return None, None, None
    loss_stmt = next(
        (
            s
            for s in body
            if isinstance(s, ast.Assign)
            and any(_dotted(t) == loss_name for t in s.targets)
            and s.lineno - 1 < backward
        ),
        None,
    )
    if loss_stmt is None:
        return None, None, None
    block = next((b for b in _blocks(body) if loss_stmt in b), [])
    for stmt in block:
        if stmt.lineno > loss_stmt.lineno:
            break
        for call in _calls_of(stmt):
            if not isinstance(call.func, ast.Name) or not call.args:
                continue
            if model is not None and call.func.id != model:
                continue
            start, end = stmt.lineno - 1, (loss_stmt.end_lineno or loss_stmt.lineno) - 1
            return (start, end), call.func.id, _dotted(call.args[0]) or None
    return None, None, None


def _blocks(body: Sequence[ast.stmt]) -> list[list[ast.stmt]]:
    """The statement lists of a loop body: itself and every ``with`` body in it."""
    out = [list(body)]
    for stmt in body:
        if isinstance(stmt, ast.With):
            out += _blocks(stmt.body)
    return out


def _constructor(
    tree: ast.Module, wanted: Callable[[str], bool]
) -> tuple[ast.Call | None, int | None]:
    for node in ast.walk(tree):
        if not isinstance(node, ast.Assign) or not isinstance(node.value, ast.Call):
            continue
        if wanted(_dotted(node.value.func)):
            return node.value, node.lineno - 1
    return None, None


def _assignment(tree: ast.Module, name: str | None, before: ast.stmt | None) -> int | None:
    """The model's last assignment before the loop, else its first anywhere (another function)."""
    if name is None:
        return None
    lines = sorted(
        (node.end_lineno or node.lineno) - 1
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign) and any(_dotted(t) == name for t in node.targets)
    )
    earlier = [line for line in lines if before is None or line < before.lineno - 1]
    return earlier[-1] if earlier else (lines[0] if lines else None)


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
        raise TorchwiseError(f"--train-script: cannot read {file}: {reason}") from None
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
