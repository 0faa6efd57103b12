"""torchwise: a senior PyTorch reviewer you can run.

Capabilities live in sub-packages with small public surfaces:

- ``torchwise.review``: static analysis of PyTorch source (never imports torch).
- ``torchwise.model``: inspect a model's shapes, parameters, FLOPs and memory; write docs.
- ``torchwise.doctor``: dynamic health checks on a model and a batch.
- ``torchwise.ckpt``: read, vet and convert checkpoints without executing them.

Importing ``torchwise`` itself is cheap: it imports neither torch nor rich.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
