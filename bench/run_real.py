"""``torchwise run`` on real public training scripts: planted bugs caught, clean scripts clean.

The scripts come from public repositories fetched with the ``fetch`` tool into
``/work/.mirror`` (bare git directories; see ``REPOS`` for the commits). Each is
extracted at its recorded commit into a temporary directory, with the data
stand-ins it reads made beside it (never an edit to the script), and run:

1. clean, under ``torchwise run`` (the findings must hold no warning or error
   that is not a real bug of the script), and with the checks off, to measure
   the overhead on the median step;
2. once per planted bug: a patch applied to a copy (one bug per copy), run under
   ``torchwise run`` (caught: the expected code, as a warning or an error, at the
   expected line), under a plain run that only stops at the same budget
   (``fast_dev_run``-style: caught when it crashes at that line), and under
   ``torch.autograd.detect_anomaly`` (caught when anomaly mode raises there).

    .venv/bin/python bench/run_real.py [--mirror /work/.mirror] [--jobs 2] [--out DIR]

Prints Markdown tables (the run section of docs/benchmarks.md) and, with
``--out``, the raw results as JSON.
"""

# ruff: noqa: E501  (the tables of scripts and planted bugs read best one entry a line)

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from torchwise.run import RunOptions, run_script  # noqa: E402

#: repository -> the commit the scripts are read at
REPOS = {
    "graykode/nlp-tutorial": "d05e31ec81d56d70c1db89b99ab07e948f7ebc11",
    "jcjohnson/pytorch-examples": "0003fcdc606a79951e53bf8f46f8574fa4739f23",
    "karpathy/ng-video-lecture": "52201428ed7b46804849dea0b3ccf0de9df1a5c3",
    "devnag/pytorch-generative-adversarial-networks": "26db8c9fec86817d9211d2c0a424b48b14d5a0e0",
    "rasbt/LLMs-from-scratch": "",  # filled from the mirror's HEAD (recorded in the output)
    "aws-samples/awsome-distributed-training": "6b3b0363ca49cad5a9c9bdcf2a80ffa3ef326388",
    "wangkuiyi/pytorch-distributed-tutorials": "4a918a5d8b72426de82ef4d9ac67f3146b9574ab",
    "xuqi220/pytorch-distributed-training": "ef5b6ecf25b72ef9e40d56ac5a26707a0274fb2d",
    "karpathy/llama2.c": "350e04fe35433e6d2941dce5a1f53308f87058eb",
}

Maker = Callable[[Path], None]


def _shakespeare(directory: Path) -> None:
    """input.txt: a character corpus (ng-video-lecture reads tiny Shakespeare)."""
    lines = [
        "First Citizen: Before we proceed any further, hear me speak.",
        "All: Speak, speak. You are all resolved rather to die than to famish?",
        "MENENIUS: Either you must confess yourselves wondrous malicious, or be",
        "accused of folly. I shall tell you a pretty tale: it may be you have heard it.",
    ]
    (directory / "input.txt").write_text("\n".join(lines * 150) + "\n", encoding="utf-8")


def _token_shards(directory: Path) -> None:
    """data/tok512/data0N.bin: raw uint16 token ids, as llama2.c's pretokenize writes them
    (shard 0 is its validation split, the rest its training split)."""
    import numpy as np

    shards = directory / "data" / "tok512"
    shards.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    for number in range(3):
        tokens = rng.integers(0, 512, size=20_000, dtype=np.uint16)
        tokens.tofile(shards / f"data{number:02d}.bin")


#: llama2.c's train.py at a size that runs in seconds on a CPU
LLAMA2C_ARGS = (
    "--compile=False", "--dtype=float32", "--vocab_source=custom", "--vocab_size=512",
    "--batch_size=4", "--max_seq_len=64", "--dim=64", "--n_layers=2", "--n_heads=4",
    "--n_kv_heads=4", "--gradient_accumulation_steps=2", "--max_iters=20",
    "--eval_interval=2", "--eval_iters=2", "--warmup_iters=1", "--always_save_checkpoint=True",
)  # fmt: skip


