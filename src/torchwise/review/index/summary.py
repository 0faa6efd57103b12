"""One file's contribution to the project index: what other files may need to
know about it, in plain data that the cache stores as JSON.

A :class:`ModuleSummary` lists the file's imports, its classes (bases, layers,
the activation their output ends in, a ``train`` override), its functions
(what they do, what they do to their parameters, the calls they make with the
values they pass), its ``torch.save`` sites and whether it is a script. The
:class:`Summarizer` builds it by riding the engine's pass like a rule, so
names and values resolve exactly as the rules see them. Names stay as the file
wrote them ("models.Net", ".utils.seed_all"); :mod:`.project` resolves them
across files.
"""

from __future__ import annotations

import ast
import builtins
import hashlib
from typing import Any

from torchwise.review.engine import effects as E
from torchwise.review.engine import facts as F
from torchwise.review.engine import gym
from torchwise.review.engine.context import Context
from torchwise.review.engine.syntax import (
    file_name,
    file_template,
    tests_cuda_availability,
    unconditional_cuda_call,
)
from torchwise.review.index.records import (
    CONFIG_LIBRARIES,
    CUDA_OPTIONAL,
    CUDA_REQUIRED,
    MAYBE_CONFIG,
    NAMESPACE_NAMES,
    TOP_LEVEL,
    ArgFact,
    CallFact,
    ClassFact,
    FunctionFact,
    LoadFact,
    LoopFact,
    ModuleSummary,
    SaveFact,
)
from torchwise.review.registry import Rule

_BUILTINS = frozenset(dir(builtins))


def _module_binds(ctx: Context, name: str) -> bool:
    """Whether the module may give ``name`` a meaning of its own: it defines or
    imports it, or star-imports a module that might."""
    module = ctx.scopes[0]
    if name in module.functions or name in module.classes or name in module.imports:
        return True
    return ctx.module.star_imports


def arg_fact(ctx: Context, expr: ast.expr | None) -> ArgFact:
    if expr is None:
        return ArgFact()
    fact = ArgFact(name=ctx.dotted(expr))
    if isinstance(expr, (ast.Tuple, ast.List)) and 1 < len(expr.elts) <= 8:
        fact.elements = [arg_fact(ctx, element) for element in expr.elts]
    if isinstance(expr, ast.Constant) and isinstance(
        expr.value, (bool, int, float, str, type(None))
    ):
        fact.literal = expr.value
    if isinstance(expr, ast.Dict) and expr.keys and len(expr.keys) <= 32:
        keys = [key.value for key in expr.keys if isinstance(key, ast.Constant)]
        if len(keys) == len(expr.keys) and all(isinstance(key, str) for key in keys):
            fact.keys = {
                str(key): _saved_kind(ctx, item)
                for key, item in zip(keys, expr.values, strict=True)
            }
    value = ctx.value_of(expr)
    if value is not None:
        fact.kind, fact.origin, fact.activation = value.kind, value.origin, value.activation
        node = value.node
        fact.line = getattr(node, "lineno", None)
        if value.activation_at is not None and value.activation_at[0] is None:
            fact.line = value.activation_at[1]  # where the activation is applied
        fact.guessed = "guessed" in value.flags
        fact.flags = sorted(value.flags - {"guessed"})
        info = value.tensor
        known = info is not None and (
            info.place is not None or info.unit_dim is not None or info.dims is not None
        )
        if info is not None and known:
            place = info.place
            fact.tensor = [
                "" if place is None else place.device,
                0 if place is None else place.line,
                "" if place is None else place.why,
                info.nonscalar,
                info.unit_dim or "",
                -1 if info.dims is None else len(info.dims),
            ]
    return fact


#: Calls that write a pickle file, by the library that reads it back.
_PICKLE_WRITERS = {
    "pickle.dump": "pickle", "_pickle.dump": "pickle", "cPickle.dump": "pickle",
    "dill.dump": "dill", "cloudpickle.dump": "cloudpickle", "joblib.dump": "joblib",
    "pandas.to_pickle": "pandas",
}  # fmt: skip
#: Calls that run the function they are given (its first argument, or
#: ``target=``): in new processes, or as the program's entry point.
_SPAWNS = {
    "torch.multiprocessing.spawn", "torch.multiprocessing.start_processes",
    "multiprocessing.Process", "torch.multiprocessing.Process",
    "multiprocessing.context.Process", "absl.app.run", "tensorflow.compat.v1.app.run",
    "fire.Fire", "accelerate.notebook_launcher",
}  # fmt: skip


