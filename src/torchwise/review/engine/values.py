"""What expressions hold: the value model behind ``Context.value_of``.

A :class:`~torchwise.review.engine.facts.Value` says what an expression is (a model
of a given class, a loss and the models its graph reaches, a softmax output,
what ``torch.load`` returned, a loader and whether its sampler draws a
subset, ...). :class:`ValueReader` computes it from the call or the name,
using the scopes and the project view that :class:`~.context.Context` keeps.
"""

from __future__ import annotations

import ast
import functools
import re
from typing import TYPE_CHECKING, Any

from torchwise.review.engine import facts as F
from torchwise.review.engine import tensors as T
from torchwise.review.engine.dispatch import subtree
from torchwise.review.engine.facts import Value
from torchwise.review.engine.tensor_values import (
    DTYPE,
    WRAPPERS,
    TensorReader,
    elementwise,
    subscript_items,
)
from torchwise.review.engine.tensors import TensorInfo

if TYPE_CHECKING:
    from torchwise.review.engine.context import Context, Scope
    from torchwise.review.engine.view import ProjectView

_LOSS_FUNCTIONS = re.compile(
    r"torch\.nn\.functional\.(\w+_loss|cross_entropy|binary_cross_entropy\w*|nll_loss|kl_div)$"
)

#: torch functions whose result is not "more of" their tensor arguments: the
#: gradients of a loss are not a loss.
_NOT_OF_ITS_ARGUMENTS = frozenset(
    {
        "torch.autograd.grad", "torch.autograd.backward",
        # new tensors shaped like their argument: no graph, no model behind them
        "torch.zeros_like", "torch.ones_like", "torch.empty_like", "torch.full_like",
        "torch.rand_like", "torch.randn_like", "torch.randint_like",
    }
)  # fmt: skip
#: torch functions that gather their tensor arguments into one with an extra dimension.
_BATCHING = frozenset({"torch.stack", "torch.cat", "torch.tensor", "torch.as_tensor"})

# Fallback kinds from conventional names, used only when no assignment told us.
_NAME_KINDS = (
    (re.compile(r"(^|_)(lr_)?sched(uler)?s?$|lr_scheduler$"), F.SCHEDULER),
    (re.compile(r"(^|_)(optim|optimizer|optimiser|opt)s?(_\w+)?$"), F.OPTIMIZER),
    (re.compile(r"(^|_)(grad_)?scaler$"), F.SCALER),
    (re.compile(r"(^|_)(criterion|loss_fn|loss_func|loss_function|lossfn)$"), F.LOSS_FN),
    (re.compile(r"(^|_)(model|net|network)$"), F.MODULE),
    (re.compile(r"(^|_)loss$"), F.LOSS),
    (re.compile(r"(^|_)(train_|val_|test_)?(data)?loader$"), F.LOADER),
)


@functools.lru_cache(maxsize=4096)
def conventional_kind(name: str) -> str | None:
    """The kind a variable's name conventionally says it holds (``optimizer``,
    ``train_loader``), or None. Remembered: the same few names are asked about
    at every use, in every file."""
    for pattern, kind in _NAME_KINDS:
        if pattern.search(name):
            return kind
    return None


#: Activations whose output a loss may wrongly receive.
ACTIVATIONS = {
    "torch.nn.functional.softmax": "softmax",
    "torch.softmax": "softmax",
    "torch.special.softmax": "softmax",
    "torch.nn.functional.log_softmax": "log_softmax",
    "torch.log_softmax": "log_softmax",
    "torch.sigmoid": "sigmoid",
    "torch.nn.functional.sigmoid": "sigmoid",
    "torch.special.expit": "sigmoid",
}
ACTIVATION_MODULES = {
    "torch.nn.Softmax": "softmax",
    "torch.nn.LogSoftmax": "log_softmax",
    "torch.nn.Sigmoid": "sigmoid",
}

