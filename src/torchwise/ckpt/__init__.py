"""Read, vet and convert checkpoints without executing them.

- :func:`inspect`: tensors, shapes, dtypes, totals and structure, read from the
  pickle's opcodes and the zip directory only (torch is never imported).
- :func:`scan`: an allowlist verdict for every global any pickle in the file
  references, with evidence (never imports torch either).
- :func:`convert`: to safetensors, only after a clean scan, verified tensor by tensor.
"""

# Imported eagerly on purpose: ``scan`` and ``convert`` are also submodule names, and
# importing a submodule later would otherwise rebind the package attribute to it.
from torchwise.ckpt.contents import InspectResult, OptimizerSummary, TensorEntry, inspect
from torchwise.ckpt.convert import ConvertResult, convert
from torchwise.ckpt.scan import FileScan, Finding, ScanReport, scan

__all__ = [
    "ConvertResult",
    "FileScan",
    "Finding",
    "InspectResult",
    "OptimizerSummary",
    "ScanReport",
    "TensorEntry",
    "convert",
    "inspect",
    "scan",
]
