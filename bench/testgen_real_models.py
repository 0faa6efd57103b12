"""`torchwise tests` on real models no one here wrote: generate, run with pytest, plant a bug.

Each case copies a model's files from a repository mirrored by the `fetch` tool
(/work/.mirror/OWNER+NAME, read with git; nothing is committed) or names a
transformers or diffusers class, into a fresh project; generates its test module with
`write_tests`; runs the module with pytest in a subprocess (as a user would);
then, where a bug is listed, plants it in the copy and runs the same module
again. The table reports what the module holds, the seconds to generate it and
to run it (pytest's own figure, without interpreter start-up), and whether the
planted bug failed it (pytest -x: the first failing test is named), and
torchtest's verdict (vars change, NaN, inf) on the same model. Timings are single
runs unless --repeats; the machine may be shared, so compare rows, not machines.

    .venv/bin/python bench/testgen_real_models.py [--repeats 3] [--only nanoGPT]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from torchwise.testgen import write_tests

MIRROR = Path("/work/.mirror")
EXAMPLE = Path(__file__).parents[1] / "examples" / "cifar_project"


@dataclass(frozen=True)
class Bug:
    kind: str  # "detached branch", "causal mask off", ...
    file: str
    text: str
    replacement: str


@dataclass(frozen=True)
class Case:
    name: str
    source: str  # "OWNER+NAME" of a mirror, "hf", or "example"
    files: dict[str, str]  # file in the project -> path in the repository
    target: str
    inputs: tuple[str, ...] = ()
    build: str | None = None
    init_kwargs: str | None = None
    bugs: tuple[Bug, ...] = ()


GPT_IDS = "i64[batch=2,seq=16]<64, i64[batch=2,seq=16]<64"
NANOGPT_ATTN = "y = y.transpose(1, 2).contiguous().view(B, T, C)"

CASES = [
    Case(
        "examples/cifar_project (ours)", "example", {}, "cifarnet",
        bugs=(
            Bug("dropout active in eval", "model.py", "return self.head(self.dropout(x))",
                "return self.head(F.dropout(x, 0.1))"),
            Bug("detached branch", "model.py", "x = self.stages(self.stem(images))",
                "x = self.stages(self.stem(images).detach())"),
            Bug("wrong reshape (view for a transpose)", "model.py",
                "x = self.pool(x).flatten(1)", "x = self.pool(x).view(-1, x.size(0)).t()"),
        ),
    ),
    Case(
        "nanoGPT", "karpathy+nanoGPT", {"model.py": "model.py"}, "model.py",
        inputs=(GPT_IDS,),
        build="GPT(GPTConfig(block_size=32, vocab_size=64, n_layer=2, n_head=2, n_embd=32))",
        bugs=(
            Bug("causal mask off", "model.py", "is_causal=True", "is_causal=False"),
            Bug("wrong reshape (heads not moved back)", "model.py", NANOGPT_ATTN,
                "y = y.contiguous().view(B, T, C)"),
            Bug("detached branch", "model.py", "x = x + self.mlp(self.ln_2(x))",
                "x = x + self.mlp(self.ln_2(x)).detach()"),
            Bug("dropout active in eval", "model.py", "x = self.dropout(x)",
                "x = F.dropout(x, 0.1)"),
        ),
    ),
    Case(
        "minGPT", "karpathy+minGPT",
        {"mingpt/__init__.py": "mingpt/__init__.py", "mingpt/model.py": "mingpt/model.py",
         "mingpt/utils.py": "mingpt/utils.py"},
        "mingpt.model:GPT", inputs=(GPT_IDS,),
        build="GPT(CN(model_type=None, n_layer=2, n_head=2, n_embd=32, vocab_size=64, "
        "block_size=16, embd_pdrop=0.1, resid_pdrop=0.1, attn_pdrop=0.1))",
        bugs=(
            Bug("causal mask off", "mingpt/model.py",
                "att = att.masked_fill(self.bias[:,:,:T,:T] == 0, float('-inf'))", "pass"),
            Bug("detached branch", "mingpt/model.py", "x = x + self.attn(self.ln_1(x))",
                "x = x + self.attn(self.ln_1(x)).detach()"),
            Bug("dropout active in eval", "mingpt/model.py", "att = self.attn_dropout(att)",
                "att = F.dropout(att, 0.1)"),
        ),
    ),
    Case(
        "word_language_model (LSTM)", "pytorch+examples",
        {"model.py": "word_language_model/model.py"}, "model.py",
        inputs=("i64[seq=10,batch=4]<50, (f32[2,4,16], f32[2,4,16])",),
        build="RNNModel('LSTM', 50, 16, 16, 2)",
        bugs=(
            Bug("dropout active in eval", "model.py", "emb = self.drop(self.encoder(input))",
                "emb = F.dropout(self.encoder(input), 0.5)"),
            Bug("detached branch", "model.py", "output = self.drop(output)",
                "output = self.drop(output).detach()"),
        ),
    ),
    Case(
        "Pytorch-UNet", "milesial+Pytorch-UNet",
        {"unet/__init__.py": "unet/__init__.py", "unet/unet_model.py": "unet/unet_model.py",
         "unet/unet_parts.py": "unet/unet_parts.py"},
        "unet.unet_model:UNet", inputs=("f32[batch=2,3,32,32]",),
        init_kwargs='{"n_channels": 3, "n_classes": 2}',
        bugs=(
            Bug("batch statistics in eval", "unet/unet_parts.py",
                "nn.BatchNorm2d(mid_channels),",
                "nn.BatchNorm2d(mid_channels, track_running_stats=False),"),
            Bug("detached branch", "unet/unet_parts.py", "x1 = self.up(x1)",
                "x1 = self.up(x1).detach()"),
        ),
    ),
    Case(
        "transformers GPT2LMHeadModel", "hf", {}, "hf:GPT2LMHeadModel",
        init_kwargs='{"n_layer": 1, "n_embd": 32, "n_head": 2, "vocab_size": 128, '
        '"n_positions": 64}',
    ),
    Case(
        "transformers BertModel", "hf", {}, "hf:BertModel",
        init_kwargs='{"num_hidden_layers": 1, "hidden_size": 32, "num_attention_heads": 2, '
        '"intermediate_size": 64, "vocab_size": 128, "max_position_embeddings": 64}',
    ),
    Case(
        "diffusers UNet2DModel", "hf", {}, "hf:UNet2DModel",
        inputs=("f32[batch=2,3,8,8], i64[batch=2]<1000",),
        init_kwargs='{"sample_size": 16, "in_channels": 3, "out_channels": 3, '
        '"block_out_channels": [32, 64], "layers_per_block": 1, "norm_num_groups": 8, '
        '"down_block_types": ["DownBlock2D", "AttnDownBlock2D"], '
        '"up_block_types": ["AttnUpBlock2D", "UpBlock2D"]}',
    ),
    Case(
        "pytorch-cifar ResNet18", "kuangliu+pytorch-cifar", {"resnet.py": "models/resnet.py"},
        "resnet.py:ResNet18", inputs=("f32[batch=2,3,32,32]",),
        bugs=(
            Bug("batch statistics in eval", "resnet.py", "self.bn1 = nn.BatchNorm2d(64)",
                "self.bn1 = nn.BatchNorm2d(64, track_running_stats=False)"),
            Bug("detached branch", "resnet.py", "out = F.relu(self.bn1(self.conv1(x)))",
                "out = F.relu(self.bn1(self.conv1(x))).detach()"),
            Bug("wrong reshape (view for a transpose)", "resnet.py",
                "out = out.view(out.size(0), -1)", "out = out.view(-1, out.size(0)).t()"),
        ),
    ),
]  # fmt: skip


def _copy(case: Case, project: Path) -> None:
    (project / "pyproject.toml").write_text("[project]\nname = 'bench'\n")
    if case.source == "example":
        for path in EXAMPLE.iterdir():
            if path.is_file():
                (project / path.name).write_bytes(path.read_bytes())
        return
    for dest, src in case.files.items():
        text = subprocess.run(
            ["git", f"--git-dir={MIRROR / case.source / 'repo'}", "show", f"HEAD:{src}"],
            capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
        (project / dest).parent.mkdir(parents=True, exist_ok=True)
        (project / dest).write_text(text)


def _pytest(project: Path, *options: str) -> tuple[str, float, list[str]]:
    """(summary line, pytest's seconds, failed test names)."""
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=",
         "-rfE", *options, "tests"],
        cwd=project, capture_output=True, text=True, timeout=1800,
    )  # fmt: skip
    last = run.stdout.strip().splitlines()[-1] if run.stdout.strip() else run.stderr[-300:]
    seconds = re.search(r"in ([\d.]+)s", last)
    failed = re.findall(r"^(?:FAILED|ERROR) \S+::(\S+)", run.stdout, flags=re.M)
    return last.strip("= "), float(seconds.group(1)) if seconds else float("nan"), failed