@dataclass(frozen=True)
class Script:
    name: str
    repo: str
    path: str
    make_data: Maker | None = None
    args: tuple[str, ...] = ()
    as_cuda: bool = False
    nproc: int = 1
    #: simulated GPUs (with as_cuda): 0 is one per rank
    gpus: int = 0
    #: files a run leaves that change the next one (a snapshot it resumes from): deleted first
    fresh: tuple[str, ...] = ()
    #: the script listens on a fixed port: two copies of it never run at once
    fixed_port: bool = False


@dataclass(frozen=True)
class Plant:
    """One planted bug: ``old`` replaced by ``new`` in a copy; the finding belongs at
    the line holding ``at`` in the patched script."""

    script: str
    code: str
    what: str
    old: str
    new: str
    at: str
    #: further (old, new) edits of the same bug
    more: tuple[tuple[str, str], ...] = field(default=())
    #: the file patched (and where the finding belongs), beside the script; "" is the script
    file: str = ""


NLP = "graykode/nlp-tutorial"
SCRIPTS = (
    Script("nnlm", NLP, "1-1.NNLM/NNLM.py"),
    Script("word2vec", NLP, "1-2.Word2Vec/Word2Vec-Skipgram(Softmax).py"),
    Script("textcnn", NLP, "2-1.TextCNN/TextCNN.py"),
    Script("textrnn", NLP, "3-1.TextRNN/TextRNN.py"),
    Script("textlstm", NLP, "3-2.TextLSTM/TextLSTM.py"),
    Script("bilstm", NLP, "3-3.Bi-LSTM/Bi-LSTM.py"),
    Script("seq2seq", NLP, "4-1.Seq2Seq/Seq2Seq.py"),
    Script("seq2seq-attention", NLP, "4-2.Seq2Seq(Attention)/Seq2Seq(Attention).py"),
    Script("bilstm-attention", NLP, "4-3.Bi-LSTM(Attention)/Bi-LSTM(Attention).py"),
    Script("transformer", NLP, "5-1.Transformer/Transformer.py"),
    Script("bert", NLP, "5-2.BERT/BERT.py"),
    Script("two-layer-optim", "jcjohnson/pytorch-examples", "nn/two_layer_net_optim.py"),
    Script("two-layer-module", "jcjohnson/pytorch-examples", "nn/two_layer_net_module.py"),
    Script("dynamic-net", "jcjohnson/pytorch-examples", "nn/dynamic_net.py"),
    Script("bigram", "karpathy/ng-video-lecture", "bigram.py", _shakespeare),
    Script("bigram-cuda", "karpathy/ng-video-lecture", "bigram.py", _shakespeare, as_cuda=True),
    Script("gan-1d", "devnag/pytorch-generative-adversarial-networks", "gan_pytorch.py"),
    Script(
        "ddp-toy",
        "rasbt/LLMs-from-scratch",
        "appendix-A/01_main-chapter-code/DDP-script-torchrun.py",
        as_cuda=True,
        nproc=2,
    ),
    Script(
        "llama2c",
        "karpathy/llama2.c",
        "train.py",
        _token_shards,
        args=LLAMA2C_ARGS,
        as_cuda=True,
        nproc=2,
    ),
    Script(
        "aws-cpu-ddp",
        "aws-samples/awsome-distributed-training",
        "3.test_cases/pytorch/cpu-ddp/ddp.py",
        args=("2", "1", "--batch_size", "32", "--checkpoint_path", "./snap.pt"),
        nproc=2,
        fresh=("snap.pt",),
    ),
    # two scripts that start their own ranks with torch.multiprocessing.spawn
    Script("spawn-cpu", "wangkuiyi/pytorch-distributed-tutorials", "ddp-cpu.py", fixed_port=True),
    Script(
        "spawn-per-gpu",
        "xuqi220/pytorch-distributed-training",
        "ddp_mp.py",
        args=("--max_epochs", "2"),
        as_cuda=True,
        gpus=2,
        fixed_port=True,
    ),
)