def spawned_function(call: ast.Call, ctx: Context) -> list[str] | None:
    """The ref of the function ``mp.spawn(worker, ...)``, ``Process(target=worker)``
    or ``app.run(main)`` runs, when it may be a project function."""
    qualname = ctx.call_name(call)
    if qualname not in _SPAWNS:
        return None
    target = next((k.value for k in call.keywords if k.arg in {"fn", "target"}), None)
    if target is None and call.args and not qualname.endswith("Process"):
        target = call.args[0]  # spawn(fn, ...), start_processes(fn, ...)
    if target is None:
        return None
    return call_ref(ctx, ast.Call(func=target, args=[], keywords=[]))


def call_ref(ctx: Context, call: ast.Call) -> list[str] | None:
    """How ``call`` names a callee that may be a project function (see CallFact.ref)."""
    func = call.func
    qualname = ctx.call_name(call)
    if qualname is not None:
        if qualname.startswith(("torch.", "numpy.", "math.", "os.", "sys.", "builtins.")):
            return None
        return ["written", qualname]
    if isinstance(func, ast.Name):
        if func.id in _BUILTINS and not _module_binds(ctx, func.id):
            return None  # `len(x)`, `dict(...)`: never a project function
        return ["name", func.id]
    if not isinstance(func, ast.Attribute):
        return None
    receiver = func.value
    if isinstance(receiver, ast.Name) and receiver.id == "self" and ctx.classes:
        function = ctx.function
        if function is not None and function.class_name is not None:
            return ["self", function.class_name, func.attr]
    value = ctx.value_of(receiver)
    if (
        value is not None
        and value.origin is not None
        and value.kind in (F.MODULE, F.INSTANCE, None)
    ):
        if value.kind == F.MODULE and func.attr in {"train", "eval", "to", "cuda", "cpu"}:
            return None  # mode and device setters of an nn.Module
        if value.origin.startswith(("torch.", "numpy.")):
            return None
        return ["value", value.origin, func.attr]
    return None


