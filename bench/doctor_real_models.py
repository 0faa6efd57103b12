"""torchwise doctor on real third-party architectures: false alarms and planted-bug catches.

Runs the whole doctor suite on every healthy case of tests/doctor/doctor_real_cases.py
(transformers, diffusers and torch modules at test size, plus reproductions of the
nanoGPT, minGPT and timm zero-init patterns) and the check meant for each planted
bug, then prints a table, the false-alarm rate (healthy models with any FAIL or
WARN) and the catch rate (planted bugs flagged by their check). With
``--torchtest`` it also runs torchtest 0.5's suite (variables change after one
Adam step, NaN and inf in the output) on every case, with the loss doctor would
pick and a wrapper that calls the model with its real arguments (torchtest calls
``model(inputs)`` with one tensor).

With ``--mirror DIR`` it also runs doctor, through the CLI's own targets
(``file.py --build EXPR``, no wrapper file), on model files of public
repositories fetched as bare git directories under DIR (``owner+name/repo``, as
the ``fetch`` tool leaves them): karpathy/nanoGPT, pytorch/examples,
kuangliu/pytorch-cifar and milesial/Pytorch-UNet. The files are extracted to a
temporary directory for the run and never copied into this repository.

    python bench/doctor_real_models.py [--only NAME,NAME] [--torchtest] [--mirror /work/.mirror]
        [--mirror-only cifar,UNet]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import nn

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "doctor"))

from doctor_real_cases import HEALTHY, PLANTED, Case, build  # noqa: E402

from torchwise.doctor import Options, Status, check  # noqa: E402
from torchwise.doctor.context import primary_output  # noqa: E402
from torchwise.errors import TorchwiseError  # noqa: E402
from torchwise.losses import choose_loss  # noqa: E402
from torchwise.target import resolve_target  # noqa: E402


@dataclass
class External:
    """A model file of a public repository, run as a user would from the CLI."""

    name: str
    repo: str  # owner+name under the mirror directory
    paths: list[str]  # files or directories to extract
    target: str
    build: str
    inputs: list[str]
    options: dict[str, int] = field(default_factory=dict)


EXTERNAL = [
    External("nanoGPT GPT", "karpathy+nanoGPT", ["model.py"], "model.py",
             "GPT(GPTConfig(n_layer=2, n_head=2, n_embd=64, block_size=64, vocab_size=512))",
             ["i64[4,32]<512"], {"causal_dim": 1}),
    External("examples word LM, LSTM", "pytorch+examples", ["word_language_model/model.py"],
             "word_language_model/model.py", "RNNModel('LSTM', 100, 32, 32, 2)",
             ["i64[35,4]<100, (f32[2,4,32], f32[2,4,32])"], {"batch_dim": 1}),
    External("examples word LM, GRU", "pytorch+examples", ["word_language_model/model.py"],
             "word_language_model/model.py", "RNNModel('GRU', 100, 32, 32, 2)",
             ["i64[35,4]<100, f32[2,4,32]"], {"batch_dim": 1}),
    External("examples word LM, Transformer", "pytorch+examples",
             ["word_language_model/model.py"], "word_language_model/model.py",
             "TransformerModel(100, 32, 2, 64, 2)", ["i64[35,4]<100"],
             {"batch_dim": 1, "causal_dim": 0}),
    External("examples MNIST Net", "pytorch+examples", ["mnist/main.py"], "mnist/main.py",
             "Net()", ["f32[4,1,28,28]"]),
    External("examples super-resolution", "pytorch+examples", ["super_resolution/model.py"],
             "super_resolution/model.py", "Net(upscale_factor=3)", ["f32[4,1,16,16]"]),
    External("examples fast neural style", "pytorch+examples",
             ["fast_neural_style/neural_style/transformer_net.py"],
             "fast_neural_style/neural_style/transformer_net.py", "TransformerNet()",
             ["f32[2,3,32,32]"]),
    External("pytorch-cifar ResNet18", "kuangliu+pytorch-cifar", ["models"],
             "models/resnet.py", "ResNet18()", ["f32[4,3,32,32]"]),
    External("pytorch-cifar MobileNetV2", "kuangliu+pytorch-cifar", ["models"],
             "models/mobilenetv2.py", "MobileNetV2()", ["f32[4,3,32,32]"]),
    External("pytorch-cifar VGG11", "kuangliu+pytorch-cifar", ["models"], "models/vgg.py",
             "VGG('VGG11')", ["f32[4,3,32,32]"]),
    External("Pytorch-UNet UNet", "milesial+Pytorch-UNet", ["unet"], "unet.unet_model:UNet",
             "UNet(3, 2)", ["f32[2,3,32,32]"]),
]  # fmt: skip


@contextlib.contextmanager
def extracted(mirror: Path, case: External) -> Iterator[Path]:
    """The case's files from the bare repository, in a temporary working directory."""
    git_dir = mirror / case.repo / "repo"
    with tempfile.TemporaryDirectory() as tmp:
        archive = subprocess.run(
            ["git", f"--git-dir={git_dir}", "archive", "HEAD", *case.paths],
            check=True, capture_output=True,
        ).stdout  # fmt: skip
        subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
        cwd = Path.cwd()
        os.chdir(tmp)  # module targets (unet.unet_model) import from the working directory
        try:
            yield Path(tmp)
        finally:
            os.chdir(cwd)


