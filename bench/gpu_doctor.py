"""torchwise doctor on CUDA: healthy real models and planted bugs, verdicts as JSON.

Runs the whole doctor suite on healthy timm and transformers models at tiny configs
(no weights, no network) and on torchwise's zoo, each built and fed exactly as
``torchwise doctor TARGET --device cuda`` does (one seed for the weights, inputs and
every draw), then the check meant for each planted bug. Prints a table and writes
``gpu_doctor.json`` to ``--out``. Needs no torchwise install:

    PYTHONPATH=src python3 bench/gpu_doctor.py --out DIR

A model that cannot be built here (a timm or transformers version without it) is
recorded as not built, with the reason; the script never stops on one model. It
stops starting new healthy models after 70% of ``--budget`` seconds (default 90) and
new planted bugs after all of it, and says which were left out. ``--device cpu`` runs
the same on the CPU (a dry run).
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
import traceback
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from torchwise.doctor import Status, check, doctor_batch, seed_all  # noqa: E402
from torchwise.target import resolve_target  # noqa: E402

LM = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
      "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 128,
      "max_position_embeddings": 64}  # fmt: skip
TEXT = ["input_ids=i64[batch=4,seq=16]<128"]
CAUSAL = {"causal_dim": 1}
IMAGE64 = ["f32[batch=4,3,64,64]"]


@dataclass
class Model:
    name: str
    target: str
    inputs: list[str] = field(default_factory=list)
    init_kwargs: dict[str, Any] | None = None
    options: dict[str, Any] = field(default_factory=dict)


HEALTHY = [
    Model("timm resnet18", "timm:resnet18", IMAGE64, {"num_classes": 10}),
    Model("timm deit_tiny", "timm:deit_tiny_patch16_224", IMAGE64,
          {"img_size": 64, "num_classes": 10}),
    Model("timm regnetx_002", "timm:regnetx_002", IMAGE64, {"num_classes": 10}),
    Model("timm mobilenetv3_small", "timm:mobilenetv3_small_100", IMAGE64, {"num_classes": 10}),
    Model("timm convnext_atto", "timm:convnext_atto", IMAGE64, {"num_classes": 10}),
    Model("timm levit_128s", "timm:levit_128s", ["f32[batch=4,3,224,224]"], {"num_classes": 10}),
    Model("zoo resnet18", "zoo:resnet18", IMAGE64),
    Model("zoo llama-tiny", "zoo:llama-tiny", ["i64[batch=4,seq=16]<256"], options=CAUSAL),
    Model("hf GPT-2", "hf:GPT2LMHeadModel", TEXT,
          {"n_layer": 2, "n_embd": 64, "n_head": 4, "vocab_size": 128, "n_positions": 64},
          CAUSAL),
    Model("hf Llama", "hf:LlamaForCausalLM", TEXT, dict(LM), CAUSAL),
    Model("hf Qwen3-MoE", "hf:Qwen3MoeForCausalLM", TEXT,
          {**LM, "moe_intermediate_size": 64, "num_experts": 4, "num_experts_per_tok": 2,
           "head_dim": 16}, CAUSAL),
    Model("hf BERT classifier", "hf:BertForSequenceClassification", TEXT,
          {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
           "num_attention_heads": 4, "vocab_size": 128, "num_labels": 3}),
    Model("hf CLIP", "hf:CLIPModel", ["input_ids=i64[batch=4,8]<64",
                                       "pixel_values=f32[batch=4,3,32,32]"],
          {"text_config": {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
                           "num_attention_heads": 2, "vocab_size": 64,
                           "max_position_embeddings": 16, "bos_token_id": 0, "eos_token_id": 2},
           "vision_config": {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
                             "num_attention_heads": 2, "image_size": 32, "patch_size": 8},
           "projection_dim": 16}),
    Model("hf Whisper", "hf:WhisperForConditionalGeneration",
          ["input_features=f32[batch=2,16,32]", "decoder_input_ids=i64[batch=2,8]<64"],
          {"d_model": 32, "encoder_layers": 2, "decoder_layers": 2,
           "encoder_attention_heads": 2, "decoder_attention_heads": 2, "encoder_ffn_dim": 64,
           "decoder_ffn_dim": 64, "num_mel_bins": 16, "max_source_positions": 16,
           "max_target_positions": 32, "vocab_size": 64, "pad_token_id": 0, "bos_token_id": 1,
           "eos_token_id": 2, "decoder_start_token_id": 1}),
]  # fmt: skip


def _hook(module: nn.Module, fn: Callable[[torch.Tensor], torch.Tensor]) -> None:
    def apply(m: nn.Module, args: Any, out: Any) -> Any:
        if isinstance(out, torch.Tensor):
            return fn(out)
        if isinstance(out, tuple) and out and isinstance(out[0], torch.Tensor):
            return (fn(out[0]), *out[1:])
        return out

    module.register_forward_hook(apply)


def _batch_stats(model: nn.Module) -> None:
    for m in model.modules():
        if isinstance(m, nn.modules.batchnorm._BatchNorm):
            m.track_running_stats = False
            m.running_mean = m.running_var = None


def _numpy_noise(model: nn.Module) -> None:
    import numpy as np

    def noisy(m: nn.Module, args: Any, out: torch.Tensor) -> torch.Tensor:
        if not m.training:
            return out
        noise = np.random.normal(0, 0.1, tuple(out.shape)).astype("float32")
        return out + torch.from_numpy(noise).to(out.device)

    model.transformer.wte.register_forward_hook(noisy)


def _distance_head(model: nn.Module) -> None:
    head = model.classifier
    head.protos = nn.Parameter(torch.randn(3, head.in_features, device=head.weight.device) * 0.1
                               + 3.0)  # fmt: skip

    def distances(m: nn.Module, args: Any, out: torch.Tensor) -> torch.Tensor:
        e = F.relu(args[0]) + 3.0
        return -((e**2).sum(-1, keepdim=True) + (m.protos**2).sum(-1) - 2 * e @ m.protos.T)

    head.register_forward_hook(distances)


def _cpu_tensor(model: nn.Module) -> None:
    _hook(model.lm_head, lambda t: t + torch.zeros(t.shape[-1]))


def _residual_twice(model: nn.Module) -> None:
    for layer in model.model.layers:
        layer.register_forward_hook(
            lambda m, args, out: (out[0] + args[0], *out[1:]) if isinstance(out, tuple)
            else out + args[0]
        )  # fmt: skip


@dataclass
class Planted:
    name: str
    base: str
    check: str
    plant: Callable[[nn.Module], None]


PLANTED = [
    Planted("resnet18 batch stats in eval", "timm resnet18", "batch-independence", _batch_stats),
    Planted("GPT-2 block detached", "hf GPT-2", "grad-flow",
            lambda m: _hook(m.transformer.h[0].mlp, lambda t: t.detach())),
    Planted("GPT-2 numpy noise", "hf GPT-2", "determinism", _numpy_noise),
    Planted("BERT distance head", "hf BERT classifier", "amp-drift", _distance_head),
    Planted("Llama CPU tensor", "hf Llama", "device-consistency", _cpu_tensor),
    Planted("Llama residual twice", "hf Llama", "wiring", _residual_twice),
    Planted("Llama dropout in eval", "hf Llama", "eval-determinism",
            lambda m: _hook(m.model.layers[0].mlp, lambda t: F.dropout(t, 0.1))),
]  # fmt: skip


def build(model: Model, device: str, seed: int = 0) -> tuple[Any, Any, Any, dict[str, Any]]:
    """The model and batch ``torchwise doctor TARGET --device DEVICE`` would run."""
    seed_all(seed)
    rt = resolve_target(model.target, inputs=model.inputs, device=device,
                        init_kwargs=None if model.init_kwargs is None
                        else json.dumps(model.init_kwargs))  # fmt: skip
    rt.model.to(device)
    args, kwargs = doctor_batch(rt, inputs_given=bool(model.inputs), device=device, seed=seed)
    return rt.model, args, kwargs, {**model.options, "batch_dim": rt.batch_dim, "seed": seed}


def _error(exc: BaseException) -> str:
    line = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {line[0][:200] if line else ''}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, required=True, help="directory for gpu_doctor.json")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--budget", type=float, default=90.0, help="seconds before stopping")
    args = parser.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        print("error: --device cuda: CUDA is not available here (use --device cpu for a dry run)")
        return 2
    warnings.filterwarnings("ignore")
    args.out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    env = {
        "device": torch.cuda.get_device_name(0) if args.device == "cuda" else platform.processor(),
        "torch": torch.__version__, "python": platform.python_version(),
        "cuda": torch.version.cuda,
    }  # fmt: skip
    for lib in ("timm", "transformers"):
        try:
            env[lib] = __import__(lib).__version__
        except Exception as exc:  # recorded, not fatal: its models are then not built
            env[lib] = f"not importable: {_error(exc)}"
    results: dict[str, Any] = {"environment": env, "healthy": {}, "planted": {}, "left_out": []}
    print(f"doctor on {env['device']} (torch {env['torch']})")
    for model in HEALTHY:
        if time.perf_counter() - start > 0.7 * args.budget:
            results["left_out"].append(model.name)
            continue
        row: dict[str, Any] = {"target": model.target}
        try:
            built = build(model, args.device)
        except Exception as exc:
            row["not_built"] = _error(exc)
            results["healthy"][model.name] = row
            print(f"  {model.name}: not built ({row['not_built']})")
            continue
        t0 = time.perf_counter()
        try:
            report = check(built[0], built[1], kwargs=built[2], name=model.name, **built[3])
        except Exception as exc:
            row["error"] = _error(exc)
            row["traceback"] = traceback.format_exc()[-2000:]
            results["healthy"][model.name] = row
            print(f"  {model.name}: doctor raised {row['error']}")
            continue
        row["seconds"] = round(time.perf_counter() - t0, 2)
        row["verdicts"] = {r.id: r.status.value for r in report}
        row["flagged"] = [f"{r.id} {r.status.value}: {r.summary[:300]}" for r in report
                          if r.status in (Status.FAIL, Status.WARN)]  # fmt: skip
        row["evidence"] = {r.id: r.evidence for r in report if r.id in ("determinism", "amp-drift")}
        results["healthy"][model.name] = row
        print(f"  {model.name}: {len(row['flagged'])} flagged in {row['seconds']}s")
        for line in row["flagged"]:
            print(f"      {line}")
    for bug in PLANTED:
        if time.perf_counter() - start > args.budget:
            results["left_out"].append(bug.name)
            continue
        base = next(m for m in HEALTHY if m.name == bug.base)
        row = {"base": bug.base, "check": bug.check}
        try:
            model, margs, mkwargs, options = build(base, args.device)
            bug.plant(model)
            result = check(model, margs, [bug.check], kwargs=mkwargs, **options)[bug.check]
            row.update(status=result.status.value, summary=result.summary[:300])
        except Exception as exc:
            row["error"] = _error(exc)
        results["planted"][bug.name] = row
        print(f"  planted {bug.name}: {row.get('status', row.get('error'))}")
    healthy = [r for r in results["healthy"].values() if "verdicts" in r]
    planted = [r for r in results["planted"].values() if "status" in r]
    results["summary"] = {
        "healthy_run": len(healthy),
        "healthy_flagged": sum(bool(r["flagged"]) for r in healthy),
        "planted_run": len(planted),
        "planted_caught": sum(r["status"] in ("fail", "warn") for r in planted),
        "seconds": round(time.perf_counter() - start, 1),
    }
    (args.out / "gpu_doctor.json").write_text(json.dumps(results, indent=1, default=str))
    print(json.dumps(results["summary"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
