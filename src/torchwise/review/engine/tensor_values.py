"""Reading the tensor facts of an expression (see :mod:`.tensors`): a mixin
of :class:`~.values.ValueReader`.

What it knows of torch, each rule with the evidence it leaves:

- factories allocate on the CPU unless given ``device=`` (``torch.zeros``,
  ``arange``, ``randn``, ``tensor``, ``from_numpy``, the legacy
  ``torch.FloatTensor``), while ``*_like`` and ``new_*`` follow their
  argument; a file that changes the default device (``set_default_device``,
  ``with torch.device(...)``) has no CPU factories;
- ``.to(device)``, ``.cuda()`` and ``.cpu()`` move, ``.to(dtype)`` does not;
  a device variable is the accelerator on the GPU path;
- element-wise operations broadcast, reductions drop (or keep) a dimension,
  views keep the device and share the storage of their base;
- a model's output lives where the model does.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from torchwise.review.engine import facts as F
from torchwise.review.engine import tensors as T
from torchwise.review.engine.facts import Value
from torchwise.review.engine.tensors import ACCEL, CPU, Place, TensorInfo

if TYPE_CHECKING:
    from torchwise.review.engine.view import ProjectView

#: ``torch.<name>(*sizes)``: a new tensor of the given sizes.
SIZED_FACTORIES = frozenset({"zeros", "ones", "empty", "rand", "randn", "empty_strided", "full"})
#: ``torch.<name>(...)``: a new 1-D tensor.
RANGE_FACTORIES = frozenset({"arange", "linspace", "logspace", "randperm", "range"})
#: Factories from data: a 0-dim tensor for a number, more for a sequence.
DATA_FACTORIES = frozenset({"tensor", "as_tensor", "asarray"})
#: The legacy typed constructors: always on the CPU, whatever they are given.
LEGACY_CPU = frozenset(
    {
        "FloatTensor", "DoubleTensor", "HalfTensor", "BFloat16Tensor", "LongTensor",
        "IntTensor", "ShortTensor", "ByteTensor", "CharTensor", "BoolTensor", "Tensor",
    }
)  # fmt: skip
#: Wrappers whose forward moves (or scatters) its inputs to the device itself.
INPUT_MOVING_WRAPPERS = frozenset(
    {
        "torch.nn.DataParallel",
        "torch.nn.parallel.DataParallel",
        "torch.nn.parallel.DistributedDataParallel",
        "torch.nn.parallel.data_parallel.DataParallel",
        "torch.nn.parallel.distributed.DistributedDataParallel",
    }
)
#: Calls that wrap a model and keep it where it is.
WRAPPERS = INPUT_MOVING_WRAPPERS | {"torch.compile", "torch.jit.script", "torch.jit.trace"}
#: ``torch.<name>_like(t)``: the device and shape of ``t``.
LIKE = frozenset(
    {"zeros_like", "ones_like", "empty_like", "full_like", "rand_like", "randn_like",
     "randint_like"}
)  # fmt: skip
#: ``t.<name>(...)``: a new tensor on ``t``'s device.
NEW_METHODS = frozenset({"new_zeros", "new_ones", "new_empty", "new_full", "new_tensor"})
#: Methods that return a view: the result shares its base's storage.
VIEW_METHODS = frozenset(
    {
        "view", "view_as", "reshape", "reshape_as", "flatten", "squeeze", "unsqueeze",
        "permute", "transpose", "t", "expand", "expand_as", "narrow", "select", "unfold",
        "detach", "diagonal", "contiguous", "movedim", "swapaxes", "unflatten", "split",
        "chunk", "unbind", "as_strided",
    }
)  # fmt: skip
#: Methods that keep the device and the shape (dtype conversions, element-wise maths).
SAME_SHAPE = frozenset(
    {
        "float", "double", "half", "bfloat16", "long", "int", "bool", "short", "byte",
        "clone", "abs", "neg", "exp", "log", "log1p", "expm1", "sqrt",
        "rsqrt", "sigmoid", "tanh", "relu", "softmax", "log_softmax", "clamp", "clip",
        "masked_fill", "pow", "sign", "round", "floor", "ceil", "reciprocal", "square",
        "sin", "cos", "erf", "nan_to_num", "requires_grad_", "fill_", "zero_", "normal_",
        "uniform_", "clamp_", "mul_", "add_", "sub_", "div_", "copy_", "masked_fill_",
        "exponential_", "bernoulli_", "random_", "detach_", "abs_", "exp_", "log_",
    }
)  # fmt: skip
#: Element-wise binary methods: ``a.add(b)`` broadcasts like ``a + b``.
BINARY_METHODS = frozenset(
    {"add", "sub", "mul", "div", "eq", "ne", "lt", "le", "gt", "ge", "maximum", "minimum",
     "true_divide", "floor_divide", "remainder", "fmod", "atan2", "logical_and",
     "logical_or", "logical_xor"}
)  # fmt: skip
#: Reductions over one dimension (or all): ``dim`` first, then ``keepdim``.
REDUCTIONS = frozenset(
    {"sum", "mean", "prod", "std", "var", "norm", "logsumexp", "all", "any", "amax",
     "amin", "argmax", "argmin", "count_nonzero", "nansum", "nanmean"}
)  # fmt: skip
#: Reductions that return ``(values, indices)`` when given a dimension.
PAIR_REDUCTIONS = frozenset({"max", "min", "median", "mode", "kthvalue", "nanmedian"})
#: torch functions that need all their tensor arguments on one device.
MULTI_TENSOR = frozenset(
    {
        "cat", "concat", "concatenate", "stack", "hstack", "vstack", "dstack", "where",
        "matmul", "mm", "bmm", "einsum", "maximum", "minimum", "add", "sub", "mul", "div",
        "eq", "ne", "lt", "le", "gt", "ge", "cdist", "dot", "outer", "cross", "masked_select",
        "gather", "index_select", "take_along_dim", "bucketize", "searchsorted",
    }
)  # fmt: skip
#: torch functions that take tensors but return none (or a Python value).
NOT_TENSOR_FUNCTIONS = frozenset(
    {"save", "load", "manual_seed", "seed", "is_tensor", "is_floating_point", "numel",
     "allclose", "equal", "is_nonzero", "set_printoptions", "compile", "typename",
     "is_complex", "result_type", "can_cast", "promote_types", "is_same_size"}
)  # fmt: skip
_DTYPES = frozenset(
    {
        "float", "float32", "float64", "float16", "bfloat16", "double", "half", "long",
        "int", "int64", "int32", "int16", "int8", "uint8", "bool", "complex64",
        "complex128", "short", "cfloat", "cdouble",
    }
)  # fmt: skip
_DEVICE_NAME_HINTS = ("device", "dev", "gpu", "cuda", "rank")
_PLACED_KINDS = (F.DEVICE, F.TENSOR, F.OUTPUT, F.LOSS)
#: What ``.to(x)`` is given, when ``x`` is a dtype rather than a device.
DTYPE = Place("dtype", 0, "a dtype")


def _is_tensor_like(value: Value | None) -> bool:
    """A tensor, model output or module: its ``.device`` is wherever it is."""
    if value is None or "guessed" in value.flags:
        return False
    return value.kind in (F.TENSOR, F.OUTPUT, F.LOSS, F.MODULE, F.TENSORS)


class TensorReader:
    """Mixin of :class:`~.values.ValueReader`: the tensor facts of expressions."""

    project: ProjectView

    if TYPE_CHECKING:

        def value_of(self, expr: ast.AST) -> Value | None: ...
        def is_size(self, expr: ast.expr) -> bool: ...
        def call_name(self, call: ast.Call) -> str | None: ...
        def qualname(self, expr: ast.AST) -> str | None: ...
        def text(self, node: ast.AST) -> str: ...
        @staticmethod
        def dotted(expr: ast.AST) -> str | None: ...

    #: Set by the walk when the file changes the default device (no CPU factories).
    default_device_changed: bool = False

    def tensor_of(self, expr: ast.AST | None) -> TensorInfo | None:
        """The tensor facts of ``expr``, or None."""
        if expr is None:
            return None
        value = self.value_of(expr)
        return None if value is None else value.tensor

    # -- devices ---------------------------------------------------------------------
    def place_of_device(self, expr: ast.expr, line: int, moved: str) -> Place | None:
        """Where ``.to(expr)`` / ``device=expr`` puts a tensor; ``DTYPE`` when
        ``expr`` is a dtype; None when unknown. ``moved`` says how, for the message."""
        if isinstance(expr, ast.Constant):
            literal = expr.value
            if isinstance(literal, str):
                kind = literal.split(":", 1)[0].strip().lower()
                if kind == "cpu":
                    return Place(CPU, line, f"{moved} to the CPU")
                if kind in {"cuda", "mps", "xpu", "hpu", "npu"}:
                    return Place(ACCEL, line, moved)
                return None
            if isinstance(literal, int) and not isinstance(literal, bool):
                return Place(ACCEL, line, moved)  # .to(0): cuda:0
            return None
        if isinstance(expr, ast.IfExp):
            both = [self.place_of_device(expr.body, line, moved),
                    self.place_of_device(expr.orelse, line, moved)]  # fmt: skip
            if any(p is not None and p.device == ACCEL for p in both):
                return Place(ACCEL, line, moved)  # "cuda" if available else "cpu": the GPU path
            return both[0] if both[0] == both[1] else None
        if isinstance(expr, ast.Call):
            qualname = self.call_name(expr)
            if qualname == "torch.device":
                inner = expr.args[0] if expr.args else None
                return None if inner is None else self.place_of_device(inner, line, moved)
        qualname = self.qualname(expr)
        if qualname is not None and qualname.startswith("torch."):
            return DTYPE if qualname[6:] in _DTYPES else None
        if isinstance(expr, ast.Attribute) and expr.attr == "device":
            owner = self.tensor_of(expr.value)
            if owner is not None and owner.place is not None:
                return Place(owner.place.device, line, f"{moved} to `{self.text(expr)}`")
            if owner is not None or _is_tensor_like(self.value_of(expr.value)):
                return None  # a tensor's or a model's device, where it is not known

        value = self.value_of(expr)
        place = None if value is None or value.tensor is None else value.tensor.place
        if place is not None and value is not None and value.kind in _PLACED_KINDS:
            return Place(place.device, line, moved)  # a device variable, or .to(other_tensor)
        name = self.dotted(expr)
        if name is not None and value is None:
            last = name.rsplit(".", 1)[-1].lower()
            if "cpu" in last:
                return None
            if any(hint in last for hint in _DEVICE_NAME_HINTS) and "dtype" not in last:
                return Place(ACCEL, line, moved)  # `device`, `args.device`, `local_rank`
        return None

    def moved(self, call: ast.Call, receiver: TensorInfo | None, method: str) -> TensorInfo:
        """A tensor (or module) after ``.to(...)``, ``.cuda()`` or ``.cpu()``."""
        base = receiver or T.NOTHING
        line = call.lineno
        if method == "cpu":
            return base.but(place=Place(CPU, line, "moved with `.cpu()`"), alias=None)
        if method == "cuda":
            return base.but(place=Place(ACCEL, line, "moved with `.cuda()`"), alias=None)
        target: ast.expr | None = None
        for item in call.keywords:
            if item.arg == "device":
                target = item.value
        if target is None and call.args:
            target = call.args[0]
        if target is None:
            return base
        place = self.place_of_device(target, line, f"moved with `.to({self.text(target)})`")
        if place is DTYPE:
            return base
        return base.but(place=place, alias=None)

    # -- torch functions ----------------------------------------------------------------
    def torch_function(self, call: ast.Call, name: str) -> TensorInfo | None:
        """The tensor a ``torch.<name>(...)`` call returns, when torch says so."""
        if name == "Tensor" and self.default_device_changed:
            return TensorInfo(dims=_literal_dims(call), batched=_sequence_data(call))
        if name in LEGACY_CPU:
            return TensorInfo(
                place=Place(CPU, call.lineno, f"`torch.{name}` (always on the CPU)"),
                dims=_literal_dims(call),
                batched=_sequence_data(call),
            )
        if name in SIZED_FACTORIES or name in RANGE_FACTORIES or name in DATA_FACTORIES:
            return self._factory(call, name)
        if name in {"randint", "eye", "normal", "tril_indices", "triu_indices", "from_numpy"}:
            return self._factory(call, name)
        if name in LIKE:
            like = self.tensor_of(call.args[0]) if call.args else None
            place = self._given_device(call) or (None if like is None else like.place)
            return TensorInfo(
                place=place,
                dims=None if like is None else like.dims,
                batched=like is not None and like.nonscalar,
            )
        if name in NOT_TENSOR_FUNCTIONS:
            return None
        tensors = [info for info in self._tensor_arguments(call) if info is not None]
        if not tensors:
            return None
        place = T.combined_place([info.place for info in tensors])
        if name in {"cat", "concat", "concatenate"}:
            first = tensors[0]
            return TensorInfo(place=place, dims=_unsized(first.dims), batched=first.nonscalar)
        if name == "stack":
            first = tensors[0]
            dims = None if first.dims is None else (None, *first.dims)
            return TensorInfo(place=place, dims=dims, batched=True)
        if name in REDUCTIONS or name in PAIR_REDUCTIONS:
            return self._reduction(call, tensors[0], name, call.args[1:])
        batched = any(info.nonscalar for info in tensors)
        return TensorInfo(place=place, batched=batched)

    def _factory(self, call: ast.Call, name: str) -> TensorInfo:
        place = self._given_device(call)
        if place is None and not self.default_device_changed and not _names_a_device(call):
            place = Place(CPU, call.lineno, f"`torch.{name}` without `device=`")
        if name in DATA_FACTORIES:
            data = call.args[0] if call.args else None
            if isinstance(data, ast.Constant) and isinstance(data.value, (int, float, bool)):
                return TensorInfo(place=place, dims=())
            return TensorInfo(place=place, dims=_literal_dims(call), batched=_sequence_data(call))
        if name == "from_numpy":
            return TensorInfo(place=place, batched=True)
        if name in RANGE_FACTORIES:
            return TensorInfo(place=place, dims=(None,))
        if name == "eye":
            return TensorInfo(place=place, dims=(None, None))
        sizes = _sizes(call, name, self.text)
        if sizes is None and len(call.args) == 1 and self.is_size(call.args[0]):
            sizes = (self.text(call.args[0]),)  # torch.zeros(n) for an int n: a vector
        if sizes is None:
            return TensorInfo(place=place, batched=bool(call.args) and not _empty_size(call))
        return TensorInfo(place=place, dims=sizes)

    def _given_device(self, call: ast.Call) -> Place | None:
        for item in call.keywords:
            if item.arg == "device":
                place = self.place_of_device(
                    item.value, call.lineno, f"created on `{self.text(item.value)}`"
                )
                return None if place is DTYPE else place
        return None

    def _tensor_arguments(self, call: ast.Call) -> list[TensorInfo | None]:
        found: list[TensorInfo | None] = []
        for arg in call.args:
            if isinstance(arg, (ast.List, ast.Tuple)):
                found += [self.tensor_of(item) for item in arg.elts]
            elif not isinstance(arg, ast.Constant):
                info = self.tensor_of(arg)
                if info is not None and info.container:
                    info = info.element()
                found.append(info)
        return found

    def torch_tensor(self, call: ast.Call, qualname: str) -> TensorInfo | None:
        """The tensor facts of a call of a torch function (None: not one we know)."""
        if qualname.startswith("torch.cuda.") and qualname.rsplit(".", 1)[-1] in LEGACY_CPU:
            return TensorInfo(place=Place(ACCEL, call.lineno, f"`{qualname}`"))
        if qualname.startswith("torch.nn.functional."):
            tensors = [info for info in self._tensor_arguments(call) if info is not None]
            if not tensors:
                return None
            first = tensors[0]
            return TensorInfo(
                place=T.combined_place([info.place for info in tensors]),
                batched=first.nonscalar,
            )
        if qualname.count(".") != 1 or not qualname.startswith("torch."):
            return None
        return self.torch_function(call, qualname[6:])

    def output_of(self, call: ast.Call, model: Value, name: str | None) -> TensorInfo:
        """What a model's output holds: it lives where the model does. A
        DataParallel/DDP wrapper moves CPU inputs to its device itself."""
        place = None if model.tensor is None else model.tensor.place
        if place is None and model.origin in INPUT_MOVING_WRAPPERS:
            return TensorInfo(batched=True)
        if place is not None and place.device == ACCEL:
            shown = f"`{name}`" if name else "the model"
            why = f"the output of {shown}, which is moved to the device"
            inputs = [info for info in self._tensor_arguments(call) if info is not None]
            output = TensorInfo(place=Place(ACCEL, place.line, why, place.path), batched=True)
            return self._output_shape(model, inputs, output)
        inputs = [info for info in self._tensor_arguments(call) if info is not None]
        combined = T.combined_place([info.place for info in inputs]) if inputs else None
        return self._output_shape(model, inputs, TensorInfo(place=combined, batched=True))

    def _output_shape(
        self, model: Value, inputs: list[TensorInfo], output: TensorInfo
    ) -> TensorInfo:
        """A model with one output feature (``nn.Linear(k, 1)`` last) applied to a
        batch gives a column ``(N, 1)``."""
        one = "one-output" in model.flags
        if not one and model.origin:
            returned = self.project.returns(model.origin)
            one = len(returned) == 1 and _unit(returned[0][0].tensor) == "linear-1"
        if not one:
            return output
        batch = bool(inputs) and inputs[0].nonscalar
        return output.but(dims=(None, 1) if batch else None, unit_dim="linear-1")

    def loss_tensor(self, call: ast.Call, flags: frozenset[str]) -> TensorInfo:
        """A loss: where its inputs are; one number unless asked per element."""
        inputs = [info for info in self._tensor_arguments(call) if info is not None]
        place = T.combined_place([info.place for info in inputs]) if inputs else None
        if "unreduced" in flags:
            return TensorInfo(place=place, batched=True)
        return TensorInfo(place=place, dims=())

    def batch_of(self, loader: ast.Call) -> TensorInfo | None:
        """What each batch of ``DataLoader(dataset, ...)`` holds, when the dataset
        shows it: CPU tensors from torchvision's datasets, from a ``TensorDataset``
        of CPU tensors and from a project ``Dataset`` that never moves a tensor.
        A ``collate_fn`` may do anything: unknown."""
        if any(item.arg == "collate_fn" for item in loader.keywords):
            return None
        dataset: ast.expr | None = loader.args[0] if loader.args else None
        for item in loader.keywords:
            if item.arg == "dataset":
                dataset = item.value
        if dataset is None:
            return None
        value = self.value_of(dataset)
        name = self.text(dataset)
        items = None if value is None else _dataset_items(value, self.project)
        place = None if items is None else items.place
        if items is None or place is None or place.device != CPU:
            return None
        batch_place = Place(CPU, loader.lineno, f"a batch of the loader over `{name}`: {place.why}")
        elements = None
        if items.elements is not None and not _collates_differently(loader):
            elements = tuple(
                TensorInfo(
                    place=batch_place,
                    dims=None if item.dims is None else (None, *item.dims),
                    batched=True,
                )
                for item in items.elements
            )
        return TensorInfo(place=batch_place, batched=True, container=True, elements=elements)

    def dataset_tensor(self, call: ast.Call, qualname: str) -> TensorInfo | None:
        """``TensorDataset(a, b)``, ``random_split(ds, ...)``, ``Subset(ds, ...)``:
        where the items of the dataset live."""
        last = qualname.rsplit(".", 1)[-1]
        if last == "TensorDataset":
            infos = self._tensor_arguments(call)
            if not infos or any(info is None or info.place is None for info in infos):
                return None
            known = [info for info in infos if info is not None]
            place = T.combined_place([info.place for info in known])
            if place is None:
                return None
            why = "a `TensorDataset` of CPU tensors" if place.device == CPU else "on the device"
            items = tuple(
                TensorInfo(place=info.place, dims=None if info.dims is None else info.dims[1:])
                for info in known
            )
            where = Place(place.device, call.lineno, why)
            return TensorInfo(place=where, container=True, elements=items)
        if last in {"random_split", "Subset", "ConcatDataset"} and call.args:
            first = self.value_of(call.args[0])
            if first is not None:
                return _dataset_items(first, self.project)
        return None

    def prepared(self, value: Value | None, call: ast.Call) -> Value | None:
        """A model or loader handed back by ``accelerator.prepare`` (or Fabric's
        ``setup``): placed on the device, its batches too."""
        if value is None:
            return None
        framework = self.text(call.func)
        if value.kind in (F.MODULE, F.LOADER):
            why = f"placed on the device by `{framework}`"
            place = Place(ACCEL, call.lineno, why)
            return value.but(
                tensor=TensorInfo(place=place, batched=True, container=value.kind == F.LOADER)
            )
        return value

    # -- tensor methods -------------------------------------------------------------
    def tensor_method(
        self, call: ast.Call, receiver: TensorInfo, method: str, base: str | None
    ) -> TensorInfo | None:
        """The tensor ``receiver.<method>(...)`` returns (None: not a tensor, or unknown).
        ``base``: the receiver's dotted name, which a view aliases."""
        args = call.args
        if method in {"to", "cuda", "cpu"}:
            return self.moved(call, receiver, method)
        if method in {"type", "type_as"}:
            return receiver.but(place=self._converted(call, receiver, method), alias=None)
        if method in NEW_METHODS:
            sizes = _sizes(call, "zeros", self.text) if method != "new_tensor" else None
            return TensorInfo(place=receiver.place, dims=sizes, batched=sizes is None)
        kind = "detach" if method in {"detach", "detach_"} else "view"
        view = (
            receiver.but(alias=base, alias_line=call.lineno, alias_kind=kind) if base else receiver
        )
        if method in SAME_SHAPE:
            return view if method.endswith("_") else receiver.but(alias=None)
        if method in BINARY_METHODS:
            other = self.tensor_of(args[0]) if args else None
            return _elementwise(receiver, other)
        if method in REDUCTIONS or method in PAIR_REDUCTIONS:
            return self._reduction(call, receiver, method, args)
        if method in VIEW_METHODS:
            return view.but(dims=self._view_dims(call, receiver, method), unit_dim=None)
        if method in {"gather", "index_select", "take_along_dim"}:
            index = args[-1] if args else None
            info = self.tensor_of(index)
            return TensorInfo(place=receiver.place, dims=None if info is None else info.dims,
                              batched=True)  # fmt: skip
        if method in {"matmul", "mm", "bmm", "repeat", "expand", "topk", "sort", "masked_select"}:
            return TensorInfo(place=receiver.place, batched=receiver.nonscalar)
        return None

    def _converted(self, call: ast.Call, receiver: TensorInfo, method: str) -> Place | None:
        """``t.type_as(other)`` takes ``other``'s device as well as its dtype;
        ``t.type(torch.long)`` keeps the device, ``t.type("torch.cuda.FloatTensor")``
        moves it."""
        given = call.args[0] if call.args else None
        if given is None:
            return receiver.place
        if method == "type_as":
            other = self.tensor_of(given)
            return None if other is None else other.place
        if isinstance(given, ast.Constant) and isinstance(given.value, str):
            if "cuda" in given.value:
                return Place(ACCEL, call.lineno, f"converted with `.type({given.value!r})`")
            return Place(CPU, call.lineno, f"converted with `.type({given.value!r})`")
        qualname = self.qualname(given)
        if qualname is not None and qualname.startswith("torch.") and qualname[6:] in _DTYPES:
            return receiver.place
        return None

    def _reduction(
        self, call: ast.Call, receiver: TensorInfo, name: str, args: list[ast.expr]
    ) -> TensorInfo:
        dim: int | None = None
        given = args[0] if args else None
        keepdim = False
        for item in call.keywords:
            if item.arg in ("dim", "axis"):  # torch takes numpy's spellings too
                given = item.value
            elif item.arg in ("keepdim", "keepdims"):
                keepdim = isinstance(item.value, ast.Constant) and item.value.value is True
        if len(args) > 1 and isinstance(args[1], ast.Constant) and args[1].value is True:
            keepdim = True
        if given is not None:
            dim = _integer(given)
            if dim is None:
                return TensorInfo(place=receiver.place)  # a dim we cannot read
        dims = T.reduced(receiver.dims, dim, keepdim)
        unit = "keepdim" if keepdim and dim is not None else None
        if dims is None and unit is not None and dim in (1, -1) and receiver.nonscalar:
            dims = (None, 1)  # scores (N, C) reduced over the classes: a column
        # Over dim d >= 1 the input had d + 1 dimensions: d are left.
        batched = dim is not None and (dim >= 1 or (keepdim and receiver.nonscalar))
        info = TensorInfo(place=receiver.place, dims=dims, unit_dim=unit, batched=batched)
        if name in PAIR_REDUCTIONS and given is not None:
            return info.but(container=True)  # (values, indices)
        return info

    def _view_dims(
        self, call: ast.Call, receiver: TensorInfo, method: str
    ) -> tuple[T.Dim, ...] | None:
        dims = receiver.dims
        args = call.args
        if method in {"view", "reshape"}:
            if len(args) == 1 and not isinstance(args[0], (ast.Tuple, ast.List, ast.Constant)):
                return None  # reshape(shape): a tuple or a number, we cannot tell
            sizes = [_size(arg, self.text) for arg in _size_arguments(call)]
            return None if not sizes and args else tuple(sizes)
        if method == "flatten":
            if not args and not call.keywords:
                return (None,)
            return None
        if method == "unsqueeze" and args:
            dim = _integer(args[0])
            return None if dim is None else T.unsqueezed(dims, dim)
        if method == "squeeze":
            if not args:
                return T.squeezed(dims, None)
            dim = _integer(args[0])
            return None if dim is None else T.squeezed(dims, dim)
        if method in {"t", "transpose", "permute", "detach", "contiguous", "swapaxes",
                      "movedim"}:  # fmt: skip
            return None if dims is None else tuple(None for _ in dims)
        return None