def run_external(mirror: Path, case: External) -> tuple[list[str], float, str]:
    with extracted(mirror, case):
        rt = resolve_target(case.target, build=case.build, inputs=case.inputs,
                            batch_dim=case.options.get("batch_dim"))  # fmt: skip
        options = Options(batch_dim=rt.batch_dim, causal_dim=case.options.get("causal_dim"))
        start = time.perf_counter()
        report = check(rt.model, rt.args, kwargs=rt.kwargs, options=options, name=case.name)
        seconds = time.perf_counter() - start
    flagged = [f"{r.id} {r.status.value}" for r in report if r.status in (Status.FAIL, Status.WARN)]
    skipped = [r.id for r in report if r.status is Status.SKIP]
    return flagged, seconds, ", ".join(skipped)


def run(case: Case) -> tuple[str, list[str], float]:
    model, args, kwargs, options = build(case)
    checks = [case.check] if case.check else None
    start = time.perf_counter()
    report = check(model, args, checks, kwargs=kwargs, name=case.name, **options)
    seconds = time.perf_counter() - start
    flagged = [f"{r.id} {r.status.value}" for r in report if r.status in (Status.FAIL, Status.WARN)]
    meant = report[case.check].status.value if case.check else "-"
    return meant, flagged, seconds


class _CallWith(nn.Module):
    """torchwise's glue for torchtest: ``forward(ignored)`` calls the model with its real
    arguments and returns its primary output (``.logits``, the first float tensor)."""

    def __init__(self, model: nn.Module, args: tuple[object, ...], kwargs: dict[str, object]):
        super().__init__()
        self.model, self.args, self.kwargs = model, args, kwargs

    def forward(self, _: torch.Tensor) -> torch.Tensor:
        return primary_output(self.model(*self.args, **self.kwargs))