#: Module methods that return the module itself.
_SELF_RETURNING = {
    "to", "cuda", "cpu", "train", "eval", "float", "half", "double", "bfloat16",
    "requires_grad_", "to_empty", "type", "share_memory",
}  # fmt: skip
#: Tensor methods that keep the graph (and so the value's provenance).
_GRAPH_KEEPING = {
    "view", "reshape", "float", "double", "half", "bfloat16", "to", "cuda", "cpu", "unsqueeze",
    "squeeze", "expand", "repeat", "t", "transpose", "permute", "contiguous", "clone", "flip",
    "mul", "add", "sub", "div", "exp", "log", "pow", "sqrt", "flatten", "mean", "sum",
    "squeeze_", "unsqueeze_", "view_as", "reshape_as", "expand_as", "__getitem__", "chunk",
    "split", "narrow", "select", "masked_fill", "type_as", "abs", "neg", "norm", "max", "min",
}  # fmt: skip
#: Tensor methods that select or rearrange values without changing them: a
#: softmax's probabilities stay probabilities (``pi.gather(1, a)``).
_VALUE_KEEPING = {
    "to", "float", "double", "view", "reshape", "unsqueeze", "squeeze", "expand", "repeat",
    "t", "transpose", "permute", "contiguous", "clone", "flip", "squeeze_", "unsqueeze_",
    "view_as", "reshape_as", "expand_as", "__getitem__", "narrow", "select", "flatten",
    "gather", "index_select", "take_along_dim", "masked_select", "take",
}  # fmt: skip
_DETACHING = {"detach", "item", "tolist", "numpy", "data", "detach_"}
_DROPOUT_LAYER = re.compile(r"^torch\.nn\.(\w*Dropout\w*|Transformer\w*)$")
_NORM_LAYER = re.compile(r"^torch\.nn\.(BatchNorm\w*|SyncBatchNorm|LazyBatchNorm\w*)$")
SHADOWED = ""  # the import binding of a name that code reassigned
UNSET: Any = object()  # not computed yet (None is a value)
#: A value known only from its name (`model`, `optimizer`): what it most likely is.
_GUESSED = frozenset({"guessed"})
#: A value taken off the graph (``.item()``, ``.numpy()``): no gradient flows back.
DETACHED = frozenset({"detached"})
#: The activation is the model's own last layer (not applied by this code).
_MODEL_ACTIVATION = frozenset({"model_activation"})
#: What a name holds after it is assigned a literal, a container or a
#: comprehension: not a model or a loss, whatever the name says.
UNTRACKED = Value(None)
#: What a name holds after it is assigned an integer (a literal, ``x.size(0)``,
#: ``len(...)``): untracked like any number, but a size a factory may be given.
INTEGER = Value(None, flags=frozenset({"int"}))


def kind_from_callee(qualname: str) -> str | None:
    """The kind of value a call to ``qualname`` returns, when it is one we track."""
    last = qualname.rsplit(".", 1)[-1]
    if qualname.startswith("torch.optim.lr_scheduler.") or last in {
        "get_scheduler",
        "get_linear_schedule_with_warmup",
        "get_cosine_schedule_with_warmup",
    }:
        return F.SCHEDULER
    if qualname.startswith("torch.optim.") and last[:1].isupper():
        return F.OPTIMIZER
    if last == "GradScaler":
        return F.SCALER
    if last == "DataLoader":
        return F.LOADER
    if last == "DistributedSampler":
        return F.SAMPLER
    if qualname in {"torch.load", "torch.serialization.load"}:
        return F.LOADED
    if qualname == "argparse.ArgumentParser":
        return F.PARSER
    if qualname == "argparse.Namespace":
        return F.NAMESPACE
    if _LOSS_FUNCTIONS.match(qualname):
        return F.LOSS
    if qualname.startswith("torch.nn.") and last[:1].isupper():
        if last in {"Parameter", "Buffer", "UninitializedParameter"}:
            return F.TENSOR
        return F.LOSS_FN if last.endswith("Loss") else F.MODULE
    if qualname in {"torch.compile", "torch.jit.script"}:
        return F.MODULE
    if qualname.startswith("torchvision.models.") and last[:1].islower():
        return F.MODULE  # torchvision.models.resnet18(...)
    if qualname.startswith("torch.utils.data.") and (
        last.endswith("Dataset") or last in {"random_split", "Subset"}
    ):
        return F.DATASET
    return None


