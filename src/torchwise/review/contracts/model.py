"""What a library's releases promise about one public name, as plain data.

The tables under ``contracts/data/`` are generated from the released wheels
themselves (``scripts/gen_contracts.py``): every public name of each minor
release, the signature its callable had, the checks its own source makes on
its arguments before it does anything (``if not 0 <= p <= 1: raise
ValueError(...)``) and the deprecation warnings it emits. Nothing here is
written by hand, so a rule built on it is as right as the release it quotes.

A set of releases is a bit mask over the table's release list (bit ``i`` is
``releases[i]``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: A guard's condition or a message part, as the generator wrote it
#: (see :mod:`torchwise.review.contracts.guards`).
Expr = Any

#: Parameter kinds, as the tables spell them.
POSITIONAL_ONLY = "p"
POSITIONAL = "a"  # positional or keyword
VAR_POSITIONAL = "v"
KEYWORD_ONLY = "k"
VAR_KEYWORD = "w"


@dataclass(frozen=True)
class Param:
    name: str
    kind: str
    #: The default's literal value, as an expression (``["const", 1]``); None
    #: when the parameter is required, ``["?"]`` when the default is not a literal.
    default: Expr = None

    @property
    def required(self) -> bool:
        return self.default is None and self.kind in (POSITIONAL_ONLY, POSITIONAL, KEYWORD_ONLY)


@dataclass(frozen=True)
class Signature:
    params: tuple[Param, ...]

    @property
    def var_keyword(self) -> bool:
        return any(param.kind == VAR_KEYWORD for param in self.params)

    @property
    def var_positional(self) -> bool:
        return any(param.kind == VAR_POSITIONAL for param in self.params)

    def accepts_keyword(self, name: str) -> bool:
        return self.var_keyword or any(
            param.name == name and param.kind in (POSITIONAL, KEYWORD_ONLY) for param in self.params
        )

    def positional_slots(self) -> int | None:
        """How many arguments it takes by position; None: any number."""
        if self.var_positional:
            return None
        return sum(param.kind in (POSITIONAL_ONLY, POSITIONAL) for param in self.params)

    def render(self) -> str:
        parts: list[str] = []
        keyword_only_marked = False
        for param in self.params:
            if param.kind == VAR_POSITIONAL:
                parts.append(f"*{param.name}")
                keyword_only_marked = True
                continue
            if param.kind == VAR_KEYWORD:
                parts.append(f"**{param.name}")
                continue
            if param.kind == KEYWORD_ONLY and not keyword_only_marked:
                parts.append("*")
                keyword_only_marked = True
            text = param.name
            if param.default is not None:
                text += "=" + _default_text(param.default)
            parts.append(text)
            if param.kind == POSITIONAL_ONLY and _last_positional_only(self.params, param):
                parts.append("/")
        return "(" + ", ".join(parts) + ")"


def _last_positional_only(params: tuple[Param, ...], param: Param) -> bool:
    later = params[params.index(param) + 1 :]
    return not any(other.kind == POSITIONAL_ONLY for other in later)


def _default_text(default: Expr) -> str:
    if isinstance(default, list) and default and default[0] == "const":
        return repr(default[1])
    return "..."


@dataclass(frozen=True)
class Guard:
    """A check the callable's own source makes on its arguments."""

    when: Expr  # the condition, over the callable's parameters
    #: The exception class raised (``"ValueError"``), or None for a warning.
    raises: str | None
    #: The warning category (``"UserWarning"``, ``"FutureWarning"``) when it warns.
    warns: str | None
    message: tuple[Expr, ...]  # literal text and expressions, concatenated
    releases: int
    #: A warning that the call (or the argument) is deprecated: its category
    #: says so, or its message does ("... is deprecated").
    deprecation: bool = False


@dataclass(frozen=True)
class Deprecation:
    """A warning the callable emits on every call, whatever its arguments."""

    message: str
    category: str
    releases: int


@dataclass
class Definition:
    """One callable (or class, module, attribute) of the library, over its releases."""

    key: str  # where it is defined: "torch.nn.modules.rnn.LSTM"
    kind: str  # "function", "class", "module", "attribute"
    #: (releases, overloads): the signatures it had, each for some releases.
    signatures: list[tuple[int, tuple[Signature, ...]]] = field(default_factory=list)
    guards: list[Guard] = field(default_factory=list)
    deprecations: list[Deprecation] = field(default_factory=list)


@dataclass
class Api:
    """A public name (``torch.nn.LSTM``) and what it referred to in each release."""

    name: str
    present: int  # releases in which the name resolves
    #: (releases, definition key): the definition it named in those releases.
    targets: list[tuple[int, str]]