class Summarizer(Rule):
    """Rides the engine pass (never registered) and fills a ModuleSummary."""

    code = "TW000"
    name = "summary"

    def __init__(self, path: str) -> None:
        self.summary = ModuleSummary(path=path)
        self.call_facts: dict[ast.Call, CallFact] = {}
        self.returns: dict[int, ArgFact] = {}  # id(function node) -> first returned value
        self.forward_returns: dict[str, list[ArgFact]] = {}
        # (id of the function or 0, name) -> what each key of the dict literal it
        # was last assigned holds: `state = {"model": model, ...}` then torch.save(state)
        self.dicts: dict[tuple[int, str], tuple[dict[str, str], int]] = {}
        # (id of the function or 0, name) -> the string it was last assigned:
        # `filename = "ckpt.pth"` then torch.save(state, filename)
        self.strings: dict[tuple[int, str], str] = {}

    def visit_Assign(self, node: ast.Assign, ctx: Context) -> None:
        mark = gym.written_for(node, ctx)
        if mark is not None and mark not in self.summary.written_for:
            self.summary.written_for.append(mark)
        value = node.value
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            owner = id(ctx.function) if ctx.function is not None else 0
            for target in node.targets:
                if isinstance(target, ast.Name):
                    self.strings[(owner, target.id)] = value.value  # a checkpoint's path
            return
        if isinstance(value, ast.Dict) and all(key is not None for key in value.keys):
            kinds = {
                key.value: _saved_kind(ctx, item)
                for key, item in zip(value.keys, value.values, strict=True)
                if isinstance(key, ast.Constant) and isinstance(key.value, str)
            }
        elif (
            isinstance(value, ast.Call)
            and isinstance(value.func, ast.Name)
            and value.func.id == "dict"
            and not value.args
            and all(item.arg for item in value.keywords)
        ):
            kinds = {item.arg or "": _saved_kind(ctx, item.value) for item in value.keywords}
        else:
            return
        owner = id(ctx.function) if ctx.function is not None else 0
        for target in node.targets:
            if isinstance(target, ast.Name):
                self.dicts[(owner, target.id)] = (kinds, node.lineno)

    # -- module-level facts -------------------------------------------------
    def visit_If(self, node: ast.If, ctx: Context) -> None:
        if ctx.function is None and "__main__" in ctx.text(node.test):
            self.summary.entry_point = True
        self._note_cuda_fallback(node.test, ctx)

    def visit_IfExp(self, node: ast.IfExp, ctx: Context) -> None:
        self._note_cuda_fallback(node.test, ctx)

    def _note_cuda_fallback(self, test: ast.expr, ctx: Context) -> None:
        """A test of whether CUDA is there (``torch.cuda.is_available()``, ``args.no_cuda``,
        ``args.cuda``): the file runs on the CPU too. ``x.is_cuda`` follows a tensor and
        ``hasattr(torch.cuda.amp, "autocast")`` a version: neither is a fallback."""
        marks = self.summary.written_for
        if CUDA_OPTIONAL not in marks and tests_cuda_availability(ctx.text(test)):
            marks.append(CUDA_OPTIONAL)

    def visit_ImportFrom(self, node: ast.ImportFrom, ctx: Context) -> None:
        if ctx.function is None and any(alias.name == "*" for alias in node.names):
            module = "." * node.level + (node.module or "")
            self.summary.star_imports.append(module)

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        marks = self.summary.written_for
        if CUDA_REQUIRED not in marks and unconditional_cuda_call(node, ctx.parents):
            marks.append(CUDA_REQUIRED)
        library = _PICKLE_WRITERS.get(ctx.call_name(node) or "")
        if library is not None and library not in self.summary.pickles_with:
            self.summary.pickles_with.append(library)
        ref = call_ref(ctx, node)
        if ref is not None:
            call_fact = CallFact(
                ref=ref,
                line=node.lineno,
                col=node.col_offset,
                branch=list(ctx.branch),
                args=[arg_fact(ctx, arg) for arg in node.args if not isinstance(arg, ast.Starred)],
                keywords={k.arg: arg_fact(ctx, k.value) for k in node.keywords if k.arg},
                no_grad=ctx.in_no_grad,
                in_loop=bool(ctx.loops),
            )
            self._dict_keys(node, call_fact, ctx)
            self.call_facts[node] = call_fact
        if ctx.call_name(node) == "torch.save" and node.args:
            fact = save_fact(ctx, node)
            if fact.file_name is None:
                target = node.args[1] if len(node.args) > 1 else None
                fact.file_name = self._named_file(target, ctx)
            saved = node.args[0]
            if isinstance(saved, ast.Name) and not fact.keys:
                owner = id(ctx.function) if ctx.function is not None else 0
                known = self.dicts.get((owner, saved.id))
                if known is not None:
                    fact.keys, fact.whole = dict(known[0]), None
                    fact.payload_line = known[1]
            function = ctx.function
            if function is not None:
                fact.function = (
                    f"{function.class_name}.{function.name}"
                    if function.class_name
                    else function.name
                )
            self.summary.saves.append(fact)

    def _dict_keys(self, node: ast.Call, fact: CallFact, ctx: Context) -> None:
        """A name that holds a dict literal, passed on (``save_on_master(to_save,
        path)``): the callee sees its keys, as for a literal written in the call."""
        owner = id(ctx.function) if ctx.function is not None else 0
        positional = [arg for arg in node.args if not isinstance(arg, ast.Starred)]
        for expr, arg in zip(positional, fact.args, strict=False):
            if isinstance(expr, ast.Name) and arg.keys is None:
                known = self.dicts.get((owner, expr.id))
                if known is not None:
                    arg.keys = dict(known[0])

    def _named_file(self, path: ast.expr | None, ctx: Context) -> str | None:
        """The file name of a path held by a name assigned a string literal."""
        if not isinstance(path, ast.Name):
            return None
        owner = id(ctx.function) if ctx.function is not None else 0
        text = self.strings.get((owner, path.id), self.strings.get((0, path.id)))
        return None if text is None else file_name(ast.Constant(text))

    def visit_Return(self, node: ast.Return, ctx: Context) -> None:
        function = ctx.function
        if function is None or node.value is None:
            return
        if function.name == "forward" and function.in_module_class and function.class_name:
            elements = node.value.elts if isinstance(node.value, ast.Tuple) else [node.value]
            facts = [arg_fact(ctx, element) for element in elements]
            self.forward_returns.setdefault(function.class_name, facts)
        self.returns.setdefault(id(function.node), arg_fact(ctx, node.value))

    # -- regions --------------------------------------------------------------
    def leave_function(self, function: F.FunctionFacts, ctx: Context) -> None:
        qualname = function.name
        if function.class_name is not None:
            qualname = f"{function.class_name}.{function.name}"
        if len(ctx.functions) > 0:
            return  # a nested function is part of its parent
        fact = self._function(qualname, function, function.calls, function.loops, ctx)
        fact.no_grad = function.no_grad
        fact.class_name = function.class_name
        fact.returns = self.returns.get(id(function.node))
        node = function.node
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            positional = [*node.args.posonlyargs, *node.args.args]
            fact.params = [a.arg for a in [*positional, *node.args.kwonlyargs]]
            defaults = node.args.defaults
            for arg, default in zip(
                positional[len(positional) - len(defaults) :], defaults, strict=False
            ):
                fact.defaults[arg.arg] = arg_fact(ctx, default)
            for arg, kw_default in zip(node.args.kwonlyargs, node.args.kw_defaults, strict=False):
                if kw_default is not None:
                    fact.defaults[arg.arg] = arg_fact(ctx, kw_default)
        self.summary.functions[qualname] = fact

    def leave_class(self, frame: Any, ctx: Context) -> None:
        node: ast.ClassDef = frame.node
        if len(ctx.classes) > 1 or ctx.function is not None:
            return  # nested classes are not importable by name
        bases = []
        for base in node.bases:
            written = ctx.qualname(base) or ctx.dotted(base)
            if written is not None:
                bases.append(
                    written if "." in written or written.startswith("<") else f"<local>.{written}"
                )
        fact = ClassFact(name=node.name, line=node.lineno, bases=bases)
        fact.attributes = {
            attr: ArgFact(
                kind=v.kind,
                origin=v.origin,
                activation=v.activation,
                line=getattr(v.node, "lineno", None),
                guessed="guessed" in v.flags,
                flags=sorted(v.flags - {"guessed"}),
            )
            for attr, v in frame.attributes.items()
        }
        fact.returns = self.forward_returns.get(node.name, [])
        methods = [f for f in ctx.module.functions if f.class_name == node.name]
        fact.methods = sorted({f.name for f in methods})
        layers: set[str] = set()
        for method in methods:
            for call in method.calls:
                qualname = call.qualname or ""
                if qualname.startswith("torch.nn.") or qualname.startswith("<local>."):
                    layers.add(qualname)
                elif call.target is None and qualname and "." in qualname:
                    layers.add(qualname)  # a library layer or model: resolved or not
            if method.name == "train" and isinstance(method.node, ast.FunctionDef):
                args = method.node.args
                fact.train_params = [a.arg for a in [*args.posonlyargs, *args.args]][1:]
                fact.train_required = len(fact.train_params) - len(args.defaults)
                first = fact.train_params[0] if fact.train_params else None
                fact.train_sets_mode = any(
                    _sets_mode(call, first) for call in method.calls
                ) or _assigns_training(method.node)
        fact.layers = sorted(layers)
        fact.moves_tensors = any(
            _moves_a_tensor(call) for method in methods for call in method.calls
        )
        forward = next((m for m in methods if m.name == "forward"), None)
        if forward is not None:
            inputs = set(forward.params) - {"self"}
            fact.moves_inputs = any(
                c.method in {"to", "cuda"} and (c.receiver or "").split(".", 1)[0] in inputs
                for c in forward.calls
            )
        fact.frozen = _frozen_at_construction(node.name, methods, ctx)
        init = next((m for m in methods if m.name == "__init__"), None)
        if init is not None and isinstance(init.node, ast.FunctionDef):
            arguments = init.node.args
            fact.init_required = len(arguments.args) - 1 - len(arguments.defaults)
            fact.first_layer = _first_layer(init)
        self.summary.classes[node.name] = fact

    def leave_module(self, module: F.ModuleFacts, ctx: Context) -> None:
        inside = {call for function in module.functions for call in function.calls}
        top = [call for call in module.calls if call not in inside]
        self.summary.functions[TOP_LEVEL] = self._function(TOP_LEVEL, None, top, module.loops, ctx)
        self.summary.imports = {
            name: target for name, target in ctx.scopes[0].imports.items() if target
        }
        self.summary.placed = list(dict.fromkeys(module.placed))
        self.summary.loads = [_load_fact(ctx, load) for load in module.loads.values()]
        for load, fact in zip(module.loads.values(), self.summary.loads, strict=True):
            if fact.file_name is None:
                call = load.node
                fact.file_name = self._named_file(call.args[0] if call.args else None, ctx)

    def _function(
        self,
        qualname: str,
        function: F.FunctionFacts | None,
        calls: list[F.CallEvent],
        loops: list[F.LoopFacts],
        ctx: Context,
    ) -> FunctionFact:
        line = getattr(function.node, "lineno", 1) if function else 1
        fact = FunctionFact(qualname=qualname, line=line)
        params = set(function.params) if function else set()
        index: dict[int, int] = {}
        for call in calls:
            for effect in E.direct_effects(call):
                fact.events.append(
                    (effect, call.node.lineno, call.node.col_offset, list(call.branch))
                )
            spawned = spawned_function(call.node, ctx)
            if spawned is not None:
                fact.spawns.append(spawned)
            found = self.call_facts.get(call.node)
            if found is not None:
                index[id(call)] = len(fact.calls)
                fact.calls.append(found)
            root = (call.receiver or "").split(".", 1)[0]
            if root in params and call.method is not None:
                use = "optimizer" if call.method in {"step", "zero_grad"} else "module"
                if call.method in _MODULE_METHODS or use == "optimizer":
                    _add(fact.param_uses, root, use)
            func = call.node.func
            if isinstance(func, ast.Name) and func.id in params:
                _add(fact.param_uses, func.id, "call")
        for setting in ctx.module.settings:
            if (
                setting.function is function
                and setting.value is not False
                and (setting.name != "benchmark")
            ):
                node = setting.node
                line, col = getattr(node, "lineno", 1), getattr(node, "col_offset", 0)
                fact.events.append((E.DETERMINISTIC, line, col, list(setting.branch)))
        for loop in loops:
            effects = sorted({e for call in loop.calls for e in E.direct_effects(call)})
            inner = [index[id(call)] for call in loop.calls if id(call) in index]
            fact.loops.append(LoopFact(loop.iterated, effects, inner))
        return fact