def _head(mirror: Path, repo: str) -> str:
    git_dir = mirror / repo.replace("/", "+") / "repo"
    result = subprocess.run(
        ["git", f"--git-dir={git_dir}", "rev-parse", "HEAD"], capture_output=True, text=True
    )
    return result.stdout.strip()


def extract(mirror: Path, script: Script, into: Path) -> Path:
    """The script's directory from the repository at its commit, under ``into``."""
    git_dir = mirror / script.repo.replace("/", "+") / "repo"
    commit = REPOS[script.repo] or _head(mirror, script.repo)
    folder = str(Path(script.path).parent)
    archive = subprocess.run(
        ["git", f"--git-dir={git_dir}", "archive", commit, *([folder] if folder != "." else [])],
        capture_output=True,
        check=True,
    )
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    path = into / script.path
    if script.make_data is not None:
        script.make_data(path.parent)
    return path


#: per script with a fixed port: held while one copy of it runs
_PORTS: dict[str, threading.Lock] = {}
_UNLOCKED = contextlib.nullcontext()

#: the scripts' environment: one thread each (two runs share the machine), no plot windows
ENV = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "MPLBACKEND": "Agg"}


def run_one(
    script: Script, path: Path, *, checks: bool = True, anomaly: bool = False, steps: int = 5
) -> dict[str, Any]:
    """One run in the script's directory; its findings and summary as plain data."""
    for name in script.fresh:
        (path.parent / name).unlink(missing_ok=True)
    options = RunOptions(
        steps=steps, as_cuda=script.as_cuda, gpus=script.gpus, nproc=script.nproc, checks=checks,
        detect_anomaly=anomaly, timeout=600, collective_timeout=20, script_output="capture",
        extra_env=ENV,
    )  # fmt: skip
    started = time.perf_counter()
    with _PORTS.setdefault(script.name, threading.Lock()) if script.fixed_port else _UNLOCKED:
        report = run_script(path, script.args, options=options, cwd=path.parent)
    return {
        "findings": [
            {"code": f.code, "line": f.line, "severity": f.severity.value,
             "file": Path(f.path).name, "message": f.message}
            for f in report.findings
        ],
        "summary": report.summary(),
        "seconds": round(time.perf_counter() - started, 1),
        "output_tail": report.output[-600:],
    }  # fmt: skip


def line_of(path: Path, needle: str) -> int:
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if needle in line:
            return number
    raise ValueError(f"{needle!r} not in {path}")


#: steps per pass of the clean runs: enough steps for a median step time
OVERHEAD_STEPS = 10
#: interleaved repeats of each mode; the fastest median of each is compared
REPEATS = 2


def clean_runs(mirror: Path, jobs: int, names: set[str]) -> dict[str, dict[str, Any]]:
    def one(script: Script) -> tuple[str, dict[str, Any]]:
        with tempfile.TemporaryDirectory(prefix="run-real-") as tmp:
            path = extract(mirror, script, Path(tmp))
            runs = []
            for _ in range(REPEATS):  # interleaved: a spell of load hits both modes alike
                runs.append((run_one(script, path, steps=OVERHEAD_STEPS),
                             run_one(script, path, checks=False, steps=OVERHEAD_STEPS)))  # fmt: skip
        checked, plain = runs[0]
        for mode, index in (("checked", 0), ("plain", 1)):
            medians = [r[index]["summary"]["median_step_seconds"] for r in runs]
            known = [m for m in medians if m]
            (checked if mode == "checked" else plain)["summary"]["median_step_seconds"] = (
                min(known) if known else None
            )
        return script.name, {"checked": checked, "plain": plain}

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        return dict(pool.map(one, [s for s in SCRIPTS if s.name in names]))


