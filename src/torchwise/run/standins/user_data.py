"""A stand-in for the script's own ``Dataset`` whose files are missing.

Most training scripts read their data through a ``Dataset`` class of their
own: a CSV, a token file, a folder of images listed in an index. When its
constructor fails because a file is not there (``FileNotFoundError``, or an
``OSError`` for a missing path), the half-built object becomes a stand-in of
the same class: 256 synthetic items, shaped for the model the script trains,
because the model is what the items must fit:

- the model is the largest root module whose parameters an optimizer holds
  (or the largest root module), found when the first item is read, which is
  after the script built it;
- the input follows the model's first layer with parameters: token indices
  for an ``Embedding``, features for a ``Linear``, channels by length for a
  ``Conv1d``, channels by a square image for a ``Conv2d``, steps by features
  for a recurrent layer; a sequence length or image size the model declares
  (``max_seq_len``, ``block_size``, ``img_size``...) is used, capped so a step
  stays short;
- the target follows the model's last layer: next tokens for a language
  model (an output as wide as its vocabulary), a class index for a classifier,
  a value for one output;
- an item is ``(input, target)``, or the input alone when the script's loop
  unpacks one value; a loop that unpacks three or more cannot be served.

Items come from their index with a private generator, so the script's random
state is not touched. Nothing here can know what the real data holds: the run
says so in a note, and when a stand-in cannot be shaped the script's own error
is raised with one line saying why. ``--no-stand-ins`` turns it off.
"""

from __future__ import annotations

import ast
import gc
import inspect
import linecache
import warnings
import weakref
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from torchwise.run.needs import GUESSED_ITEMS, missing_file
from torchwise.run.sites import is_user_file, user_frame

Note = Callable[[str], None]
Patch = Callable[[Any, str, Any], None]

ITEMS = 256
MAX_SEQUENCE = 64
MAX_IMAGE = 64
DEFAULT_SEQUENCE = 32
DEFAULT_IMAGE = 32
#: token ids drawn below this bound fit any vocabulary at least this large
TOKEN_BOUND = 256
SEQUENCE_NAMES = ("max_seq_len", "block_size", "max_seq_length", "seq_len", "max_len",
                  "context_length", "n_positions", "max_position_embeddings", "n_ctx")  # fmt: skip
IMAGE_NAMES = ("img_size", "image_size", "input_size", "resolution", "img_dim")


class CannotShape(Exception):
    """The stand-in's items cannot be shaped; the message says why."""


def patch_user_datasets(note: Note, patch: Patch) -> None:
    """Wrap the constructor of every ``Dataset`` subclass the user's code defines from now on."""
    dataset_type = torch.utils.data.Dataset
    #: the modules built since the run started: the script's, not an earlier run's in this process
    created: weakref.WeakSet[nn.Module] = weakref.WeakSet()
    previous = dataset_type.__dict__.get("__init_subclass__")

    def init_subclass(cls: Any, /, **kwargs: Any) -> None:
        if previous is not None:
            previous.__get__(None, cls)(**kwargs)
        else:
            super(dataset_type, cls).__init_subclass__(**kwargs)
        constructor = cls.__dict__.get("__init__")
        if callable(constructor) and _defined_by_user(constructor):
            cls.__init__ = _guarded(constructor, note, created)

    patch(dataset_type, "__init_subclass__", classmethod(init_subclass))
    loader_type = torch.utils.data.DataLoader
    original_iter = loader_type.__iter__

    def __iter__(loader: Any) -> Any:
        items = getattr(loader.dataset, "_torchwise_items", None)
        if isinstance(items, _LazyItems):
            items.prepare()  # here, in the main process: workers' notes would be lost
        return original_iter(loader)

    patch(loader_type, "__iter__", __iter__)
    original_module_init = nn.Module.__init__

    def module_init(module: nn.Module, *args: Any, **kwargs: Any) -> None:
        original_module_init(module, *args, **kwargs)
        created.add(module)

    patch(nn.Module, "__init__", module_init)


def _defined_by_user(function: Callable[..., Any]) -> bool:
    code = getattr(function, "__code__", None)
    return code is not None and is_user_file(code.co_filename)


def _guarded(
    original: Callable[..., None], note: Note, created: weakref.WeakSet[nn.Module]
) -> Callable[..., None]:
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        outermost = not self.__dict__.get("_torchwise_constructing", False)
        self.__dict__["_torchwise_constructing"] = True
        try:
            original(self, *args, **kwargs)
        except Exception as error:
            if not outermost or not missing_file(error):
                raise
            _become(self, error, note, created)
        finally:
            if outermost:
                self.__dict__.pop("_torchwise_constructing", None)

    __init__.__wrapped__ = original  # type: ignore[attr-defined]
    return __init__


