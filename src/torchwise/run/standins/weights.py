"""Stand-ins for pretrained weights that cannot be downloaded.

A script that starts from pretrained weights fetches them: torchvision's
``weights=``/``pretrained=True``, ``torch.hub.load_state_dict_from_url``,
``timm.create_model(..., pretrained=True)``. Each is tried as written first
(a cached file is used as usual); only when the download fails (no network,
a hub that refuses) does the stand-in take over: the model keeps the random
initialisation of its own architecture, and the run says so in a note. The
steps then test the training code, not the pretrained values.

How: the failed download returns :class:`StandInWeights`, an empty state
dict that ``Module.load_state_dict`` accepts as "keep what you have" (and so
does the empty dict a script makes from it, renaming its keys). ``timm``
loads weights inside ``create_model``: a failure there builds the model again
with ``pretrained=False``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from types import ModuleType
from typing import Any

Note = Callable[[str], None]
Patch = Callable[[Any, str, Any], None]


class StandInWeights(dict[str, Any]):
    """The state dict of weights that could not be downloaded: empty, and
    accepted by ``load_state_dict`` as "keep the initialisation"."""

    def __init__(self, source: str, reason: str) -> None:
        super().__init__()
        self.source = source
        self.reason = reason


class WeightStandIns:
    """Patches the download functions and ``load_state_dict``; remembers
    whether a stand-in was handed out (then an empty state dict derived from
    it is accepted too)."""

    def __init__(self, note: Note, patch: Patch) -> None:
        self.note = note
        self.patch = patch
        self.handed_out = False

    def install(self) -> None:
        import torch
        import torch.hub
        import torch.utils.model_zoo

        self.patch(
            torch.hub,
            "load_state_dict_from_url",
            self._downloading(torch.hub.load_state_dict_from_url),
        )
        zoo_load = getattr(torch.utils.model_zoo, "load_url")  # noqa: B009 (not re-exported)
        self.patch(torch.utils.model_zoo, "load_url", self._downloading(zoo_load))
        self._patch_load_state_dict(torch.nn.Module)

    # -- downloads -----------------------------------------------------------------
    def _downloading(self, original: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(original)
        def load_state_dict_from_url(url: str, *args: Any, **kwargs: Any) -> Any:
            try:
                return original(url, *args, **kwargs)
            except Exception as error:
                if not download_failed(error):
                    raise
                return self.stand_in(str(url), error)

        load_state_dict_from_url.__torchwise_stand_in__ = True  # type: ignore[attr-defined]
        return load_state_dict_from_url

    def stand_in(self, source: str, error: BaseException) -> StandInWeights:
        self.handed_out = True
        reason = one_line(error)
        self.note(
            f"stand-in weights: {_short(source)} could not be downloaded ({reason}); the model "
            "keeps its random initialisation (--no-stand-ins to fail instead)"
        )
        return StandInWeights(source, reason)

    def patch_torchvision_models(self, module: ModuleType) -> None:
        """``torchvision.models._api`` imported the download function by name."""
        original = getattr(module, "load_state_dict_from_url", None)
        if callable(original) and not getattr(original, "__torchwise_stand_in__", False):
            self.patch(module, "load_state_dict_from_url", self._downloading(original))

    def patch_timm(self, module: ModuleType) -> None:
        """``timm.create_model(name, pretrained=True)``: built again without the
        pretrained weights when loading them fails."""
        original = getattr(module, "create_model", None)
        if not callable(original):
            return

        @functools.wraps(original)
        def create_model(
            model_name: str, pretrained: bool = False, *args: Any, **kwargs: Any
        ) -> Any:
            if not pretrained:
                return original(model_name, pretrained, *args, **kwargs)
            try:
                return original(model_name, pretrained, *args, **kwargs)
            except Exception as error:
                if not download_failed(error):
                    raise
                kwargs.pop("pretrained_cfg_overlay", None)
                model = original(model_name, False, *args, **kwargs)
                self.stand_in(f"timm's pretrained {model_name}", error)
                return model

        for owner in (module, getattr(module, "models", None)):
            if owner is not None and getattr(owner, "create_model", None) is original:
                self.patch(owner, "create_model", create_model)

    # -- loading -------------------------------------------------------------------
    def _patch_load_state_dict(self, module_class: Any) -> None:
        original = module_class.load_state_dict
        handed = self

        @functools.wraps(original)
        def load_state_dict(self: Any, state_dict: Any, *args: Any, **kwargs: Any) -> Any:
            if isinstance(state_dict, StandInWeights) or (
                handed.handed_out and isinstance(state_dict, dict) and not state_dict
            ):
                from torch.nn.modules.module import _IncompatibleKeys

                return _IncompatibleKeys([], [])
            return original(self, state_dict, *args, **kwargs)

        self.patch(module_class, "load_state_dict", load_state_dict)


def download_failed(error: BaseException) -> bool:
    """Whether an error is a download that could not happen: no network, a
    name that does not resolve, a refused or failed HTTP request, a hub that
    is offline (``OSError`` and its kin, and the HTTP libraries' errors)."""
    if isinstance(error, (OSError, ConnectionError, TimeoutError)):
        return not isinstance(error, (PermissionError, IsADirectoryError))
    module = type(error).__module__.split(".", 1)[0]
    if module in ("requests", "urllib3", "httpx", "huggingface_hub", "http"):
        return True
    cause = error.__cause__ or error.__context__
    return cause is not None and cause is not error and download_failed(cause)


def one_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    shown = text[0] if text else ""
    return f"{type(error).__name__}: {shown[:120]}" if shown else type(error).__name__


def _short(source: str) -> str:
    return source if len(source) <= 100 else source[:97] + "..."