def _moves_a_tensor(call: F.CallEvent) -> bool:
    """``x.to(...)``, ``x.cuda()``, ``torch.zeros(..., device=d)``."""
    if call.method in {"to", "cuda", "pin_memory"}:
        return True
    return any(item.arg == "device" for item in call.node.keywords)


_INPUT_LAYERS = {
    "torch.nn.Conv1d", "torch.nn.Conv2d", "torch.nn.Conv3d", "torch.nn.Linear",
    "torch.nn.Embedding", "torch.nn.LSTM", "torch.nn.GRU", "torch.nn.RNN",
}  # fmt: skip


def _first_layer(init: F.FunctionFacts) -> list[str | int]:
    """The first input layer ``__init__`` builds (a torch layer, or a part of the
    project's own), with its leading integer arguments."""
    for call in sorted(init.calls, key=lambda c: (c.node.lineno, c.node.col_offset)):
        if call.qualname not in _INPUT_LAYERS and not call.builds_model:
            continue
        qualname = call.qualname
        if qualname is None or (qualname.startswith("torch.nn.") and qualname not in _INPUT_LAYERS):
            continue
        numbers: list[str | int] = []
        for arg in call.node.args[:2]:
            if isinstance(arg, ast.Constant) and type(arg.value) is int:
                numbers.append(arg.value)
            else:
                break
        return [qualname, *numbers]
    return []