class ValueReader(TensorReader):
    """Mixin of :class:`~.context.Context`: what an expression holds."""

    project: ProjectView
    scopes: list[Scope]
    _values: dict[ast.AST, Value | None]

    @property
    def _ctx(self) -> Context:
        """This object, as the Context the project view is asked with."""
        return self  # type: ignore[return-value]

    if TYPE_CHECKING:

        def call_name(self, call: ast.Call) -> str | None: ...
        def qualname(self, expr: ast.AST) -> str | None: ...
        def lookup(self, name: str) -> Value | None: ...
        def is_module_base(self, expr: ast.expr) -> bool: ...
        @property
        def in_no_grad(self) -> bool: ...
        @staticmethod
        def dotted(expr: ast.AST) -> str | None: ...

    def is_size(self, expr: ast.expr) -> bool:
        """Whether ``expr`` holds a Python int: a literal, ``x.size(i)``,
        ``x.shape[i]``, ``len(...)``, ``int(...)``, a name bound to one, sums
        and products of them."""
        if isinstance(expr, ast.Constant):
            return type(expr.value) is int
        if isinstance(expr, ast.BinOp) and isinstance(
            expr.op, (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Mod)
        ):
            return self.is_size(expr.left) and self.is_size(expr.right)
        if isinstance(expr, ast.Subscript) and isinstance(expr.value, ast.Attribute):
            return expr.value.attr == "shape" and not isinstance(expr.slice, ast.Slice)
        if isinstance(expr, ast.Call):
            func = expr.func
            if isinstance(func, ast.Name):
                return func.id in {"len", "int"}
            if isinstance(func, ast.Attribute):
                return func.attr in {"numel", "dim"} or (func.attr == "size" and bool(expr.args))
            return False
        name = self.dotted(expr)
        return name is not None and self.lookup(name) is INTEGER

    def kind_of(self, expr: ast.AST) -> str | None:
        """What ``expr`` holds: a model, an optimizer, a loss tensor, ... or None."""
        value = self.value_of(expr)
        return None if value is None else value.kind

    def value_of(self, expr: ast.AST) -> Value | None:
        """What ``expr`` holds, as far as assignments, calls and names show."""
        value: Value | None = self._values.get(expr, UNSET)
        if value is UNSET:
            value = self._values[expr] = self._value_of(expr)
        return value

    def _value_of(self, expr: ast.AST) -> Value | None:
        if isinstance(expr, ast.Call):
            return self.value_of_call(expr)
        if isinstance(expr, ast.BinOp):
            left, right = self.value_of(expr.left), self.value_of(expr.right)
            info = elementwise(_tensor(left), _tensor(right))
            if info is not None and (
                self._unknown_operand(expr.left, left) or self._unknown_operand(expr.right, right)
            ):
                info = info.but(dims=None)  # the other side may be a tensor of any rank
            return _with_tensor(self._combine(left, right), info)
        if isinstance(expr, ast.Compare):
            return self._compared(expr)
        if isinstance(expr, ast.Subscript):
            return self._item(expr)
        if isinstance(expr, (ast.Tuple, ast.List)):
            return self._container([self.value_of(item) for item in expr.elts], expr)
        if isinstance(expr, ast.Attribute):
            found = self._attribute(expr)
            if found is not UNSET:
                return found
        name = self.dotted(expr)
        if name is None:
            return None
        found = self.lookup(name)
        if found is UNTRACKED or found is INTEGER:
            return None  # assigned something untracked (a list, a number, ...)
        if found is not None and found.kind is not None:
            return found
        if found is None and self.qualname(expr) is not None:
            return None  # an imported module or function (`torch.optim`), not a variable
        kind = conventional_kind(name.rsplit(".", 1)[-1])
        if kind is not None:
            return Value(kind, origin=found.origin if found else None, flags=_GUESSED)
        return found

    def _unknown_operand(self, expr: ast.expr, value: Value | None) -> bool:
        """An operand with no tensor facts that is not plainly a Python number: it may
        be a tensor of any rank (``x[:, None] / dim_t`` with ``dim_t`` untracked), so
        the result's rank is not the other operand's."""
        if _tensor(value) is not None:
            return False
        if isinstance(expr, ast.UnaryOp):
            expr = expr.operand
        if isinstance(expr, ast.Constant):
            return False
        name = self.dotted(expr)
        return name is None or self.lookup(name) is not INTEGER

    def _compared(self, expr: ast.Compare) -> Value | None:
        """``a == b``, ``a < b``: a boolean tensor when a tensor is compared."""
        operands = [expr.left, *expr.comparators]
        values = [self.value_of(operand) for operand in operands]
        info: TensorInfo | None = None
        for value in values:
            info = elementwise(info, _tensor(value)) if info is not None else _tensor(value)
        if info is None and not any(_is_tensor(value) for value in values):
            return None
        if info is not None and any(
            self._unknown_operand(operand, value)
            for operand, value in zip(operands, values, strict=True)
        ):
            info = info.but(dims=None)
        return Value(F.TENSOR, tensor=info, node=expr)

    def _item(self, expr: ast.Subscript) -> Value | None:
        """``x[...]``: an item of a loaded checkpoint, of a container of tensors,
        or a part of a tensor (a view of it for basic indexing)."""
        inner = self.value_of(expr.value)
        if inner is None:
            return None
        if inner.kind == F.LOADED:  # an item of a loaded checkpoint: ckpt["model"]
            key = expr.slice
            text = key.value if isinstance(key, ast.Constant) else None
            return inner.but(key=text if isinstance(text, str) else None)
        info = inner.tensor
        if inner.kind == F.TENSORS or (info is not None and info.container):
            index = expr.slice
            position = index.value if isinstance(index, ast.Constant) else None
            held = inner.items
            if (
                held is not None
                and isinstance(position, int)
                and -len(held) <= position < len(held)
            ):
                return held[position]
            element = (
                None
                if info is None
                else info.element(position if isinstance(position, int) else None)
            )
            kind = F.OUTPUT if inner.kind == F.OUTPUT else F.TENSOR
            return inner.but(kind=kind, tensor=element, node=expr)  # keeps its graph
        if inner.kind in (F.OUTPUT, F.TENSOR, F.LOSS):
            kind = F.OUTPUT if inner.kind == F.OUTPUT else F.TENSOR
            if info is None:
                return inner.but(kind=kind, node=expr)
            items = subscript_items(expr.slice)
            basic = "other" not in items
            base = self.dotted(expr.value) if basic else None
            part = TensorInfo(
                place=info.place,
                dims=T.indexed(info.dims, items),
                batched=info.nonscalar and ("slice" in items or "none" in items),
                alias=base or (info.alias if basic else None),
                alias_line=expr.lineno if base else info.alias_line,
                alias_kind="slice" if base else info.alias_kind,
            )
            return inner.but(kind=kind, tensor=part, node=expr)
        return None

    def _attribute(self, expr: ast.Attribute) -> Value | None:
        """``x.data``, ``x.T``, ``x.device``; UNSET when the attribute is an
        ordinary name to look up."""
        attr = expr.attr
        if attr not in {"data", "T", "mT", "H", "mH", "device"}:
            return UNSET  # type: ignore[no-any-return]
        inner = self.value_of(expr.value)
        if inner is None or inner.kind not in (F.LOSS, F.OUTPUT, F.TENSOR):
            return UNSET  # type: ignore[no-any-return]
        info = inner.tensor
        if attr == "device":
            place = None if info is None else info.place
            return Value(F.DEVICE, tensor=TensorInfo(place=place), node=expr)
        base = self.dotted(expr.value)
        view = None
        if info is not None:
            dims = None if info.dims is None else tuple(None for _ in info.dims)
            kind = "data" if attr == "data" else "view"
            view = info.but(
                alias=base or info.alias, alias_line=expr.lineno, dims=dims, alias_kind=kind
            )
            if attr == "data":
                view = view.but(dims=info.dims)
        if attr == "data":
            return inner.but(through=frozenset(), crossing=None, tensor=view, node=expr)
        return inner.but(kind=F.TENSOR, activation=None, tensor=view, node=expr)

    def _container(self, values: list[Value | None], node: ast.AST) -> Value | None:
        """A tuple or list literal of tensors: what every element holds, when they agree."""
        infos = [_tensor(value) for value in values]
        if not values or not all(_is_tensor(value) for value in values):
            return None
        places = [None if info is None else info.place for info in infos]
        devices = {None if place is None else place.device for place in places}
        place = places[0] if len(devices) == 1 else None
        batched = all(info is not None and info.nonscalar for info in infos)
        items = tuple(info for info in infos if info is not None)
        element = TensorInfo(
            place=place,
            batched=batched,
            container=True,
            elements=items if len(items) == len(infos) else None,
        )
        return Value(F.TENSORS, tensor=element, node=node, items=tuple(values))

    def kind_of_call(self, call: ast.Call) -> str | None:
        value = self.value_of_call(call)
        return None if value is None else value.kind

    def value_of_call(self, call: ast.Call) -> Value | None:
        qualname = self.call_name(call)
        func = call.func
        if qualname is not None:
            return self._value_of_resolved(call, qualname)
        if isinstance(func, ast.Attribute):
            held = self.lookup(self.dotted(func) or "") if self.dotted(func) else None
            if held is None or held.kind not in (F.MODULE, F.LOSS_FN, F.LOADED):
                return self._value_of_method(call, func)
            # `self.head(x)`: the attribute holds a module; calling it runs it.
        elif isinstance(func, ast.Call):  # nn.Softmax(dim=1)(x)
            activation = ACTIVATION_MODULES.get(self.call_name(func) or "")
            if activation is not None:
                return self._activated(call, activation)
        callee = self.value_of(func)
        if (
            callee is not None
            and "guessed" in callee.flags
            and isinstance(func, ast.Name)
            and self._defined_function(func.id)
        ):
            callee = None  # `unwrap_model(m)`: a function of the file, not a model by its name
        if callee is None:
            if isinstance(func, ast.Name) and func.id == "iter" and call.args:
                return Value(F.ITERATOR, node=call)
            return self.project.value_of_call(self._ctx, call)
        if callee.kind == F.LOSS_FN:
            through = self._through(call.args)
            return Value(
                F.LOSS,
                origin=callee.origin,
                through=through[0],
                crossing=_consumed(through[1], call),
                flags=callee.flags,
                node=call,
                tensor=self.loss_tensor(call, callee.flags),
            )
        if callee.kind in (F.MODULE, F.LOADED):  # a loaded object that is called is a model
            return self._model_output(call, self.dotted(func), callee)
        return None

    def _value_of_resolved(self, call: ast.Call, qualname: str) -> Value | None:
        if qualname == "torch.autograd.Variable" and call.args:
            return self.value_of(call.args[0])  # a no-op wrapper since torch 0.4
        activation = ACTIVATIONS.get(qualname)
        if activation is not None:
            return self._activated(call, activation)
        if qualname.startswith("<local>.") or not qualname.startswith(
            ("torch", "argparse", "numpy", "torchvision")
        ):
            project = self.project.value_of_call(self._ctx, call)
            if project is not None:
                return project
            if qualname.startswith("<local>."):
                name = qualname[8:]
                is_module = any(name in scope.module_classes for scope in self.scopes)
                return Value(F.MODULE if is_module else None, origin=qualname, node=call)
        if qualname == "torch.device":
            place = (
                self.place_of_device(call.args[0], call.lineno, "`torch.device`")
                if call.args
                else None
            )
            return Value(
                F.DEVICE, tensor=TensorInfo(place=None if place is DTYPE else place), node=call
            )
        kind = kind_from_callee(qualname)
        if kind is None:
            info = self.torch_tensor(call, qualname)
            if (
                qualname.startswith("torch.")
                and qualname.rsplit(".", 1)[-1][:1].islower()
                and qualname not in _NOT_OF_ITS_ARGUMENTS
            ):
                combined = self._combine_all(call.args)  # torch.sum(loss), torch.cat([...])
                if combined is not None and combined.kind == F.LOSS and qualname in _BATCHING:
                    return combined.but(kind=F.TENSOR, tensor=info)  # losses stacked: a vector
                if combined is not None:
                    return combined.but(tensor=info, node=call)
            if info is not None:
                return Value(F.TENSOR, origin=qualname, node=call, tensor=info)
            # Unknown here, but the index may know it: keep where it came from.
            return Value(None, origin=qualname, node=call)
        if kind == F.OPTIMIZER:
            return Value(kind, origin=qualname, model=optimised_model(call), node=call)
        if kind == F.LOSS:
            through, crossing = self._through(call.args)
            flags = _reduction_flags(call)
            return Value(
                kind,
                origin=qualname,
                through=through,
                crossing=_consumed(crossing, call),
                flags=flags,
                node=call,
                tensor=self.loss_tensor(call, flags),
            )
        if kind == F.LOSS_FN:
            return Value(kind, origin=qualname, flags=_reduction_flags(call), node=call)
        if kind == F.MODULE:
            return self._layer(call, qualname)
        if kind == F.DATASET:
            return Value(
                kind, origin=qualname, node=call, tensor=self.dataset_tensor(call, qualname)
            )
        if kind == F.LOADER:
            return Value(
                kind,
                origin=qualname,
                node=call,
                flags=self._loader_flags(call),
                tensor=self.batch_of(call),
            )
        return Value(kind, origin=qualname, node=call)

    def _value_of_method(self, call: ast.Call, func: ast.Attribute) -> Value | None:
        receiver = self.value_of(func.value)
        method = func.attr
        passed = pass_through_arguments(call)
        if passed is not None and len(passed) == 1:
            # `model = accelerator.prepare(model)`: the same object, on the device
            return self.prepared(self.value_of(passed[0]), call)
        if receiver is None:
            if method in {"softmax", "sigmoid", "log_softmax"}:
                return self._activated(call, method, func.value)
            return self.project.value_of_call(self._ctx, call)
        kind = receiver.kind
        movable = kind == F.MODULE or (kind is None and receiver.origin)
        if movable and method in {"to", "cuda", "cpu"}:
            return receiver.but(tensor=self.moved(call, receiver.tensor, method))
        if kind == F.MODULE and method in _SELF_RETURNING:
            return receiver
        if kind is None and receiver.origin and method in {"train", "eval"}:
            return receiver  # an instance of a class we will know from the index
        if kind == F.TENSORS and method in {"to", "cuda", "cpu"}:
            return receiver.but(tensor=self.moved(call, receiver.tensor, method))
        if kind == F.TENSORS and method in {"values", "items", "copy"}:
            return receiver
        if kind in (F.MODULE, F.LOADED) and method == "forward":
            return self._model_output(call, self.dotted(func.value), receiver)
        if kind == F.PARSER and method in {"parse_args", "parse_known_args"}:
            return Value(F.NAMESPACE, node=call)
        if kind in (F.LOSS, F.OUTPUT, F.TENSOR):
            info = self.tensor_method(
                call, receiver.tensor or T.NOTHING, method, self.dotted(func.value)
            )
            if info is not None and info.dims == () and not _surely_tensor(receiver):
                info = info.but(dims=None)  # `dist.mode()`: not torch's full reduction
            if method in {"softmax", "sigmoid", "log_softmax"}:
                return self._activated(call, method, func.value)
            if method in {"detach", "detach_"}:
                return Value(F.TENSOR, tensor=info, node=call)
            if method in _DETACHING:
                return Value(F.TENSOR, flags=DETACHED)
            if method in _VALUE_KEEPING:
                return receiver.but(kind=kind, tensor=info, node=call)
            if method in _GRAPH_KEEPING:
                return receiver.but(activation=None, tensor=info, node=call)
            if info is None:
                return None
            # Any other tensor method (gather, matmul, new_*): a tensor, still on the graph.
            return receiver.but(kind=F.TENSOR, activation=None, tensor=info, node=call)
        if kind == F.LOADED and method in _SELF_RETURNING:
            return receiver  # `torch.load(...).to(device)`: still what was loaded
        if kind == F.LOADED and method in {"get", "pop"} and call.args:
            key = call.args[0]
            text = key.value if isinstance(key, ast.Constant) else None
            return receiver.but(key=text if isinstance(text, str) else None)
        return self.project.value_of_call(self._ctx, call)

    def _loader_flags(self, call: ast.Call) -> frozenset[str]:
        """{"subset"} when a sampler draws only part of the dataset (a fold, a split)."""
        for item in call.keywords:
            if item.arg not in {"sampler", "batch_sampler"}:
                continue
            sampler = item.value
            if isinstance(sampler, ast.Name):
                found = self.lookup(sampler.id)
                origin = found.origin if found is not None else None
            else:
                origin = self.call_name(sampler) if isinstance(sampler, ast.Call) else None
            if origin is not None and origin.rsplit(".", 1)[-1].startswith("Subset"):
                return frozenset({"subset"})
        return frozenset()

    def _layer(self, call: ast.Call, qualname: str) -> Value:
        """A torch.nn layer: what it contains (dropout, batch norm, parts we cannot
        see) and the activation its output ends in (nn.Sequential(..., nn.Softmax()))."""
        activation = ACTIVATION_MODULES.get(qualname)
        if activation is not None:
            return Value(F.MODULE, origin=qualname, activation=activation, node=call)
        if qualname in WRAPPERS and call.args:
            wrapped = self.value_of(call.args[0])  # DDP(model), torch.compile(model)
            tensor = None if wrapped is None else wrapped.tensor
            return Value(F.MODULE, origin=qualname, node=call, tensor=tensor)
        flags: set[str] = set()
        node: ast.AST = call
        if qualname in {"torch.nn.Sequential", "torch.nn.ModuleList", "torch.nn.ModuleDict"}:
            parts = [self.value_of(arg) for arg in call.args if not isinstance(arg, ast.Starred)]
            if any(isinstance(arg, ast.Starred) for arg in call.args) or call.keywords:
                flags.add("opaque")
            for part in parts:
                if part is None or part.kind != F.MODULE:
                    flags.add("opaque")
                else:
                    flags |= part.flags
                    if part.origin is None or not part.origin.startswith("torch.nn."):
                        flags.add("opaque")
            last = parts[-1] if parts and qualname == "torch.nn.Sequential" else None
            flags.discard(ONE_OUTPUT)
            shaping = [p for p in parts if p is None or p.origin not in SHAPE_KEEPING_LAYERS]
            if qualname == "torch.nn.Sequential" and shaping and shaping[-1] is not None:
                flags |= shaping[-1].flags & {ONE_OUTPUT}
            if last is not None and last.activation is not None:
                return Value(
                    F.MODULE,
                    origin=qualname,
                    activation=last.activation,
                    node=last.node or call,
                    flags=frozenset(flags),
                )
        elif qualname == "torch.nn.Linear" and _one_output(call):
            flags.add(ONE_OUTPUT)
        elif _DROPOUT_LAYER.match(qualname):
            flags.add("dropout")
        elif _NORM_LAYER.match(qualname):
            flags.add("batchnorm")
        return Value(F.MODULE, origin=qualname, node=node, flags=frozenset(flags))

    def _model_output(self, call: ast.Call, name: str | None, model: Value) -> Value:
        through, crossing = self._through(call.args)
        if through and name is not None and name not in through and crossing is None:
            # a model applied to another model's undetached output
            crossing = F.Crossing(call, name, through)
        models = through | ({name} if name else set())
        if self.in_no_grad:
            models, crossing = frozenset(), None  # no graph is recorded under no_grad
        activation, activation_at = self.project.output_activation(self._ctx, model)
        return Value(
            F.OUTPUT,
            origin=model.origin,
            model=name,
            through=frozenset(models),
            crossing=crossing,
            activation=activation,
            activation_at=activation_at,
            node=call,
            flags=_MODEL_ACTIVATION if activation else frozenset(),
            tensor=self.output_of(call, model, name),
        )

    def _activated(self, call: ast.Call, activation: str, operand: ast.expr | None = None) -> Value:
        if operand is None:
            operand = call.args[0] if call.args else None
        inner = None if operand is None else self.value_of(operand)
        at = (None, call.lineno)
        info = None if inner is None or inner.tensor is None else inner.tensor.but(alias=None)
        if inner is not None and inner.kind in (F.OUTPUT, F.TENSOR, F.LOSS):
            return inner.but(
                kind=F.OUTPUT, activation=activation, activation_at=at, node=call, tensor=info
            )
        return Value(F.TENSOR, activation=activation, activation_at=at, node=call, tensor=info)

    def _through(self, args: list[ast.expr]) -> tuple[frozenset[str], F.Crossing | None]:
        models: set[str] = set()
        crossing: F.Crossing | None = None
        for arg in args:
            value = self.value_of(arg)
            if value is not None and value.through:
                models |= value.through
                crossing = crossing or value.crossing
        return frozenset(models), crossing

    def _defined_function(self, name: str) -> bool:
        """Whether ``name`` is bound by a ``def`` of the module or of a function around
        this point (``def unwrap_model`` inside ``main``)."""
        ctx = self._ctx
        if name in ctx.scopes[0].functions:
            return True
        known = ctx.module.nested_functions
        for function in ctx.functions:
            key = id(function.node)
            if key not in known:
                known[key] = frozenset(
                    node.name
                    for node in subtree(function.node)
                    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                )
            if name in known[key]:
                return True
        return False

    def _combine_all(self, args: list[ast.expr]) -> Value | None:
        values: list[Value | None] = []
        for arg in args:
            if isinstance(arg, (ast.List, ast.Tuple)):
                values += [self.value_of(item) for item in arg.elts]
            else:
                values.append(self.value_of(arg))
        combined = None
        for value in values:
            combined = self._combine(combined, value)
        return combined

    @staticmethod
    def _combine(left: Value | None, right: Value | None) -> Value | None:
        values = [v for v in (left, right) if v is not None]
        kinds = {v.kind for v in values}
        through = frozenset().union(*(v.through for v in values))
        crossing = next((v.crossing for v in values if v.crossing is not None), None)
        if F.LOSS in kinds:
            return Value(F.LOSS, through=through, crossing=crossing)
        if kinds & {F.OUTPUT, F.TENSOR}:
            return Value(F.TENSOR, through=through, crossing=crossing)
        return None


