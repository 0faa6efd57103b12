"""Which gym API a line of code is written for.

gym 0.26 (and every gymnasium) changed ``env.step()`` to return five values
(``obs, reward, terminated, truncated, info``) and ``env.reset()`` to return
``(obs, info)``. Code unpacking five values or a pair is written for the new
API; code is judged against the old one only where the project shows it uses
the new one somewhere, or uses gymnasium, which never had the old API.
"""

from __future__ import annotations

import ast

from torchwise.review.engine.context import Context

#: The marks :func:`written_for` gives.
NEW_API = "gym>=0.26"
OLD_API = "gym<0.26"

_GYMS = ("gym.", "gymnasium.")


def env_library(expr: ast.expr, ctx: Context) -> str | None:
    """ "gym" or "gymnasium" when ``expr`` is an environment one of them made."""
    value = ctx.value_of(expr)
    origin = "" if value is None else (value.origin or "")
    if not origin.startswith(_GYMS):
        return None
    return origin.partition(".")[0]


def env_call(node: ast.Assign, ctx: Context) -> tuple[str, str, int] | None:
    """(library, "step" or "reset", number of names unpacked) of
    ``target = env.step(...)`` / ``env.reset(...)``; 1 for a single name."""
    value = node.value
    if len(node.targets) != 1 or not isinstance(value, ast.Call):
        return None
    if not isinstance(value.func, ast.Attribute) or value.func.attr not in {"step", "reset"}:
        return None
    library = env_library(value.func.value, ctx)
    if library is None:
        return None
    target = node.targets[0]
    if isinstance(target, (ast.Tuple, ast.List)):
        if any(isinstance(element, ast.Starred) for element in target.elts):
            return None
        return library, value.func.attr, len(target.elts)
    return library, value.func.attr, 1


def written_for(node: ast.Assign, ctx: Context) -> str | None:
    """NEW_API, OLD_API, or None when the line does not tell."""
    call = env_call(node, ctx)
    if call is None:
        return None
    _, method, count = call
    if (method, count) in {("step", 5), ("reset", 2)}:
        return NEW_API
    if (method, count) == ("step", 4):
        return OLD_API
    return None
