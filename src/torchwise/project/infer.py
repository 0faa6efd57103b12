"""Guess a model's input from its first layer, and prove the guess by running it.

A model whose inputs nobody configured still tells what it eats: its first
layer with parameters (in registration order, which is almost always forward
order) is a ``Conv2d(3, ...)``, an ``Embedding(50257, ...)``, a ``Linear(784,
...)``. Each candidate input spec is tried with one real forward at batch 2 in
eval mode under ``no_grad``; the first that runs wins. Specs name their dims
(``batch``, ``seq``) so the reports and doctor can resize them.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

#: Spatial sizes tried for images: CIFAR, MNIST, small, ImageNet.
_IMAGE_SIZES = (32, 28, 64, 224, 256)
_MAX_TRIES = 8


def candidates(model: Any) -> Iterator[str]:
    """Input specs worth trying, most likely first, from the model's first real layer."""
    from torch import nn

    for module in model.modules():
        # torch's own layers only: a custom module that owns a parameter (a learned
        # position embedding) says nothing about the input its children take.
        if not type(module).__module__.startswith("torch.nn"):
            continue
        if not any(True for _ in module.parameters(recurse=False)):
            continue
        if isinstance(module, nn.Conv2d):
            c = module.in_channels
            yield from (f"f32[batch=2,{c},{s},{s}]" for s in _IMAGE_SIZES)
        elif isinstance(module, nn.Conv1d):
            c = module.in_channels
            yield from (f"f32[batch=2,{c},{n}]" for n in (128, 1024, 16000))
        elif isinstance(module, nn.Conv3d):
            c = module.in_channels
            yield from (f"f32[batch=2,{c},{d},{s},{s}]" for d, s in ((8, 32), (16, 112)))
        elif isinstance(module, (nn.Embedding, nn.EmbeddingBag)):
            n = module.num_embeddings
            yield from (f"i64[batch=2,seq=16]<{n}", f"i64[batch=2,seq=8]<{n}")
        elif isinstance(module, nn.Linear):
            f = module.in_features
            yield f"f32[batch=2,{f}]"
            yield f"f32[batch=2,seq=8,{f}]"
            for channels in (1, 3):
                side = math.isqrt(f // channels)
                if channels * side * side == f and side > 1:
                    yield f"f32[batch=2,{channels},{side},{side}]"
        elif isinstance(module, (nn.RNNBase,)):
            f = module.input_size
            if module.batch_first:
                yield f"f32[batch=2,seq=8,{f}]"
            else:
                yield f"f32[seq=8,batch=2,{f}]"
        elif isinstance(module, (nn.LayerNorm,)):
            d = module.normalized_shape[-1]
            yield from (f"f32[batch=2,seq=8,{d}]", f"f32[batch=2,{d}]")
        elif isinstance(module, (nn.BatchNorm2d, nn.GroupNorm)):
            c = module.num_features if isinstance(module, nn.BatchNorm2d) else module.num_channels
            yield from (f"f32[batch=2,{c},{s},{s}]" for s in _IMAGE_SIZES)
        elif isinstance(module, nn.BatchNorm1d):
            yield f"f32[batch=2,{module.num_features}]"
        elif isinstance(module, nn.MultiheadAttention):
            yield f"f32[batch=2,seq=8,{module.embed_dim}]"
        return  # only the first of torch's layers with parameters speaks for the input


def infer_input(model: Any) -> tuple[str | None, list[str]]:
    """The first candidate spec the model runs on, and the errors of those it did not."""
    import torch

    from torchwise.target import make_inputs, parse_input_spec

    errors: list[str] = []
    was_training = model.training
    model.eval()
    try:
        for index, spec in enumerate(candidates(model)):
            if index >= _MAX_TRIES:
                break
            args, kwargs = make_inputs([parse_input_spec(spec)], device="cpu")
            try:
                with torch.no_grad():
                    model(*args, **kwargs)
            except Exception as exc:  # a wrong guess: shape errors are the usual answer
                errors.append(f"{spec}: {type(exc).__name__}: {str(exc).splitlines()[0][:120]}")
                continue
            return spec, errors
    finally:
        model.train(was_training)
    return None, errors
