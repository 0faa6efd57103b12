"""ckpt scan: every payload technique caught with evidence, no benign file called unsafe."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import zipfile
from pathlib import Path

import jsonschema
import pytest
import torch
from ckpt_corpus import BENIGN_KINDS, TECHNIQUES, Hostile, TrainState
from click.testing import CliRunner

from torchwise.ckpt import scan
from torchwise.cli import app

SCHEMA = Path(__file__).parents[1] / "data" / "sarif-schema-2.1.0.json"


def test_corpus_has_every_technique(hostile: dict[str, Hostile]) -> None:
    assert list(hostile) == TECHNIQUES
    assert len(TECHNIQUES) >= 15


@pytest.mark.parametrize("technique", TECHNIQUES)
def test_hostile_file_is_unsafe_with_evidence(
    technique: str, hostile: dict[str, Hostile], marker: Path
) -> None:
    case = hostile[technique]
    report = scan(case.path)
    [result] = report.files
    assert result.verdict == "unsafe", result
    assert report.exit_code == 1
    culprits = [f for f in result.findings if case.culprit in (f.global_name or "")]
    assert culprits, [f.global_name for f in result.findings]
    finding = culprits[0]
    assert finding.severity in ("dangerous", "unsafe")
    assert finding.member and finding.offset >= 0
    # The call it would make is shown with its literal arguments: the marker path.
    assert any(str(marker) in (f.call or "") for f in result.findings), result.findings
    if case.trigger.startswith("member:"):
        assert case.trigger.split(":", 1)[1] in finding.member
    assert not marker.exists()


def test_known_dangerous_calls_are_named(hostile: dict[str, Hostile]) -> None:
    for technique in ("os.system", "builtins.eval", "timeit.timeit (setup)", "runpy._run_code"):
        [result] = scan(hostile[technique].path).files
        assert any(f.severity == "dangerous" for f in result.findings), technique
        assert any("known dangerous" in f.reason for f in result.findings)


@pytest.mark.parametrize("protocol", range(6))
def test_every_pickle_protocol(protocol: int, tmp_path: Path, marker: Path) -> None:
    class Payload:
        def __reduce__(self) -> tuple[object, ...]:
            return os.system, (f"touch {marker}",)

    bad, good = tmp_path / "bad.pkl", tmp_path / "good.pkl"
    bad.write_bytes(pickle.dumps({"a": [1, 2], "p": Payload()}, protocol=protocol))
    good.write_bytes(pickle.dumps({"a": [1, 2.5, "x"], "b": (None, True)}, protocol=protocol))
    assert scan(bad).files[0].verdict == "unsafe"
    assert scan(good).files[0].verdict == "safe"
    assert not marker.exists()


@pytest.mark.parametrize("kind", BENIGN_KINDS)
def test_benign_file_is_not_unsafe(kind: str, benign: dict[str, Path]) -> None:
    report = scan(benign[kind])
    assert report.exit_code == 0
    expected = "warning" if kind in ("NumPy arrays", "argparse.Namespace") else "safe"
    assert {f.verdict for f in report.files} == {expected}


def test_warnings_say_why(benign: dict[str, Path]) -> None:
    [numpy_scan] = scan(benign["NumPy arrays"]).files
    assert all("NumPy" in f.reason for f in numpy_scan.findings)
    [ns_scan] = scan(benign["argparse.Namespace"]).files
    names = {f.global_name: f.reason for f in ns_scan.findings}
    assert "argparse.Namespace" in names and "pathlib.PurePosixPath" in names


def test_pickled_module_is_unsafe_with_advice(tmp_path: Path) -> None:
    path = tmp_path / "model.pt"
    torch.save(torch.nn.Linear(2, 2), path)
    [result] = scan(path).files
    assert result.verdict == "unsafe"
    assert any("state_dict" in f.reason for f in result.findings)


def test_allow_accepts_a_named_global(tmp_path: Path) -> None:
    path = tmp_path / "state.pt"
    torch.save({"state": TrainState(3, torch.ones(2))}, path)
    assert scan(path).files[0].verdict == "unsafe"
    assert scan(path, allow=["ckpt_corpus.TrainState"]).files[0].verdict == "safe"


def test_build_on_a_class_is_flagged(tmp_path: Path) -> None:
    # GLOBAL collections.OrderedDict, then BUILD sets attributes on the class itself.
    path = tmp_path / "build.pkl"
    path.write_bytes(b"\x80\x02ccollections\nOrderedDict\n}X\x01\x00\x00\x00aK\x01sb.")
    [result] = scan(path).files
    assert result.verdict == "unsafe"
    assert any(f.rule == "malformed-pickle" for f in result.findings)


# --- broken input: a clear error, exit 2 -------------------------------------------------


def _cut(src: Path, dst: Path, keep: float) -> Path:
    data = src.read_bytes()
    dst.write_bytes(data[: int(len(data) * keep)])
    return dst


def test_truncated_legacy_file_is_read_by_pickle_load(
    benign: dict[str, Path], tmp_path: Path
) -> None:
    """Cut in its storages, a legacy file still starts with whole pickles: torch.load fails,
    pickle.load reads the first (an int). No loader runs anything: safe, and torch's failure
    is said."""
    path = _cut(benign["legacy format"], tmp_path / "cut.pt", 0.9)
    [result] = scan(path).files
    assert result.verdict == "safe"
    assert "truncated" in result.loaders["torch.load"]
    assert result.loaders["pickle.load"] == "reads"
    assert any(note.startswith("torch.load fails: truncated") for note in result.notes)


@pytest.mark.parametrize(("kind", "keep"), [("state dict", 0.5), ("plain pickle of data", 0.5)])
def test_truncated_file_is_an_error(
    kind: str, keep: float, benign: dict[str, Path], tmp_path: Path
) -> None:
    path = _cut(benign[kind], tmp_path / "cut.pt", keep)
    report = scan(path)
    assert report.exit_code == 2
    assert report.files[0].verdict == "error"
    assert "truncated" in (report.files[0].error or "") or "zip" in (report.files[0].error or "")


def test_truncated_after_payload_is_still_unsafe(tmp_path: Path, marker: Path) -> None:
    # pickle.load would already have run os.system before hitting the cut.
    payload = b"\x80\x02cposix\nsystem\nX\x05\x00\x00\x00touchR}X\x01\x00\x00"
    (tmp_path / "cut.pkl").write_bytes(payload)
    [result] = scan(tmp_path / "cut.pkl").files
    assert result.verdict == "unsafe" and result.error


@pytest.mark.parametrize("content", [b"", b"not a checkpoint at all\n", b"\x00" * 64])
def test_garbage_is_an_error(content: bytes, tmp_path: Path) -> None:
    path = tmp_path / "junk.pt"
    path.write_bytes(content)
    assert scan(path).exit_code == 2


def test_broken_zip_directory(benign: dict[str, Path], tmp_path: Path) -> None:
    data = bytearray(benign["state dict"].read_bytes())
    data[-22:] = b"\x00" * 22  # wipe the end-of-central-directory record
    (tmp_path / "b.pt").write_bytes(bytes(data))
    [result] = scan(tmp_path / "b.pt").files
    assert result.verdict == "error" and "zip" in (result.error or "")


# --- directories, CLI and formats ------------------------------------------------------


def test_directory_scan_and_exit_codes(
    benign: dict[str, Path], hostile: dict[str, Hostile]
) -> None:
    runner = CliRunner()
    clean = runner.invoke(app, ["ckpt", "scan", str(benign["state dict"].parent)])
    assert clean.exit_code == 0, clean.output
    bad = runner.invoke(app, ["ckpt", "scan", str(hostile["os.system"].path.parent)])
    assert bad.exit_code == 1
    assert "UNSAFE" in bad.output and "would call: posix.system('touch" in bad.output


def test_json_output(hostile: dict[str, Hostile]) -> None:
    result = CliRunner().invoke(
        app, ["ckpt", "scan", "--format", "json", str(hostile["getattr chain on __import__"].path)]
    )
    assert result.exit_code == 1
    data = json.loads(result.output)
    [entry] = data["files"]
    assert entry["verdict"] == "unsafe"
    calls = [f["call"] for f in entry["findings"]]
    assert any("builtins.getattr(builtins.__import__('os'), 'system')(" in c for c in calls)


def test_sarif_validates_against_the_official_schema(
    hostile: dict[str, Hostile], benign: dict[str, Path], tmp_path: Path
) -> None:
    broken = tmp_path / "broken.pt"
    broken.write_bytes(b"\x80\x02}q\x00")
    paths = [str(hostile["nested archive"].path), str(benign["NumPy arrays"]), str(broken)]
    result = CliRunner().invoke(app, ["ckpt", "scan", "--format", "sarif", *paths])
    sarif = json.loads(result.output)
    schema = json.loads(SCHEMA.read_text())
    jsonschema.validators.validator_for(schema)(schema).validate(sarif)
    rule_ids = {r["ruleId"] for r in sarif["runs"][0]["results"]}
    assert {"TWC001", "TWC003", "TWC006"} <= rule_ids


def test_missing_path_is_a_usage_error() -> None:
    result = CliRunner().invoke(app, ["ckpt", "scan", "/no/such/file.pt"])
    assert result.exit_code == 2


def test_scan_and_inspect_never_import_torch(hostile: dict[str, Hostile]) -> None:
    code = (
        "import sys; from torchwise.ckpt import scan, inspect; "
        f"scan({str(hostile['nested archive'].path)!r}); "
        f"inspect({str(hostile['os.system'].path)!r}); "
        "assert 'torch' not in sys.modules and 'numpy' not in sys.modules, 'imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_zip_members_are_listed(hostile: dict[str, Hostile]) -> None:
    case = hostile["second pickle in the zip"]
    [result] = scan(case.path).files
    with zipfile.ZipFile(case.path) as z:
        pickles = [n for n in z.namelist() if n.endswith(".pkl")]
    assert set(pickles) <= set(result.members)


@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning")
def test_torchscript_archive_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "scripted.pt"
    torch.jit.script(torch.nn.Linear(2, 2)).save(str(path))
    [result] = scan(path).files
    assert result.format == "torchscript" and result.verdict == "unsafe"
    rules = {f.rule for f in result.findings}
    assert "torchscript-code" in rules
    assert any("TorchScript class" in f.reason for f in result.findings)


def test_tar_archive_is_a_clear_error(tmp_path: Path) -> None:
    import tarfile

    (tmp_path / "x").write_text("x")
    with tarfile.open(tmp_path / "old.tar", "w") as tar:
        tar.add(tmp_path / "x", arcname="x")
    [result] = scan(tmp_path / "old.tar").files
    assert result.verdict == "error" and "tar archive" in (result.error or "")
