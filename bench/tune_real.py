"""Does tune's advice hold on real models? Each recommendation applied and timed again.

For each real third-party model (transformers and timm from PyPI with small configs;
nanoGPT, pytorch/examples' word-language-model LSTM and pytorch-cifar's MobileNetV2
read from their repositories under ``--mirror`` when present), in one run:

1. ``tune()`` runs as a user runs it (the default 60 s budget, no finders, AdamW,
   the loss torchwise picks for the output);
2. an independent interleaved run then measures, round-robin in a shuffled order
   (``--rounds`` rounds, samples of about 20 ms of steps after the settle steps each
   setting needs): the default step, tune's whole recommendation, each recommended
   knob alone on the default step, and every comparison tune made (the knob on top of
   the knobs it was measured on, and those knobs without it);
3. each comparison's per-round time ratio gets a 95% Wilcoxon signed-rank interval
   (Hodges-Lehmann estimate). The advice **helped** when the interval lies below 1,
   **hurt** when above, and was **neutral** otherwise; a verdict of tune is
   **contradicted** only when the re-measurement's interval excludes 1 on the other
   side ("faster" re-measured slower, or the reverse; "no significant difference"
   re-measured beyond 5% either way).

The same sweep code as bench/tune_accuracy.py, on models no one here wrote.

    python bench/tune_real.py [--models gpt2,bert,...] [--rounds 15] [--budget 60]
                              [--mirror /work/.mirror] [--threads 1]
                              [--out bench/.out/tune_real.json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from torchwise.tune import TuneReport, tune
from torchwise.tune.api import build_workload
from torchwise.tune.options import TuneOptions
from torchwise.tune.search import settings_for
from torchwise.tune.stats import median
from torchwise.tune.step import StepSettings

BENCH = Path(__file__).resolve().parent
sys.path[:0] = [str(BENCH), str(BENCH.parent / "tests" / "model")]
from real_models import import_timm  # noqa: E402

from inspect_real import _checkout, _import, _load_file  # noqa: E402
from tune_accuracy import Arm, key, label, sweep, versus  # noqa: E402

OUT = BENCH / ".out"


@dataclass
class Real:
    name: str
    source: str
    build: Callable[[], torch.nn.Module]
    inputs: Callable[[], tuple[Any, ...]]
    batch_dim: int = 0


def _ids(vocab: int, batch: int = 8, seq: int = 64) -> Callable[[], tuple[Any, ...]]:
    return lambda: (torch.randint(0, vocab, (batch, seq)),)


def _images(batch: int, size: int) -> Callable[[], tuple[Any, ...]]:
    return lambda: (torch.randn(batch, 3, size, size),)


def pypi_models() -> list[Real]:
    found: list[Real] = []
    try:
        import transformers as T
    except ImportError:
        T = None
    if T is not None:
        T.logging.set_verbosity_error()
        small = {"num_hidden_layers": 2, "hidden_size": 128, "intermediate_size": 512,
                 "num_attention_heads": 4, "vocab_size": 1000}  # fmt: skip
        found += [
            Real(
                "gpt2",
                f"transformers {T.__version__} GPT2LMHeadModel",
                lambda: T.GPT2LMHeadModel(
                    T.GPT2Config(n_layer=2, n_embd=128, n_head=4, vocab_size=1000, n_positions=64)
                ),
                _ids(1000),
            ),
            Real(
                "llama",
                f"transformers {T.__version__} LlamaForCausalLM",
                lambda: T.LlamaForCausalLM(T.LlamaConfig(**small, num_key_value_heads=2)),
                _ids(1000),
            ),
            Real(
                "bert",
                f"transformers {T.__version__} BertForSequenceClassification",
                lambda: T.BertForSequenceClassification(T.BertConfig(**small, num_labels=4)),
                _ids(1000),
            ),
        ]
    timm = import_timm()
    if timm is not None:
        found += [
            Real(
                "timm-resnet18",
                f"timm {timm.__version__} resnet18",
                lambda: timm.create_model("resnet18", pretrained=False, num_classes=10),
                _images(8, 64),
            ),
            Real(
                "timm-vit-tiny",
                f"timm {timm.__version__} vit_tiny_patch16_224 (img_size=64)",
                lambda: timm.create_model(
                    "vit_tiny_patch16_224", pretrained=False, num_classes=10, img_size=64
                ),
                _images(8, 64),
            ),
        ]
    return found


def repo_models(mirror: Path, into: Path) -> list[Real]:
    found: list[Real] = []
    nano = _checkout(mirror, "karpathy/nanoGPT", ["model.py"], into)
    if nano is not None:
        m = _load_file(nano / "model.py", "nanogpt_model")
        found.append(
            Real(
                "nanogpt",
                "karpathy/nanoGPT model.py (4 layers, 128 wide)",
                lambda: m.GPT(
                    m.GPTConfig(n_layer=4, n_head=4, n_embd=128, block_size=64, vocab_size=1000)
                ),
                _ids(1000),
            )
        )
    examples = _checkout(mirror, "pytorch/examples", ["word_language_model/model.py"], into)
    if examples is not None:
        wlm = _load_file(examples / "word_language_model" / "model.py", "word_lm_model")
        found.append(
            Real(
                "word-lm-lstm",
                "pytorch/examples word_language_model RNNModel(LSTM)",
                lambda: wlm.RNNModel("LSTM", 1000, 128, 128, 2),
                lambda: (
                    torch.randint(0, 1000, (35, 8)),
                    (torch.zeros(2, 8, 128), torch.zeros(2, 8, 128)),
                ),
                batch_dim=1,
            )
        )
    cifar = _checkout(mirror, "kuangliu/pytorch-cifar", ["models/mobilenetv2.py"], into)
    if cifar is not None:
        mob = _import(cifar, "models.mobilenetv2")
        found.append(
            Real(
                "cifar-mobilenetv2",
                "kuangliu/pytorch-cifar models/mobilenetv2.py",
                mob.MobileNetV2,
                _images(4, 32),
            )
        )
    return found


def outcome(low: float, high: float) -> str:
    return "helped" if high < 1 else "hurt" if low > 1 else "neutral"


def contradicted(verdict: str, ratio: float, low: float, high: float) -> bool | None:
    """Whether the re-measurement contradicts tune's verdict (None: not a timed verdict)."""
    if verdict == "faster":
        return low > 1
    if verdict == "slower":
        return high < 1
    if verdict == "no significant difference":
        return high < 0.95 or low > 1.05
    return None


