"""What a call does to training, in one word: the shared vocabulary of the
per-file summaries (:mod:`.summary`), the project index and the training rules.

A call *backward*s, *step*s an optimizer, *zero_grad*s, puts a model in *eval*
or *train* mode, runs a model (*model_call*), or seeds a generator (*seed*).
A function's effects are those of its calls, and of the project functions it
calls (the index closes them over the call graph).
"""

from __future__ import annotations

import ast
import re

from torchwise.review.engine import facts as F

BACKWARD, STEP, ZERO_GRAD, EVAL, TRAIN, MODEL_CALL, SEED, SCALER = (
    "backward",
    "step",
    "zero_grad",
    "eval",
    "train",
    "model_call",
    "seed",
    "scaler",
)
#: Any backward, including a framework's (``accelerator.backward(loss)``).
LEARNS = "learns"
#: Asks for deterministic kernels (``cudnn.deterministic = True``,
#: ``torch.use_deterministic_algorithms(True)``); recorded from the settings.
DETERMINISTIC = "deterministic"
BUILDS_MODEL = "builds_model"
BUILDS_OPTIMIZER = "builds_optimizer"
#: Seeds torch's generator, or may (a seed helper whose body is not known);
#: ``random.seed``, ``np.random.seed`` and ``env.seed`` do not.
SEEDS_TORCH = "seeds_torch"
#: Runs a model with autograd on (not under ``no_grad``). The index drops it
#: from a callee called under ``no_grad`` and from a ``no_grad`` function.
MODEL_CALL_WITH_GRAD = "model_call_with_grad"
#: Draws from NumPy's or Python's global generator (``np.random.rand``,
#: ``random.shuffle``), and seeds it (``np.random.seed``, ``random.seed``, or a
#: helper that seeds every generator: ``seed_everything``, ``set_seed``).
DRAWS_NUMPY, DRAWS_RANDOM = "draws_numpy", "draws_random"
SEEDS_NUMPY, SEEDS_RANDOM = "seeds_numpy", "seeds_random"
#: The effects that seed a generator.
SEEDING = frozenset({SEED, SEEDS_TORCH, SEEDS_NUMPY, SEEDS_RANDOM})
_NUMPY_DRAW = re.compile(
    r"numpy\.random\.(?!seed$|get_state$|set_state$|default_rng$|RandomState$|Generator$|"
    r"SeedSequence$|PCG64$|MT19937$)\w+$"
)
_RANDOM_DRAW = re.compile(
    r"random\.(random|randint|randrange|choice|choices|shuffle|sample|uniform|gauss|"
    r"normalvariate|betavariate|expovariate|triangular)$"
)
#: Chooses the process's current CUDA device (``torch.cuda.set_device``).
SETS_CUDA_DEVICE = "sets_cuda_device"
#: Starts the default process group (``torch.distributed.init_process_group``).
INITS_PROCESS_GROUP = "inits_process_group"
#: Needs the default process group: a collective, or ``get_rank()``/
#: ``get_world_size()``, which raise without one.
NEEDS_PROCESS_GROUP = "needs_process_group"
_PROCESS_GROUP_STARTERS = frozenset(
    {
        "torch.distributed.init_process_group",
        "torch.distributed.distributed_c10d.init_process_group",
        "deepspeed.init_distributed",
    }
)
_DIST = "torch.distributed."
PROCESS_GROUP_CALLS = frozenset(
    _DIST + name
    for name in (
        "barrier", "monitored_barrier", "all_reduce", "all_gather", "all_gather_into_tensor",
        "all_gather_object", "broadcast", "broadcast_object_list", "reduce", "reduce_scatter",
        "reduce_scatter_tensor", "gather", "gather_object", "scatter", "scatter_object_list",
        "all_to_all", "all_to_all_single", "get_rank", "get_world_size", "new_group",
    )
)  # fmt: skip
#: Generators that hold their own state: seeding one seeds nothing else.
_LOCAL_GENERATORS = {
    "torch.Generator",
    "numpy.random.default_rng",
    "numpy.random.RandomState",
    "random.Random",
    "numpy.random.Generator",
}

_FRAMEWORK_RECEIVERS = re.compile(r"(^|\.)(accelerator|fabric|trainer|engine|deepspeed\w*|self)$")
#: Module functions named ``backward`` that are not a tensor's backward: the
#: distributed autograd engine keeps gradients per context, there is nothing to zero.
_NOT_TENSOR_BACKWARD = {"torch.distributed.autograd.backward"}


def is_false(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Constant) and node.value is False


def is_backward(call: F.CallEvent) -> bool:
    return call.method == "backward" or call.qualname == "torch.autograd.backward"