#: (old, new) edits per plant; ``at`` is text on the line the finding belongs at
PLANTS = (
    # TWR101: the zero_grad call deleted
    Plant("nnlm", "TWR101", "zero_grad deleted", "        optimizer.zero_grad()\n", "", "        loss.backward()"),
    Plant("textcnn", "TWR101", "zero_grad deleted", "        optimizer.zero_grad()\n", "", "        loss.backward()"),
    Plant("bert", "TWR101", "zero_grad deleted", "        optimizer.zero_grad()\n", "", "        loss.backward()"),
    Plant("bigram", "TWR101", "zero_grad deleted", "    optimizer.zero_grad(set_to_none=True)\n", "", "    loss.backward()"),
    Plant("two-layer-optim", "TWR101", "zero_grad deleted", "  optimizer.zero_grad()\n", "", "  loss.backward()"),
    Plant("gan-1d", "TWR101", "the discriminator's zero_grad deleted", "            D.zero_grad()\n", "", "            d_real_error.backward()"),
    # TWR302: regression targets of the wrong shape
    Plant("two-layer-optim", "TWR302", "targets (N, 1) for outputs (N, 10)", "y = torch.randn(N, D_out)", "y = torch.randn(N, 1)", "loss = loss_fn(y_pred, y)"),
    Plant("two-layer-module", "TWR302", "targets (N, 1) for outputs (N, 10)", "y = torch.randn(N, D_out)", "y = torch.randn(N, 1)", "loss = loss_fn(y_pred, y)"),
    Plant("dynamic-net", "TWR302", "targets (N, 1) for outputs (N, 10)", "y = torch.randn(N, D_out)", "y = torch.randn(N, 1)", "loss = criterion(y_pred, y)"),
    # TWR303: labels outside the classes
    Plant("textcnn", "TWR303", "labels 1/2 for two classes", "labels = [1, 1, 1, 0, 0, 0]", "labels = [2, 2, 2, 1, 1, 1]", "loss = criterion(output, targets)"),
    Plant("textrnn", "TWR303", "targets shifted by one", "        target_batch.append(target)", "        target_batch.append(target + 1)", "loss = criterion(output, target_batch)"),
    Plant("bert", "TWR303", "isNext labels 1/2", "loss_clsf = criterion(logits_clsf, isNext)", "loss_clsf = criterion(logits_clsf, isNext + 1)", "loss_clsf = criterion(logits_clsf, isNext + 1)"),
    # TWR110: an operation that makes NaNs
    Plant("nnlm", "TWR110", "log instead of tanh", "tanh = torch.tanh(self.d + self.H(X))", "tanh = torch.log(self.d + self.H(X))", "tanh = torch.log(self.d + self.H(X))"),
    Plant("textcnn", "TWR110", "sqrt instead of relu", "h = F.relu(conv(embedded_chars))", "h = torch.sqrt(conv(embedded_chars))", "h = torch.sqrt(conv(embedded_chars))"),
    # TWR102: a gradient cut by .detach()
    Plant("nnlm", "TWR102", "embedding output detached", "X = self.C(X) #", "X = self.C(X).detach() #", "X = self.C(X).detach()"),
    Plant("textcnn", "TWR102", "embedding output detached", "embedded_chars = self.W(X) #", "embedded_chars = self.W(X).detach() #", "embedded_chars = self.W(X).detach()"),
    Plant("transformer", "TWR102", "encoder output detached", "        enc_outputs, enc_self_attns = self.encoder(enc_inputs)", "        enc_outputs, enc_self_attns = self.encoder(enc_inputs)\n        enc_outputs = enc_outputs.detach()", "enc_outputs, enc_self_attns = self.encoder(enc_inputs)"),
    # TWR103: part of the model left out of the optimizer
    Plant("seq2seq", "TWR103", "only the encoder is optimized", "optimizer = torch.optim.Adam(model.parameters(), lr=0.001)", "optimizer = torch.optim.Adam(model.enc_cell.parameters(), lr=0.001)", "optimizer = torch.optim.Adam("),
    Plant("word2vec", "TWR103", "only the input embedding is optimized", "optimizer = optim.Adam(model.parameters(), lr=0.001)", "optimizer = optim.Adam(model.W.parameters(), lr=0.001)", "optimizer = optim.Adam("),
    # TWR202, TWR501: bigram's evaluation and seed
    Plant("bigram", "TWR202", "estimate_loss without no_grad", "@torch.no_grad()\ndef estimate_loss", "def estimate_loss", "logits, loss = model(X, Y)"),
    Plant("bigram", "TWR501", "seed after the model is built", "torch.manual_seed(1337)\n", "", "torch.manual_seed(1337)", more=(("m = model.to(device)\n", "m = model.to(device)\ntorch.manual_seed(1337)\n"),)),
    # TWR401, TWR402: device bugs, under --as-cuda
    Plant("bigram-cuda", "TWR401", "batch not moved to the device", "    x, y = x.to(device), y.to(device)\n", "", "logits = self.token_embedding_table(idx)"),
    Plant("bigram-cuda", "TWR401", "targets moved back to the CPU", "targets = targets.view(B*T)", "targets = targets.view(B*T).cpu()", "loss = F.cross_entropy(logits, targets)"),
    Plant("bigram-cuda", "TWR402", "numpy() of a CUDA loss", "losses[k] = loss.item()", "losses[k] = loss.numpy()", "losses[k] = loss.numpy()"),
    # distributed, --nproc 2 --as-cuda
    Plant("ddp-toy", "TWR601", "every rank gets the whole dataset", "sampler=DistributedSampler(train_ds)  # NEW", "sampler=DistributedSampler(train_ds, num_replicas=1, rank=0)", "    train_loader = DataLoader("),
    Plant("ddp-toy", "TWR301", "set_epoch deleted", "        train_loader.sampler.set_epoch(epoch)\n", "", "for features, labels in train_loader:"),
    Plant("ddp-toy", "TWR602", "forward through the unwrapped module", "            logits = model(features)", "            logits = model.module(features)", "optimizer.step()"),
    Plant("aws-cpu-ddp", "TWR601", "every rank gets the whole dataset", "sampler=DistributedSampler(dataset)", "sampler=DistributedSampler(dataset, num_replicas=1, rank=0)", "    return DataLoader("),
    Plant("aws-cpu-ddp", "TWR301", "set_epoch deleted", "        self.train_data.sampler.set_epoch(epoch)\n", "", "for source, targets in self.train_data:"),
    Plant("aws-cpu-ddp", "TWR603", "barrier inside the rank-0 save", "        torch.save(snapshot, self.snapshot_path)\n", "        if self.rank == \"0\":\n            torch.save(snapshot, self.snapshot_path)\n            torch.distributed.barrier()\n", "torch.distributed.barrier()"),
    Plant("llama2c", "TWR601", "every rank seeded as rank 0", "        rank = dist.get_rank() if dist.is_initialized() else 0\n", "        rank = 0\n", "        dl = torch.utils.data.DataLoader(", file="tinystories.py"),
    # (not the forward through raw_model: then rank 0's evaluation forward through DDP
    # broadcasts buffers that rank 1 never joins, and the run reports that hang at line 221)
    Plant("llama2c", "TWR602", "gradient sync off by one (never on)", "model.require_backward_grad_sync = micro_step == gradient_accumulation_steps - 1", "model.require_backward_grad_sync = micro_step == gradient_accumulation_steps", "    scaler.step(optimizer)"),
    Plant("llama2c", "TWR603", "loss all-reduced in the master-only log", "        lossf = loss.item() * gradient_accumulation_steps\n", "        torch.distributed.all_reduce(loss.detach())\n        lossf = loss.item() * gradient_accumulation_steps\n", "torch.distributed.all_reduce(loss.detach())"),
    Plant("llama2c", "TWR606", "evaluation and checkpoint on every rank", "    if iter_num % eval_interval == 0 and master_process:", "    if iter_num % eval_interval == 0:", "torch.save(checkpoint, os.path.join(out_dir, \"ckpt.pt\"))"),
    # mp.spawn'd ranks (no --nproc)
    Plant("spawn-cpu", "TWR602", "model not wrapped in DDP", "    model = torch.nn.parallel.DistributedDataParallel(fc)", "    model = fc", "        opt.step()"),
    Plant("spawn-cpu", "TWR603", "loss all-reduced on rank 0 only", "        opt.step()\n", "        opt.step()\n        if rank == 0:\n            torch.distributed.all_reduce(l.detach())\n", "torch.distributed.all_reduce(l.detach())"),
    Plant("spawn-cpu", "TWR606", "checkpoint written by every rank", "        opt.step()\n", "        opt.step()\n        if x % 5 == 0:\n            torch.save(fc.state_dict(), 'fc.pt')\n", "torch.save(fc.state_dict(), 'fc.pt')"),
    Plant("spawn-per-gpu", "TWR601", "every rank gets the whole dataset", "td = DistributedSampler(train_dataset)", "td = DistributedSampler(train_dataset, num_replicas=1, rank=0)", "    train_dataloader = DataLoader(train_dataset,"),
    Plant("spawn-per-gpu", "TWR301", "set_epoch deleted", "        self.train_dataloader.sampler.set_epoch(epoch)\n", "", "for x, y in self.train_dataloader:"),
    # (not the inputs: DDP with device_ids moves them to its device itself)
    Plant("spawn-per-gpu", "TWR401", "targets not moved to the GPU", "            y = y.to(self.gpu_id)\n", "", "loss = F.cross_entropy(y_, y)"),
)  # fmt: skip


