"""Building a model without memory: every parameter and buffer lands on ``meta``.

``with torch.device("meta")`` would also put every *other* tensor the
constructor creates on meta, and real constructors read values back
(``[x.item() for x in torch.linspace(0, rate, depth)]`` in timm's and many
ViTs' drop-path schedules), which meta tensors cannot do. So, like
``accelerate.init_empty_weights``, only registration is intercepted: a
parameter or buffer is moved to meta the moment a module registers it, and
everything else stays a real CPU tensor. A layer's transient CPU weight lives
only until it is registered, one layer at a time, so a 7B configuration builds
in a few hundred MB and a second or two.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

#: Real (non-meta) builds above this many parameters are refused: at 4 bytes each
#: they need 8 GiB or more, and inspect and doc give the same counts on meta.
REAL_BUILD_LIMIT = 2_000_000_000


@contextlib.contextmanager
def params_on_meta() -> Iterator[None]:
    """Register every parameter and buffer created inside the block on ``meta``."""
    from torch import nn

    register_parameter = nn.Module.register_parameter
    register_buffer = nn.Module.register_buffer

    def on_meta_parameter(module: nn.Module, name: str, param: nn.Parameter | None) -> None:
        register_parameter(module, name, param)
        if param is not None and param.device.type != "meta":
            data = param.detach().to("meta")
            try:
                moved = type(param)(data, requires_grad=param.requires_grad)
            except TypeError:  # a subclass with another constructor: keep the plain kind
                moved = nn.Parameter(data, requires_grad=param.requires_grad)
            vars(moved).update(vars(param))  # flags libraries set (HF's _is_hf_initialized)
            module._parameters[name] = moved

    def on_meta_buffer(
        module: nn.Module, name: str, tensor: torch.Tensor | None, persistent: bool = True
    ) -> None:
        register_buffer(module, name, tensor, persistent=persistent)
        if tensor is not None and tensor.device.type != "meta":
            module._buffers[name] = tensor.to("meta")

    nn.Module.register_parameter = on_meta_parameter  # type: ignore[method-assign,assignment]
    nn.Module.register_buffer = on_meta_buffer  # type: ignore[method-assign,assignment]
    try:
        yield
    finally:
        nn.Module.register_parameter = register_parameter  # type: ignore[method-assign]
        nn.Module.register_buffer = register_buffer  # type: ignore[method-assign]


def count_parameters(model: torch.nn.Module) -> int:
    """Parameters of ``model``, tied ones counted once."""
    return sum(p.numel() for p in model.parameters())


def gib(parameters: int) -> str:
    """``26.9 GiB``: the float32 size of ``parameters`` weights."""
    return f"{parameters * 4 / 2**30:.1f} GiB"