def is_tensor_backward(call: F.CallEvent) -> bool:
    """A backward on a tensor, not through a framework that scales losses itself."""
    if not is_backward(call) or call.qualname in _NOT_TENSOR_BACKWARD:
        return False
    if call.qualname is not None and call.qualname != "torch.autograd.backward":
        return False  # a module's function: `dist_autograd.backward(ctx, [loss])`
    return call.receiver is None or not _FRAMEWORK_RECEIVERS.search(call.receiver)


def is_optimizer_step(call: F.CallEvent) -> bool:
    if call.method == "step":
        return call.receiver_kind in (F.OPTIMIZER, F.SCALER)
    return call.method == "optimizer_step"  # torch_xla's xm.optimizer_step(opt)


def is_scheduler_step(call: F.CallEvent) -> bool:
    return call.method == "step" and call.receiver_kind == F.SCHEDULER


def is_zero_grad(call: F.CallEvent) -> bool:
    return call.method == "zero_grad"


def is_eval(call: F.CallEvent) -> bool:
    if call.method == "eval" and not call.node.args:
        return True
    return call.method == "train" and bool(call.node.args) and is_false(call.node.args[0])


def is_train(call: F.CallEvent) -> bool:
    if call.method != "train":
        return False
    if call.receiver_kind not in (F.MODULE, None) or call.target is not None:
        return False  # `trainer.train()`, or a project class's own training method
    return not call.node.args or not is_false(call.node.args[0])


def is_model_call(call: F.CallEvent) -> bool:
    if call.callee_kind == F.MODULE:
        return True
    return call.method == "forward" and call.receiver_kind == F.MODULE


def is_seed(call: F.CallEvent) -> bool:
    """A call that seeds a global generator (a local ``torch.Generator`` does not)."""
    name = call.qualname or call.method or _called_name(call.node) or ""
    if _restores_rng_state(name):
        return True  # `torch.set_rng_state(state)`: the generators as the parent left them
    if "seed" not in name.lower():
        # A launcher or trainer handed the seed: `colossalai.launch(seed=...)`.
        return any(k.arg == "seed" for k in call.node.keywords)
    receiver = call.receiver_value
    return receiver is None or receiver.origin not in _LOCAL_GENERATORS


def _restores_rng_state(name: str) -> bool:
    """``torch.set_rng_state``, ``torch.cuda.set_rng_state_all``, ``random.setstate``,
    ``numpy.random.set_state``, a helper named ``_set_rng_states``: a generator put
    back in a state saved elsewhere (Lightning's launcher hands its workers the
    parent's)."""
    lowered = name.lower()
    last = lowered.rsplit(".", 1)[-1]
    if "rng_state" in last and ("set" in last or "restore" in last):
        return True
    return lowered in {"random.setstate", "numpy.random.set_state"}


#: Module methods that compute nothing through the model.
_BOOKKEEPING = frozenset(
    {
        "eval", "train", "parameters", "named_parameters", "buffers", "named_buffers",
        "children", "named_children", "modules", "named_modules", "state_dict",
        "load_state_dict", "to", "cuda", "cpu", "half", "float", "double", "bfloat16",
        "zero_grad", "apply", "register_buffer", "register_parameter", "add_module",
        "register_forward_hook", "register_forward_pre_hook", "register_full_backward_hook",
        "register_backward_hook", "requires_grad_", "share_memory", "extra_repr",
        "get_submodule", "get_parameter", "type", "init_hidden", "initHidden",
        "reset_parameters", "save_pretrained", "to_empty", "save", "load", "summary",
    }
)  # fmt: skip


def is_model_call_with_grad(call: F.CallEvent) -> bool:
    """A model run with autograd on: called, or one of its parts or methods
    (``model.encoder(src)``, ``model.decode(z)``)."""
    if call.no_grad:
        return False
    if is_model_call(call):
        return True
    return call.receiver_kind == F.MODULE and call.method not in _BOOKKEEPING


_OTHER_GENERATORS = ("random.", "numpy.", "tensorflow.", "jax.", "gym.", "gymnasium.")


#: Seeds of the CUDA generators only: the CPU generator (weight initialisation
#: before a model is moved, samplers, CPU dropout) stays as it was.
_CUDA_ONLY_SEEDS = frozenset(
    {
        "torch.cuda.manual_seed",
        "torch.cuda.manual_seed_all",
        "torch.cuda.seed",
        "torch.cuda.seed_all",
    }
)


def seeds_torch(call: F.CallEvent) -> bool:
    """A seed that reaches torch's (CPU) generator, as far as the call tells."""
    if not is_seed(call):
        return False
    qualname = call.qualname or ""
    if qualname.startswith(_OTHER_GENERATORS) or qualname in _CUDA_ONLY_SEEDS:
        return False
    return not (call.method == "seed" and not qualname)  # env.seed(0), space.seed(0)


def builds_model(call: F.CallEvent) -> bool:
    return call.builds_model


