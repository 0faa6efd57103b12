"""Budgets: a file too large to vet ends "unsafe: too large to vet", quickly and in bounded memory.

Verdicts here rest on the deterministic limits (bytes, opcodes, memo, nesting),
never on wall time; the timings are in bench/ckpt_scan.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
import zlib
from pathlib import Path

import pytest
from click.testing import CliRunner
from craft import Entry, build_zip, torch_entries

from torchwise.ckpt.budgets import Budgets
from torchwise.ckpt.scan import scan_file
from torchwise.cli import app


def deflate_bomb(path: Path, unit: bytes, total: int, head: bytes = b"\x80\x02") -> Path:
    """A torch zip whose data.pkl inflates to ``total`` bytes of ``unit`` (built in chunks)."""
    engine = zlib.compressobj(9, zlib.DEFLATED, -15)
    chunk = unit * (1 << 20)
    parts, crc, size = [engine.compress(head)], zlib.crc32(head), len(head)
    for _ in range(total // len(chunk)):
        parts.append(engine.compress(chunk))
        crc, size = zlib.crc32(chunk, crc), size + len(chunk)
    parts.append(engine.compress(b"."))
    parts.append(engine.flush())
    crc, size = zlib.crc32(b".", crc), size + 1
    stored = b"".join(parts)
    entries = torch_entries(b"")
    entries[0] = Entry(
        b"archive/data.pkl", b"", 8, payload=stored, crc=crc, sizes=(len(stored), size)
    )
    path.write_bytes(build_zip(entries))
    return path


def _too_large(result: object) -> bool:
    findings = getattr(result, "findings", [])
    return any(f.rule == "too-large-to-vet" for f in findings)


@pytest.fixture(scope="module")
def bombs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """200 KiB on disk, 200 MiB inflated, of MARK (nesting limit) or NONE (opcode limit)."""
    root = tmp_path_factory.mktemp("bombs")
    return {name: deflate_bomb(root / f"{name}.pt", unit, 200 << 20)
            for name, unit in (("MARK", b"("), ("NONE", b"N"))}  # fmt: skip


def test_mark_bomb_ends_at_the_opcode_limit(bombs: dict[str, Path]) -> None:
    """weights_only nests as deep as memory allows, so nesting has no limit of its own: the
    bomb ends where every bomb ends, at the opcode budget."""
    assert bombs["MARK"].stat().st_size < 300 << 10
    result = scan_file(bombs["MARK"])
    assert result.verdict == "unsafe" and _too_large(result)
    assert any("number of opcodes" in f.reason for f in result.findings), result.findings


def test_a_nesting_limit_can_still_be_asked_for(bombs: dict[str, Path]) -> None:
    result = scan_file(bombs["MARK"], budgets=Budgets(max_depth=100))
    assert any("MARK nesting" in f.reason for f in result.findings), result.findings


def test_opcode_bomb_ends_at_the_opcode_limit_in_bounded_memory(bombs: dict[str, Path]) -> None:
    code = (
        "import sys; from pathlib import Path; "
        "from torchwise.ckpt.scan import scan_file; "
        f"r = scan_file(Path({str(bombs['NONE'])!r})); "
        "hwm = [l for l in open('/proc/self/status') if l.startswith('VmHWM')][0].split()[1]; "
        "print(r.verdict, hwm); "
        "print(r.findings[0].rule, r.findings[0].reason)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    first, finding = out.stdout.splitlines()
    verdict, max_rss_kib = first.split()
    assert verdict == "unsafe"
    assert finding.startswith("too-large-to-vet") and "number of opcodes" in finding
    # VmHWM, not ru_maxrss: a child's ru_maxrss keeps the parent's peak across exec
    assert int(max_rss_kib) < 500 * 1024  # well under 500 MB; it is about 40 MB


def test_declared_size_over_the_byte_budget(tmp_path: Path) -> None:
    path = tmp_path / "big.pt"
    path.write_bytes(build_zip(torch_entries(b"\x80\x02}." + b"N" * 4096)))
    assert scan_file(path, budgets=Budgets(max_bytes=1024)).verdict == "unsafe"
    assert scan_file(path).verdict == "safe"


@pytest.mark.parametrize(
    ("blob", "budgets", "what"),
    [
        (b"\x80\x02" + b"N" * 100 + b".", Budgets(max_opcodes=50), "opcodes"),
        (b"\x80\x02N" + b"\x94" * 100 + b".", Budgets(max_memo=10), "memo"),
        (b"\x80\x02" + b"(" * 100 + b"N.", Budgets(max_depth=10), "MARK nesting"),
        (b"\x80\x02X" + (2000).to_bytes(4, "little") + b"a" * 2000 + b".", Budgets(max_bytes=1000),
         "size in bytes"),
    ],
)  # fmt: skip
def test_each_budget_has_a_deterministic_limit(
    blob: bytes, budgets: Budgets, what: str, tmp_path: Path
) -> None:
    path = tmp_path / "f.pkl"
    path.write_bytes(blob)
    result = scan_file(path, budgets=budgets)
    assert result.verdict == "unsafe" and _too_large(result)
    assert any(what in f.reason for f in result.findings), result.findings
    assert scan_file(path).verdict in ("safe", "error")  # within the defaults it is vetted


def test_nested_archives_beyond_the_limit(tmp_path: Path) -> None:
    blob = build_zip(torch_entries(b"\x80\x02}."))
    for _ in range(6):
        blob = build_zip(torch_entries(b"\x80\x02}.", b"archive", Entry(b"archive/inner.pt", blob)))
    path = tmp_path / "nested.pt"
    path.write_bytes(blob)
    result = scan_file(path)
    assert result.verdict == "unsafe" and _too_large(result)


def test_budget_flags_on_the_cli(tmp_path: Path) -> None:
    path = tmp_path / "f.pkl"
    path.write_bytes(b"\x80\x02" + b"N" * 100 + b".")
    runner = CliRunner()
    ok = runner.invoke(app, ["ckpt", "scan", str(path)])
    assert ok.exit_code == 0, ok.output
    capped = runner.invoke(
        app, ["ckpt", "scan", "--max-opcodes", "50", "--format", "json", str(path)]
    )
    assert capped.exit_code == 1
    [entry] = json.loads(capped.output)["files"]
    assert entry["findings"][0]["rule"] == "too-large-to-vet"


def _nested_fan_out(levels: int, fan: int) -> bytes:
    """An archive whose ``fan`` entries all point at one stored inner archive, ``levels`` deep:
    fan**levels paths through a file of a few hundred KB."""
    inner = build_zip(torch_entries(b"\x80\x02N."))
    for _ in range(levels):
        inner = build_zip([Entry(b"a/x.pt", inner)], order=[0] * fan)
    return inner


def test_a_fanned_out_nested_archive_costs_every_entry_it_visits(tmp_path: Path) -> None:
    """Entries that point at the same nested archive count every time: 300**3 paths end at the
    budget, within the test's seconds, not after minutes of work."""
    path = tmp_path / "fan.pt"
    path.write_bytes(_nested_fan_out(3, 300))
    assert path.stat().st_size < 64 << 10
    result = scan_file(path, budgets=Budgets(max_opcodes=20_000))
    assert result.verdict == "unsafe"
    assert _too_large(result), result.findings
