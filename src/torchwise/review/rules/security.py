"""Security (TW3xx): loading code or data that can run arbitrary code.

Every rule here is about deserialisation that executes what a file (or a
remote repository) tells it to. The SARIF output gives the whole range a
``security-severity``, so a rule belongs here only when that is its intent.
"""

from __future__ import annotations

import ast

from torchwise.review.context import Context
from torchwise.review.findings import Applicability, Fix, Severity
from torchwise.review.registry import Rule, rule
from torchwise.review.rules._util import (
    add_keyword,
    has_kwargs_splat,
    in_compat_code,
    is_false,
    is_true,
    keyword,
    rename_attribute,
)
from torchwise.review.settings import DEFAULT_MIN_TORCH

# Loaders that take `weights_only`, and its position when passed positionally.
_TORCH_LOADERS = {
    "torch.load": None,  # keyword-only
    "torch.serialization.load": None,
    "torch.hub.load_state_dict_from_url": 6,
}
_RETRY_ERRORS = frozenset({"TypeError"})
# weights_only became the default in torch 2.6.
_WEIGHTS_ONLY_DEFAULT = (2, 6)


def _argument(call: ast.Call, name: str, position: int | None) -> ast.expr | None:
    """The value passed for parameter ``name`` (by keyword or at ``position``)."""
    item = keyword(call, name)
    if item is not None:
        return item.value
    if position is not None and len(call.args) > position:
        return call.args[position]
    return None


def _has_starred(call: ast.Call) -> bool:
    return any(isinstance(arg, ast.Starred) for arg in call.args)


@rule
class TorchLoadUnsafe(Rule):
    """## What it does
    Flags `torch.load` (and `torch.hub.load_state_dict_from_url`) called with
    `weights_only=False`, with a custom `pickle_module`, or without
    `weights_only` when the configured `min-torch-version` is below 2.6.

    ## Why is this bad?
    Without `weights_only=True`, `torch.load` is `pickle.load`: a checkpoint
    downloaded from the internet or shared by a colleague can run any code on
    your machine the moment it is loaded. PyTorch made `weights_only=True` the
    default in 2.6, so on older versions the argument must be written out. A
    custom `pickle_module` turns the safe loader off too.

    ## Example
    ```python
    import torch

    state = torch.load("checkpoint.pt", map_location="cpu")
    full = torch.load("checkpoint.pt", weights_only=False)
    ```

    ## Use instead
    ```python
    import torch

    state = torch.load("checkpoint.pt", map_location="cpu", weights_only=True)
    ```

    ## Fix safety
    Unsafe: adding `weights_only=True` makes loading fail for checkpoints that
    hold objects outside PyTorch's allowlist (an `argparse.Namespace`, a
    custom config class, ...), so a human must check what the file contains;
    `torch.serialization.add_safe_globals` allowlists the classes you trust.
    Calls that pass `weights_only=False` or a `pickle_module` get no fix: they
    asked for full unpickling on purpose.
    """

    code = "TW301"
    name = "torch-load-without-weights-only"
    family = "security"
    severity = Severity.WARNING
    message = "`{callee}` without `weights_only=True` can run arbitrary code from the file"
    fix = Applicability.UNSAFE

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        qualname = ctx.call_name(node)
        if qualname not in _TORCH_LOADERS:
            return
        callee = qualname.replace("torch.serialization.load", "torch.load")
        if in_compat_code(ctx, catching=_RETRY_ERRORS):
            return  # `except TypeError: torch.load(f)`: the retry for torch without weights_only
        weights_only = _argument(node, "weights_only", _TORCH_LOADERS[qualname])
        if weights_only is not None:
            if is_false(weights_only):
                message = "`{callee}(weights_only=False)` unpickles the file: it can run any code"
                ctx.report(self, node, message=message, callee=callee)
            return  # True, or a variable: the caller decided
        if has_kwargs_splat(node) or _has_starred(node):
            return  # weights_only may be inside **kwargs
        pickle_position = 2 if callee == "torch.load" else None
        if _argument(node, "pickle_module", pickle_position) is not None:
            message = (
                "`{callee}` with a custom `pickle_module` unpickles the file: it can run any code"
            )
            ctx.report(self, node, message=message, callee=callee)
            return
        settings = ctx.settings
        minimum = getattr(settings, "min_torch_version", None) or DEFAULT_MIN_TORCH
        if tuple(minimum) >= _WEIGHTS_ONLY_DEFAULT:
            return  # weights_only=True is already the default everywhere the code runs
        fix = Fix(
            "Pass `weights_only=True`",
            (add_keyword(ctx, node, "weights_only=True"),),
            Applicability.UNSAFE,
        )
        ctx.report(self, node, fix=fix, callee=callee)