def _elementwise(left: TensorInfo, right: TensorInfo | None) -> TensorInfo:
    if right is None:
        return left.but(alias=None, unit_dim=None, dims=None if left.dims is None else left.dims)
    return TensorInfo(
        place=T.combined_place([left.place, right.place]),
        dims=T.broadcast(left.dims, right.dims),
        batched=left.nonscalar or right.nonscalar,
    )


def elementwise(left: TensorInfo | None, right: TensorInfo | None) -> TensorInfo | None:
    """The facts of ``left <op> right`` (either may be a Python number: None)."""
    if left is None and right is None:
        return None
    if left is None:
        assert right is not None
        return right.but(alias=None, container=False)  # with a number: the same shape
    if right is None:
        return left.but(alias=None, container=False)
    return _elementwise(left, right)


def _names_a_device(call: ast.Call) -> bool:
    """``device=`` is given (its value unknown here, ``device=x.device``): not the CPU
    by default."""
    return any(item.arg == "device" for item in call.keywords)


def _sequence_data(call: ast.Call) -> bool:
    data = call.args[0] if call.args else None
    return isinstance(data, (ast.List, ast.Tuple, ast.ListComp))


def _literal_dims(call: ast.Call) -> tuple[T.Dim, ...] | None:
    """The shape of ``torch.tensor([[1, 2], [3, 4]])``'s data, when written out
    as regular nested lists (``torch.FloatTensor([1])``: ``(1,)``)."""
    data = call.args[0] if len(call.args) == 1 else None
    dims: list[T.Dim] = []
    while isinstance(data, (ast.List, ast.Tuple)):
        items = data.elts
        if any(isinstance(item, ast.Starred) for item in items):
            return None
        dims.append(len(items))
        if not items:
            break
        nested = [isinstance(item, (ast.List, ast.Tuple)) for item in items]
        if all(nested):
            data = items[0]
            continue
        if not all(_number(item) for item in items):
            return None  # an item that may itself be a list: the rank is not known
        break
    return tuple(dims) if dims else None