#: Framework calls that hand back the objects they are given, wrapped.
PASS_THROUGH = {
    "prepare", "setup", "setup_dataloaders", "setup_module", "setup_optimizers",
    "prepare_model", "prepare_data_loader", "initialize",
}  # fmt: skip


def pass_through_arguments(value: ast.expr | None) -> list[ast.expr] | None:
    """The arguments of ``accelerator.prepare(a, b)`` / ``fabric.setup(...)``."""
    if not (isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute)):
        return None
    if value.func.attr not in PASS_THROUGH or value.keywords:
        return None
    if any(isinstance(arg, ast.Starred) for arg in value.args):
        return None
    return list(value.args)


def _consumed(crossing: F.Crossing | None, loss: ast.Call) -> F.Crossing | None:
    """Remember the first loss computed from a crossing."""
    if crossing is None or crossing.consumer is not None:
        return crossing
    return F.Crossing(crossing.node, crossing.model, crossing.upstream, loss)


def _reduction_flags(call: ast.Call) -> frozenset[str]:
    """{"unreduced"} for a loss asked for one value per element, {"summed"} for
    one that sums the batch (no flag: the default batch mean)."""
    for item in call.keywords:
        value = item.value
        literal = value.value if isinstance(value, ast.Constant) else UNSET
        if item.arg == "reduction":
            if literal == "sum":
                return frozenset({"summed"})
            if literal != "mean":
                return frozenset({"unreduced"})  # "none", or decided at run time
        if item.arg == "reduce" and literal is not True:
            return frozenset({"unreduced"})
        if item.arg == "size_average" and literal is False:
            return frozenset({"summed"})
    return frozenset()