def builds_optimizer(call: F.CallEvent) -> bool:
    qualname = call.qualname or ""
    last = qualname.rsplit(".", 1)[-1]
    return (
        qualname.startswith("torch.optim.")
        and last[:1].isupper()
        and "lr_scheduler" not in qualname
    )


def learns(call: F.CallEvent) -> bool:
    """Any backward pass: a tensor's, or one a framework runs for the loss."""
    return is_backward(call) and call.qualname not in _NOT_TENSOR_BACKWARD


def _called_name(call: ast.Call) -> str | None:
    func = call.func
    return func.id if isinstance(func, ast.Name) else None


def uses_scaler(call: F.CallEvent) -> bool:
    if call.receiver_kind == F.SCALER or call.callee_kind == F.SCALER:
        return True
    return (call.qualname or "").endswith("GradScaler")


def draws_numpy(call: F.CallEvent) -> bool:
    return _NUMPY_DRAW.match(call.qualname or "") is not None


def draws_random(call: F.CallEvent) -> bool:
    return _RANDOM_DRAW.match(call.qualname or "") is not None


def _seeds_every_generator(call: F.CallEvent) -> bool:
    """A seed helper that is not one generator's own seed (``seed_everything``,
    ``set_seed``, a project's ``fix_seed``): it is taken to seed them all."""
    if not is_seed(call):
        return False
    qualname = call.qualname or ""
    if qualname.startswith(("torch.", "random.", "numpy.", "gym", "tensorflow", "jax")):
        return False
    return not (call.method == "seed" and not qualname)  # env.seed(0), space.seed(0)


def seeds_numpy(call: F.CallEvent) -> bool:
    qualname = call.qualname or ""
    return qualname in ("numpy.random.seed", "numpy.random.set_state") or _seeds_every_generator(
        call
    )


def seeds_random(call: F.CallEvent) -> bool:
    qualname = call.qualname or ""
    return qualname in ("random.seed", "random.setstate") or _seeds_every_generator(call)


def inits_process_group(call: F.CallEvent) -> bool:
    return call.qualname in _PROCESS_GROUP_STARTERS


def needs_process_group(call: F.CallEvent) -> bool:
    return call.qualname in PROCESS_GROUP_CALLS


def sets_cuda_device(call: F.CallEvent) -> bool:
    return (call.qualname or "").endswith("cuda.set_device")


PREDICATES = {
    BACKWARD: is_tensor_backward,
    STEP: is_optimizer_step,
    ZERO_GRAD: is_zero_grad,
    EVAL: is_eval,
    TRAIN: is_train,
    MODEL_CALL: is_model_call,
    MODEL_CALL_WITH_GRAD: is_model_call_with_grad,
    SEED: is_seed,
    SEEDS_TORCH: seeds_torch,
    SCALER: uses_scaler,
    LEARNS: learns,
    BUILDS_MODEL: builds_model,
    BUILDS_OPTIMIZER: builds_optimizer,
    INITS_PROCESS_GROUP: inits_process_group,
    NEEDS_PROCESS_GROUP: needs_process_group,
    SETS_CUDA_DEVICE: sets_cuda_device,
    DRAWS_NUMPY: draws_numpy,
    DRAWS_RANDOM: draws_random,
    SEEDS_NUMPY: seeds_numpy,
    SEEDS_RANDOM: seeds_random,
}


#: The effects only a call of one method can have (a backward also through
#: ``torch.autograd.backward``); the others are asked of every call. The index
#: pass asks this of each of a project's calls: 11 predicates each was a tenth
#: of its time on timm.
_METHOD_EFFECTS = {
    "backward": frozenset({BACKWARD, LEARNS}),
    "step": frozenset({STEP}),
    "optimizer_step": frozenset({STEP}),
    "zero_grad": frozenset({ZERO_GRAD}),
    "eval": frozenset({EVAL}),
    "train": frozenset({EVAL, TRAIN}),
    "set_device": frozenset({SETS_CUDA_DEVICE}),
}
_ANY_CALL_EFFECTS = frozenset(
    {
        MODEL_CALL,
        MODEL_CALL_WITH_GRAD,
        SEED,
        SEEDS_TORCH,
        SCALER,
        BUILDS_MODEL,
        BUILDS_OPTIMIZER,
        INITS_PROCESS_GROUP,
        NEEDS_PROCESS_GROUP,
        DRAWS_NUMPY,
        DRAWS_RANDOM,
        SEEDS_NUMPY,
        SEEDS_RANDOM,
    }
)


def direct_effects(call: F.CallEvent) -> list[str]:
    """Every effect word that describes ``call`` itself, in PREDICATES order."""
    possible = _ANY_CALL_EFFECTS | _METHOD_EFFECTS.get(call.method or "", frozenset())
    if call.qualname == "torch.autograd.backward":
        possible |= _METHOD_EFFECTS["backward"]
    return [name for name, predicate in PREDICATES.items() if name in possible and predicate(call)]