_HUB_CALLS = {"torch.hub.load", "torch.hub.list", "torch.hub.help"}


@rule
class HubTrustRepo(Rule):
    """## What it does
    Flags `torch.hub.load`, `torch.hub.list` and `torch.hub.help` called with
    `trust_repo=True`.

    ## Why is this bad?
    Hub entry points run the repository's `hubconf.py`, arbitrary Python code
    fetched from GitHub at run time. `trust_repo=True` skips the check that asks
    before running code from a repository not seen before, so a typo in the
    repository name or a compromised repository runs silently.

    ## Example
    ```python
    import torch

    model = torch.hub.load("someone/models", "resnet18", trust_repo=True)
    ```

    ## Use instead
    ```python
    import torch

    model = torch.hub.load("someone/models", "resnet18", trust_repo="check")
    ```
    """

    code = "TW302"
    name = "hub-trust-repo"
    family = "security"
    severity = Severity.WARNING
    message = "`{callee}(trust_repo=True)` runs the repository's code without asking"

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        qualname = ctx.call_name(node)
        if qualname in _HUB_CALLS:
            item = keyword(node, "trust_repo")
            if item is not None and is_true(item.value):
                ctx.report(self, node, callee=qualname)


@rule
class NumpyAllowPickle(Rule):
    """## What it does
    Flags `np.load(..., allow_pickle=True)`.

    ## Why is this bad?
    With `allow_pickle=True`, NumPy unpickles object arrays stored in the
    file, and unpickling runs whatever code the file names. Arrays of numbers
    never need it.

    ## Example
    ```python
    import numpy as np

    features = np.load("features.npy", allow_pickle=True)
    ```

    ## Use instead
    ```python
    import numpy as np

    features = np.load("features.npy")
    ```
    """

    code = "TW303"
    name = "numpy-load-allow-pickle"
    family = "security"
    severity = Severity.WARNING
    message = "`numpy.load(allow_pickle=True)` unpickles object arrays: it can run any code"

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        if ctx.call_name(node) == "numpy.load" and is_true(_argument(node, "allow_pickle", 2)):
            ctx.report(self, node)


@rule
class TrustRemoteCode(Rule):
    """## What it does
    Flags any call that passes `trust_remote_code=True` (Hugging Face
    `from_pretrained`, `pipeline`, `load_dataset`, ...).

    ## Why is this bad?
    `trust_remote_code=True` downloads Python files from the model or dataset
    repository and imports them: whoever controls the repository (or a later
    commit to it) runs code on your machine. Pin a reviewed `revision=` and
    prefer architectures your installed library already implements.

    ## Example
    ```python
    from transformers import AutoModel

    model = AutoModel.from_pretrained("someone/model", trust_remote_code=True)
    ```

    ## Use instead
    ```python
    from transformers import AutoModel

    model = AutoModel.from_pretrained("someone/model")
    ```
    """

    code = "TW304"
    name = "trust-remote-code"
    family = "security"
    severity = Severity.WARNING
    message = "`trust_remote_code=True` imports and runs code downloaded from the repository"

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        item = keyword(node, "trust_remote_code")
        if item is not None and is_true(item.value):
            ctx.report(self, item)


# Deserialisers that read a file (or file object) and run pickle on it.
_FILE_UNPICKLERS = {
    "pickle.load",
    "pickle.Unpickler",
    "_pickle.load",
    "cPickle.load",
    "dill.load",
    "dill.Unpickler",
    "cloudpickle.load",
    "joblib.load",
    "pandas.read_pickle",
}
# The same from bytes already in memory.
_BYTES_UNPICKLERS = {
    "pickle.loads",
    "_pickle.loads",
    "cPickle.loads",
    "dill.loads",
    "cloudpickle.loads",
}