def _frozen_at_construction(
    class_name: str, methods: list[F.FunctionFacts], ctx: Context
) -> list[str]:
    init = next((m for m in methods if m.name == "__init__"), None)
    if init is None:
        return []
    at_construction = {"__init__"} | {
        call.method for call in init.calls if call.receiver == "self" and call.method
    }
    frozen = set()
    for freeze in ctx.module.freezes:
        function = freeze.function
        if (
            function is not None
            and function.class_name == class_name
            and function.name in at_construction
            and freeze.owner.startswith("self.")
            and freeze.owner.count(".") == 1
            and not freeze.partial
        ):
            frozen.add(freeze.owner[5:])
    return sorted(frozen)


_MODULE_METHODS = {
    "eval", "train", "parameters", "named_parameters", "state_dict", "forward", "modules",
    "children", "named_modules", "zero_grad", "init_hidden", "initHidden", "apply",
}  # fmt: skip


def _add(table: dict[str, list[str]], key: str, item: str) -> None:
    items = table.setdefault(key, [])
    if item not in items:
        items.append(item)


def _sets_mode(call: F.CallEvent, mode: str | None) -> bool:
    """``super().train(mode)``, ``child.train(mode)``, ``.train(False)``, ``.eval()``:
    a call that switches modes, not a training routine of the same name."""
    if call.method == "eval" and not call.node.args:
        return True
    if call.method != "train":
        return False
    args = call.node.args
    if not args:
        return True
    first = args[0]
    if isinstance(first, ast.Constant) and isinstance(first.value, bool):
        return True
    if isinstance(first, ast.Name) and first.id == mode:
        return len(args) == 1 or isinstance(call.node.func, ast.Attribute)
    return isinstance(first, ast.Name) and first.id == "self" and len(args) <= 2


