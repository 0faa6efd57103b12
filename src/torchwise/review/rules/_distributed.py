"""Distributed training (TW8xx): what every rank must do together.

A collective (``all_reduce``, ``barrier``, DDP's gradient all-reduce in
``backward()``) returns only when every rank of the group has called it; a
process group must exist before any of them, and each rank's model must sit
on the device DDP is told.
"""

from __future__ import annotations

import re

from torchwise.review.engine.effects import PROCESS_GROUP_CALLS

#: Conditions that tell a distributed run from a single process.
DISTRIBUTED_GUARD = re.compile(
    r"is_initialized|is_available|distributed|world_size|ddp|dist_url|dist_on|multiprocessing|"
    r"local_rank|num_gpus|ngpus|n_gpu|nproc|WORLD_SIZE|LOCAL_RANK|\bRANK\b|accelerator|"
    r"num_processes|use_dist|\bdist\b|parallel|multi_gpu|gpus|is_dist|is_main|get_rank|rank",
    re.IGNORECASE,
)

DDP = frozenset(
    {
        "torch.nn.parallel.DistributedDataParallel",
        "torch.nn.parallel.distributed.DistributedDataParallel",
    }
)

__all__ = ["DDP", "DISTRIBUTED_GUARD", "PROCESS_GROUP_CALLS"]
