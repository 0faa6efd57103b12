"""The plain data the project index is made of: what each file contributes
(:class:`ModuleSummary` and the facts in it, stored as JSON by the cache) and
what the index derives from them (:class:`ClassModel`, :class:`CallSite`,
:class:`TorchRange`). No behaviour beyond (de)serialisation lives here, so the
engine, the rules and the index can all speak of these records.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import MISSING, asdict, dataclass, field, fields
from typing import Any

Json = Any

TOP_LEVEL = "<module>"  # the summary's pseudo-function of top-level code
#: Names that hold the parsed command line in scripts that use argparse.
NAMESPACE_NAMES = frozenset({"args", "opt", "opts", "options"})


@dataclass
class ArgFact:
    """A value passed, returned or stored, as far as the file shows."""

    kind: str | None = None
    origin: str | None = None  # written qualname of what produced it
    name: str | None = None  # the dotted name passed ("train_loader")
    literal: Json = None  # True/False/None/numbers/strings, as written
    activation: str | None = None
    line: int | None = None  # where the value (or its activation) was made
    guessed: bool = False  # known only from the name it has (`model`, `loader`)
    flags: list[str] = field(default_factory=list)  # Value.flags (dropout, opaque, ...)
    #: The items of a tuple or list written out (``return loss, logits``).
    elements: list[ArgFact] | None = None
    #: A tensor's device, with the evidence, the origin of a size-1 last
    #: dimension and the rank: [device or "", line, why, has dimensions,
    #: "linear-1" or "", rank or -1].
    tensor: list[str | int | bool] | None = None
    #: A dict literal's string keys and what each holds, as SaveFact.keys
    #: (``save_checkpoint({"epoch": e, "best": best}, ...)``).
    keys: dict[str, str] | None = None


@dataclass
class CallFact:
    #: How the callee is named: ["name", "f"] | ["written", "engine.train_one_epoch"]
    #: | ["self", "Class", "method"] | ["value", "<written class>", "method"].
    ref: list[str]
    line: int
    col: int
    branch: list[tuple[str, bool]]
    args: list[ArgFact] = field(default_factory=list)
    keywords: dict[str, ArgFact] = field(default_factory=dict)
    no_grad: bool = False
    in_loop: bool = False


@dataclass
class LoopFact:
    iterated: str | None  # the dotted name iterated over
    effects: list[str]  # direct effects of the calls inside
    calls: list[int]  # indices into FunctionFact.calls of the calls inside


@dataclass
class FunctionFact:
    qualname: str  # "f", "Class.method" or TOP_LEVEL
    line: int
    params: list[str] = field(default_factory=list)
    defaults: dict[str, ArgFact] = field(default_factory=dict)
    #: Ordered direct effects: [effect, line, col, branch].
    events: list[tuple[str, int, int, list[tuple[str, bool]]]] = field(default_factory=list)
    calls: list[CallFact] = field(default_factory=list)
    #: param -> what the function does with it: "call", "module", "optimizer"
    param_uses: dict[str, list[str]] = field(default_factory=dict)
    loops: list[LoopFact] = field(default_factory=list)
    no_grad: bool = False  # decorated with no_grad/inference_mode
    returns: ArgFact | None = None
    class_name: str | None = None
    #: Functions it starts in new processes (``mp.spawn(worker, ...)``), as
    #: CallFact refs: what they do happens when this function runs.
    spawns: list[list[str]] = field(default_factory=list)


@dataclass
class ClassFact:
    name: str
    line: int
    bases: list[str]  # written qualnames ("<local>.Base" for this file)
    layers: list[str] = field(default_factory=list)  # nn constructors used in the class
    attributes: dict[str, ArgFact] = field(default_factory=dict)  # self.<attr> in __init__
    #: The activation each element of forward's return value ends in.
    returns: list[ArgFact] = field(default_factory=list)
    methods: list[str] = field(default_factory=list)
    #: ``def train(self, ...)``: its parameters and whether it still sets the mode.
    train_params: list[str] | None = None
    train_required: int = 0  # parameters without a default
    train_sets_mode: bool = False
    #: Attributes whose parameters every instance freezes (in __init__ or a
    #: method __init__ calls): `for p in self.resnet.parameters(): p.requires_grad = False`.
    frozen: list[str] = field(default_factory=list)
    #: Parameters of __init__ without a default (a no-argument build needs 0).
    init_required: int = 0
    #: The first input layer built in __init__ and its leading integer arguments:
    #: ["torch.nn.Conv2d", 3, 64] (what an example input must look like).
    first_layer: list[str | int] = field(default_factory=list)
    #: Whether a method moves a tensor (``.to(...)``, ``.cuda()``, ``device=``):
    #: a dataset that does may hand out tensors on the device.
    moves_tensors: bool = False
    #: Whether ``forward`` moves one of its inputs (``x = x.to(self.device)``):
    #: calling it with CPU tensors is then fine.
    moves_inputs: bool = False
    #: Whether the class changes how it is moved (defines ``_apply``, ``to`` or
    #: ``cuda``): its plain tensor attributes may move with it.


@dataclass
class SaveFact:
    line: int
    path: str | None  # the literal file name, when written as a string
    path_text: str
    #: What is saved, when not a dict: "module", "optimizer", "namespace",
    #: "array", "state", "other", or "param:<name>" for a parameter of the
    #: enclosing function (the index asks its callers what they pass).
    whole: str | None
    keys: dict[str, str] = field(default_factory=dict)  # dict key -> what it holds
    function: str | None = None  # qualname of the enclosing function
    #: The file name the path expression ends in (``"ckpt.pt"`` of
    #: ``os.path.join(out, "ckpt.pt")``), when the code writes it out.
    file_name: str | None = None
    #: Where the saved dict was built, when it was built first (``state = {...}``).
    payload_line: int | None = None


@dataclass
class LoadFact:
    """A ``torch.load`` of the file: what it reads back, and how."""

    line: int
    path_text: str
    file_name: str | None  # as SaveFact.file_name
    keys: list[str] = field(default_factory=list)  # items read: ckpt["args"]
    #: The file name with its formatted parts as ``{}`` (``{}_actor{}.pth``).
    file_template: str | None = None
    #: "true"/"false" when ``weights_only=`` is given as a literal, "given" when
    #: as an expression (the caller decides), None when left to the default.
    weights_only: str | None = None


#: Configuration libraries whose objects the weights-only unpickler refuses.
CONFIG_LIBRARIES = ("yacs", "omegaconf", "easydict", "ml_collections", "mmcv", "mmengine")
#: SaveFact kind of a value named like a configuration (``"config": config``):
#: a configuration object when the project imports one of CONFIG_LIBRARIES.
MAYBE_CONFIG = "config?"

#: ``ModuleSummary.written_for`` mark of a file that falls back to the CPU without CUDA.
CUDA_OPTIONAL = "cuda-optional"
#: ``ModuleSummary.written_for`` mark of a file that calls ``.cuda()`` on no
#: branch: whatever it tests, it does not run without CUDA.
CUDA_REQUIRED = "cuda-required"


@dataclass
class ModuleSummary:
    path: str
    imports: dict[str, str] = field(default_factory=dict)  # local name -> written qualname
    star_imports: list[str] = field(default_factory=list)
    classes: dict[str, ClassFact] = field(default_factory=dict)
    functions: dict[str, FunctionFact] = field(default_factory=dict)
    saves: list[SaveFact] = field(default_factory=list)
    loads: list[LoadFact] = field(default_factory=list)
    entry_point: bool = False
    #: Models of the file's classes moved to the device: [class as written, line].
    placed: list[tuple[str, int]] = field(default_factory=list)
    #: What the code shows of the library versions and machines it is written for,
    #: e.g. "gym>=0.26" where it unpacks ``env.step()`` into five values,
    #: "cuda-optional" where it falls back to the CPU without CUDA.
    written_for: list[str] = field(default_factory=list)
    #: The libraries the file pickles files with ("pickle", "dill", "joblib").
    pickles_with: list[str] = field(default_factory=list)
    parsed: bool = True
    #: A hash of the source it summarises: a summary is a function of its text.
    source_hash: str = ""

    def to_json(self) -> Json:
        # Most argument facts are nearly empty: written out in full they made a
        # cache entry 4x larger, and decoding the JSON was most of a warm run.
        return asdict(self, dict_factory=compact_arg_fact)

    @classmethod
    def from_json(cls, data: Json) -> ModuleSummary:
        def arg(item: Json) -> ArgFact | None:
            return None if item is None else _arg(item)

        def call(item: Json) -> CallFact:
            return CallFact(
                ref=item["ref"],
                line=item["line"],
                col=item["col"],
                branch=[(b[0], b[1]) for b in item["branch"]],
                args=[_arg(a) for a in item["args"]],
                keywords={k: _arg(a) for k, a in item["keywords"].items()},
                no_grad=item["no_grad"],
                in_loop=item["in_loop"],
            )

        def function(item: Json) -> FunctionFact:
            return FunctionFact(
                qualname=item["qualname"],
                line=item["line"],
                params=item["params"],
                defaults={k: _arg(a) for k, a in item["defaults"].items()},
                events=[(e[0], e[1], e[2], [(b[0], b[1]) for b in e[3]]) for e in item["events"]],
                calls=[call(c) for c in item["calls"]],
                param_uses=item["param_uses"],
                loops=[LoopFact(**loop) for loop in item["loops"]],
                no_grad=item["no_grad"],
                returns=arg(item["returns"]),
                class_name=item["class_name"],
                spawns=item["spawns"],
            )

        def klass(item: Json) -> ClassFact:
            return ClassFact(
                **{
                    **item,
                    "attributes": {k: _arg(a) for k, a in item["attributes"].items()},
                    "returns": [_arg(a) for a in item["returns"]],
                }
            )

        return cls(
            path=data["path"],
            imports=data["imports"],
            star_imports=data["star_imports"],
            classes={k: klass(v) for k, v in data["classes"].items()},
            functions={k: function(v) for k, v in data["functions"].items()},
            saves=[SaveFact(**s) for s in data["saves"]],
            loads=[LoadFact(**item) for item in data["loads"]],
            entry_point=data["entry_point"],
            placed=[(str(item[0]), int(item[1])) for item in data["placed"]],
            written_for=list(data["written_for"]),
            pickles_with=list(data["pickles_with"]),
            parsed=data["parsed"],
            source_hash=data["source_hash"],
        )

    def digest(self) -> str:
        """Changes whenever the summary can: with the text it was made from."""
        return self.source_hash


_ARG_DEFAULTS: dict[str, Any] = {
    f.name: f.default for f in fields(ArgFact) if f.default is not MISSING
}
_ARG_FIELDS = frozenset(f.name for f in fields(ArgFact))


def compact_arg_fact(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``asdict``'s dict factory: an ArgFact's fields at their defaults are left
    out (``_arg(item)`` restores them); other dataclasses are kept whole."""
    if {key for key, _ in pairs} != _ARG_FIELDS:
        return dict(pairs)
    # Identity, not equality, for the defaults: a literal False or 0 is no None.
    return {
        key: value
        for key, value in pairs
        if not (value is _ARG_DEFAULTS.get(key, MISSING) or (key == "flags" and value == []))
    }