def _assigns_training(node: ast.FunctionDef) -> bool:
    """``self.training = mode`` in a ``train`` override (a read-only look at its own body)."""
    for statement in node.body:
        if isinstance(statement, ast.Assign) and any(
            isinstance(t, ast.Attribute) and t.attr == "training" for t in statement.targets
        ):
            return True
    return False


_SAVED_KINDS = {F.MODULE: "module", F.OPTIMIZER: "optimizer", F.NAMESPACE: "namespace"}
#: What ``weights_only=True`` refuses (the load rules name each).
_REFUSED_KINDS = {"module", "optimizer", "namespace", "array", "config"}
#: Names that hold a configuration object in a project that uses one of them.
_CONFIG_NAMES = frozenset({"config", "cfg", "conf", "configs", "hparams", "opt_cfg"})


def _saved_kind(ctx: Context, expr: ast.expr) -> str:
    if isinstance(expr, ast.Call):
        func = expr.func
        if isinstance(func, ast.Attribute) and func.attr == "state_dict":
            owner = ctx.value_of(func.value)
            if owner is not None and owner.kind == F.OPTIMIZER:
                return "optimizer_state"
            if owner is not None and owner.kind in (F.MODULE, F.SCHEDULER):
                return "model_state" if owner.kind == F.MODULE else "scheduler_state"
            if ctx.dotted(func.value) == "self":
                return "model_state"
            return "state"
        if (ctx.call_name(expr) or "").startswith("numpy."):
            return "array"
    if isinstance(expr, (ast.List, ast.Tuple)) and expr.elts:
        kinds = {_saved_kind(ctx, element) for element in expr.elts}
        refused = kinds & _REFUSED_KINDS
        if refused:
            return sorted(refused)[0]  # `[model, optimizer]`: one refused item fails the load
        refs = sorted(kind for kind in kinds if kind.startswith("ref:"))
        if refs:
            return refs[0]  # `[policy, stats]`: the index says what the project's class is
        return kinds.pop() if len(kinds) == 1 else "other"
    if isinstance(expr, ast.Constant):
        return "state"
    value = ctx.value_of(expr)
    kind = None if value is None else _SAVED_KINDS.get(value.kind or "")
    if kind is not None:
        return kind
    if value is not None and value.kind is None and (value.origin or "").startswith("numpy."):
        return "array"  # `best = np.max(scores)`: a NumPy scalar or array
    origin = None if value is None else value.origin
    if origin and any(library in origin.lower() for library in CONFIG_LIBRARIES):
        return "config"
    if ctx.dotted(expr) in _CONFIG_NAMES:
        # `"config": config`: a configuration object when the project is built on
        # yacs or OmegaConf (the index knows; a plain dict otherwise).
        return MAYBE_CONFIG
    if (
        value is not None
        and value.kind is None
        and origin
        and not origin.startswith(("torch", "builtins", "argparse"))
        and isinstance(value.node, ast.Call)
    ):
        return f"ref:{origin}"  # built by a project name the index resolves
    if isinstance(expr, ast.Name):
        function = ctx.function
        if function is not None and expr.id in function.params:
            return f"param:{expr.id}"
        if expr.id in NAMESPACE_NAMES and ctx.qualname(ast.Name("argparse")) == "argparse":
            return "namespace"  # `"args": args` in a script that parses arguments
    return "other"