def run_torchtest(case: Case) -> str:
    """torchtest's full suite (vars change, NaN, inf) with the loss doctor would pick."""
    import torchtest

    model, args, kwargs, _ = build(case)
    wrapped = _CallWith(model, args, kwargs)
    with torch.no_grad():
        loss = choose_loss(wrapped(torch.zeros(1)))
    optim = torch.optim.Adam(wrapped.parameters(), lr=1e-3)
    try:
        torchtest.test_suite(
            wrapped, loss.fn, optim, [torch.zeros(1), loss.target],
            test_vars_change=True, test_nan_vals=True, test_inf_vals=True,
        )  # fmt: skip
    except (
        torchtest.VariablesChangeException,
        torchtest.NaNTensorException,
        torchtest.InfTensorException,
    ) as exc:
        return f"caught ({type(exc).__name__.replace('Exception', '')})"
    except Exception as exc:  # a crash is a verdict here, not a bench failure
        return f"crash ({type(exc).__name__})"
    return "pass"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--only", help="comma-separated names of tests/doctor cases")
    parser.add_argument("--mirror", type=Path, help="fetched repositories (owner+name/repo)")
    parser.add_argument("--torchtest", action="store_true", help="add torchtest's verdicts")
    parser.add_argument(
        "--mirror-only", help="comma-separated substrings of repository model names"
    )
    args = parser.parse_args(argv)
    wanted = set(args.only.split(",")) if args.only else None
    warnings.filterwarnings("ignore")
    torch.set_num_threads(2)
    healthy = [c for c in HEALTHY if wanted is None or c.name in wanted]
    picked = args.mirror_only.split(",") if args.mirror_only else None
    planted = [c for c in PLANTED if wanted is None or c.name in wanted]
    print("## Healthy real models: the whole doctor suite\n")
    peer = run_torchtest if args.torchtest else (lambda case: "-")
    print("| model | architecture | doctor flags | seconds | torchtest |")
    print("|---|---|---|---:|---|")
    false_alarms, peer_alarms, times = 0, 0, []
    for case in healthy:
        _, flagged, seconds = run(case)
        verdict = peer(case)
        false_alarms += bool(flagged)
        peer_alarms += verdict not in ("pass", "-")
        times.append(seconds)
        print(f"| {case.name} | {case.source} | {', '.join(flagged) or '-'} | {seconds:.1f} | "
              f"{verdict} |")  # fmt: skip
    print("\n## Planted bugs: the check meant for each\n")
    print("| case | model | bug | check | doctor | torchtest |")
    print("|---|---|---|---|---|---|")
    caught = peer_caught = 0
    for case in planted:
        meant, _, _ = run(case)
        verdict = peer(case)
        caught += meant in ("fail", "warn")
        peer_caught += verdict.startswith("caught")
        bug = case.bug.replace("|", "\\|")
        print(f"| {case.name} | {case.source} | {bug} | {case.check} | {meant} | {verdict} |")
    if healthy:
        print(
            f"\nfalse alarms: {false_alarms} of {len(healthy)} healthy models have a FAIL or WARN; "
            f"median {statistics.median(times):.1f}s per full suite (shared machine)"
        )
    if planted:
        print(f"planted bugs caught by their check: {caught} of {len(planted)}")
    if args.torchtest:
        print(f"torchtest: {peer_alarms} of {len(healthy)} healthy models flagged (or crashed), "
              f"{peer_caught} of {len(planted)} planted bugs caught")  # fmt: skip
    if args.mirror is not None:
        run_mirror(args.mirror, picked)


def run_mirror(mirror: Path, picked: list[str] | None = None) -> None:
    print("\n## Model files of public repositories, from the CLI's targets\n")
    print("| model | repository | target | flagged | skipped | seconds |")
    print("|---|---|---|---|---|---:|")
    alarms = total = 0
    for case in EXTERNAL:
        if picked is not None and not any(part in case.name for part in picked):
            continue
        if not (mirror / case.repo / "repo").is_dir():
            print(f"| {case.name} | {case.repo} | not fetched | | | |")
            continue
        repo = case.repo.replace("+", "/")
        target = f"`{case.target} --build {case.build}`"
        try:
            flagged, seconds, skipped = run_external(mirror, case)
        except TorchwiseError as exc:  # the file does not load here: say why, do not count
            print(f"| {case.name} | {repo} | {target} | not loadable: {exc.message} | | |")
            continue
        alarms += bool(flagged)
        total += 1
        print(f"| {case.name} | {repo} | {target} | {', '.join(flagged) or '-'} | "
              f"{skipped or '-'} | {seconds:.1f} |")  # fmt: skip
    print(f"\nrepository models with a FAIL or WARN: {alarms} of {total}")


if __name__ == "__main__":
    main()
