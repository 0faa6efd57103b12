"""How long after a keystroke does the editor show the findings? ``torchwise
server`` against ``ruff server``, driven the same way by a real LSP client.

For each file (real files of public repositories, about 300 lines, most of
them importing project modules that review indexes too), each server is
started in the repository's root, the file is opened, and then ``--edits``
changes are sent one at a time, as an editor sends keystrokes: a line
``_latency_probe = N`` inserted in the middle of the file, then taken out
again. The latency of a change is the wall time from sending
``textDocument/didChange`` to receiving the ``publishDiagnostics`` of that
version; the next change is sent only once it arrived, so no change is folded
into another. Printed: the median and 90th percentile per file and server, the
ratio of the medians; then, as CPU time (which the load of a shared machine
does not inflate), each server's CPU per change (from /proc, over all the
edits) and review's own share of torchwise's: the median CPU time of
``torchwise.review.review_text`` on the same texts in this process (what the
server calls for each change); beside it, "alone", the same call with the
file's path in an empty directory (no import finds a project file: the
difference is what indexing the imported files costs each change) and how
many imported files review indexed. Each edit goes to torchwise, then
ruff, then review in this process, before the next, so all of them meet the
same load; the machine's load is printed beside the figures.

Usage: ``python bench/server_latency.py [--edits 40] [--json out.json]``.
The repositories must be under /work/.mirror (the ``fetch`` tool brings them).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls import uris
from pygls.lsp.client import LanguageClient
from pygls.protocol import default_converter

sys.path.insert(0, str(Path(__file__).parent))
from review_corpus import Repository, extract

OUT = Path(__file__).parent / ".out" / "server_latency"
BIN = Path(sys.executable).parent

GUIDED = Repository(
    "openai/guided-diffusion", "22e0df8183507e13a7813f8d38d51b072ca1e67c",
    "diffusion models: training utilities, UNet, scripts",
)  # fmt: skip
VIT = Repository(
    "lucidrains/vit-pytorch", "69d24fe9e3024c0d4b02761123b8583a24ebed1e",
    "vision transformer variants, one module each",
)  # fmt: skip
#: (repository, file): about 300 lines each, and one of 894 for scale.
FILES = (
    (GUIDED, "guided_diffusion/train_util.py"),  # 301 lines, imports 5 project modules
    (GUIDED, "guided_diffusion/fp16_util.py"),
    (GUIDED, "scripts/classifier_train.py"),
    (VIT, "vit_pytorch/dino.py"),
    (VIT, "vit_pytorch/scalable_vit.py"),
    (VIT, "vit_pytorch/cct.py"),
    (GUIDED, "guided_diffusion/unet.py"),  # 894 lines
)


def servers() -> dict[str, list[str]]:
    return {
        "torchwise": [str(BIN / "torchwise"), "server"],
        "ruff": [str(BIN / "ruff"), "server"],
    }


def _lenient_converter() -> Any:
    """pygls's converter, except that a server's notebook sync options are not read:
    lsprotocol 2025.0.0 cannot read ruff's (``"notebook": "*"``), and the bench
    needs none of them."""
    converter = default_converter()
    converter.register_structure_hook(types.NotebookDocumentSyncOptions, lambda obj, _: None)
    return converter


@dataclass
class Session:
    """One server, started in ``root``, with the diagnostics it published."""

    command: list[str]
    root: Path

    async def start(self) -> None:
        self.client = LanguageClient("latency-bench", "1", converter_factory=_lenient_converter)
        self.arrived: dict[tuple[str, int | None], float] = {}
        self.event = asyncio.Event()

        @self.client.feature(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
        def published(params: types.PublishDiagnosticsParams) -> None:
            self.arrived.setdefault((params.uri, params.version), time.perf_counter())
            self.event.set()

        await self.client.start_io(*self.command, cwd=str(self.root))
        await self.client.initialize_async(
            types.InitializeParams(
                capabilities=types.ClientCapabilities(),
                root_uri=uris.from_fs_path(str(self.root)),
                workspace_folders=[
                    types.WorkspaceFolder(uri=str(uris.from_fs_path(str(self.root))), name="w")
                ],
            )
        )
        self.client.initialized(types.InitializedParams())

    async def wait(self, uri: str, version: int) -> float:
        while (uri, version) not in self.arrived:
            self.event.clear()
            await asyncio.wait_for(self.event.wait(), 60)
        return self.arrived[(uri, version)]

    async def stop(self) -> None:
        await self.client.shutdown_async(None)
        self.client.exit(None)
        await self.client.stop()


def _cpu_s(pid: int) -> float:
    """CPU seconds (user + system, every thread) a process has used (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _edit(uri: str, version: int, line: int, text: str, remove: bool) -> list[object]:
    start = types.Position(line=line, character=0)
    end = types.Position(line=line + 1, character=0) if remove else start
    return [
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[
                types.TextDocumentContentChangePartial(
                    range=types.Range(start=start, end=end), text="" if remove else text
                )
            ],
        )
    ]


