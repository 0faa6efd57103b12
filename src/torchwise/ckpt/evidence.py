"""Turn the machine's records into evidence a person can read: the call a global leads to."""

from __future__ import annotations

from typing import Any

from torchwise.ckpt.picklevm.values import Call, Global, PersistentRef, Unknown

_NUMPY_SCALAR = frozenset({"numpy.core.multiarray.scalar", "numpy._core.multiarray.scalar"})
_NUMPY_DTYPE = "numpy.dtype"


def caller_index(calls: list[Call]) -> dict[int, Call]:
    """id(global) -> the outermost call built on it (``getattr(os, 'system')('ls')``)."""
    by_func = {id(c.func): c for c in reversed(calls)}
    index: dict[int, Call] = {}
    for call in calls:
        if isinstance(call.func, Global) and id(call.func) not in index:
            outer = call
            seen = {id(outer)}
            while id(outer) in by_func and id(by_func[id(outer)]) not in seen:
                outer = by_func[id(outer)]
                seen.add(id(outer))
            index[id(call.func)] = outer
    # Globals used only as arguments (getattr(__import__('os'), ...)): the call holding them.
    for call in calls:
        for arg in call.args if isinstance(call.args, tuple) else ():
            if isinstance(arg, Global) and id(arg) not in index:
                index[id(arg)] = call
    return index


def numpy_object_scalars(calls: list[Call]) -> list[Call]:
    """``numpy...scalar(dtype('O'), raw)``: a raw object pointer in older NumPy."""
    found = []
    for call in calls:
        if not (isinstance(call.func, Global) and call.func.qualname in _NUMPY_SCALAR):
            continue
        args = call.args if isinstance(call.args, tuple) else ()
        dtype = args[0] if args else None
        code = dtype.args[0] if isinstance(dtype, Call) and isinstance(dtype.args, tuple) else None
        code = code[0] if isinstance(code, tuple) and code else code
        if not isinstance(code, str) or code.lstrip("<>|=").startswith("O"):
            found.append(call)
    return found


def render(obj: Any, depth: int = 0) -> str:
    """A short, literal rendering of a symbolic value, for evidence."""
    if depth > 4:
        return "..."
    if isinstance(obj, Global):
        return obj.qualname
    if isinstance(obj, Call):
        args = obj.args if isinstance(obj.args, (tuple, list)) else (obj.args,)
        inner = ", ".join(render(a, depth + 1) for a in args[:6])
        text = f"{render(obj.func, depth + 1)}({inner}{', ...' if len(args) > 6 else ''})"
        return text if len(text) < 400 else text[:397] + "..."
    if isinstance(obj, (str, bytes)):
        text = repr(obj)
        return text if len(text) < 200 else text[:197] + "..."
    if isinstance(obj, tuple):
        items = ", ".join(render(a, depth + 1) for a in obj[:6])
        return f"({items}{',' if len(obj) == 1 else ''})"
    if isinstance(obj, list):
        return f"[{', '.join(render(a, depth + 1) for a in obj[:6])}]"
    if isinstance(obj, dict):
        pairs = list(obj.items())[:6]
        return (
            "{"
            + ", ".join(f"{render(k, depth + 1)}: {render(v, depth + 1)}" for k, v in pairs)
            + "}"
        )
    if isinstance(obj, PersistentRef):
        return "<persistent id>"
    if isinstance(obj, Unknown):
        return f"<{obj.why}>"
    if obj is None or isinstance(obj, (int, float, bool)):
        return repr(obj)
    return f"<{type(obj).__name__}>"