def _number(expr: ast.expr) -> bool:
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, (ast.USub, ast.UAdd)):
        expr = expr.operand
    return isinstance(expr, ast.Constant) and isinstance(expr.value, (int, float, bool))


def _empty_size(call: ast.Call) -> bool:
    first = call.args[0] if call.args else None
    return isinstance(first, (ast.List, ast.Tuple)) and not first.elts


def _integer(expr: ast.expr) -> int | None:
    if isinstance(expr, ast.Constant) and type(expr.value) is int:
        return expr.value
    if (
        isinstance(expr, ast.UnaryOp)
        and isinstance(expr.op, ast.USub)
        and isinstance(expr.operand, ast.Constant)
        and type(expr.operand.value) is int
    ):
        return -expr.operand.value
    return None


def _size(expr: ast.expr, text: object) -> T.Dim:
    number = _integer(expr)
    if number is not None:
        return None if number < 0 else number
    if isinstance(expr, (ast.Name, ast.Attribute, ast.Call, ast.Subscript, ast.BinOp)):
        return text(expr)  # type: ignore[operator, no-any-return]
    return None


def _size_arguments(call: ast.Call) -> list[ast.expr]:
    """``view(a, b)`` and ``view((a, b))`` alike."""
    args = call.args
    if len(args) == 1 and isinstance(args[0], (ast.Tuple, ast.List)):
        return list(args[0].elts)
    if any(isinstance(arg, ast.Starred) for arg in args):
        return []
    return list(args)


