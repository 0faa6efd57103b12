"""The C unpickler, allowed to import exactly what ``weights_only`` allows, for torch.load.

torch's ``weights_only`` unpickler is a Python reimplementation that lacks opcodes
of pickle protocols 4 and 5 (``FRAME``, ``MEMOIZE``, ``SHORT_BINUNICODE``...), so a
checkpoint saved with ``pickle_protocol=4`` cannot be loaded with it at all. For
those, convert hands torch.load this module as ``pickle_module``: CPython's own
unpickler whose ``find_class`` returns only objects on weights_only's allowlist
(``torch._weights_only_unpickler._get_allowed_globals``, the user's
``safe_globals``) plus the inert builtins of :data:`torchwise.ckpt.policy.INERT`,
and raises for anything else. Every callable an unpickler can reach comes through
``find_class``, so nothing outside the allowlist can run. It is used only after
the scan has vetted the file.
"""

from __future__ import annotations

import _compat_pickle
import builtins
import pickle
import types
from typing import Any

from torchwise.ckpt.policy import INERT


def allowed_objects(extra: list[Any]) -> dict[str, Any]:
    from torch import _weights_only_unpickler as weights_only

    unpickler: Any = weights_only
    allowed: dict[str, Any] = dict(unpickler._get_allowed_globals())
    allowed.update(unpickler._get_user_allowed_globals())
    allowed.update({name: getattr(builtins, name.split(".")[1]) for name in INERT})
    for obj in extra:
        allowed[f"{obj.__module__}.{obj.__qualname__}"] = obj
    return allowed


def restricted_pickle_module(extra: list[Any]) -> types.ModuleType:
    allowed = allowed_objects(extra)

    class Unpickler(pickle.Unpickler):
        def find_class(self, module: str, name: str) -> Any:
            for candidate in (f"{module}.{name}", _python3_name(module, name)):
                if candidate in allowed:
                    return allowed[candidate]
            raise pickle.UnpicklingError(f"{module}.{name} is not on the allowlist")

    def load(file: Any, **kwargs: Any) -> Any:
        return Unpickler(file, **kwargs).load()

    module = types.ModuleType("torchwise_restricted_pickle")
    module.Unpickler = Unpickler  # type: ignore[attr-defined]
    module.load = load  # type: ignore[attr-defined]
    return module


def _python3_name(module: str, name: str) -> str:
    if (module, name) in _compat_pickle.NAME_MAPPING:
        module, name = _compat_pickle.NAME_MAPPING[(module, name)]
    else:
        module = _compat_pickle.IMPORT_MAPPING.get(module, module)
    return f"{module}.{name}"