@rule
class PickleLoad(Rule):
    """## What it does
    Flags `pickle.load`, `pickle.Unpickler`, `dill.load`, `cloudpickle.load`,
    `joblib.load` and `pandas.read_pickle`.

    ## Why is this bad?
    Unpickling a file runs the code the file names: a pickled checkpoint or
    dataset from anywhere you do not control is an executable. Store tensors
    with `safetensors` or `torch.save` + `torch.load(weights_only=True)`, and
    metadata as JSON.

    ## Example
    ```python
    import pickle

    with open("checkpoint.pkl", "rb") as f:
        state = pickle.load(f)
    ```

    ## Use instead
    ```python
    import torch

    state = torch.load("checkpoint.pt", weights_only=True)
    ```
    """

    code = "TW305"
    name = "pickle-load"
    family = "security"
    severity = Severity.WARNING
    message = "`{callee}` unpickles the file: it can run any code the file contains"

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        qualname = ctx.call_name(node)
        if qualname in _FILE_UNPICKLERS:
            ctx.report(self, node, callee=qualname)


@rule
class PickleLoads(Rule):
    """## What it does
    Flags `pickle.loads` (and `dill`/`cloudpickle`'s) on bytes in memory.
    Off by default: the bytes often come from this very process (a queue, a
    collective), where unpickling is fine.

    ## Why is this bad?
    When the bytes were read from a file, a socket or a cache another user can
    write, unpickling them runs the code they name.

    ## Example
    ```python
    import pickle

    state = pickle.loads(blob)
    ```

    ## Use instead
    ```python
    import json

    state = json.loads(blob)
    ```
    """

    code = "TW306"
    name = "pickle-loads"
    family = "security"
    severity = Severity.INFO
    default_enabled = False
    message = "`{callee}` runs any code the bytes contain; make sure they cannot come from outside"

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        qualname = ctx.call_name(node)
        if qualname in _BYTES_UNPICKLERS:
            ctx.report(self, node, callee=qualname)


_YAML_LOADS = {"yaml.load": 1, "yaml.load_all": 1}
_YAML_UNSAFE_CALLS = {"yaml.unsafe_load", "yaml.unsafe_load_all"}
_YAML_UNSAFE_LOADERS = {"yaml.Loader", "yaml.UnsafeLoader", "yaml.CLoader", "yaml.CUnsafeLoader"}
for _name in list(_YAML_UNSAFE_LOADERS):
    _YAML_UNSAFE_LOADERS.add(_name.replace("yaml.", "yaml.loader.", 1))


@rule
class YamlUnsafeLoad(Rule):
    """## What it does
    Flags `yaml.load` without a safe `Loader` (none, `yaml.Loader`,
    `yaml.UnsafeLoader`) and `yaml.unsafe_load`.

    ## Why is this bad?
    PyYAML's full loader builds arbitrary Python objects from tags such as
    `!!python/object/apply:os.system`: a config file becomes a program. Training
    configs are exactly the files people download and share.

    ## Example
    ```python
    import yaml

    with open("config.yaml") as f:
        config = yaml.load(f, Loader=yaml.Loader)
    ```

    ## Use instead
    ```python
    import yaml

    with open("config.yaml") as f:
        config = yaml.safe_load(f)
    ```

    ## Fix safety
    Offered only for `yaml.load(stream)` without a `Loader` (which PyYAML 6
    rejects, and older versions load unsafely): it becomes `yaml.safe_load`.
    Unsafe, because documents that use Python-specific tags no longer load.
    """

    code = "TW307"
    name = "yaml-unsafe-load"
    family = "security"
    severity = Severity.WARNING
    message = "`{callee}` can construct arbitrary Python objects; use `yaml.safe_load`"
    fix = Applicability.UNSAFE

    def visit_Call(self, node: ast.Call, ctx: Context) -> None:
        qualname = ctx.call_name(node)
        if qualname in _YAML_UNSAFE_CALLS:
            ctx.report(self, node, callee=qualname)
            return
        if qualname not in _YAML_LOADS or has_kwargs_splat(node) or _has_starred(node):
            return
        loader = _argument(node, "Loader", _YAML_LOADS[qualname])
        if loader is not None:
            if ctx.qualname(loader) in _YAML_UNSAFE_LOADERS:
                ctx.report(self, node, callee=f"{qualname}(Loader={ctx.text(loader)})")
            return
        fix = None
        if isinstance(node.func, ast.Attribute) and len(node.args) == 1 and not node.keywords:
            safe = "safe_load" if qualname == "yaml.load" else "safe_load_all"
            edit = rename_attribute(ctx, node.func, safe)
            fix = Fix(f"Use `yaml.{safe}`", (edit,), Applicability.UNSAFE)
        ctx.report(self, node, fix=fix, callee=f"{qualname} without a Loader")
