"""Input factories for bench/doctor_suite.py (``--inputs-from doctor_suite_inputs.py:NAME``).

A graph network takes one graph, not a batch: node features and an adjacency matrix
that a random spec cannot describe (self-loops, symmetric, row-normalised as GCN and
GAT training scripts build it).
"""

from __future__ import annotations

import torch


def graph(nodes: int = 12, features: int = 8) -> tuple[torch.Tensor, torch.Tensor]:
    """Node features (N, F) and a symmetric adjacency (N, N) with self-loops, rows summing
    to one: a ring with a few chords."""
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(nodes, features, generator=gen)
    adj = torch.eye(nodes)
    for i in range(nodes):
        adj[i, (i + 1) % nodes] = adj[(i + 1) % nodes, i] = 1.0
    for i, j in torch.randint(0, nodes, (nodes // 2, 2), generator=gen).tolist():
        adj[i, j] = adj[j, i] = 1.0
    return x, adj / adj.sum(1, keepdim=True)