def _sizes(call: ast.Call, name: str, text: object) -> tuple[T.Dim, ...] | None:
    """The sizes a sized factory is given, when written out."""
    args = list(call.args)
    if name == "full" and args:
        args = args[:1]
    if name == "randint":
        size = next((k.value for k in call.keywords if k.arg == "size"), None)
        if size is None:
            size = next((a for a in args if isinstance(a, (ast.Tuple, ast.List))), None)
        if isinstance(size, (ast.Tuple, ast.List)):
            return tuple(_size(item, text) for item in size.elts)
        return None
    if len(args) == 1 and isinstance(args[0], (ast.Tuple, ast.List)):
        return tuple(_size(item, text) for item in args[0].elts)
    if not args or any(isinstance(arg, ast.Starred) for arg in args):
        return None
    if len(args) == 1 and not isinstance(args[0], ast.Constant):
        return None  # torch.zeros(shape): a tuple or a number, we cannot tell
    return tuple(_size(arg, text) for arg in args)


def _unsized(dims: tuple[T.Dim, ...] | None) -> tuple[T.Dim, ...] | None:
    return None if dims is None else tuple(None for _ in dims)


def subscript_items(slice_: ast.expr) -> list[str]:
    """How each index of ``x[...]`` acts (see :func:`.tensors.indexed`)."""
    elements = slice_.elts if isinstance(slice_, ast.Tuple) else [slice_]
    items = []
    for element in elements:
        if isinstance(element, ast.Slice):
            items.append("slice")
        elif isinstance(element, ast.Constant) and element.value is None:
            items.append("none")
        elif isinstance(element, ast.Constant) and element.value is Ellipsis:
            items.append("...")
        elif _integer(element) is not None:
            items.append("int")
        else:
            items.append("other")
    return items