def run_model(real: Real, rounds: int, budget: float, seed: int) -> dict[str, Any]:
    torch.manual_seed(seed)
    model = real.build()
    inputs = real.inputs()
    t0 = time.perf_counter()
    report: TuneReport = tune(
        model,
        inputs,
        budget_s=budget,
        batch_dim=real.batch_dim,
        seed=seed,
        find_batch_size=False,
        profile=False,
        notify=lambda line: print(f"    {line}", file=sys.stderr),
    )
    tune_seconds = time.perf_counter() - t0
    accepted = [t.knob for t in report.search.accepted]
    pick = settings_for(accepted)
    knobs = {t.knob.id: t.knob for t in report.trials}
    settings: dict[Any, StepSettings] = {}

    def add(s: StepSettings) -> Any:
        settings.setdefault(key(s, None), s)
        return key(s, None)

    default_key = add(StepSettings())
    pick_key = add(pick)
    alone = {k.id: add(settings_for([k])) for k in accepted}
    comparisons = []
    for trial in report.trials:
        c = trial.comparison
        if trial.knob.kind != "speed" or c is None or trial.error is not None:
            continue
        incumbent = [knobs[k] for k in trial.on_top_of]
        comparisons.append(
            (trial, add(settings_for([*incumbent, trial.knob])), add(settings_for(incumbent)))
        )
    options = TuneOptions(batch_dim=real.batch_dim)
    workload, _ = build_workload(
        model, inputs, None, None, None, options, torch.device("cpu"), real.name
    )
    arms, sweep_seconds = sweep(workload, list(settings.values()), rounds, seed, None)
    by_key: dict[Any, Arm] = {key(a.settings, None): a for a in arms}

    def measured(arm_key: Any, base_key: Any) -> list[float]:
        if arm_key == base_key:
            return [1.0, 1.0, 1.0]
        return list(versus(by_key[arm_key], by_key[base_key]))

    whole = measured(pick_key, default_key)
    singles = {}
    for knob_id, k in alone.items():
        r = measured(k, default_key)
        singles[knob_id] = {"remeasured": r, "outcome": outcome(r[1], r[2])}
    verdicts = []
    for trial, arm_key, base_key in comparisons:
        r = measured(arm_key, base_key)
        c = trial.comparison
        assert c is not None
        verdicts.append(
            {
                "knob": trial.knob.id,
                "on_top_of": list(trial.on_top_of),
                "tune": [c.ratio, c.ci_low, c.ci_high],
                "verdict": trial.status,
                "remeasured": r,
                "contradicted": contradicted(trial.status, *r),
            }
        )
    combined = report.search.combined
    return {
        "model": real.name,
        "source": real.source,
        "default_ms": median(by_key[default_key].times) * 1e3,
        "recommended": [k.id for k in accepted],
        "recommended_label": label(pick, None),
        "tune_claim": None
        if combined is None
        else [combined.ratio, combined.ci_low, combined.ci_high],
        "remeasured": whole,
        "outcome": outcome(whole[1], whole[2]) if accepted else "no advice",
        "singles": singles,
        "verdicts": verdicts,
        "tune_seconds": tune_seconds,
        "remeasure_seconds": sweep_seconds,
        "rounds": rounds,
    }