def patched(path: Path, plant: Plant) -> int:
    """Apply ``plant`` to the copy at ``path``; the line its finding belongs at."""
    text = path.read_text(encoding="utf-8")
    for old, new in ((plant.old, plant.new), *plant.more):
        if old not in text:
            raise ValueError(f"{plant.script}: {old!r} not found")
        text = text.replace(old, new, 1)
    path.write_text(text, encoding="utf-8")
    return line_of(path, plant.at)


def _caught(result: dict[str, Any], code: str, line: int, file: str) -> bool:
    return any(
        f["code"] == code and f["line"] == line and f["file"] == file and f["severity"] != "info"
        for f in result["findings"]
    )


def plant_runs(mirror: Path, jobs: int, names: set[str]) -> list[dict[str, Any]]:
    scripts = {script.name: script for script in SCRIPTS}

    def one(plant: Plant) -> dict[str, Any]:
        script = scripts[plant.script]
        with tempfile.TemporaryDirectory(prefix="run-plant-") as tmp:
            path = extract(mirror, script, Path(tmp))
            target = path.parent / plant.file if plant.file else path
            line = patched(target, plant)
            ours = run_one(script, path)
            plain = run_one(script, path, checks=False)
            anomaly = run_one(script, path, checks=False, anomaly=True)
        return {
            "script": plant.script,
            "code": plant.code,
            "what": plant.what,
            "line": line,
            "caught": _caught(ours, plant.code, line, target.name),
            "found": [f"{f['code']}@{f['line']}" for f in ours["findings"]],
            "plain": _peer(plain, line, target.name),
            "anomaly": _peer(anomaly, line, target.name),
            "seconds": ours["seconds"],
        }

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        return list(pool.map(one, [p for p in PLANTS if p.script in names]))