#: torchvision's and torchaudio's datasets: items are CPU tensors (or PIL images
#: and numbers that the default collate turns into CPU tensors).
_LIBRARY_DATASETS = ("torchvision.datasets.", "torchaudio.datasets.", "torchtext.datasets.")


def _dataset_items(value: Value, project: ProjectView) -> TensorInfo | None:
    """What a dataset's items hold, when the code shows it: where they live,
    and for torchvision's classification sets and ``TensorDataset`` what each
    element of an item is (an image, a label: a 0-dim number)."""
    if value.tensor is not None and value.tensor.place is not None:
        return value.tensor
    origin = value.origin or ""
    line = getattr(value.node, "lineno", 0)
    if origin.startswith(_LIBRARY_DATASETS):
        name = origin.rsplit(".", 1)[-1]
        place = Place(CPU, line, f"`{name}` yields CPU tensors")
        elements = None
        node = value.node
        relabelled = isinstance(node, ast.Call) and any(
            item.arg in {"target_transform", "transforms", "target_type"} for item in node.keywords
        )
        if name in CLASSIFICATION_SETS and not relabelled:
            elements = (TensorInfo(place=place, batched=True), TensorInfo(place=place, dims=()))
        return TensorInfo(place=place, container=True, elements=elements)
    klass = project.klass(origin) if origin else None
    if klass is not None and not klass.fact.moves_tensors and "__getitem__" in klass.fact.methods:
        name = origin.rsplit(".", 1)[-1]
        return TensorInfo(
            place=Place(CPU, line, f"`{name}` never moves a tensor to a device"), container=True
        )
    return None


