"""The tensor facet of the value model: where a tensor lives, how many
dimensions it has and of what size, and whose storage it shares.

Static review cannot run the program, so each fact is kept only with the
evidence that established it, and "unknown" is the default:

- **device** (:class:`Place`): ``CPU`` or ``ACCEL`` (the accelerator a script
  moves its model to: CUDA on the GPU node, whatever the machine the code was
  written on), with the line and the reason ("`torch.zeros` without
  `device=`", "a batch of `train_loader`", "moved with `.to(device)`"). A
  device variable (``device = torch.device("cuda" if ... else "cpu")``) is the
  accelerator: a bug that only crashes on the GPU is still a crash.
- **shape** (``dims``): a tuple of sizes, each an ``int``, a symbol (the text
  that computes it: ``"B"``, ``"x.size(0)"``) or None (unknown); None for an
  unknown rank. ``batched`` records "has at least one dimension" when the rank
  is unknown (a batch from a loader, a model's output): what decides whether a
  CPU tensor may meet a CUDA one (0-dim CPU tensors may, as Python numbers).
- **alias**: the dotted name of the tensor whose storage a view (``.view``,
  ``.T``, basic slicing, ``.detach()``, ``.data``, or plain assignment) shares.

The algebra here is pure (no AST, no context); :mod:`.values` reads the code.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

CPU, ACCEL = "cpu", "accel"

Dim = int | str | None


@dataclass(frozen=True)
class Place:
    """Where a tensor (or a module's parameters) lives, and the evidence."""

    device: str  # CPU or ACCEL
    line: int  # where the evidence is
    why: str  # what put it there, for the message
    path: str | None = None  # the file of ``line``, when it is not the file reviewed

    def evidence(self) -> str:
        """``why`` and where: "`torch.zeros` without `device=`, line 12"."""
        where = f"line {self.line}" if self.path is None else f"{self.path}:{self.line}"
        return f"{self.why}, {where}"


@dataclass(frozen=True)
class TensorInfo:
    """What is known of a tensor (or of a module's parameters, or of every
    element of a container of tensors)."""

    place: Place | None = None
    dims: tuple[Dim, ...] | None = None
    batched: bool = False  # at least one dimension, when ``dims`` is unknown
    alias: str | None = None  # the dotted name of the tensor whose storage it shares
    alias_line: int = 0  # where the view was taken
    #: How: "assigned" (``b = a``), "detach", "data", "view", "slice".
    alias_kind: str | None = None
    #: Where the last size-1 dimension came from, when it is one a loss or a
    #: comparison must not broadcast against a vector: "keepdim", "linear-1".
    unit_dim: str | None = None
    container: bool = False  # a tuple, list or dict of such tensors
    #: A container's items by position, when each is known (a batch's images, labels).
    elements: tuple[TensorInfo, ...] | None = None

    @property
    def rank(self) -> int | None:
        return None if self.dims is None else len(self.dims)

    @property
    def nonscalar(self) -> bool:
        """Known to have at least one dimension."""
        return self.batched or bool(self.dims)

    @property
    def device(self) -> str | None:
        return None if self.place is None else self.place.device

    def but(self, **changes: object) -> TensorInfo:
        return replace(self, **changes)  # type: ignore[arg-type]

    def element(self, index: int | None = None) -> TensorInfo:
        """What the container's item ``index`` holds (any item: None)."""
        items = self.elements
        if items is not None and index is not None and -len(items) <= index < len(items):
            return items[index]
        return self.but(container=False, elements=None)


NOTHING = TensorInfo()


def combined_place(places: list[Place | None]) -> Place | None:
    """The device of an op's result: the accelerator if any operand is on it
    (the op either runs there or fails), the CPU if every operand is known to
    be on it, else unknown."""
    known = [place for place in places if place is not None]
    accelerated = next((p for p in known if p.device == ACCEL), None)
    if accelerated is not None:
        return accelerated
    if known and len(known) == len(places):
        return known[0]
    return None


def mixes_devices(infos: list[TensorInfo]) -> tuple[TensorInfo, TensorInfo] | None:
    """(the CPU operand, the accelerator operand) when an op that needs its
    operands on one device gets a CPU tensor with dimensions and an
    accelerator tensor. A 0-dim CPU tensor is allowed (PyTorch treats it as a
    number), and so is a CPU tensor of unknown rank: only evidence counts."""
    cpu = next((i for i in infos if i.device == CPU and i.nonscalar), None)
    accelerated = next((i for i in infos if i.device == ACCEL), None)
    if cpu is None or accelerated is None:
        return None
    return cpu, accelerated


# -- shapes -------------------------------------------------------------------------
def broadcast(
    left: tuple[Dim, ...] | None, right: tuple[Dim, ...] | None
) -> tuple[Dim, ...] | None:
    """The shape of an element-wise result (None when either rank is unknown)."""
    if left is None or right is None:
        return None
    width = max(len(left), len(right))
    padded_left = (1,) * (width - len(left)) + left
    padded_right = (1,) * (width - len(right)) + right
    out: list[Dim] = []
    for a, b in zip(padded_left, padded_right, strict=True):
        if a == 1:
            out.append(b)
        elif b == 1 or a == b:
            out.append(a)
        else:
            out.append(a if b is None else b if a is None else None)
    return tuple(out)


def mutual_broadcast(left: TensorInfo, right: TensorInfo) -> bool:
    """Whether an element-wise op between the two expands *both*: a column
    ``(N, 1)`` whose size-1 dimension came from a reduction with
    ``keepdim=True`` or a layer with one output, against a vector ``(N,)``,
    gives an ``(N, N)`` matrix. Deliberate outer products are written with
    explicit ``[:, None]``/``unsqueeze`` and carry no such origin."""
    for column, vector in ((left, right), (right, left)):
        if column.unit_dim is None or column.dims is None or vector.dims is None:
            continue
        is_column = len(column.dims) == 2 and column.dims[1] == 1
        if is_column and len(vector.dims) == 1 and vector.dims[0] != 1:
            return True
    return False


def reduced(dims: tuple[Dim, ...] | None, dim: int | None, keepdim: bool) -> tuple[Dim, ...] | None:
    """The shape after a reduction over ``dim`` (None: over everything)."""
    if dim is None:
        return ()  # x.sum(), x.mean(), x.max(): a 0-dim tensor
    if dims is None:
        return None
    position = dim if dim >= 0 else len(dims) + dim
    if not 0 <= position < len(dims):
        return None
    if keepdim:
        return (*dims[:position], 1, *dims[position + 1 :])
    return (*dims[:position], *dims[position + 1 :])


def unsqueezed(dims: tuple[Dim, ...] | None, dim: int) -> tuple[Dim, ...] | None:
    if dims is None:
        return None
    position = dim if dim >= 0 else len(dims) + 1 + dim
    if not 0 <= position <= len(dims):
        return None
    return (*dims[:position], 1, *dims[position:])


def squeezed(dims: tuple[Dim, ...] | None, dim: int | None) -> tuple[Dim, ...] | None:
    """``squeeze(dim)``: drops that dimension if it is known to be 1, keeps it if
    known not to be; ``squeeze()``: drops every size-1 dimension (unknown sizes
    make the rank unknown; symbolic sizes are taken to be more than 1)."""
    if dims is None:
        return None
    if dim is None:
        if any(size is None for size in dims):
            return None
        return tuple(size for size in dims if size != 1)
    position = dim if dim >= 0 else len(dims) + dim
    if not 0 <= position < len(dims):
        return None
    size = dims[position]
    if size == 1:
        return (*dims[:position], *dims[position + 1 :])
    return None if size is None else dims


def indexed(dims: tuple[Dim, ...] | None, items: list[str]) -> tuple[Dim, ...] | None:
    """The shape after basic indexing with ``items``, each ``"int"`` (drops a
    dimension), ``"slice"`` (keeps it), ``"none"`` (adds one), ``"..."``, or
    ``"other"`` (advanced indexing: the shape is not worked out)."""
    if dims is None or "other" in items:
        return None
    if "..." in items:
        if items.count("...") > 1:
            return None
        at = items.index("...")
        consumed = sum(1 for item in items if item in ("int", "slice"))
        fill = len(dims) - consumed
        if fill < 0:
            return None
        items = [*items[:at], *(["slice"] * fill), *items[at + 1 :]]
    out: list[Dim] = []
    position = 0
    for item in items:
        if item == "none":
            out.append(1)
            continue
        if position >= len(dims):
            return None  # more indices than dimensions: IndexError at run time
        if item == "slice":
            out.append(dims[position])
        position += 1
    out.extend(dims[position:])
    return tuple(out)


def too_many_indices(dims: tuple[Dim, ...] | None, items: list[str]) -> bool:
    """Whether basic indexing uses more indices than the tensor has dimensions
    (``loss.mean()[0]``, ``x.sum(1)[:, 0]`` on a vector): an IndexError."""
    if dims is None or "other" in items or "..." in items:
        return False
    return sum(1 for item in items if item in ("int", "slice")) > len(dims)
