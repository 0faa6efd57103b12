"""torchwise inspect on real third-party models: counts against each library's own, FLOPs
against the peers (fvcore, ptflops, torchinfo, FlopCounterMode), in one run.

    python bench/inspect_real.py [--mirror /work/.mirror] [--models gpt2,resnet50]

Models come from their libraries, never copied here: timm (through an empty
torchvision stand-in when PyPI's CUDA torchvision cannot load), transformers and
diffusers from PyPI, and, when the repositories are present under ``--mirror``
(bare git copies, as the ``fetch`` tool makes them), files read from git:
karpathy/nanoGPT ``model.py``, karpathy/minGPT ``mingpt/``, pytorch/examples
``word_language_model/model.py``, milesial/Pytorch-UNet ``unet/`` and
kuangliu/pytorch-cifar ``models/``. torchwise runs on meta (its default), the
peers on the real CPU model; MACs are forward multiply-accumulates, batch 1.
minGPT (a lambda closing over its MLP) is also checked for the untouched-model
guarantee: a training-mode inspection must leave no ``.grad`` on its parameters.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.util
import io
import subprocess
import sys
import tempfile
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from torchwise.model import summarize

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "model"))
from real_models import import_timm

Inputs = tuple[tuple[Any, ...], dict[str, Any]]


@dataclass
class Real:
    name: str
    source: str  # "timm", "transformers 5.x", "karpathy/nanoGPT model.py"...
    build: Callable[[], torch.nn.Module]
    inputs: Callable[[], Inputs]
    own_count: Callable[[torch.nn.Module], int] | None = None
    peers: bool = True  # False: too big to run for real (meta only)


def _image(size: int = 224) -> Callable[[], Inputs]:
    return lambda: ((torch.randn(1, 3, size, size),), {})


def _tokens(vocab: int, seq: int = 128) -> Callable[[], Inputs]:
    return lambda: ((torch.randint(0, vocab, (1, seq)),), {})


def timm_models() -> list[Real]:
    timm = import_timm()
    if timm is None:
        return []
    names = [
        "resnet50",
        "vit_small_patch16_224",
        "convnext_tiny",
        "efficientnet_b0",
        "mobilenetv3_large_100",
        "swin_tiny_patch4_window7_224",
    ]
    return [
        Real(name, f"timm {timm.__version__}", lambda name=name: timm.create_model(name), _image())
        for name in names
    ]


def hub_models() -> list[Real]:
    import diffusers as D
    import transformers as T

    T.logging.set_verbosity_error()
    version = f"transformers {T.__version__}"
    own = lambda model: model.num_parameters()  # noqa: E731
    llama7b = T.LlamaConfig(
        hidden_size=4096,
        intermediate_size=11008,
        num_hidden_layers=32,
        num_attention_heads=32,
        num_key_value_heads=32,
        vocab_size=32000,
    )
    mixtral = T.MixtralConfig(
        num_hidden_layers=2,
        hidden_size=256,
        intermediate_size=512,
        num_attention_heads=8,
        num_key_value_heads=4,
        vocab_size=1000,
        num_local_experts=8,
    )
    ids = torch.randint(0, 32000, (1, 128))

    def on_meta(make: Callable[[], torch.nn.Module]) -> Callable[[], torch.nn.Module]:
        def build() -> torch.nn.Module:
            with torch.device("meta"):
                return make()

        return build

    return [
        Real(
            "gpt2 (124M)", version, lambda: T.GPT2LMHeadModel(T.GPT2Config()), _tokens(50257), own
        ),
        Real("bert-base", version, lambda: T.BertModel(T.BertConfig()), _tokens(30522), own),
        Real(
            "t5-small",
            version,
            lambda: T.T5ForConditionalGeneration(T.T5Config()),
            lambda: ((ids % 32128,), {"decoder_input_ids": ids % 32128}),
            own,
        ),
        Real("vit-base (HF)", version, lambda: T.ViTModel(T.ViTConfig()), _image(), own),
        Real(
            "mixtral (2 layers, 8 experts)",
            version,
            lambda: T.MixtralForCausalLM(mixtral),
            _tokens(1000),
            own,
        ),
        Real(
            "llama-2-7b config",
            version,
            on_meta(lambda: T.LlamaForCausalLM(llama7b)),
            _tokens(32000),
            own,
            peers=False,
        ),
        Real(
            "ddpm-cifar10 UNet2DModel",
            f"diffusers {D.__version__}",
            lambda: D.UNet2DModel(
                sample_size=32,
                block_out_channels=(128, 256, 256, 256),
                down_block_types=("DownBlock2D", "AttnDownBlock2D", "DownBlock2D", "DownBlock2D"),
                up_block_types=("UpBlock2D", "UpBlock2D", "AttnUpBlock2D", "UpBlock2D"),
            ),
            lambda: ((torch.randn(1, 3, 32, 32), torch.tensor([10])), {}),
            own,
        ),
    ]


def _checkout(mirror: Path, repo: str, paths: list[str], into: Path) -> Path | None:
    """Files of a mirrored repository (bare git) written under ``into``; None if absent."""
    git_dir = mirror / repo.replace("/", "+") / "repo"
    if not git_dir.is_dir():
        return None
    root = into / repo.replace("/", "+")
    for path in paths:
        shown = subprocess.run(
            ["git", "--git-dir", str(git_dir), "show", f"HEAD:{path}"],
            capture_output=True,
            check=True,
        )
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_bytes(shown.stdout)
    return root


def _import(root: Path, module: str) -> Any:
    """A package module from a checkout (``mingpt.model``): its root goes on sys.path."""
    sys.path.insert(0, str(root))
    return importlib.import_module(module)


def _load_file(path: Path, name: str) -> Any:
    """A single-file module under a unique name (two repositories both have model.py)."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def repo_models(mirror: Path, into: Path) -> list[Real]:
    found: list[Real] = []
    nano = _checkout(mirror, "karpathy/nanoGPT", ["model.py"], into)
    if nano is not None:
        m = _load_file(nano / "model.py", "nanogpt_model")
        found.append(
            Real(
                "nanoGPT GPT-2 (124M)",
                "karpathy/nanoGPT model.py",
                lambda: m.GPT(m.GPTConfig()),
                _tokens(50304),
                lambda model: model.get_num_params(non_embedding=False),
            )
        )
    mingpt = _checkout(
        mirror,
        "karpathy/minGPT",
        ["mingpt/__init__.py", "mingpt/model.py", "mingpt/utils.py"],
        into,
    )
    if mingpt is not None:
        mm = _import(mingpt, "mingpt.model")

        def build_mingpt() -> torch.nn.Module:
            config = mm.GPT.get_default_config()
            config.model_type, config.vocab_size, config.block_size = "gpt2", 50257, 1024
            return mm.GPT(config)

        found.append(
            Real(
                "minGPT gpt2 (124M)",
                "karpathy/minGPT mingpt/model.py",
                build_mingpt,
                _tokens(50257),
            )
        )
    examples = _checkout(mirror, "pytorch/examples", ["word_language_model/model.py"], into)
    if examples is not None:
        wlm = _load_file(examples / "word_language_model" / "model.py", "word_lm_model")
        found.append(
            Real(
                "word_language_model LSTM",
                "pytorch/examples word_language_model",
                lambda: wlm.RNNModel("LSTM", 33278, 200, 200, 2),
                lambda: (
                    (
                        torch.randint(0, 33278, (35, 20)),
                        (torch.zeros(2, 20, 200), torch.zeros(2, 20, 200)),
                    ),
                    {},
                ),
            )
        )
        found.append(
            Real(
                "word_language_model Transformer",
                "pytorch/examples word_language_model",
                lambda: wlm.TransformerModel(33278, 200, 2, 200, 2),
                lambda: ((torch.randint(0, 33278, (35, 20)),), {}),
            )
        )
    unet = _checkout(
        mirror,
        "milesial/Pytorch-UNet",
        ["unet/__init__.py", "unet/unet_model.py", "unet/unet_parts.py"],
        into,
    )
    if unet is not None:
        um = _import(unet, "unet")
        found.append(
            Real(
                "Pytorch-UNet UNet(3 to 2)",
                "milesial/Pytorch-UNet unet/",
                lambda: um.UNet(3, 2),
                _image(256),
            )
        )
    cifar = _checkout(
        mirror, "kuangliu/pytorch-cifar", ["models/resnet.py", "models/mobilenetv2.py"], into
    )
    if cifar is not None:
        res = _import(cifar, "models.resnet")
        mob = _import(cifar, "models.mobilenetv2")
        found.append(
            Real(
                "pytorch-cifar ResNet18",
                "kuangliu/pytorch-cifar models/resnet.py",
                res.ResNet18,
                _image(32),
            )
        )
        found.append(
            Real(
                "pytorch-cifar MobileNetV2",
                "kuangliu/pytorch-cifar models/",
                mob.MobileNetV2,
                _image(32),
            )
        )
    return found


