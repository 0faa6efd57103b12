"""The loaders a user could point at a checkpoint, by the names reports use."""

from __future__ import annotations

TORCH_LOAD = "torch.load"
JIT_LOAD = "torch.jit.load"
EXPORT_LOAD = "torch.export.load"
NUMPY_LOAD = "numpy.load(allow_pickle=True)"
JOBLIB_LOAD = "joblib.load"
PICKLE_LOAD = "pickle.load"
SAFETENSORS = "safetensors"

#: every loader the scan models, in the order reports list them
ALL_LOADERS = (
    TORCH_LOAD, JIT_LOAD, EXPORT_LOAD, NUMPY_LOAD, JOBLIB_LOAD, PICKLE_LOAD, SAFETENSORS
)  # fmt: skip