async def measure(root: Path, path: Path, edits: int) -> dict[str, list[float]]:
    """Change-to-diagnostics seconds of ``edits`` changes to ``path``, per server, and
    review_text's own seconds on the same texts; one edit at a time, each to every
    server in turn, so that all of them meet the same load."""
    from torchwise.review import review_text

    uri = str(uris.from_fs_path(str(path)))
    text = path.read_text()
    lines = text.splitlines(keepends=True)
    middle = len(lines) // 2
    sessions = {name: Session(command, root) for name, command in servers().items()}
    for session in sessions.values():
        await session.start()
    found: dict[str, list[float]] = {name: [] for name in [*sessions, "review", "alone"]}
    pids = {name: session.client._server.pid for name, session in sessions.items()}  # type: ignore[union-attr]
    cpu: dict[str, float] = {}
    try:
        for session in sessions.values():
            session.client.text_document_did_open(
                types.DidOpenTextDocumentParams(
                    text_document=types.TextDocumentItem(
                        uri=uri, language_id="python", version=1, text=text
                    )
                )
            )
            await session.wait(uri, 1)
        report = review_text(text, str(path))  # rules imported, as in a running server
        indexed = len(report.index.summaries) - 1 if report.index is not None else 0
        found["indexed"] = [float(indexed)]
        alone = OUT / "alone" / path.name
        alone.parent.mkdir(parents=True, exist_ok=True)
        cpu = {name: -_cpu_s(pid) for name, pid in pids.items()}
        for number in range(edits):
            version = number + 2
            remove = number % 2 == 1
            probe = f"_latency_probe = {number // 2}\n"
            for name, session in sessions.items():
                (change,) = _edit(uri, version, middle, probe, remove)
                sent = time.perf_counter()
                session.client.text_document_did_change(change)  # type: ignore[arg-type]
                found[name].append(await session.wait(uri, version) - sent)
            now = "".join(lines) if remove else "".join([*lines[:middle], probe, *lines[middle:]])
            # CPU time: the load of the shared machine does not inflate it.
            started = time.process_time()
            review_text(now, str(path))
            found["review"].append(time.process_time() - started)
            started = time.process_time()
            review_text(now, str(alone))  # the same, where no import finds a file
            found["alone"].append(time.process_time() - started)
        for name, pid in pids.items():
            found[f"{name}_cpu"] = [(cpu[name] + _cpu_s(pid)) / edits]
        return found
    finally:
        for session in sessions.values():
            await session.stop()


def p90(values: list[float]) -> float:
    return statistics.quantiles(values, n=10)[-1] if len(values) > 1 else values[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--edits", type=int, default=40)
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    uptime = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    print(f"machine: {os.cpu_count()} cores; {uptime}")
    ruff = subprocess.run([str(BIN / "ruff"), "--version"], capture_output=True, text=True)
    print(f"peer: {ruff.stdout.strip()}")
    rows = []
    header = (
        f"{'file':40} {'lines':>5} {'wall ms: torchwise':>18} {'ruff':>12} {'ratio':>5}"
        f" | {'CPU ms/change: torchwise':>24} {'ruff':>5} {'review':>6} {'share':>5}"
        f" {'alone':>5} {'indexed':>7}"
    )
    print(header)
    print(f"{'':46} {'median/p90':>18} {'median/p90':>12}")
    for repository, name in FILES:
        root = extract(repository, OUT)
        path = root / name
        found = asyncio.run(measure(root, path, args.edits))
        tw, ruff = found["torchwise"], found["ruff"]
        row = {
            "repository": repository.name,
            "commit": repository.commit,
            "file": name,
            "lines": path.read_text().count("\n"),
            "torchwise_median_ms": 1000 * statistics.median(tw),
            "torchwise_p90_ms": 1000 * p90(tw),
            "ruff_median_ms": 1000 * statistics.median(ruff),
            "ruff_p90_ms": 1000 * p90(ruff),
            "torchwise_cpu_ms": 1000 * found["torchwise_cpu"][0],
            "ruff_cpu_ms": 1000 * found["ruff_cpu"][0],
            "review_cpu_ms": 1000 * statistics.median(found["review"]),
            "review_file_alone_cpu_ms": 1000 * statistics.median(found["alone"]),
            "imported_files_indexed": int(found["indexed"][0]),
        }
        row["ratio"] = row["torchwise_median_ms"] / row["ruff_median_ms"]
        row["review_share"] = row["review_cpu_ms"] / row["torchwise_cpu_ms"]
        rows.append(row)
        label = f"{repository.name.split('/')[1]}/{name}"[-40:]
        print(
            f"{label:40} {row['lines']:5} "
            f"{row['torchwise_median_ms']:11.1f}/{row['torchwise_p90_ms']:6.1f} "
            f"{row['ruff_median_ms']:5.1f}/{row['ruff_p90_ms']:6.1f} {row['ratio']:5.1f}"
            f" | {row['torchwise_cpu_ms']:24.1f} {row['ruff_cpu_ms']:5.1f}"
            f" {row['review_cpu_ms']:6.1f} {row['review_share']:5.0%}"
            f" {row['review_file_alone_cpu_ms']:5.1f} {row['imported_files_indexed']:7}"
        )
    print(f"after: {subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}")
    if args.json:
        args.json.write_text(json.dumps({"uptime": uptime, "files": rows}, indent=2))


if __name__ == "__main__":
    main()