def peer_macs(
    model: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> dict[str, Any]:
    """Each peer's forward MACs (or why it failed)."""
    results: dict[str, Any] = {}

    def fvcore() -> Any:
        from fvcore.nn import FlopCountAnalysis

        if kwargs:
            return "n/a (keyword inputs)"
        analysis = FlopCountAnalysis(model, args)
        analysis.unsupported_ops_warnings(False).uncalled_modules_warnings(False)
        return analysis.total()

    def ptflops() -> Any:
        import inspect as pyinspect

        from ptflops import get_model_complexity_info

        names = list(pyinspect.signature(model.forward).parameters)
        feed = {**dict(zip(names, args, strict=False)), **kwargs}
        macs, _ = get_model_complexity_info(
            model,
            (1,),
            input_constructor=lambda _: feed,
            as_strings=False,
            print_per_layer_stat=False,
            verbose=False,
        )
        return macs

    def torchinfo() -> Any:
        import torchinfo as ti

        return ti.summary(
            model, input_data=list(args), verbose=0, mode="eval", **kwargs
        ).total_mult_adds

    def flop_counter() -> Any:
        from torch.utils.flop_counter import FlopCounterMode

        with torch.no_grad(), FlopCounterMode(display=False) as counter:
            model(*args, **kwargs)
        return counter.get_total_flops() // 2

    for label, run in (
        ("fvcore", fvcore),
        ("ptflops", ptflops),
        ("torchinfo", torchinfo),
        ("FlopCounterMode", flop_counter),
    ):
        try:
            with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
                warnings.simplefilter("ignore")
                with contextlib.redirect_stderr(io.StringIO()):
                    results[label] = run()
        except Exception as exc:  # a peer failing is a result, not a crash
            results[label] = f"failed ({type(exc).__name__})"
    return results


def giga(value: Any, reference: int | None = None) -> str:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int):
        return str(value)
    text = f"{value / 1e9:.3f}G"
    if reference:
        text += f" ({value / reference:.2f}x)"
    return text


