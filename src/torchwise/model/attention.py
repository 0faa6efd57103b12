"""``F.scaled_dot_product_attention`` on meta as it runs on the target device.

SDPA picks its kernel at run time from the device, dtypes, shapes and arguments.
The math path computes the ``(B, H, Tq, Tk)`` scores, softmax and dropout mask
as ordinary ops and autograd keeps them for backward; the fused kernels (flash,
memory-efficient) keep only their inputs, the output, a ``(B, H, Tq)``
log-sum-exp and the random state, and recompute the scores in backward. On meta
torch always takes the math path (and on fake tensors, which claim the CPU, the
CPU's choice), so a training-memory estimate of a transformer would count
``T x T`` matrices per layer that the target device never holds.

:class:`TargetAttention` is a torch-function mode for the meta and fake-tensor
runs: it decides which kernel the target device would take for each call
(:func:`cuda_kernel`, :func:`cpu_kernel`) and runs that kernel's own aten op,
whose meta kernel and autograd formula save what the real kernel saves. Calls the
target would run on the math path keep the math path. Real CPU or CUDA runs
need none of this: their SDPA takes its real kernel.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import _disable_current_modes

#: Devices whose kernel choice can be modelled on meta.
TARGETS = ("cuda", "cpu")
#: Kernel names as reported (``ModelSummary.attention_kernels``).
MATH, FLASH, EFFICIENT, FLASH_CPU = "math", "flash", "memory-efficient", "flash (cpu)"
#: The GPU generation assumed when none is present here: Hopper (H100/H200). For
#: these rules every generation from Ampere (sm80) up decides the same except
#: the sm86/sm89 flash head-dim limit in training.
ASSUMED_CAPABILITY = (9, 0)
#: Newest architecture torch's fused CUDA kernels are built for (Blackwell, sm121).
NEWEST_CAPABILITY = (12, 1)
#: The flash kernel's head-dim limit, and the alignment its inputs are padded to.
FLASH_MAX_HEAD_DIM, FLASH_PAD = 256, 8
#: The memory-efficient kernel pads a mask's last dim to a multiple of this.
EFFICIENT_MASK_ALIGNMENT = 16

_PARAMS = ("query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale", "enable_gqa")
_DEFAULTS: dict[str, Any] = {"attn_mask": None, "dropout_p": 0.0, "is_causal": False,
                             "scale": None, "enable_gqa": False}  # fmt: skip
_HALF = (torch.float16, torch.bfloat16)


@dataclass(frozen=True)
class SdpaCall:
    """One call's arguments, bound to SDPA's parameter names."""

    query: torch.Tensor
    key: torch.Tensor
    value: torch.Tensor
    attn_mask: torch.Tensor | None
    dropout_p: float
    is_causal: bool
    scale: float | None
    enable_gqa: bool

    @classmethod
    def bind(cls, args: tuple[Any, ...], kwargs: dict[str, Any]) -> SdpaCall:
        values = dict(_DEFAULTS) | dict(zip(_PARAMS, args, strict=False)) | kwargs
        return cls(**{name: values[name] for name in _PARAMS})

    @property
    def qkv(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        return self.query, self.key, self.value

    def requires_grad(self) -> bool:
        return torch.is_grad_enabled() and any(t.requires_grad for t in self.qkv)


def _dense_ok(call: SdpaCall, *, ignore_singleton_dim: bool) -> bool:
    """The checks every fused kernel makes on dense inputs (``sdp_utils_cpp.h``): 4-D,
    non-empty sequences, one batch size, equal heads (or grouped-query attention
    asked for, with the key/value heads dividing the query's), and stride 1 in the
    last dim of q, k, v and the mask."""
    q, k, v = call.qkv
    if not q.dim() == k.dim() == v.dim() == 4 or any(t.is_nested for t in call.qkv):
        return False
    if q.shape[-2] == 0 or k.shape[-2] == 0 or not q.shape[0] == k.shape[0] == v.shape[0]:
        return False
    heads = (q.shape[1], k.shape[1], v.shape[1])
    if len(set(heads)) > 1 and not (
        call.enable_gqa and heads[1] == heads[2] and heads[0] % heads[1] == 0
    ):
        return False
    unit = all(t.stride(-1) == 1 for t in call.qkv)
    unit = unit or (ignore_singleton_dim and q.shape[-1] == 1)
    return unit and (call.attn_mask is None or call.attn_mask.stride(-1) == 1)


def _gemm_alignment(dtype: torch.dtype, capability: tuple[int, int]) -> int:
    """``minimum_gemm_alignment``: the head-dim multiple the memory-efficient kernel
    needs (tensor cores from sm80, or sm70 in half precision, read 128 bits)."""
    half = dtype in _HALF
    tensor_cores = capability >= (8, 0) or (capability >= (7, 0) and half)
    alignment = 4 if capability >= (8, 0) else 1
    return max(alignment, 128 // (16 if half else 32)) if tensor_cores else alignment


def _flash_ok(call: SdpaCall, capability: tuple[int, int]) -> bool:
    """``can_use_flash_attention``: fp16/bf16 on sm80+, no explicit mask, equal head
    dims up to 256, a causal mask only when square; on sm86/89/120/121 training with
    a head dim in (192, 224], or above 224 with dropout, is refused."""
    q, k, v = call.qkv
    enabled = torch.backends.cuda.flash_sdp_enabled()  # type: ignore[no-untyped-call]
    if not enabled or call.attn_mask is not None:
        return False
    if not (8, 0) <= capability <= NEWEST_CAPABILITY or not q.dtype == k.dtype == v.dtype:
        return False
    if q.dtype not in _HALF or q.dim() != 4:
        return False
    dim = q.shape[-1]
    if not (dim == k.shape[-1] == v.shape[-1] and dim <= FLASH_MAX_HEAD_DIM):
        return False
    consumer = (8, 6) <= capability <= (8, 9) or (12, 0) <= capability <= (12, 1)
    if consumer and call.requires_grad() and not (dim <= 192 or (not call.dropout_p and dim > 224)):
        return False
    if call.is_causal and q.shape[-2] != k.shape[-2]:
        return False
    return _dense_ok(call, ignore_singleton_dim=True)


def _efficient_ok(call: SdpaCall, capability: tuple[int, int]) -> bool:
    """``can_use_mem_efficient_attention``: sm50+, fp16/fp32 (and bf16 from sm80),
    masks and dropout allowed, head dims a multiple of the GEMM alignment, and (from
    sm80) q, k, v starting at an aligned offset in their storage."""
    q, k, v = call.qkv
    if not torch.backends.cuda.mem_efficient_sdp_enabled():  # type: ignore[no-untyped-call]
        return False
    if not (5, 0) <= capability <= NEWEST_CAPABILITY or q.dim() != 4:
        return False
    dtypes = (torch.float16, torch.float32) + ((torch.bfloat16,) if capability >= (8, 0) else ())
    if not (q.dtype == k.dtype == v.dtype and q.dtype in dtypes):
        return False
    align = _gemm_alignment(q.dtype, capability)
    dim, dim_v = q.shape[-1], v.shape[-1]
    if not (dim == k.shape[-1] and dim > 0 and dim_v > 0 and dim % align == dim_v % align == 0):
        return False
    if capability >= (8, 0) and any(t.storage_offset() % align for t in call.qkv):
        return False
    return _dense_ok(call, ignore_singleton_dim=False)


def cuda_capability() -> tuple[int, int]:
    """This machine's GPU generation if it has one, else :data:`ASSUMED_CAPABILITY`."""
    if torch.cuda.is_available():
        major, minor = torch.cuda.get_device_capability()
        return major, minor
    return ASSUMED_CAPABILITY


def cuda_kernel(call: SdpaCall, capability: tuple[int, int] = ASSUMED_CAPABILITY) -> str:
    """The kernel SDPA takes for ``call`` on an NVIDIA GPU of ``capability``.

    torch's ``select_sdp_backend`` (``aten/.../cuda/sdp_utils.cpp``) tries flash,
    then memory-efficient, then math, honouring the backends the user switched off
    (``torch.backends.cuda.enable_*_sdp``, ``sdpa_kernel``). This mirrors its
    checks, which read only shapes, strides, dtypes and arguments, all known on
    meta. cuDNN attention (first on some Hopper set-ups) is not told apart: it keeps
    what flash keeps (output and per-row statistics) and takes no call that flash or
    memory-efficient would refuse (head dims a multiple of 8, dense inputs).
    """
    if _flash_ok(call, capability):
        return FLASH
    if _efficient_ok(call, capability):
        return EFFICIENT
    return MATH


def _stand_in(tensor: torch.Tensor) -> torch.Tensor:
    """A CPU tensor with ``tensor``'s sizes, dtype, last-dim stride and
    ``requires_grad``, but zero strides elsewhere: one row of memory."""
    last = tensor.stride(-1)
    rows = max((tensor.shape[-1] - 1) * last + 1, 0)
    base = torch.empty(rows, dtype=tensor.dtype).requires_grad_(tensor.requires_grad)
    return base.as_strided(tensor.shape, (0,) * (tensor.dim() - 1) + (last,))


def cpu_kernel(call: SdpaCall) -> str:
    """The kernel SDPA takes for ``call`` on this machine's CPU, asked of torch itself.

    torch's CPU chooser (``_fused_sdp_choice``) reads sizes, dtypes, the last-dim
    stride and whether a mask needs a gradient; it runs on stand-ins that share those
    (:func:`_stand_in`) outside the measuring modes. The CPU flash kernel refuses
    dropout, so a model that trains with attention dropout stays on the math path.
    """
    mask = call.attn_mask
    with _disable_current_modes(), torch.no_grad():
        q, k, v = (_stand_in(t) for t in call.qkv)
        stand_mask = None if mask is None else _stand_in(mask)
        args = (q, k, v, stand_mask, call.dropout_p, call.is_causal)
        try:
            choice = torch._fused_sdp_choice(*args, scale=call.scale, enable_gqa=call.enable_gqa)
        except (RuntimeError, TypeError, ValueError):
            return MATH  # an input torch would reject: the original call raises it
    return FLASH_CPU if choice == SDPBackend.FLASH_ATTENTION.value else MATH


def _additive(mask: torch.Tensor | None, dtype: torch.dtype) -> torch.Tensor | None:
    """SDPA's ``convert_boolean_attn_mask``: True keeps a position, False adds -inf."""
    if mask is None or mask.dtype != torch.bool:
        return mask
    zero = torch.zeros((), dtype=dtype, device=mask.device)
    return torch.where(mask, zero, torch.full((), -math.inf, dtype=dtype, device=mask.device))


def _efficient_bias(call: SdpaCall) -> torch.Tensor | None:
    """SDPA's ``preprocess_mask`` for memory-efficient attention: the mask expanded to
    (B, H, Tq, Tk), its last dim padded to a multiple of 16 (then sliced back)."""
    bias = _additive(call.attn_mask, call.query.dtype)
    if bias is None:
        return None
    (batch, heads, tq, _), tk = call.query.shape, call.key.shape[-2]
    bias = bias.expand(batch, heads, tq, tk)
    if tk % EFFICIENT_MASK_ALIGNMENT:
        pad = EFFICIENT_MASK_ALIGNMENT - tk % EFFICIENT_MASK_ALIGNMENT
        return F.pad(bias, (0, pad))[..., :tk]
    if any(s % EFFICIENT_MASK_ALIGNMENT for s in bias.stride()[:3]):
        return bias.contiguous()
    return bias


def _run_kernel(kernel: str, call: SdpaCall) -> torch.Tensor:
    """Run ``kernel``'s aten op as SDPA itself calls it (``attention.cpp``)."""
    aten = torch.ops.aten
    q, k, v = call.qkv
    if kernel == FLASH:
        dim = q.shape[-1]
        scale = call.scale if call.scale is not None else 1 / math.sqrt(dim)
        pad = -dim % FLASH_PAD  # the CUDA path pads q, k, v to a multiple of 8
        padded = [F.pad(t, (0, pad)) if pad else t for t in call.qkv]
        out: torch.Tensor = aten._scaled_dot_product_flash_attention(
            *padded, call.dropout_p, call.is_causal, False, scale=scale
        )[0]
        return out[..., :dim] if pad else out
    if kernel == EFFICIENT:
        if k.shape[1] != q.shape[1]:
            # Grouped-query attention: the kernel reads the shared heads in place; the
            # meta backward does not support that, so the heads are repeated (the
            # estimate then keeps k and v at the query's head count: a small excess).
            group = q.shape[1] // k.shape[1]
            call = SdpaCall(q, k.repeat_interleave(group, 1), v.repeat_interleave(group, 1),
                            call.attn_mask, call.dropout_p, call.is_causal, call.scale,
                            False)  # fmt: skip
        out = aten._scaled_dot_product_efficient_attention(
            *call.qkv, _efficient_bias(call), call.requires_grad(), call.dropout_p,
            call.is_causal, scale=call.scale,
        )[0]  # fmt: skip
        return out
    mask = _additive(call.attn_mask, q.dtype)
    out = aten._scaled_dot_product_flash_attention_for_cpu(
        q, k, v, call.dropout_p, call.is_causal, attn_mask=mask, scale=call.scale
    )[0]
    return out


class TargetAttention(TorchFunctionMode):
    """Runs each ``F.scaled_dot_product_attention`` call with the kernel the target
    device (``"cuda"`` or ``"cpu"``) would take, counting calls per kernel in
    ``kernels``; every other function runs unchanged."""

    def __init__(self, target: str) -> None:
        super().__init__()
        if target not in TARGETS:
            raise ValueError(f"target must be one of {', '.join(TARGETS)}, not {target!r}")
        self.target = target
        self.capability = cuda_capability() if target == "cuda" else None
        self.kernels: Counter[str] = Counter()

    def __torch_function__(
        self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None
    ) -> Any:
        kwargs = kwargs or {}
        if func is not F.scaled_dot_product_attention:
            return func(*args, **kwargs)
        call = SdpaCall.bind(args, kwargs)
        if self.capability is not None:
            kernel = cuda_kernel(call, self.capability)
        else:
            kernel = cpu_kernel(call)
        if kernel != MATH:
            try:
                out = _run_kernel(kernel, call)
            except (RuntimeError, NotImplementedError):
                pass  # no meta kernel for this case: keep the math path
            else:
                self.kernels[kernel] += 1
                return out
        self.kernels[MATH] += 1
        # Fake tensors claim the CPU, whose chooser would take its flash kernel.
        with sdpa_kernel([SDPBackend.MATH]):
            return func(*args, **kwargs)