@dataclass(frozen=True)
class TorchRange:
    """The torch versions a project declares it runs on (None: unbounded/unknown)."""

    minimum: tuple[int, int] | None = None
    below: tuple[int, int] | None = None  # exclusive upper bound
    source: str | None = None  # "requirements.txt: torch>=2.1"

    def allows(self, version: tuple[int, int]) -> bool:
        """Whether the project may run on ``version`` (or later)."""
        return self.below is None or self.below > version


@dataclass
class ClassModel:
    """An nn.Module (or plain) class, flattened across its project bases and parts."""

    id: str  # "module:Class"
    fact: ClassFact
    is_module: bool
    dropout: bool
    batchnorm: bool
    unknown: bool  # some base or part could not be resolved: it may have either
    train_override: bool  # defines `train` that is not nn.Module.train(mode)
    #: Frozen (requires_grad=False) attributes with batch norm inside.
    frozen_batchnorm: tuple[str, ...] = ()


@dataclass
class CallSite:
    caller: str  # id of the calling function ("module:f" or "module:<module>")
    path: str
    fact: CallFact
    #: Whether an eval() precedes it in the caller (on a compatible branch); asked
    #: of few sites, so worked out on first use (the call graph alone is built for
    #: every cache-key digest, warm runs included).
    _after_eval: Callable[[], bool] = field(repr=False, compare=False)
    _known: bool | None = field(default=None, repr=False, compare=False)

    @property
    def after_eval(self) -> bool:
        if self._known is None:
            self._known = self._after_eval()
        return self._known


def _arg(item: Json) -> ArgFact:
    """An ArgFact from its JSON (its tuple items too)."""
    elements = item.get("elements")
    if elements is None:
        return ArgFact(**item)
    return ArgFact(**{**item, "elements": [_arg(element) for element in elements]})
