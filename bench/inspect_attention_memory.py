"""inspect's training-memory estimate against a real step's peak, for attention models.

    PYTHONPATH=src python3 bench/inspect_attention_memory.py [--baseline-src DIR]
    PYTHONPATH=src python3 bench/inspect_attention_memory.py --device cuda --out DIR

Each model is estimated on meta (``torchwise.model.summarize``, ``memory_for`` cpu
and cuda) and then trained for one AdamW step with cross-entropy (after a first
step made the optimizer state, gradients freed with ``set_to_none``), its peak
measured as docs/benchmarks.md's issue-24 figures were: on the CPU by replaying
the allocator's events (``torchwise.tune.memory.measure_step_memory``), on CUDA
with ``torch.cuda.max_memory_allocated``. ``--baseline-src`` estimates again with
another checkout's ``src`` (in a subprocess; an older torchwise has no
``memory_for``) for the "before" column. Models: the zoo's nanoGPT-style GPT-2
(``F.scaled_dot_product_attention(..., is_causal=True)``) and transformers'
GPT-2 (sdpa and eager), with and without attention dropout, and transformers'
BERT (sdpa, a padding mask); tiny configurations on the CPU, GPT-2 small at
8 x 512 on CUDA (the H200 figure that motivated this: 10.72 GiB estimated,
6.85 GiB measured). ``--out DIR`` writes ``attention_memory.json`` there.
"""

from __future__ import annotations

import argparse
import inspect as pyinspect
import json
import os
import subprocess
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

Build = Callable[[bool], tuple[torch.nn.Module, tuple[Any, ...], dict[str, Any], torch.Tensor]]
MiB = 2**20


def _hf_gpt2(attn: str, pdrop: float) -> Build:
    def build(full: bool) -> tuple[torch.nn.Module, tuple[Any, ...], dict[str, Any], torch.Tensor]:
        from transformers import GPT2Config, GPT2LMHeadModel

        size = {} if full else {"n_layer": 4, "n_embd": 256, "n_head": 8, "vocab_size": 512}
        config = GPT2Config(**size, attn_pdrop=pdrop, use_cache=False)
        config._attn_implementation = attn
        vocab, shape = config.vocab_size, ((8, 512) if full else (4, 512))
        ids = torch.randint(0, vocab, shape)
        return GPT2LMHeadModel(config), (ids,), {}, torch.randint(0, vocab, shape)

    return build


def _zoo_gpt2(pdrop: float) -> Build:
    def build(full: bool) -> tuple[torch.nn.Module, tuple[Any, ...], dict[str, Any], torch.Tensor]:
        from torchwise.zoo.gpt2 import GPT2

        model = GPT2(dropout=pdrop) if full else GPT2(512, 512, 4, 8, 256, pdrop)
        vocab, shape = (50257, (8, 512)) if full else (512, (4, 512))
        return model, (torch.randint(0, vocab, shape),), {}, torch.randint(0, vocab, shape)

    return build