def _r(triple: list[float]) -> str:
    ratio, low, high = triple
    return f"{ratio:.2f} ({low:.2f}-{high:.2f})"


def print_tables(results: list[dict[str, Any]]) -> None:
    print(
        "\n| model | default step | tune recommends | tune's claim: time ratio (95% CI) "
        "| re-measured | outcome | tune s |"
    )
    print("|---|---:|---|---|---|---|---:|")
    for r in results:
        claim = "-" if r["tune_claim"] is None else _r(r["tune_claim"])
        print(
            f"| {r['model']} | {r['default_ms']:.1f} ms | {', '.join(r['recommended']) or '-'} "
            f"| {claim} | {_r(r['remeasured']) if r['recommended'] else '-'} | {r['outcome']} "
            f"| {r['tune_seconds']:.0f} |"
        )
    print("\n| model | recommended knob, alone on the default step | re-measured | outcome |")
    print("|---|---|---|---|")
    tally: dict[str, int] = {}
    for r in results:
        for knob, s in r["singles"].items():
            tally[s["outcome"]] = tally.get(s["outcome"], 0) + 1
            print(f"| {r['model']} | {knob} | {_r(s['remeasured'])} | {s['outcome']} |")
    wholes: dict[str, int] = {}
    for r in results:
        wholes[r["outcome"]] = wholes.get(r["outcome"], 0) + 1
    print(f"\nwhole recommendations: {wholes}")
    print(f"single recommended knobs: {tally}")
    print("\n| model | knob | on top of | tune: ratio (CI), verdict | re-measured | contradicted |")
    print("|---|---|---|---|---|---|")
    checked = contra = 0
    for r in results:
        for v in r["verdicts"]:
            if v["contradicted"] is not None:
                checked += 1
                contra += v["contradicted"]
            print(
                f"| {r['model']} | {v['knob']} | {' + '.join(v['on_top_of']) or '-'} | "
                f"{_r(v['tune'])}, {v['verdict']} | {_r(v['remeasured'])} | "
                f"{'YES' if v['contradicted'] else 'no'} |"
            )
    print(f"\ntimed verdicts contradicted by the re-measurement: {contra} of {checked}")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--models", default="")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--budget", type=float, default=60.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--mirror", type=Path, default=Path("/work/.mirror"))
    parser.add_argument("--out", type=Path, default=OUT / "tune_real.json")
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="start at this intra-op thread count (on a machine loaded past its cores, "
        "2 threads ran a step up to 25x slower than 1 and dwarfed every other knob)",
    )
    args = parser.parse_args()
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    warnings.filterwarnings("ignore")
    started = time.perf_counter()
    load = os.getloadavg()[0]
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        models = pypi_models() + repo_models(args.mirror, Path(tmp))
        wanted = [m for m in args.models.split(",") if m]
        by_name = {m.name: m for m in models}
        unknown = [n for n in wanted if n not in by_name]
        if unknown:
            parser.error(f"unknown model(s) {unknown}; known: {', '.join(by_name)}")
        for real in [by_name[n] for n in wanted] if wanted else models:
            print(f"{real.name} ({real.source}):", file=sys.stderr)
            results.append(run_model(real, args.rounds, args.budget, args.seed))
            r = results[-1]
            args.out.parent.mkdir(parents=True, exist_ok=True)  # kept as it goes: runs are long
            args.out.write_text(json.dumps(results, indent=1, default=str))
            print(
                f"  recommends {r['recommended']}: re-measured {_r(r['remeasured'])} "
                f"({r['outcome']})",
                file=sys.stderr,
            )
    print(
        f"torch {torch.__version__}, {os.cpu_count()} cores, load average {load:.1f} -> "
        f"{os.getloadavg()[0]:.1f}, {time.perf_counter() - started:.0f} s in all"
    )
    print_tables(results)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1, default=str))


if __name__ == "__main__":
    main()