def dotted(expr: ast.AST) -> str | None:
    """``self.optimizer`` for an Attribute chain of names, else None."""
    # The engine asks this of most expressions it meets: a name and a one-dot
    # chain, nearly all of them, take no list.
    if isinstance(expr, ast.Name):
        return expr.id
    if not isinstance(expr, ast.Attribute):
        return None
    value = expr.value
    if isinstance(value, ast.Name):
        return f"{value.id}.{expr.attr}"
    parts: list[str] = []
    while isinstance(expr, ast.Attribute):
        parts.append(expr.attr)
        expr = expr.value
    if not isinstance(expr, ast.Name):
        return None
    parts.append(expr.id)
    return ".".join(reversed(parts))


def optimised_model(call: ast.Call) -> str | None:
    """``"D"`` for ``Adam(D.parameters(), ...)``: the one model whose parameters
    an optimizer's first argument names (None for several or none)."""
    if not call.args:
        return None
    models = set()
    for node in subtree(call.args[0]):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in {"parameters", "named_parameters"}
        ):
            name = dotted(node.func.value)
            if name is None:
                return None
            models.add(name)
    return models.pop() if len(models) == 1 else None


def _tensor(value: Value | None) -> TensorInfo | None:
    return None if value is None else value.tensor


def _is_tensor(value: Value | None) -> bool:
    return value is not None and value.kind in (F.TENSOR, F.OUTPUT, F.LOSS, F.TENSORS)


