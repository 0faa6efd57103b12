"""One module-hook stack: which submodules are running, for every capability that asks.

Measuring a model per layer (inspect's FLOPs and memory, doc's data-flow graph,
doctor's per-layer checks) needs the same three things: a callback when a
submodule's forward starts, one when it returns, and the stack of submodules
running right now. :func:`module_calls` registers one pre- and one post-hook on
each module, keeps that stack, and removes every hook on exit::

    from torchwise.hooks import module_calls

    def entered(call):           # call.name, call.module, call.args, call.kwargs
        print("->", call.name or "(root)", len(calls.stack))

    def returned(call, output):  # only when the forward returned; call is popped
        print("<-", call.name, type(output).__name__)

    with module_calls(model, on_enter=entered, on_exit=returned) as calls:
        model(x)
    calls.failed                 # the innermost ModuleCall whose forward raised, or None

Names are ``model.named_modules()`` names (the root is ``""``). ``only`` limits
the hooks to some of them. The post-hook is registered with ``always_call``,
so the stack unwinds correctly when a forward raises, and :attr:`CallStack.failed`
keeps the innermost call that raised for the error message. Hooks go on the
modules passed in, so callers that must not touch a user's model hook a private
copy (:func:`torchwise.model.private_copy`).
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from torch import nn


@dataclass
class ModuleCall:
    """One running call of a submodule's forward, with the arguments it received."""

    name: str
    module: nn.Module
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    #: the exception being handled when the call started (usually None), so that the
    #: post-hook can tell a return from an exception unwinding through it
    _handling: BaseException | None = field(default=None, repr=False)


@dataclass
class CallStack:
    """The calls running now (outermost first) and the innermost one that raised."""

    calls: list[ModuleCall] = field(default_factory=list)
    #: names of the running modules, outermost first (kept beside ``calls`` so that
    #: per-op code can read it without building a list)
    stack: list[str] = field(default_factory=list)
    failed: ModuleCall | None = None

    @property
    def current(self) -> ModuleCall | None:
        """The innermost running call."""
        return self.calls[-1] if self.calls else None


Enter = Callable[[ModuleCall], None]
Exit = Callable[[ModuleCall, Any], None]


@contextlib.contextmanager
def module_calls(
    model: nn.Module,
    *,
    on_enter: Enter | None = None,
    on_exit: Exit | None = None,
    only: Collection[str] | None = None,
) -> Iterator[CallStack]:
    """Hook every module of ``model`` (or those named in ``only``) for the ``with`` block.

    ``on_enter(call)`` runs before a module's forward, after it is pushed on the
    stack; ``on_exit(call, output)`` runs after the forward returned and the call
    was popped. When a forward raises, ``on_exit`` is not called, the call is
    popped, and the innermost such call is kept in ``failed`` (a later call that
    starts clears it: the model caught the error and went on).
    """
    calls = CallStack()
    handles = []

    def pre_hook(name: str) -> Callable[..., None]:
        def hook(module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
            call = ModuleCall(name, module, args, kwargs, sys.exc_info()[1])
            calls.failed = None
            calls.calls.append(call)
            calls.stack.append(name)
            if on_enter is not None:
                on_enter(call)

        return hook

    def post_hook(name: str) -> Callable[..., None]:
        def hook(module: nn.Module, args: Any, kwargs: Any, output: Any) -> None:
            # The innermost running call of this module (a module may call itself).
            index = next(
                (i for i in reversed(range(len(calls.stack))) if calls.stack[i] == name), None
            )
            if index is None:  # pragma: no cover - a hook torch calls without its pre-hook
                return
            call = calls.calls[index]
            del calls.calls[index:], calls.stack[index:]
            if sys.exc_info()[1] is not call._handling:  # unwinding an exception
                if calls.failed is None:
                    calls.failed = call
            elif on_exit is not None:
                on_exit(call, output)

        return hook

    for name, module in model.named_modules():
        if only is not None and name not in only:
            continue
        handles.append(module.register_forward_pre_hook(pre_hook(name), with_kwargs=True))
        handles.append(
            module.register_forward_hook(post_hook(name), with_kwargs=True, always_call=True)
        )
    try:
        yield calls
    finally:
        for handle in handles:
            handle.remove()
