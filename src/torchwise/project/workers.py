"""What the worker forkserver of ``torchwise project`` and the MCP server imports.

Both run the user's model code in workers (:mod:`torchwise.isolation`) forked
from one forkserver; importing these before the first fork makes every job
start warm. ``torchwise.project.warmup`` comes first: it imports torch with its
import warnings hidden (the forkserver's stderr is ours) and pays torch's
first-call costs once.
"""

WORKER_PRELOAD = (
    "torchwise.project.warmup",
    "torch",
    "torchwise.target",
    "torchwise.model",
    "torchwise.doctor",
    "torchwise.review",
    "torchwise.ckpt",
    "torchwise.project.schema",
)