def _hf_bert(pdrop: float) -> Build:
    def build(full: bool) -> tuple[torch.nn.Module, tuple[Any, ...], dict[str, Any], torch.Tensor]:
        from transformers import BertConfig, BertForMaskedLM

        size = {} if full else {"num_hidden_layers": 4, "hidden_size": 256,
                                "num_attention_heads": 8, "intermediate_size": 1024,
                                "vocab_size": 512}  # fmt: skip
        config = BertConfig(**size, attention_probs_dropout_prob=pdrop)
        config._attn_implementation = "sdpa"
        vocab, shape = config.vocab_size, ((8, 512) if full else (4, 512))
        mask = torch.ones(shape, dtype=torch.long)
        mask[0, shape[1] // 2 :] = 0  # one padded sequence: SDPA gets an explicit mask
        ids = torch.randint(0, vocab, shape)
        kwargs = {"attention_mask": mask}
        return BertForMaskedLM(config), (ids,), kwargs, torch.randint(0, vocab, shape)

    return build


MODELS: dict[str, Build] = {
    "zoo GPT-2 (sdpa), no attention dropout": _zoo_gpt2(0.0),
    "zoo GPT-2 (sdpa), attention dropout 0.1": _zoo_gpt2(0.1),
    "transformers GPT-2 sdpa, no attention dropout": _hf_gpt2("sdpa", 0.0),
    "transformers GPT-2 sdpa, attention dropout 0.1": _hf_gpt2("sdpa", 0.1),
    "transformers GPT-2 eager, no attention dropout": _hf_gpt2("eager", 0.0),
    "transformers BERT sdpa + padding mask, no attention dropout": _hf_bert(0.0),
}


def estimate(name: str, full: bool, memory_for: str | None) -> dict[str, Any]:
    """inspect's AdamW total on meta (``memory_for`` None: an older torchwise)."""
    from torchwise.model import summarize

    torch.manual_seed(0)
    model, args, kwargs, _ = MODELS[name](full)
    options = {"memory_for": memory_for} if memory_for else {}
    if "memory_for" not in pyinspect.signature(summarize).parameters:
        options = {}
    summary = summarize(model, args, kwargs, device="meta", **options)
    assert summary.training is not None
    return {
        "bytes": summary.training.total("adamw"),
        "kernels": getattr(summary, "attention_kernels", {}),
        "device_used": summary.device_used,
    }


def measured_peak(name: str, full: bool, device: torch.device) -> int:
    from torchwise.tune.memory import live_training_state, measure_step_memory

    torch.manual_seed(0)
    model, args, kwargs, labels = MODELS[name](full)
    model = model.to(device).train()
    args = tuple(a.to(device) for a in args)
    kwargs = {k: v.to(device) for k, v in kwargs.items()}
    labels = labels.to(device)
    optimizer = torch.optim.AdamW(model.parameters())

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        out = model(*args, **kwargs)
        logits = out.logits if hasattr(out, "logits") else out
        F.cross_entropy(logits.flatten(0, -2), labels.flatten()).backward()
        optimizer.step()

    step()
    optimizer.zero_grad(set_to_none=True)
    state = lambda: live_training_state(model, optimizer)  # noqa: E731
    return measure_step_memory(step, device, state).peak


def baseline(src: Path, name: str, full: bool) -> int:
    """The estimate another checkout's torchwise makes (run in a fresh process)."""
    code = (
        "import json, sys; sys.path.insert(0, sys.argv[1]); import inspect_attention_memory as b; "
        "print(json.dumps(b.estimate(sys.argv[2], sys.argv[3] == '1', None)))"
    )
    env = dict(os.environ, PYTHONPATH=str(src))
    here = str(Path(__file__).resolve().parent)
    command = [sys.executable, "-c", code, here, name, "1" if full else "0"]
    out = subprocess.run(command, env=env, capture_output=True, text=True, check=True).stdout
    return int(json.loads(out.strip().splitlines()[-1])["bytes"])


def _cell(estimate: int | None, peak: int) -> str:
    return "-" if estimate is None else f"{estimate / MiB:,.0f} MiB ({estimate / peak:.2f})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--baseline-src", type=Path, help="another checkout's src/ (before)")
    parser.add_argument("--out", type=Path, help="write attention_memory.json here")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    device, full = torch.device(args.device), args.device == "cuda"
    print(f"torch {torch.__version__}, {args.device}; load {os.getloadavg()[0]:.1f}")
    rows: dict[str, Any] = {}
    here, other = ("cuda", "cpu") if full else ("cpu", "cuda")
    print(f"| model | before | estimate for {here} | measured peak | estimate for {other} | "
          "kernels (meta run) |")  # fmt: skip
    print("|---|---|---|---|---|---|")
    for name in MODELS:
        mine, theirs = estimate(name, full, here), estimate(name, full, other)
        peak = measured_peak(name, full, device)
        before = baseline(args.baseline_src, name, full) if args.baseline_src else None
        rows[name] = {"before": before, here: mine, other: theirs, "measured_peak": peak}
        kernels = f"{here} {mine['kernels'] or '-'}, {other} {theirs['kernels'] or '-'}"
        cells = [
            name, _cell(before, peak), _cell(mine["bytes"], peak), f"{peak / MiB:,.0f} MiB",
            f"{theirs['bytes'] / MiB:,.0f} MiB", f"{kernels} ({mine['device_used']})",
        ]  # fmt: skip
        print("| " + " | ".join(cells) + " |")
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        text = json.dumps({"device": args.device, "torch": torch.__version__, "rows": rows})
        (args.out / "attention_memory.json").write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
