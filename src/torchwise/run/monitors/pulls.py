"""Trained weights pulled toward a network that never trains (TWR114, soft updates).

A DQN or an actor-critic keeps a target network and moves it toward the online
one after each step: ``target = tau * online + (1 - tau) * target``. Written
the wrong way round, the *online* network is pulled toward the target, which
then never changes: every step undoes part of the optimizer's work and the
target stays at its initial weights. ``load_state_dict`` (a hard copy) is
watched elsewhere; this module sees in-place writes (``.data.copy_``,
``lerp_``, ``mul_``/``add_``) that move the trained weights:

1. After each of the first optimizer steps, a few elements of each trained
   parameter are kept. Before the next step, a parameter whose values moved
   (a write through ``.data`` keeps the version counter) is compared with the
   parameters of the same shape that no optimizer holds:
   when the change is a step of ``tau`` in (0, 1] toward one of them (the new
   values lie on the segment between the old ones and that parameter's), the
   trained network was pulled toward it.
2. The line is then found by watching the following steps' in-place writes
   into the trained parameters whose values come from the untrained ones (a
   torch function mode, only for those steps), and reported there.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from torchwise.run.sites import Site, user_site

#: optimizer steps after which trained parameters are compared (each costs a copy of a few values)
WATCHED_STEPS = 8
ELEMENTS = 16
#: relative residual under which a change is a step toward another parameter. Measured on
#: float32 soft updates (`p.copy_(tau * t + (1 - tau) * p)`, 100 draws each): the rounding
#: leaves at most 6e-4 at tau=1e-3 and 2e-4 at tau=5e-3, while a change that is not a step
#: toward that parameter (an optimizer's) leaves at least 0.8. bfloat16 weights round too
#: coarsely to tell (residuals up to ~1): their pulls are missed, never invented.
COLLINEAR = 0.02
#: steps the line-finding mode stays on before the finding is reported without a line
SEARCH_STEPS = 3
FROM_SOURCE = "_torchwise_from_untrained"


def _values(param: torch.Tensor) -> torch.Tensor:
    with torch._C.DisableTorchFunction():  # our arithmetic, outside the simulated devices
        return param.detach().reshape(-1)[:ELEMENTS].double().clone()


def pull_fraction(old: torch.Tensor, new: torch.Tensor, source: torch.Tensor) -> float | None:
    """``tau`` when ``new = old + tau * (source - old)`` with ``tau`` in (0, 1]; else None."""
    with torch._C.DisableTorchFunction():
        return _fraction(old, new, source)


def _fraction(old: torch.Tensor, new: torch.Tensor, source: torch.Tensor) -> float | None:
    delta, towards = new - old, source - old
    scale = float(towards.norm())
    if float(delta.norm()) == 0.0 or scale == 0.0:
        return None
    tau = float(delta @ towards) / scale**2
    residual = float((delta - tau * towards).norm())
    if not 0.0 < tau <= 1.0 + 1e-6 or residual > COLLINEAR * max(float(delta.norm()), 1e-12):
        return None
    return tau


class PullWatch:
    """Keeps the trained parameters' values after each step and checks them before the next."""

    def __init__(self, report: Callable[[Site | None, str, dict[str, object]], None]) -> None:
        self.report = report
        self.kept: dict[int, tuple[torch.Tensor, int, torch.Tensor]] = {}
        self.search: _LineSearch | None = None
        self.search_steps = 0
        self.found: tuple[str, str, float] | None = None  # trained, source, tau
        self.done = False

    def after_step(self, trained: Iterable[torch.Tensor], step: int) -> None:
        if self.done or step > WATCHED_STEPS:
            return
        for param in trained:
            if param.layout == torch.strided and not param.is_meta and param.is_floating_point():
                self.kept[id(param)] = (param, param._version, _values(param))

    def before_step(
        self,
        untrained: list[torch.Tensor],
        label: Callable[[torch.Tensor], str],
    ) -> None:
        """Compare the kept values; start the line search when a pull is seen."""
        if self.done:
            return
        if self.search is not None:
            self.search_steps += 1
            if self.search.site is not None or self.search_steps > SEARCH_STEPS:
                self._finish()
            return
        trained = {_storage(p) for p, _, _ in self.kept.values()}
        pulls = self._pulls(untrained)
        if not pulls:
            return
        (param, source, tau) = pulls[0]
        self.found = (label(param), label(source), tau)
        sources = {_storage(p) for p in untrained}
        self.search = _LineSearch(trained, sources)
        self.search.__enter__()  # type: ignore[no-untyped-call]

    def close(self) -> None:
        if self.search is not None and not self.done:
            self._finish()

    def _pulls(
        self, untrained: list[torch.Tensor]
    ) -> list[tuple[torch.Tensor, torch.Tensor, float]]:
        by_shape: dict[tuple[int, ...], list[torch.Tensor]] = {}
        for param in untrained:
            by_shape.setdefault(tuple(param.shape), []).append(param)
        pulls = []
        for param, _, old in self.kept.values():
            new = _values(param)  # `.data.copy_` keeps the version counter: compare values
            with torch._C.DisableTorchFunction():
                if torch.equal(new, old) or not bool(torch.isfinite(new).all()):
                    continue  # unchanged, or NaN (TWR110's business)
            for source in by_shape.get(tuple(param.shape), []):
                tau = pull_fraction(old, new, _values(source))
                if tau is not None:
                    pulls.append((param, source, tau))
                    break
        self.kept = {}
        return pulls

    def _finish(self) -> None:
        search, self.search, self.done = self.search, None, True
        site = None
        if search is not None:
            search.__exit__(None, None, None)  # type: ignore[no-untyped-call]
            site = search.site
        if self.found is None:
            return
        trained, source, tau = self.found
        self.report(
            site,
            f"{trained}, which the optimizer trains, is moved toward {source}, which no "
            f"optimizer trains (a step of {tau:.3g} of the way): the soft update runs the "
            "wrong way, so the target network never changes and every step pulls the "
            "trained weights back to it",
            {"tau": round(tau, 6)},
        )


class _LineSearch(TorchFunctionMode):
    """Tags results computed from the untrained parameters; the user's line of an in-place
    write of such a result into a trained parameter is the pull's line."""

    def __init__(self, trained: set[int], sources: set[int]) -> None:
        super().__init__()
        self.trained = trained
        self.sources = sources
        self.site: Site | None = None

    def __torch_function__(
        self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None
    ) -> Any:
        kwargs = kwargs or {}
        result = func(*args, **kwargs)
        tensors = [a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor)]
        derived = any(self._from_source(t) for t in tensors)
        name = getattr(func, "__name__", "")
        if derived and self.site is None and name.endswith("_") and tensors:
            target = args[0] if args and isinstance(args[0], torch.Tensor) else None
            if target is not None and _storage(target) in self.trained:
                self.site = user_site()
        if derived and isinstance(result, torch.Tensor):
            with contextlib.suppress(AttributeError, TypeError):
                setattr(result, FROM_SOURCE, True)
        return result

    def _from_source(self, tensor: torch.Tensor) -> bool:
        return bool(getattr(tensor, FROM_SOURCE, False)) or _storage(tensor) in self.sources


def _storage(tensor: torch.Tensor) -> int:
    try:
        return int(tensor.untyped_storage().data_ptr())
    except (RuntimeError, NotImplementedError):
        return 0
