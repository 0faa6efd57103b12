"""What the engine's pass records besides calls: what names hold after each
assignment (tuple unpacking, framework wrappers, literals), module-level models
visible to every function, and the facts some rules need about how values are
used: what ``torch.load`` returned and how the code uses it, which modules'
parameters are frozen, which names an optimizer updates.

:class:`Tracker` is a mixin of the engine's ``_Pass``: one walk, no rule
walks the tree again.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from torchwise.review.engine import facts as F
from torchwise.review.engine.context import (
    INTEGER,
    UNTRACKED,
    Binding,
    Context,
    kind_from_callee,
    pass_through_arguments,
)
from torchwise.review.engine.facts import Value
from torchwise.review.engine.tensor_values import elementwise, tensor_of_fact
from torchwise.review.engine.tensors import ACCEL, TensorInfo

_VIEW_ATTRIBUTES = {"data", "T", "mT", "H", "mH"}
_CUDNN_SWITCHES = {"benchmark", "deterministic"}
#: An element of a model's tuple output (what it holds is known only in part).
UNPACKED = "unpacked"
_TORCH_LOADS = {"torch.load", "torch.serialization.load"}


_GLOBAL_KINDS = {F.MODULE, F.LOSS_FN, F.OPTIMIZER, F.LOADER}


_LITERALS = (
    ast.Constant, ast.List, ast.Tuple, ast.Dict, ast.Set, ast.ListComp, ast.DictComp,
    ast.SetComp, ast.JoinedStr, ast.Lambda,
)  # fmt: skip


#: Methods that show an object is an nn.Module or an optimizer, not tensors.
_MODULE_USES = {
    **dict.fromkeys(
        (
            "eval",
            "train",
            "parameters",
            "named_parameters",
            "modules",
            "children",
            "forward",
            "named_modules",
            "state_dict",
            "init_hidden",
            "initHidden",
            "apply",
            "zero_grad",
        ),
        "module",
    ),
    "step": "optimizer",
    "param_groups": "optimizer",
}


def builds_model(ctx: Context, qualname: str | None) -> bool:
    """A call that constructs a model: a torch.nn layer, a module class of the
    project, a torchvision constructor, ``from_pretrained``/``create_model``."""
    if qualname is None:
        return False
    last = qualname.rsplit(".", 1)[-1]
    if last in {"from_pretrained", "create_model"}:
        return True
    if qualname.startswith(("torch.", "torchvision.")):
        wrappers = {"torch.compile", "torch.jit.script"}
        return kind_from_callee(qualname) == F.MODULE and qualname not in wrappers
    if not last[:1].isupper():
        return False
    if qualname.startswith("<local>."):
        return ctx.is_module_base(ast.Name(last))
    return ctx.project.is_module_class(ctx, qualname)


def _parameters_of(loop: ast.For | ast.AsyncFor, parameter: str) -> ast.expr | None:
    """``X`` when ``loop`` is ``for <parameter> in X.parameters():`` (or
    ``for _, <parameter> in X.named_parameters():``)."""
    target, iterated = loop.target, loop.iter
    if isinstance(target, ast.Tuple) and len(target.elts) == 2:
        target = target.elts[1]
    if not (isinstance(target, ast.Name) and target.id == parameter):
        return None
    if (
        isinstance(iterated, ast.Call)
        and isinstance(iterated.func, ast.Attribute)
        and iterated.func.attr in {"parameters", "named_parameters"}
    ):
        return iterated.func.value
    return None


class Tracker:
    """Mixin: bindings and usage facts, recorded as the pass walks."""

    ctx: Context

    if TYPE_CHECKING:

        def children(self, node: ast.AST) -> None: ...

    def _prescan_global(self, statement: ast.Assign) -> None:
        """``model = Net()`` at module level (even under ``if __name__ == ...``,
        even below the functions that use it): functions see it, as at run time.
        Only the first such assignment of a name, and only a model, a loss
        function, an optimizer or a loader; the pass rebinds it in order."""
        ctx = self.ctx
        if len(statement.targets) != 1 or not isinstance(statement.targets[0], ast.Name):
            return
        name = statement.targets[0].id
        if name in ctx.scopes[0].values or not isinstance(statement.value, ast.Call):
            return
        value = ctx.value_of(statement.value)
        if value is not None and value.kind in _GLOBAL_KINDS:
            ctx.scopes[0].values[name] = [Binding(value, ())]

    def _assign(self, node: ast.Assign | ast.AnnAssign) -> None:
        self.children(node)
        value = node.value
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        bound = None if value is None else self.ctx.value_of(value)
        if bound is None and value is not None and self.ctx.is_size(value):
            bound = INTEGER  # `n = x.size(0)`: a number, and a size
        if bound is None and (isinstance(value, _LITERALS) or _python_number(value)):
            bound = UNTRACKED  # `loss = []`, `loss = t.item()`: the name no longer means a loss
        if bound is None and isinstance(node, ast.AnnAssign):
            kind = self._kind_of_annotation(node.annotation)
            bound = None if kind is None else Value(kind)
        if bound is not None and bound.kind == F.LOADED and bound.key is not None:
            self._load_key(bound)
        if bound is not None and bound.kind == F.OPTIMIZER and bound.model is not None:
            self._optimised_is_a_model(bound.model)
        if bound is not None and bound.kind == F.MODULE and value is not None:
            self._note_placement(bound, value)
        bound = self._aliased(value, bound)
        if (
            isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Constant)
            and node.value.value is False
        ):
            for target in node.targets:
                self._freeze(target, node)
        for target in targets:
            self._bind_target(target, value, bound)
            self._note_setting(target, value)
            if isinstance(target, ast.Subscript) and bound is not None and bound.through:
                self._written_into(target, bound)

    def _written_into(self, target: ast.Subscript, written: Value) -> None:
        """``x[mask] = model(s)``: ``x`` now holds values on the model's graph."""
        ctx = self.ctx
        base = target.value
        if ctx.dotted(base) is None:
            return
        current = ctx.value_of(base)
        if current is None or current.kind not in (F.TENSOR, F.OUTPUT, F.LOSS):
            return
        ctx.bind(base, current.but(through=current.through | written.through))

    def _note_setting(self, target: ast.expr, value: ast.expr | None) -> None:
        """``torch.backends.cudnn.benchmark = True`` and its ``deterministic`` twin."""
        if not isinstance(target, ast.Attribute) or target.attr not in _CUDNN_SWITCHES:
            return
        ctx = self.ctx
        if ctx.qualname(target) != f"torch.backends.cudnn.{target.attr}":
            return
        literal = value.value if isinstance(value, ast.Constant) else None
        ctx.module.settings.append(
            F.SettingFacts(
                target,
                target.attr,
                literal if isinstance(literal, bool) else None,
                ctx.function,
                ctx.branch,
            )
        )

    def _aliased(self, value: ast.expr | None, bound: Value | None) -> Value | None:
        """``b = a`` for a tensor ``a``: ``b`` is the same tensor, not a copy (an
        in-place write through ``b`` changes ``a``)."""
        if bound is None or bound.kind not in (F.TENSOR, F.OUTPUT, F.LOSS) or value is None:
            return bound
        name = self.ctx.dotted(value)
        if name is None or (isinstance(value, ast.Attribute) and value.attr in _VIEW_ATTRIBUTES):
            return bound  # `b = a.data` is a view already (see ValueReader._attribute)
        info = bound.tensor or TensorInfo()
        return bound.but(
            tensor=info.but(alias=name, alias_line=value.lineno, alias_kind="assigned")
        )

    def _expr(self, node: ast.Expr) -> None:
        """``model.to(device)`` as a statement moves the module in place (a
        tensor's ``.to`` returns a copy instead: nothing to rebind)."""
        self.children(node)
        call = node.value
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)):
            return
        method = call.func.attr
        if method == "eval" and not call.args and not call.keywords:
            self._evaluated_is_a_model(call.func.value)
            return
        if method not in {"to", "cuda", "cpu"}:
            return
        ctx = self.ctx
        receiver = call.func.value
        value = ctx.value_of(receiver)
        if value is None or not (value.kind == F.MODULE or (value.kind is None and value.origin)):
            return
        moved = value.but(tensor=ctx.moved(call, value.tensor, method))
        ctx.bind(receiver, moved)
        self._note_placement(moved, call)

    def _note_placement(self, value: Value, node: ast.AST) -> None:
        """Remember a model of a known class moved to the device (the index
        tells each class's forward that its inputs live there)."""
        place = None if value.tensor is None else value.tensor.place
        if place is not None and place.device == ACCEL and value.origin is not None:
            self.ctx.module.placed.append((value.origin, getattr(node, "lineno", 0)))

    def _freeze(self, target: ast.expr, node: ast.AST) -> None:
        """``p.requires_grad = False`` in ``for p in X.parameters():``."""
        if not (
            isinstance(target, ast.Attribute)
            and target.attr == "requires_grad"
            and isinstance(target.value, ast.Name)
        ):
            return
        parameter = target.value.id
        for loop in reversed(self.ctx.loops):
            loop_node = loop.node
            if not isinstance(loop_node, (ast.For, ast.AsyncFor)):
                continue
            owner = _parameters_of(loop_node, parameter)
            if owner is not None:
                self._record_freeze(owner, node, partial=self.ctx.branch != loop.branch)
                return

    def _record_freeze(self, owner: ast.expr, node: ast.AST, partial: bool = False) -> None:
        ctx = self.ctx
        name = ctx.dotted(owner)
        if name is not None:
            ctx.module.freezes.append(
                F.FreezeFacts(node, name, ctx.value_of(owner), ctx.function, ctx.branch, partial)
            )

    def _evaluated_is_a_model(self, receiver: ast.expr) -> None:
        """``model.eval()`` as a statement: whatever a project factory returned
        (``model = get_model(cfg)``), an object put in evaluation mode is a
        model. Tensors have no ``eval``; a project class that is not a module
        keeps its own meaning."""
        ctx = self.ctx
        if ctx.dotted(receiver) is None or ctx.qualname(receiver) is not None:
            return
        value = ctx.value_of(receiver)
        guessed = value is not None and "guessed" in value.flags
        if value is not None and value.kind not in (None, F.OUTPUT, F.TENSOR) and not guessed:
            return
        if value is not None and value.kind is None and value.origin is not None:
            return  # an instance of a class the index knows (or a library's)
        ctx.bind(receiver, Value(F.MODULE, node=receiver))

    def _optimised_is_a_model(self, name: str) -> None:
        """``Adam(D.parameters())``: whatever ``D`` is, it is a model."""
        ctx = self.ctx
        target = ast.parse(name, mode="eval").body
        if ctx.kind_of(target) is None:
            ctx.bind(target, Value(F.MODULE))

    def _load_key(self, value: Value) -> None:
        if isinstance(value.node, ast.Call) and value.key is not None:
            facts = self.ctx.module.loads.get(value.node)
            if facts is not None:
                facts.keys.add(value.key)

    def _bind_target(self, target: ast.expr, value: ast.expr | None, bound: Value | None) -> None:
        ctx = self.ctx
        if isinstance(target, (ast.Name, ast.Attribute)):
            ctx.bind(target, bound)
        elif isinstance(target, (ast.Tuple, ast.List)):
            elements = target.elts
            if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(elements):
                for element, item in zip(elements, value.elts, strict=False):
                    self._bind_target(element, item, ctx.value_of(item))
                return
            passed = pass_through_arguments(value)
            if passed is not None and len(passed) == len(elements):
                # `model, optimizer = accelerator.prepare(model, optimizer)`: the same objects
                for element, item in zip(elements, passed, strict=True):
                    self._bind_target(element, None, ctx.value_of(item))
                return
            parts = self._unpacked(value, bound, len(elements))
            for element, part in zip(elements, parts, strict=False):
                if isinstance(element, ast.Starred):
                    element = element.value
                self._bind_target(element, None, part)

    def _unpacked(
        self, value: ast.expr | None, bound: Value | None, count: int
    ) -> list[Value | None]:
        """What each name of ``a, b = value`` holds."""
        if bound is None:
            return [None] * count
        if bound.kind == F.OUTPUT and isinstance(value, ast.Call):
            returns = self.ctx.project.returns(bound.origin)
            if len(returns) == count:
                # `validity, label = discriminator(x)`: each element's own activation.
                return [
                    bound.but(
                        activation=item.activation,
                        activation_at=at,
                        node=bound.node,
                        flags=bound.flags
                        | {UNPACKED}
                        | ({"model_activation"} if item.activation else set()),
                        tensor=tensor_of_fact(item.tensor, "returned")
                        or (bound.tensor.but(dims=None, unit_dim=None) if bound.tensor else None),
                    )
                    for item, at in returns
                ]
            # Elements of a model's tuple: some may be indices or lengths, not on the graph.
            return [bound.but(activation=None, flags=bound.flags | {UNPACKED})] * count
        if bound.kind in (F.LOADED, F.MODULE, F.LOSS, F.TENSOR, F.DATASET):
            return [bound] * count  # `encoder, decoder = torch.load(...)`
        if bound.items is not None and len(bound.items) == count:
            return list(bound.items)  # `loss, logits = step(x)`: each item as returned
        if bound.kind == F.TENSORS and bound.tensor is not None:
            info = bound.tensor  # `x, y = batch`
            return [bound.but(kind=F.TENSOR, tensor=info.element(i)) for i in range(count)]
        return [None] * count

    def _aug_assign(self, node: ast.AugAssign) -> None:
        self.children(node)
        ctx = self.ctx
        if isinstance(node.target, (ast.Name, ast.Attribute)):
            current = ctx.value_of(node.target)
            added = ctx.value_of(node.value)
            if _python_number(node.value):
                ctx.bind(node.target, UNTRACKED)  # `epoch_loss += loss.item()`: a float from now on
            elif added is not None and added.kind == F.LOSS:
                through = added.through | (current.through if current else frozenset())
                # `loss /= n` keeps its shape; `total += loss` takes the loss's.
                info = (
                    elementwise(None if current is None else current.tensor, added.tensor)
                    if current is not None and current.tensor is not None
                    else added.tensor
                )
                ctx.bind(
                    node.target,
                    Value(F.LOSS, through=through, crossing=added.crossing, tensor=info),
                )
            elif (
                current is not None
                and current.kind == F.LOSS
                and current.tensor is not None
                and added is None
            ):
                pass  # `loss /= n`: the same 0-dim loss, divided by a number
            elif current is None and not _untracked(ctx, node.target):
                ctx.bind(node.target, None)

    def _kind_of_annotation(self, annotation: ast.expr | None) -> str | None:
        if annotation is None:
            return None
        qualname = self.ctx.qualname(annotation)
        if qualname == "torch.optim.Optimizer":
            return F.OPTIMIZER
        if qualname == "torch.nn.Module":
            return F.MODULE
        return None

    # -- regions -------------------------------------------------------------------

    def _note_load_use(self, event: F.CallEvent) -> None:
        """Record ``torch.load`` calls and how what they return is used."""
        loads = self.ctx.module.loads
        if event.qualname in _TORCH_LOADS:
            loads.setdefault(event.node, F.LoadFacts(event.node))
            return
        if not loads:
            return  # uses are noted only of this file's own loads (see _load_used)
        func = event.node.func
        if isinstance(func, ast.Attribute) and event.method in _MODULE_USES:
            for value in self.ctx.candidates(func.value):
                if value.kind == F.LOADED:
                    self._load_used(value, _MODULE_USES[event.method], event.node)
        elif isinstance(func, ast.Name):
            for value in self.ctx.candidates(func):
                if value.kind == F.LOADED:
                    self._load_used(value, "module", event.node)  # `rnn(x)`: a loaded module
        if event.target is not None:
            function = self.ctx.project.function(event.target)
            if function is None:
                return
            params = [p for p in function.params if p not in {"self", "cls"}]
            for param, arg in zip(params, event.node.args, strict=False):
                passed = self.ctx.value_of(arg)
                uses = function.param_uses.get(param, ())
                if (
                    passed is not None
                    and passed.kind == F.LOADED
                    and ("call" in uses or "module" in uses)
                ):
                    self._load_used(passed, "module", event.node)

    def _load_used(self, value: Value, use: str, where: ast.AST) -> None:
        if isinstance(value.node, ast.Call):
            facts = self.ctx.module.loads.get(value.node)
            if facts is not None:
                facts.uses.add(use)
                facts.where.append(where)


def _python_number(value: ast.expr | None) -> bool:
    """``x.item()``, ``x.tolist()``, ``float(x)``: a Python value, never a graph."""
    if not isinstance(value, ast.Call):
        return False
    func = value.func
    if isinstance(func, ast.Attribute):
        return func.attr in {"item", "tolist"}
    return isinstance(func, ast.Name) and func.id in {"float", "int"}


def _untracked(ctx: Context, target: ast.expr) -> bool:
    """Bound to a plain number or container: ``epoch_loss /= n`` keeps it so (a
    name like ``*_loss`` must not become a guessed loss again)."""
    name = ctx.dotted(target)
    return name is not None and ctx.lookup(name) in (UNTRACKED, INTEGER)
