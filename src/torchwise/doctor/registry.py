"""The one table of checks: public id, title, and the class that implements it.

The ids are a public contract (``--checks``, JSON output, the Python API) and
their order here is the order reports list them in. This module does not import
torch, so ``torchwise doctor --help`` can list the checks; :func:`load` imports
a check's module when it runs.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from torchwise.doctor.checks.base import Check


@dataclass(frozen=True)
class CheckEntry:
    id: str
    #: what the check establishes, for ``--help`` and reports
    title: str
    #: ``module:Class`` under ``torchwise.doctor.checks``
    impl: str
    #: what a passing check guards against, in a few words (a generated test's comment)
    guards: str


CHECKS: tuple[CheckEntry, ...] = (
    CheckEntry("grad-flow", "every trainable parameter gets a gradient", "grad_flow:GradFlow",
               "every parameter gets a gradient"),
    CheckEntry("batch-independence", "sample i's output ignores sample j",
               "batch_independence:BatchIndependence", "samples do not mix in eval"),
    CheckEntry("causal-leak", "position t ignores inputs after t (--causal DIM)",
               "causal_leak:CausalLeak", "position t ignores later positions"),
    CheckEntry("eval-determinism", "two eval-mode forwards agree",
               "eval_determinism:EvalDeterminism", "two eval forwards agree"),
    CheckEntry("train-eval-gap", "how train and eval outputs differ, and why",
               "train_eval_gap:TrainEvalGap", "train and eval differ only as expected"),
    CheckEntry("init-loss", "loss at initialization is near chance", "init_loss:InitLoss",
               "the loss starts near chance"),
    CheckEntry("overfit-batch", "the model can memorise one small batch",
               "overfit_batch:OverfitBatch", "it can memorise one batch"),
    CheckEntry("param-update", "optimizer steps move every trainable parameter",
               "param_update:ParamUpdate", "an optimizer step moves every parameter"),
    CheckEntry("nan-inf", "output, loss and gradients are finite", "nan_inf:NanInf",
               "outputs, loss and gradients are finite"),
    CheckEntry("grad-scale", "gradients neither vanish nor explode across depth",
               "grad_scale:GradScale", "gradients neither vanish nor explode"),
    CheckEntry("dead-units", "share of ReLU units never active, per layer",
               "dead_units:DeadUnits", "ReLU units are alive"),
    CheckEntry("wiring", "weights train, residuals add once, attention sums its keys, ties hold",
               "wiring:Wiring", "the model is wired as its parts say"),
    CheckEntry("determinism", "same seed, same output and gradients",
               "determinism:Determinism", "same seed, same outputs and gradients"),
    CheckEntry("amp-drift", "low-precision autocast agrees with float32", "amp_drift:AmpDrift",
               "autocast agrees with float32"),
    CheckEntry("device-consistency", "every tensor follows the model's device",
               "device_consistency:DeviceConsistency", "tensors follow the model's device"),
    CheckEntry("exportable", "torch.export works; torch.compile graph breaks",
               "exportable:Exportable", "torch.export works"),
)  # fmt: skip

#: The public check ids, in report order.
CHECK_IDS: tuple[str, ...] = tuple(entry.id for entry in CHECKS)


def entry(check_id: str) -> CheckEntry:
    return next(e for e in CHECKS if e.id == check_id)


def guards(check_id: str) -> str:
    """What ``check_id`` guards against, in a few words."""
    return entry(check_id).guards


def load(check_id: str) -> Check[Any]:
    """An instance of the check registered under ``check_id``."""
    module_name, _, class_name = entry(check_id).impl.partition(":")
    module = importlib.import_module(f"torchwise.doctor.checks.{module_name}")
    cls: type[Check[Any]] = getattr(module, class_name)
    return cls()
