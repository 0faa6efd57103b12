"""Targets and input specs: ``"file.py:Name"`` + ``"f32[8,3,32,32]"`` -> model, inputs.

Shared by every model command (inspect, doc, doctor, and later ones). A
*target* names a model:

- ``path/to/file.py:Name`` or ``package.module:Name`` (``Name`` may be dotted);
  with ``--build EXPR``, ``path/to/file.py`` alone;
- ``zoo:NAME``, a reference model from :mod:`torchwise.zoo`;
- ``hf:NAME``, a transformers model class built from its config class (or a
  diffusers model), and ``timm:NAME`` from timm's registry; no hub access;
- ``NAME`` from ``[tool.torchwise.models.NAME]`` in the nearest ``pyproject.toml``.

``Name`` may be an ``nn.Module`` subclass (built with ``init_kwargs`` or no
arguments), a module instance, or a factory returning a module or a
``(module, example_inputs)`` pair; ``build`` is any Python expression evaluated
in the module's namespace (``GPT(GPTConfig(n_layer=2))``). An *input spec*
describes one forward argument (:mod:`torchwise.inputs`, re-exported here;
grammar in docs/targets.md). :class:`TargetRequest` is what a front end
was asked for (the target, its inputs, how to build it); its ``resolve`` (or
:func:`resolve_target`) returns a :class:`ResolvedTarget`, the one object every
command works from.
"""

from torchwise.inputs import (
    DEFAULT_INT_BOUND,
    Dim,
    InputSpec,
    batch_dim_of,
    make_inputs,
    parse_input_spec,
    parse_input_specs,
    spec_from_value,
)
from torchwise.target.meta import REAL_BUILD_LIMIT
from torchwise.target.request import TargetRequest
from torchwise.target.resolve import BUILD_ON, ResolvedTarget, check_inputs, resolve_target

__all__ = [
    "BUILD_ON",
    "DEFAULT_INT_BOUND",
    "REAL_BUILD_LIMIT",
    "Dim",
    "InputSpec",
    "ResolvedTarget",
    "TargetRequest",
    "batch_dim_of",
    "check_inputs",
    "make_inputs",
    "parse_input_spec",
    "parse_input_specs",
    "resolve_target",
    "spec_from_value",
]
