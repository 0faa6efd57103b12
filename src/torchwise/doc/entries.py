"""The ``(TYPE)`` of each generated entry: constructor and ``forward`` arguments,
attributes, and ``forward``'s return value.

Types come from what was measured or passed, not guessed: a constructor argument
without an annotation is typed by the value the build expression passed to it
(``config (GPTConfig)``), a tensor argument by its measured symbolic shape, and
the return value by the structure ``forward`` returned, ``None`` members
included, with what an optional argument changes (nanoGPT's ``targets`` turns
the loss from ``None`` into a tensor).

Every TYPE this module writes keeps spaces and colons inside brackets, so the
docstring parser reads it back whole and ``--write`` stays idempotent.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import inspect
import io
import re
import sys
from typing import TYPE_CHECKING, Any

from torchwise.doc import returns as docreturns
from torchwise.doc import shapes as docshapes
from torchwise.doc.docstrings import GenEntry
from torchwise.units import exact

if TYPE_CHECKING:
    import torch

    from torchwise.target import InputSpec, ResolvedTarget

#: Attribute entries whose ``TYPE`` would push the line past this are shortened.
MAX_ENTRY = 96


def _annotation(param: inspect.Parameter) -> str | None:
    """The annotation as a user writes it: ``LlamaConfig``, ``Tensor | None``."""
    if param.annotation is inspect.Parameter.empty:
        return None
    if isinstance(param.annotation, str):
        return param.annotation
    text = inspect.formatannotation(param.annotation)
    text = re.sub(r"<class '([\w.]+)'>", r"\1", text)
    return re.sub(r"\b(?:[A-Za-z_]\w*\.)+([A-Za-z_]\w*)", r"\1", text)


def _default(value: Any) -> str:
    if isinstance(value, type) or inspect.isfunction(value):
        return str(value.__qualname__)
    return repr(value)


def type_name(value: Any) -> str:
    """``int``, ``GPTConfig``, ``tuple``: the type of a passed value, as a user writes it."""
    cls = type(value)
    return cls.__name__ if cls.__module__ == "builtins" else cls.__qualname__


def signature_entry(param: inspect.Parameter, passed: Any = inspect.Parameter.empty) -> GenEntry:
    """``name (TYPE)``: the annotation, else the type of the value passed, else of the
    default; then the default."""
    prefix = {"VAR_POSITIONAL": "*", "VAR_KEYWORD": "**"}.get(param.kind.name, "")
    kind = _annotation(param)
    if kind is None and passed is not inspect.Parameter.empty and passed is not None:
        kind = type_name(passed)
    if kind is None and param.default not in (inspect.Parameter.empty, None):
        kind = type_name(param.default)
    parts = [kind] if kind else []
    if param.default is not inspect.Parameter.empty:
        parts.append(f"default={_default(param.default)}")
    return GenEntry(prefix + param.name, ", ".join(parts) or None)


def _init_parameters(cls: type) -> list[inspect.Parameter]:
    import torch

    init = vars(cls).get("__init__") or getattr(cls, "__init__", None)
    if init is None or init is torch.nn.Module.__init__:
        return []
    try:
        return list(inspect.signature(init).parameters.values())[1:]
    except (TypeError, ValueError):
        return []


def init_entries(cls: type, passed: dict[str, Any] | None = None) -> list[GenEntry]:
    """The constructor's arguments, typed by annotation or by the value passed."""
    passed = passed or {}
    return [
        signature_entry(p, passed.get(p.name, inspect.Parameter.empty))
        for p in _init_parameters(cls)
    ]


def constructor_values(rt: ResolvedTarget, cls: type) -> dict[str, Any]:
    """The values the build passed to ``cls``'s constructor, by parameter name.

    ``--init-kwargs`` give them directly; a build expression such as
    ``GPT(GPTConfig(n_layer=2))`` is parsed, and the arguments of its call of
    ``cls`` are evaluated again in the module's namespace (on meta, output
    silenced). Arguments that cannot be evaluated are left out.
    """
    values = dict(rt.init_kwargs)
    if not rt.build:
        return values
    try:
        tree = ast.parse(rt.build, mode="eval")
    except SyntaxError:
        return values
    call = next(
        (
            node
            for node in ast.walk(tree)
            if isinstance(node, ast.Call) and _called_name(node.func) == cls.__name__
        ),
        None,
    )
    module = sys.modules.get(rt.module or "") or sys.modules.get(cls.__module__)
    if call is None or module is None:
        return values
    params = [p.name for p in _init_parameters(cls) if p.kind != p.VAR_KEYWORD]
    expressions = dict(zip(params, call.args, strict=False))
    expressions.update({kw.arg: kw.value for kw in call.keywords if kw.arg is not None})
    for name, node in expressions.items():
        found, value = _evaluate(node, vars(module))
        if found:
            values[name] = value
    return values


def _called_name(func: ast.expr) -> str | None:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None


def _evaluate(node: ast.expr, namespace: dict[str, Any]) -> tuple[bool, Any]:
    import torch

    try:
        code = compile(ast.Expression(node), "<build>", "eval")
        with contextlib.redirect_stdout(io.StringIO()), torch.device("meta"):
            return True, eval(code, {"__builtins__": builtins, **namespace})
    except Exception:
        return False, None