def save_fact(ctx: Context, call: ast.Call) -> SaveFact:
    saved = call.args[0]
    target = call.args[1] if len(call.args) > 1 else None
    if target is None:
        item = next((k for k in call.keywords if k.arg == "f"), None)
        target = item.value if item is not None else None
    path = target.value if isinstance(target, ast.Constant) else None
    fact = SaveFact(
        line=call.lineno,
        path=path if isinstance(path, str) else None,
        path_text=ctx.text(target) if target is not None else "",
        whole=None,
        file_name=file_name(target),
    )
    if isinstance(saved, ast.Dict) and all(key is not None for key in saved.keys):
        for key, value in zip(saved.keys, saved.values, strict=False):
            if isinstance(key, ast.Constant) and isinstance(key.value, str):
                fact.keys[key.value] = _saved_kind(ctx, value)
    elif (
        isinstance(saved, ast.Call)
        and isinstance(saved.func, ast.Name)
        and saved.func.id == "dict"
        and not saved.args
        and all(item.arg for item in saved.keywords)
    ):
        for item in saved.keywords:
            fact.keys[item.arg or ""] = _saved_kind(ctx, item.value)
    elif isinstance(saved, ast.Starred):
        # `def save_on_master(*args, **kwargs): torch.save(*args, **kwargs)`: what
        # each caller passes first is the payload.
        fact.whole = FORWARDED_FIRST if _forwards_varargs(saved, ctx) else "other"
    else:
        fact.whole = _saved_kind(ctx, saved)
    return fact


#: SaveFact.whole of a save that forwards its function's ``*args``.
FORWARDED_FIRST = "param:*0"


def _forwards_varargs(starred: ast.Starred, ctx: Context) -> bool:
    function = ctx.function
    node = None if function is None else function.node
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or node.args.vararg is None:
        return False
    return isinstance(starred.value, ast.Name) and starred.value.id == node.args.vararg.arg


def _load_fact(ctx: Context, load: F.LoadFacts) -> LoadFact:
    call = load.node
    path = (
        call.args[0]
        if call.args
        else next((item.value for item in call.keywords if item.arg == "f"), None)
    )
    given = next((item.value for item in call.keywords if item.arg == "weights_only"), None)
    weights_only = None
    if given is not None:
        literal = given.value if isinstance(given, ast.Constant) else None
        weights_only = "true" if literal is True else "false" if literal is False else "given"
    elif any(item.arg is None for item in call.keywords):
        weights_only = "given"  # `torch.load(f, **options)`
    return LoadFact(
        line=call.lineno,
        path_text="" if path is None else ctx.text(path),
        file_name=file_name(path),
        keys=sorted(load.keys),
        weights_only=weights_only,
        file_template=None if path is None else file_template(path),
    )


def source_hash(source: str) -> str:
    return hashlib.sha256(source.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def summarize_tree(tree: ast.Module, source: str, path: str) -> ModuleSummary:
    """The summary of one parsed file (one engine pass, no rules)."""
    from torchwise.review.engine.walk import Walk

    summarizer = Summarizer(path)
    ctx = Context(path, source, None)
    try:
        Walk(ctx, [summarizer]).run(tree)
    except RecursionError:
        summarizer.summary = ModuleSummary(path=path, parsed=False)
    summarizer.summary.source_hash = source_hash(source)
    return summarizer.summary


def unparsed(path: str, source: str = "") -> ModuleSummary:
    """The summary of a file that could not be read or parsed."""
    return ModuleSummary(path=path, parsed=False, source_hash=source_hash(source))
