"""Read, vet and convert checkpoints without executing them.

- :func:`inspect`: tensors, shapes, dtypes, totals and structure, read from the
  pickle's opcodes and the archive directory only (torch is never imported).
- :func:`scan`: is the file safe to ``torch.load``? Every pickle in it, read the
  way torch reads it and judged against weights_only's allowlist, with evidence
  (never imports torch either).
- :func:`convert`: to safetensors, only after a clean scan, streamed tensor by
  tensor and verified byte for byte; :func:`load_converted` rebuilds the original.

Its parts: :mod:`.picklevm` (the pickle machine), :mod:`.formats` (zip, tar and the
other containers, read as each loader reads them), :mod:`.loaders` (one model per
loader of where it finds pickles and code), :mod:`.policy` (the allowlist), and
:mod:`.conversion` (convert and its inverse).
"""

# Imported eagerly on purpose: ``scan`` is also a submodule name, and importing a
# submodule later would otherwise rebind the package attribute to it.
from torchwise.ckpt.budgets import Budgets
from torchwise.ckpt.contents import InspectResult, OptimizerSummary, TensorEntry, inspect
from torchwise.ckpt.conversion import ConvertOptions, ConvertResult, convert, load_converted
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
