"""Security (TW3xx): loading code or data that can run arbitrary code.

Every rule here is about deserialisation that executes what a file (or a
remote repository) tells it to. The SARIF output gives the whole range a
``security-severity``, so a rule belongs here only when that is its intent.
"""

from __future__ import annotations

import ast

from torchwise.review.engine.syntax import keyword

# Loaders that take `weights_only`, and its position when passed positionally.
TORCH_LOADERS = {
    "torch.load": None,  # keyword-only
    "torch.serialization.load": None,
    "torch.hub.load_state_dict_from_url": 6,
}
RETRY_ERRORS = frozenset({"TypeError"})
# weights_only became the default in torch 2.6.
WEIGHTS_ONLY_DEFAULT = (2, 6)


def argument(call: ast.Call, name: str, position: int | None) -> ast.expr | None:
    """The value passed for parameter ``name`` (by keyword or at ``position``)."""
    item = keyword(call, name)
    if item is not None:
        return item.value
    if position is not None and len(call.args) > position:
        return call.args[position]
    return None


def has_starred(call: ast.Call) -> bool:
    return any(isinstance(arg, ast.Starred) for arg in call.args)


HUB_CALLS = {"torch.hub.load", "torch.hub.list", "torch.hub.help"}


# Deserialisers that read a file (or file object) and run pickle on it.
FILE_UNPICKLERS = {
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
BYTES_UNPICKLERS = {
    "pickle.loads",
    "_pickle.loads",
    "cPickle.loads",
    "dill.loads",
    "cloudpickle.loads",
}


YAML_LOADS = {"yaml.load": 1, "yaml.load_all": 1}
YAML_UNSAFE_CALLS = {"yaml.unsafe_load", "yaml.unsafe_load_all"}
YAML_UNSAFE_LOADERS = {"yaml.Loader", "yaml.UnsafeLoader", "yaml.CLoader", "yaml.CUnsafeLoader"}
for _name in list(YAML_UNSAFE_LOADERS):
    YAML_UNSAFE_LOADERS.add(_name.replace("yaml.", "yaml.loader.", 1))