#: torchvision datasets whose items are ``(image, class index)``.
CLASSIFICATION_SETS = frozenset(
    {
        "MNIST", "FashionMNIST", "KMNIST", "EMNIST", "QMNIST", "CIFAR10", "CIFAR100", "SVHN",
        "STL10", "ImageFolder", "DatasetFolder", "ImageNet", "Caltech101", "Caltech256",
        "Flowers102", "Food101", "StanfordCars", "FGVCAircraft", "GTSRB", "Country211",
        "DTD", "EuroSAT", "PCAM", "RenderedSST2", "USPS", "SEMEION", "Places365",
    }
)  # fmt: skip


def _collates_differently(loader: ast.Call) -> bool:
    """A loader whose batches are not the default stack of items."""
    return any(item.arg in {"collate_fn", "batch_sampler"} for item in loader.keywords)


def _unit(tensor: list[str | int | bool] | None) -> str | None:
    """The size-1 origin recorded with a returned tensor (see ArgFact.tensor)."""
    return str(tensor[4]) or None if tensor is not None and len(tensor) > 4 else None


def tensor_of_fact(tensor: list[str | int | bool] | None, why: str) -> TensorInfo | None:
    """The shape facts an index record keeps of a returned tensor (its rank, the
    origin of a size-1 last dimension), without its device."""
    if tensor is None or len(tensor) < 6:
        return None
    rank = int(tensor[5])
    unit = str(tensor[4]) or None
    if rank < 0 and unit is None:
        return None
    dims = None if rank < 0 else tuple(None for _ in range(rank))
    return TensorInfo(dims=dims, batched=bool(tensor[3]), unit_dim=unit)