def _peer(result: dict[str, Any], line: int, file: str) -> str:
    """What a peer run shows: a crash (at the bug's line or elsewhere), or nothing."""
    crashes = [f for f in result["findings"] if f["code"] == "TWR001"]
    if not crashes:
        return "nothing"
    at = (
        "at the line"
        if any(f["line"] == line and f["file"] == file for f in crashes)
        else "elsewhere"
    )
    return f"crash {at}: {crashes[0]['message'].removeprefix('the script raised ')[:70]}"


def report(clean: dict[str, dict[str, Any]], plants: list[dict[str, Any]]) -> str:
    out = ["## Clean scripts", "",
           "| script | repository | steps | warnings/errors | hints | median step (checked / plain) | ratio |",
           "|---|---|---:|---|---|---:|---:|"]  # fmt: skip
    ratios = []
    by_name = {script.name: script for script in SCRIPTS}
    for name, runs in clean.items():
        checked, plain = runs["checked"], runs["plain"]
        serious = [
            f"{f['code']}@{f['line']}" for f in checked["findings"] if f["severity"] != "info"
        ]
        hints = [f"{f['code']}@{f['line']}" for f in checked["findings"] if f["severity"] == "info"]
        a = checked["summary"]["median_step_seconds"]
        b = plain["summary"]["median_step_seconds"]
        ratio = a / b if a and b else None
        if ratio is not None:
            ratios.append(ratio)
        out.append(
            f"| {name} | {by_name[name].repo} | {checked['summary']['steps']} | "
            f"{', '.join(serious) or '0'} | {', '.join(hints) or '-'} | "
            f"{_ms(a)} / {_ms(b)} | {f'{ratio:.2f}' if ratio else '-'} |"
        )
    caught = sum(1 for p in plants if p["caught"])
    out += ["", f"Median overhead on the step: {_median(ratios):.2f}x (max {max(ratios, default=0):.2f}x)", "",
            "## Planted bugs", "",
            "| script | bug | expected | torchwise run | found | plain run (fast_dev_run-style) | detect_anomaly |",
            "|---|---|---|---|---|---|---|"]  # fmt: skip
    for p in plants:
        out.append(
            f"| {p['script']} | {p['what']} | {p['code']} at {p['line']} | "
            f"{'caught' if p['caught'] else 'MISSED'} | {', '.join(p['found']) or '-'} | "
            f"{p['plain']} | {p['anomaly']} |"
        )
    plain_hits = sum(1 for p in plants if "at the line" in p["plain"])
    anomaly_hits = sum(1 for p in plants if "at the line" in p["anomaly"])
    out += ["", f"torchwise run: {caught} of {len(plants)} caught at the right line; "
            f"plain run: {plain_hits} crash at the line; detect_anomaly: {anomaly_hits}."]  # fmt: skip
    return "\n".join(out)


def _ms(seconds: float | None) -> str:
    return f"{seconds * 1000:.2f} ms" if seconds else "-"


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2] if ordered else 0.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mirror", type=Path, default=Path("/work/.mirror"))
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--only", choices=("clean", "plants", "all"), default="all")
    parser.add_argument("--scripts", nargs="+", help="only these scripts (and their plants)")
    args = parser.parse_args()
    started = time.perf_counter()
    commits = {repo: commit or _head(args.mirror, repo) for repo, commit in REPOS.items()}
    names = set(args.scripts or [script.name for script in SCRIPTS])
    clean = clean_runs(args.mirror, args.jobs, names) if args.only != "plants" else {}
    plants = plant_runs(args.mirror, args.jobs, names) if args.only != "clean" else []
    print(f"uptime: {os.getloadavg()}; {time.perf_counter() - started:.0f} s\n")
    print(report(clean, plants))
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        document = {"commits": commits, "clean": clean, "plants": plants}
        (args.out / "run_real.json").write_text(json.dumps(document, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