def _plant(project: Path, bug: Bug) -> str:
    """Plant ``bug`` in the project's copy; returns the healthy text to restore."""
    source = (project / bug.file).read_text()
    assert bug.text in source, f"the bug's text is not in {bug.file}: {bug.text}"
    (project / bug.file).write_text(source.replace(bug.text, bug.replacement, 1))
    return source


def _torchtest(project: Path, case: Case) -> str:
    """torchtest's suite (vars change, NaN, inf) on the project's model, in a subprocess
    (each project names its module the same). The model's extra forward arguments are
    bound, as a torchtest user would do: torchtest feeds one input tensor."""
    spec = json.dumps({"target": case.target, "inputs": list(case.inputs), "build": case.build,
                       "init_kwargs": case.init_kwargs})  # fmt: skip
    run = subprocess.run(
        [sys.executable, __file__, "--torchtest-one", spec],
        cwd=project, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    lines = run.stdout.strip().splitlines()
    return lines[-1] if lines else f"crash ({run.stderr.strip().splitlines()[-1][:80]})"


def torchtest_one(spec_json: str) -> None:
    import torch
    import torchtest

    from torchwise.doctor.context import primary_output
    from torchwise.losses import choose_loss
    from torchwise.target import resolve_target

    spec = json.loads(spec_json)
    sys.path.insert(0, os.getcwd())
    resolved = resolve_target(spec["target"], inputs=spec["inputs"], build=spec["build"],
                              init_kwargs=spec["init_kwargs"], build_on="cpu")  # fmt: skip
    model, args, kwargs = resolved.model, list(resolved.args), dict(resolved.kwargs)
    fed = next(iter(kwargs)) if not args else None  # hf: targets take keyword inputs
    first = args.pop(0) if args else kwargs.pop(str(fed))

    class Bound(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            if fed is not None:
                return primary_output(self.model(*args, **{fed: x}, **kwargs))
            return primary_output(self.model(x, *args, **kwargs))

    bound = Bound()
    with torch.no_grad():
        loss = choose_loss(bound(first))
    try:
        torchtest.test_suite(
            bound, loss.fn, torch.optim.Adam(bound.parameters(), lr=1e-3), [first, loss.target],
            test_vars_change=True, test_nan_vals=True, test_inf_vals=True,
        )  # fmt: skip
        print("pass")
    except (torchtest.VariablesChangeException, torchtest.NaNTensorException,
            torchtest.InfTensorException) as exc:  # fmt: skip
        print(f"caught ({type(exc).__name__.replace('Exception', '')})")


def run_case(case: Case, repeats: int, with_torchtest: bool) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="tw-testgen-bench-") as tmp:
        project = Path(tmp)
        _copy(case, project)
        cwd = Path.cwd()
        os.chdir(project)  # module targets (mingpt.model, unet.unet_model) import from here
        try:
            generate_s = []
            for _ in range(repeats):
                start = time.perf_counter()
                result = write_tests(case.target, inputs=case.inputs, build=case.build,
                                     init_kwargs=case.init_kwargs, output="tests/test_model.py",
                                     force=True)  # fmt: skip
                generate_s.append(time.perf_counter() - start)
        finally:
            os.chdir(cwd)
        runs = [_pytest(project) for _ in range(repeats)]
        row: dict[str, object] = {
            "model": case.name,
            "tests": len(result.tests) + len(result.included_checks),
            "doctor": ", ".join(result.included_checks),
            "left out": "; ".join(f"{t.name}: {t.why}" for t in result.left_out),
            "options": result.doctor_options,
            "generate_s": statistics.median(generate_s),
            "pytest_s": statistics.median(r[1] for r in runs),
            "healthy": runs[0][0],
            "warnings": result.warnings,
        }
        if with_torchtest:
            row["torchtest healthy"] = _torchtest(project, case)
        for n, bug in enumerate(case.bugs, 1):
            healthy = _plant(project, bug)
            # -x: a bug is caught at the first failing test (the rest would only add time)
            _, seconds, failed = _pytest(project, "-x")
            verdict = f"CAUGHT by {', '.join(failed)}" if failed else "missed"
            row[f"bug {n}"] = f"{bug.kind}: {verdict} ({seconds:.0f} s)"
            if with_torchtest:
                row[f"bug {n}"] += f"; torchtest: {_torchtest(project, case)}"
            (project / bug.file).write_text(healthy)
        return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--only", help="run the cases whose name contains one of these (A,B)")
    parser.add_argument("--no-torchtest", action="store_true", help="skip the torchtest runs")
    parser.add_argument("--torchtest-one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.torchtest_one:
        torchtest_one(args.torchtest_one)
        return
    with_torchtest = not args.no_torchtest and importlib.util.find_spec("torchtest") is not None
    for case in CASES:
        if args.only and not any(part in case.name for part in args.only.split(",")):
            continue
        if case.source not in ("hf", "example") and not (MIRROR / case.source).is_dir():
            print(f"{case.name}: skipped, {MIRROR / case.source} is not mirrored (fetch it)")
            continue
        row = run_case(case, args.repeats, with_torchtest)
        print(f"\n== {row['model']}", flush=True)
        for key, value in row.items():
            if key != "model" and value not in ("", [], {}):
                shown = f"{value:.1f}" if isinstance(value, float) else value
                print(f"  {key:<10} {shown}", flush=True)


if __name__ == "__main__":
    main()