def _become(
    dataset: Any, error: BaseException, note: Note, created: weakref.WeakSet[nn.Module]
) -> None:
    cls = type(dataset)
    items = _LazyItems(cls.__name__, error, note, created)
    namespace = {
        "_torchwise_stand_in": True,
        "_torchwise_items": items,
        "__module__": cls.__module__,
        "__qualname__": cls.__qualname__,
        "__len__": lambda self: ITEMS,
        "__getitem__": lambda self, index: items.item(index),
    }
    name = cls.__name__

    def __getattr__(self: Any, attribute: str) -> Any:
        if attribute.startswith("__"):
            raise AttributeError(attribute)
        raise AttributeError(
            f"'{name}' object has no attribute '{attribute}' (torchwise: {name}'s files are "
            f"missing and its stand-in has no `{attribute}`: its __init__ stopped before "
            "setting it; run with the real data)"
        )

    namespace["__getattr__"] = __getattr__
    if isinstance(dataset, torch.utils.data.IterableDataset):
        namespace["__iter__"] = lambda self: (items.item(index) for index in range(ITEMS))
    dataset.__class__ = type(cls.__name__, (cls,), namespace)


@dataclass
class ItemShape:
    """What one synthetic item holds."""

    input_shape: tuple[int, ...]
    input_dtype: torch.dtype
    input_bound: int  # exclusive upper bound of token ids; 0 for floats
    target_shape: tuple[int, ...] | None  # None: no target
    target_dtype: torch.dtype
    target_bound: int
    source: str  # what the shape was read from, for the note

    def describe(self) -> str:
        def one(shape: tuple[int, ...], dtype: torch.dtype, bound: int) -> str:
            kind = f"int64 ids below {bound}" if bound else str(dtype).removeprefix("torch.")
            return f"{kind} {tuple(shape)}"

        text = one(self.input_shape, self.input_dtype, self.input_bound)
        if self.target_shape is not None:
            text += " with targets " + one(self.target_shape, self.target_dtype, self.target_bound)
        return text


class _LazyItems:
    """Shapes the items when the first one is read: the model exists by then."""

    def __init__(
        self, name: str, error: BaseException, note: Note, created: weakref.WeakSet[nn.Module]
    ) -> None:
        self.name = name
        self.created = created
        self.error = error
        self.note = note
        self.shape: ItemShape | None = None
        self.seed = zlib.crc32(name.encode())

    def item(self, index: int) -> Any:
        if not -ITEMS <= index < ITEMS:
            raise IndexError(f"index {index} is out of range for {ITEMS} items")
        return make_item(self.prepare(), index % ITEMS, self.seed)

    def prepare(self) -> ItemShape:
        """The items' shape, found (and noted) once."""
        if self.shape is None:
            try:
                self.shape = shape_for(trained_model(list(self.created)), loop_arity())
            except CannotShape as reason:
                raise type(self.error)(
                    f"{self.error} (torchwise: {self.name}'s files are missing and its stand-in "
                    f"cannot be shaped: {reason}; run with the real data)"
                ) from self.error
            self.note(
                f"stand-in data: {self.name}() could not read its files ({_short(self.error)}); "
                f"{ITEMS} synthetic items, {self.shape.describe()}, {GUESSED_ITEMS} "
                f"{self.shape.source}, take its place (--no-stand-ins runs only on the real data)"
            )
        return self.shape


def _short(error: BaseException) -> str:
    text = f"{type(error).__name__}: {error}"
    return text if len(text) <= 120 else text[:117] + "..."


def make_item(shape: ItemShape, index: int, seed: int) -> Any:
    generator = torch.Generator().manual_seed(seed * 100003 + index)

    def one(dims: tuple[int, ...], dtype: torch.dtype, bound: int) -> torch.Tensor:
        if bound:
            return torch.randint(0, bound, dims, generator=generator, dtype=torch.int64)
        return torch.randn(dims, generator=generator, dtype=dtype)

    x = one(shape.input_shape, shape.input_dtype, shape.input_bound)
    if shape.target_shape is None:
        return x
    return x, one(shape.target_shape, shape.target_dtype, shape.target_bound)


def trained_model(modules: list[nn.Module]) -> nn.Module:
    """Of ``modules``, the largest root module an optimizer holds parameters of, or the
    largest root module."""
    optimized: set[int] = set()
    with warnings.catch_warnings():  # an isinstance() on a deprecated alias warns
        warnings.simplefilter("ignore")
        for obj in gc.get_objects():
            if isinstance(obj, torch.optim.Optimizer):
                optimized.update(id(p) for group in obj.param_groups for p in group["params"])
    children = {id(child) for module in modules for child in module.children()}
    roots = [m for m in modules if id(m) not in children and _parameters(m)]
    if not roots:
        raise CannotShape("no model with parameters was built before the first item was read")
    held = [m for m in roots if any(id(p) in optimized for p in m.parameters())]
    return max(held or roots, key=_parameters)


