"""Read, vet and convert checkpoints without executing them.

- :func:`inspect`: tensors, shapes, dtypes, totals and structure, read from the
  pickle's opcodes and the archive directory only (torch is never imported).
- :func:`scan`: is the file safe to ``torch.load``? Every pickle in it, read the
  way torch reads it and judged against weights_only's allowlist, with evidence
  (never imports torch either).
- :func:`convert`: to safetensors, only after a clean scan, streamed tensor by
  tensor and verified byte for byte; :func:`load_converted` rebuilds the original.
"""

# Imported eagerly on purpose: ``scan`` and ``convert`` are also submodule names, and
# importing a submodule later would otherwise rebind the package attribute to it.
from torchwise.ckpt.budgets import Budgets
from torchwise.ckpt.contents import InspectResult, OptimizerSummary, TensorEntry, inspect
from torchwise.ckpt.convert import ConvertOptions, ConvertResult, convert
from torchwise.ckpt.restore import load_converted
from torchwise.ckpt.scan import FileScan, Finding, ScanReport, scan

__all__ = [
    "Budgets",
    "ConvertOptions",
    "ConvertResult",
    "FileScan",
    "Finding",
    "InspectResult",
    "OptimizerSummary",
    "ScanReport",
    "TensorEntry",
    "convert",
    "inspect",
    "load_converted",
    "scan",
]
