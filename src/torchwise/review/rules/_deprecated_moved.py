"""Deprecated APIs (TW412-TW415): functions and modules PyTorch moved elsewhere.

Helpers shared by the TW412-TW415 rule modules.
"""

from __future__ import annotations

# old -> (new name, keywords the new call needs to behave the same)
UPSAMPLE = {
    "torch.nn.functional.upsample": ("interpolate", ""),
    "torch.nn.functional.upsample_nearest": ("interpolate", 'mode="nearest"'),
    "torch.nn.functional.upsample_bilinear": ("interpolate", 'mode="bilinear", align_corners=True'),
    "torch.nn.UpsamplingNearest2d": ("Upsample", 'mode="nearest"'),
    "torch.nn.UpsamplingBilinear2d": ("Upsample", 'mode="bilinear", align_corners=True'),
}


WEIGHT_NORM = {
    "torch.nn.utils.weight_norm": "torch.nn.utils.parametrizations.weight_norm",
    "torch.nn.utils.weight_norm.weight_norm": "torch.nn.utils.parametrizations.weight_norm",
    "torch.nn.utils.remove_weight_norm": "torch.nn.utils.parametrize.remove_parametrizations",
}


LAUNCH = "torch.distributed.launch"


_FUNC_API = ("vmap", "grad", "grad_and_value", "vjp", "jvp", "jacrev", "jacfwd", "hessian")
MOVED = {
    "torch.backends.cuda.sdp_kernel": "torch.nn.attention.sdpa_kernel",
    "torch.utils._pytree._register_pytree_node": "torch.utils._pytree.register_pytree_node",
    "functorch.functionalize": "torch.func.functionalize",
    **{f"functorch.{name}": f"torch.func.{name}" for name in _FUNC_API},
}
