"""Facts the engine collects during its single pass, for rules that reason
about a region (a loop, a function, a module) rather than a single node.

Every call is recorded once as a :class:`CallEvent` in each region that
lexically contains it, so a rule that runs when the pass leaves a loop sees
every call inside that loop, nested loops included, without walking the tree.

A :class:`Value` is what the engine knows a name or an expression holds (a
model of a given class, a softmax output, a loss whose graph runs through two
models, what ``torch.load`` returned ...). A :data:`Branch` is the path of
``if`` conditions a statement sits under, so that facts on one branch do not
condemn the other (see :func:`exclusive`).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field, replace

from torchwise.review.engine.tensors import TensorInfo

#: Kinds of value the engine tracks for local names (see Context.value_of).
MODULE, OPTIMIZER, SCHEDULER, LOSS_FN, LOADER, SCALER, SAMPLER = (
    "module",
    "optimizer",
    "scheduler",
    "loss_fn",
    "loader",
    "scaler",
    "sampler",
)
LOSS, OUTPUT, TENSOR = "loss", "output", "tensor"  # tensors, possibly with an autograd graph
LOADED = "loaded"  # what torch.load returned, or an item of it
NAMESPACE, PARSER = "namespace", "parser"  # argparse.Namespace, ArgumentParser
ITERATOR = "iterator"  # iter(something)
DATASET = "dataset"
INSTANCE = "instance"  # an instance of a project class that is not an nn.Module
DEVICE = "device"  # a torch.device, a device string or number (its place: Value.tensor)
TENSORS = "tensors"  # a tuple, list or dict of tensors (what each holds: Value.tensor)

#: ((condition text, polarity), ...) from the outermost ``if`` inward.
Branch = tuple[tuple[str, bool], ...]


def exclusive(first: Branch, second: Branch) -> bool:
    """Whether two statements can never run in the same pass through the code:
    one sits under a condition the other sits under the negation of.

    Conditions are compared by their text, so ``if use_amp:`` twice in a function
    counts as one condition (true in both places or false in both)."""
    if not first or not second:
        return False
    polarity = dict(first)
    return any(polarity.get(test, sign) != sign for test, sign in second)


def implied(condition: Branch, by: Branch) -> bool:
    """Whether every condition of ``condition`` also holds on the path ``by``."""
    return set(condition) <= set(by)


@dataclass(frozen=True, eq=False)
class Crossing:
    """``D(fake)`` where ``fake = G(z)`` was not detached: gradients of
    whatever is computed from it flow back into ``G``."""

    node: ast.AST  # the call applying the downstream model
    model: str  # the downstream model ("D")
    upstream: frozenset[str]  # the models whose outputs it was applied to ({"G"})
    consumer: ast.AST | None = None  # the first loss computed from it


@dataclass(frozen=True, eq=False)
class Value:
    """What an expression holds, as far as the code shows."""

    kind: str | None
    #: The callee that produced it, resolved: "torch.nn.BCELoss", "models.Net",
    #: "torch.load", "torchvision.models.resnet18".
    origin: str | None = None
    #: "softmax"/"sigmoid"/"log_softmax" when the tensor is such an output.
    activation: str | None = None
    #: Where that activation is applied: (file, line); file None for this file.
    activation_at: tuple[str | None, int] | None = None
    #: Outputs: the model (dotted name) that computed it; optimizers: the model
    #: whose parameters they update.
    model: str | None = None
    #: Models whose parameters the tensor's autograd graph reaches (not detached).
    through: frozenset[str] = frozenset()
    #: Where a model was applied to another model's undetached output.
    crossing: Crossing | None = None
    #: For LOADED values: the key read from the loaded object ("settings").
    key: str | None = None
    #: Extra facts: "unreduced" (a loss with reduction="none": one value per sample).
    flags: frozenset[str] = frozenset()
    node: ast.AST | None = None
    #: Tensors, modules, devices and containers of tensors: device, shape,
    #: alias (see :mod:`.tensors`). None: nothing known.
    tensor: TensorInfo | None = None
    #: The items of a tuple or list written out (``return loss, logits``), each
    #: what it holds: what unpacking it binds.
    items: tuple[Value | None, ...] | None = None

    def but(self, **changes: object) -> Value:
        return replace(self, **changes)  # type: ignore[arg-type]


@dataclass(eq=False)
class CallEvent:
    """One call, with what the engine knew about it at that point of the pass."""

    node: ast.Call
    qualname: str | None  # "torch.nn.functional.softmax" when the callee resolves
    method: str | None  # "backward" for ``loss.backward()``
    receiver: str | None  # "self.optimizer" for ``self.optimizer.step()``
    receiver_value: Value | None  # what the receiver holds
    callee_value: Value | None  # MODULE for ``model(x)``, LOSS_FN for ``criterion(out, y)``
    no_grad: bool  # inside torch.no_grad()/inference_mode() (or a decorated function)
    loop_depth: int
    branch: Branch = ()
    #: The project function this call runs ("module:qualname"), when it resolves.
    target: str | None = None
    builds_model: bool = False  # Net(...), nn.Linear(...), resnet18(), from_pretrained(...)

    @property
    def line(self) -> int:
        return self.node.lineno

    @property
    def receiver_kind(self) -> str | None:
        return None if self.receiver_value is None else self.receiver_value.kind

    @property
    def callee_kind(self) -> str | None:
        return None if self.callee_value is None else self.callee_value.kind


@dataclass(eq=False)
class Region:
    node: ast.AST
    calls: list[CallEvent] = field(default_factory=list)


@dataclass(eq=False)
class LoopFacts(Region):
    """A ``for``/``while`` loop. ``outer`` is the enclosing loop in the same function."""

    outer: LoopFacts | None = None
    function: FunctionFacts | None = None
    #: What a ``for`` loop iterates over (``for x, y in train_loader``), if known.
    iterates: Value | None = None
    iterated: str | None = None  # the dotted name iterated, if a name
    branch: Branch = ()


@dataclass(eq=False)
class FunctionFacts(Region):
    name: str = ""
    class_name: str | None = None
    in_module_class: bool = False  # a method of an nn.Module subclass
    no_grad: bool = False  # decorated with @torch.no_grad() / @torch.inference_mode()
    loops: list[LoopFacts] = field(default_factory=list)
    params: tuple[str, ...] = ()
    #: The project id of the function ("module:Class.method"), when indexed.
    target: str | None = None


@dataclass(eq=False)
class LoadFacts:
    """A ``torch.load(...)`` call and what the code does with what it returned."""

    node: ast.Call
    #: How the loaded object (or an item of it) is used: "module" (called, put
    #: in eval mode, asked for parameters...), "optimizer" (stepped).
    uses: set[str] = field(default_factory=set)
    keys: set[str] = field(default_factory=set)  # items read: ckpt["args"]
    #: Where each use happens (for the message).
    where: list[ast.AST] = field(default_factory=list)


@dataclass(eq=False)
class FreezeFacts:
    """``for p in X.parameters(): p.requires_grad = False`` (or
    ``X.requires_grad_(False)``): the parameters of ``X`` are frozen."""

    node: ast.AST
    owner: str  # "backbone", "self.resnet", "model.encoder"
    value: Value | None  # what the owner held there
    function: FunctionFacts | None
    branch: Branch
    partial: bool = False  # under a condition inside the loop: some parameters only


@dataclass(eq=False)
class SettingFacts:
    """A process-wide switch set by the code: ``torch.backends.cudnn.benchmark =
    True``, ``torch.backends.cudnn.deterministic = True``,
    ``torch.use_deterministic_algorithms(True)``."""

    node: ast.AST
    name: str  # "benchmark", "deterministic", "deterministic_algorithms"
    value: bool | None  # None: set to an expression (a flag from the command line)
    function: FunctionFacts | None
    branch: Branch


@dataclass(eq=False)
class ModuleFacts(Region):
    functions: list[FunctionFacts] = field(default_factory=list)
    loops: list[LoopFacts] = field(default_factory=list)
    loads: dict[ast.Call, LoadFacts] = field(default_factory=dict)
    freezes: list[FreezeFacts] = field(default_factory=list)
    #: Models of known classes moved to the device: (class as written, line).
    placed: list[tuple[str, int]] = field(default_factory=list)
    settings: list[SettingFacts] = field(default_factory=list)
    #: Whether the module star-imports anything (set as imports are bound).
    star_imports: bool = False
    #: id of a function node -> the names bound by ``def`` inside it (filled when needed).
    nested_functions: dict[int, frozenset[str]] = field(default_factory=dict)