def _parameters(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def loop_arity() -> int | None:
    """How many values the script's loop unpacks from a batch: ``for x, y in loader`` is 2,
    ``for i, (x, y, m) in enumerate(loader)`` is 3; None when the loop keeps the batch whole."""
    frame = user_frame(inspect.currentframe())
    if frame is None:
        return None
    line = linecache.getline(frame.f_code.co_filename, frame.f_lineno).strip()
    if not line.startswith("for "):
        return None
    try:
        tree = ast.parse(line.rstrip(":") + ":\n    pass")
    except SyntaxError:
        return None
    loop = tree.body[0]
    if not isinstance(loop, ast.For):
        return None
    target = loop.target
    iterable = loop.iter
    enumerated = isinstance(iterable, ast.Call) and getattr(iterable.func, "id", "") == "enumerate"
    if enumerated and isinstance(target, ast.Tuple) and len(target.elts) == 2:
        target = target.elts[1]
    return len(target.elts) if isinstance(target, (ast.Tuple, ast.List)) else None


def shape_for(model: nn.Module, arity: int | None) -> ItemShape:
    """The item shape the model's first and last layers ask for."""
    if arity is not None and arity > 2:
        raise CannotShape(f"the loop unpacks {arity} values from each batch")
    leaves = [m for m in model.modules() if _own_parameters(m)]
    first, last = leaves[0], leaves[-1]
    name = type(_unwrapped(model)).__name__
    vocabulary = 0
    if isinstance(first, nn.Embedding):
        vocabulary = first.num_embeddings
        length = _declared(model, SEQUENCE_NAMES, DEFAULT_SEQUENCE, MAX_SEQUENCE)
        input_shape: tuple[int, ...] = (length,)
        source = f"{name}'s Embedding({first.num_embeddings}, {first.embedding_dim})"
        dtype = torch.int64
    elif isinstance(first, nn.Linear):
        input_shape, dtype = (first.in_features,), torch.float32
        source = f"{name}'s Linear({first.in_features}, {first.out_features})"
    elif isinstance(first, nn.Conv1d):
        length = _declared(model, SEQUENCE_NAMES, 128, 256)
        input_shape, dtype = (first.in_channels, length), torch.float32
        source = f"{name}'s Conv1d({first.in_channels}, ...)"
    elif isinstance(first, nn.Conv2d):
        side = _declared(model, IMAGE_NAMES, DEFAULT_IMAGE, MAX_IMAGE)
        input_shape, dtype = (first.in_channels, side, side), torch.float32
        source = f"{name}'s Conv2d({first.in_channels}, ...)"
    elif isinstance(first, nn.RNNBase):
        length = _declared(model, SEQUENCE_NAMES, DEFAULT_SEQUENCE, MAX_SEQUENCE)
        input_shape, dtype = (length, first.input_size), torch.float32
        source = f"{name}'s {type(first).__name__}({first.input_size}, ...)"
    else:
        raise CannotShape(f"{name}'s first layer is a {type(first).__name__}")
    bound = min(vocabulary, TOKEN_BOUND) if vocabulary else 0
    if arity == 1:
        return ItemShape(input_shape, dtype, bound, None, torch.int64, 0, source)
    outputs = _outputs(last)
    if vocabulary and outputs == vocabulary:  # a language model: the next tokens
        return ItemShape(input_shape, dtype, bound, input_shape, torch.int64, bound, source)
    if outputs is None:
        raise CannotShape(f"{name}'s last layer is a {type(last).__name__}")
    if outputs == 1:
        return ItemShape(input_shape, dtype, bound, (1,), torch.float32, 0, source)
    return ItemShape(input_shape, dtype, bound, (), torch.int64, outputs, source)


def _unwrapped(model: nn.Module) -> nn.Module:
    """The model inside DDP, DataParallel or torch.compile's wrapper (for the note)."""
    for _ in range(4):
        inner = getattr(model, "module", None) or getattr(model, "_orig_mod", None)
        if not isinstance(inner, nn.Module):
            break
        model = inner
    return model


def _own_parameters(module: nn.Module) -> bool:
    return any(True for _ in module.parameters(recurse=False))


def _outputs(layer: nn.Module) -> int | None:
    if isinstance(layer, nn.Linear):
        return layer.out_features
    if isinstance(layer, nn.Embedding):  # a tied output layer shares the embedding
        return layer.num_embeddings
    return None


def _declared(model: nn.Module, names: tuple[str, ...], default: int, cap: int) -> int:
    """A size the model declares on itself or on its config object, capped."""
    holders: list[Any] = [model]
    for module in list(model.modules())[:4]:
        holders.extend(getattr(module, key, None) for key in ("config", "params", "args", "cfg"))
    for holder in holders:
        if holder is None:
            continue
        for key in names:
            value = getattr(holder, key, None)
            if isinstance(value, int) and not isinstance(value, bool) and value > 1:
                return min(value, cap)
            if isinstance(value, (tuple, list)) and value and isinstance(value[0], int):
                return min(int(value[0]), cap)
    return default
