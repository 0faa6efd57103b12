"""Facts the engine collects during its single pass, for rules that reason
about a region (a loop, a function, a module) rather than a single node.

Every call is recorded once as a :class:`CallEvent` in each region that
lexically contains it, so a rule that runs when the pass leaves a loop sees
every call inside that loop, nested loops included, without walking the tree.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

#: Kinds of value the engine tracks for local names (see Context.kind_of).
MODULE, OPTIMIZER, SCHEDULER, LOSS_FN, LOADER, SCALER, SAMPLER = (
    "module",
    "optimizer",
    "scheduler",
    "loss_fn",
    "loader",
    "scaler",
    "sampler",
)
LOSS, OUTPUT, TENSOR = "loss", "output", "tensor"  # tensors with an autograd graph


@dataclass(eq=False)
class CallEvent:
    """One call, with what the engine knew about it at that point of the pass."""

    node: ast.Call
    qualname: str | None  # "torch.nn.functional.softmax" when the callee resolves
    method: str | None  # "backward" for ``loss.backward()``
    receiver: str | None  # "self.optimizer" for ``self.optimizer.step()``
    receiver_kind: str | None  # OPTIMIZER, ...
    callee_kind: str | None  # MODULE for ``model(x)``, LOSS_FN for ``criterion(out, y)``
    no_grad: bool  # inside torch.no_grad()/inference_mode() (or a decorated function)
    loop_depth: int

    @property
    def line(self) -> int:
        return self.node.lineno


@dataclass(eq=False)
class Region:
    node: ast.AST
    calls: list[CallEvent] = field(default_factory=list)


@dataclass(eq=False)
class LoopFacts(Region):
    """A ``for``/``while`` loop. ``outer`` is the enclosing loop in the same function."""

    outer: LoopFacts | None = None
    function: FunctionFacts | None = None


@dataclass(eq=False)
class FunctionFacts(Region):
    name: str = ""
    class_name: str | None = None
    in_module_class: bool = False  # a method of an nn.Module subclass
    no_grad: bool = False  # decorated with @torch.no_grad() / @torch.inference_mode()
    loops: list[LoopFacts] = field(default_factory=list)


@dataclass(eq=False)
class ModuleFacts(Region):
    functions: list[FunctionFacts] = field(default_factory=list)
    loops: list[LoopFacts] = field(default_factory=list)