def _with_tensor(value: Value | None, info: TensorInfo | None) -> Value | None:
    """``value`` with the tensor facts of the expression (a tensor of unknown
    kind when only the facts are known)."""
    if info is None:
        return value
    if value is None:
        return Value(F.TENSOR, tensor=info)
    return value.but(tensor=info)


#: A layer whose output has one feature: ``nn.Linear(k, 1)`` (a score or a regression).
ONE_OUTPUT = "one-output"


def _surely_tensor(value: Value) -> bool:
    """Whether a value is a tensor for sure, so that its methods are torch's:
    a loss, a tensor, or the output of one of torch's own layers. The output
    of a model of the project's may be a distribution (``.mode()``,
    ``.mean()`` are its own), a tuple or a ``ModelOutput``."""
    if value.kind != F.OUTPUT:
        return True
    return (value.origin or "").startswith("torch.nn.") or (
        value.tensor is not None and value.tensor.dims is not None
    )


#: Layers that keep their input's shape (an activation after the last Linear).
SHAPE_KEEPING_LAYERS = frozenset(
    f"torch.nn.{name}"
    for name in ("Sigmoid", "Tanh", "ReLU", "LeakyReLU", "Dropout", "Identity", "ELU", "GELU",
                 "Softplus", "Hardtanh", "SiLU")
)  # fmt: skip


def _one_output(call: ast.Call) -> bool:
    """``nn.Linear(k, 1)`` or ``nn.Linear(k, out_features=1)``."""
    given = call.args[1] if len(call.args) > 1 else None
    for item in call.keywords:
        if item.arg == "out_features":
            given = item.value
    return isinstance(given, ast.Constant) and given.value == 1
