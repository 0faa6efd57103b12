"""Model inspection: measured shapes, parameters, FLOPs and memory.

Public API::

    from torchwise.model import summarize
    summary = summarize(model, (x,), {}, device="meta", depth=2)
    summary.total_params, summary.macs_forward, summary.layers[0].output_shapes

``summarize`` never modifies ``model``: it runs a private copy (on meta by
default, so even a 70B model costs no memory), made by :func:`private_copy`,
under :class:`Untouched`, which refuses any op on the caller's own tensors.
``scaling`` runs it at several sizes of a named input dimension and fits how
FLOPs and memory grow.
"""

from torchwise.model.private import ReferenceLeak, Untouched, private_copy
from torchwise.model.summary import SCHEMA_VERSION, LayerInfo, ModelSummary, summarize

__all__ = [
    "SCHEMA_VERSION",
    "LayerInfo",
    "ModelSummary",
    "ReferenceLeak",
    "Untouched",
    "private_copy",
    "summarize",
]