def attribute_entries(model: torch.nn.Module) -> list[GenEntry]:
    """Direct submodules (type, config, parameters), own parameters and buffers."""
    entries = []
    for name, child in model.named_children():
        n_params = sum(p.numel() for p in child.parameters())
        params = f", {exact(n_params)} params" if n_params else ""
        kids = len(list(child.children()))
        short = type(child).__name__ + (f" of {kids}" if kids else "")
        full = f"{type(child).__name__}({child.extra_repr()})" if not kids else short
        type_ = full + params
        if len(name) + len(type_) + 12 > MAX_ENTRY:
            type_ = short + params
        entries.append(GenEntry(name, type_))
    for name, param in model.named_parameters(recurse=False):
        frozen = "" if param.requires_grad else ", frozen"
        entries.append(GenEntry(name, f"Parameter[{_tensor_type(param)}]{frozen}"))
    for name, buffer in model.named_buffers(recurse=False):
        entries.append(GenEntry(name, f"buffer[{_tensor_type(buffer)}]"))
    return entries


def _tensor_type(tensor: torch.Tensor) -> str:
    dims = ", ".join(str(s) for s in tensor.shape)
    return f"{docshapes.dtype_name(tensor.dtype)}, ({dims}{',' if tensor.dim() == 1 else ''})"


def leaf_type(leaf: docshapes.Leaf) -> str:
    return f"Tensor[{leaf.dtype}, {leaf.shape_text()}]"


def _spec_type(spec: InputSpec, path: str, leaves: dict[str, docshapes.Leaf]) -> str:
    """The TYPE of one forward argument from its spec, tensors by their measured leaf."""
    if spec.children is not None:
        fields = ", ".join(
            f"{k}={_spec_type(c, f'{path}[{k!r}]', leaves)}" for k, c in spec.children.items()
        )
        return f"dict({fields})"
    if spec.items is not None:
        parts = ", ".join(
            _spec_type(item, f"{path}[{i}]", leaves) for i, item in enumerate(spec.items)
        )
        return f"{'list' if spec.is_list else 'tuple'}[{parts}]"
    if spec.literal is not None:
        return type_name(spec.value)
    leaf = leaves.get(path)
    return leaf_type(leaf) if leaf is not None else "Tensor"


def forward_entries(
    model: torch.nn.Module,
    specs: list[InputSpec],
    names: list[str],
    shapes: docshapes.SymbolicShapes,
    effects: list[docreturns.OptionalEffect] | None = None,
) -> list[GenEntry]:
    """``forward``'s arguments: measured types for the given inputs, the type an optional
    argument was tried with when it changed the outputs, the signature otherwise."""
    leaves = {leaf.path: leaf for leaf in shapes.inputs}
    by_name = dict(zip(names, specs, strict=True))
    tried = {effect.parameter: effect.like for effect in effects or []}
    try:
        params = list(inspect.signature(model.forward).parameters.values())
    except (TypeError, ValueError):
        return []
    entries = []
    for param in params:
        spec = by_name.get(param.name)
        if param.name in tried and spec is None:
            like = tried[param.name]
            kind = _spec_type(specs[like], names[like], leaves)
            entries.append(GenEntry(param.name, f"{kind}, default={_default(param.default)}"))
        elif spec is None or spec.literal is not None:
            entries.append(signature_entry(param))
        else:
            entries.append(GenEntry(param.name, _spec_type(spec, param.name, leaves)))
    return entries


def returns_type(
    shapes: docshapes.SymbolicShapes, effects: list[docreturns.OptionalEffect] | None = None
) -> str:
    """The return value's structure with each tensor's type, ``None`` members kept, and
    for each top-level member what an optional argument turns it into."""
    leaves = {leaf.path: leaf for leaf in shapes.outputs}
    changes: dict[str, list[str]] = {}
    for effect in effects or []:
        for path, member in effect.outputs.items():
            text = "None" if member is None else _sized(member, shapes.symbols)
            changes.setdefault(path, []).append(f"{text} with {effect.parameter}")

    def render(node: Any, top: str | None = None) -> str:
        kind = node[0]
        if kind == "tensor":
            text = leaf_type(leaves[node[1]]) if node[1] in leaves else "Tensor"
        elif kind == "none":
            text = "None"
        elif kind in ("tuple", "list"):
            parts = [render(part, f"[{i}]" if top is None else None) for i, part in
                     enumerate(node[1])]  # fmt: skip
            return f"{kind}[{', '.join(parts)}]"
        elif kind == "dict":
            return "dict(" + ", ".join(f"{k}={render(v)}" for k, v in node[1]) + ")"
        elif kind == "named":
            return f"{node[1]}(" + ", ".join(f"{k}={render(v)}" for k, v in node[2]) + ")"
        else:
            text = node[1]
        extra = changes.get(top or "", [])
        return f"{text} ({'; '.join(extra)})" if extra else text

    tree = shapes.output_tree
    if tree is None:
        return "None"
    return render(tree, None if tree[0] in ("tuple", "list") else "output")


def _sized(member: tuple[str, list[int]], symbols: dict[str, int]) -> str:
    """``Tensor[float32, (batch, seq_len, 65)]`` from measured sizes: a size equal to
    exactly one symbol's example size is written as that symbol."""
    dtype, sizes = member
    by_size: dict[int, list[str]] = {}
    for name, size in symbols.items():
        by_size.setdefault(size, []).append(name)
    dims = [by_size[s][0] if len(by_size.get(s, [])) == 1 else str(s) for s in sizes]
    return f"Tensor[{dtype}, ({', '.join(dims)}{',' if len(dims) == 1 else ''})]"