def untouched(model: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    """Run a training-mode inspection (forward + backward) and check the caller's model."""
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    model.train()
    summarize(model, args, kwargs, device="cpu", mode="train")
    grads = sum(p.grad is not None for p in model.parameters())
    same = all(torch.equal(before[n], p) for n, p in model.named_parameters())
    return "untouched" if grads == 0 and same and model.training else f"TOUCHED ({grads} grads)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mirror", type=Path, default=Path("/work/.mirror"))
    parser.add_argument("--models", default="", help="comma-separated names (default: all)")
    options = parser.parse_args()
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as tmp:
        models = timm_models() + hub_models() + repo_models(options.mirror, Path(tmp))
        wanted = set(options.models.split(",")) if options.models else None
        print(
            "| Model | Source | Params | Library's count | torchwise full | torchwise "
            "no-attention | attention | fvcore | ptflops | torchinfo | FlopCounterMode |"
        )
        print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for real in models:
            if wanted is not None and real.name not in wanted:
                continue
            with contextlib.redirect_stdout(io.StringIO()):
                model = real.build().eval()
            args, kwargs = real.inputs()
            summary = summarize(model, args, kwargs, estimate_training=False)
            full = summary.macs_forward
            no_attention = (summary.flops_forward - summary.attention_flops_forward) // 2
            own = real.own_count(model) if real.own_count else None
            own_text = (
                "-" if own is None else f"{own:,}" + (" ✓" if own == summary.total_params else "")
            )
            share = f"{100 * summary.attention_flops_forward / max(summary.flops_forward, 1):.1f}%"
            peers = peer_macs(model, args, kwargs) if real.peers else {}
            cells = [
                real.name,
                real.source,
                f"{summary.total_params:,}",
                own_text,
                giga(full),
                giga(no_attention),
                share,
            ]
            cells += [
                giga(peers.get(p, "-"), no_attention)
                for p in ("fvcore", "ptflops", "torchinfo", "FlopCounterMode")
            ]
            print("| " + " | ".join(cells) + " |", flush=True)
            if real.name.startswith("minGPT"):
                print(
                    f"<!-- minGPT, training-mode inspection: {untouched(model, args, kwargs)} -->"
                )


if __name__ == "__main__":
    main()
