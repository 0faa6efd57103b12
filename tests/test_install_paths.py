"""What a new user meets when installing: the extras, torch's import warnings, the hints.

The whole path (build the wheel, install it in clean environments, run every command) is
``scripts/newcomer.sh``; these are the parts that need no new environment.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from torchwise.deps import TORCH_CPU_INDEX, missing

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]

# torch imported where NumPy cannot be: torch warns "Failed to initialize NumPy" as it
# does in a venv with the torch wheel and no NumPy (the wheel does not require it).
# (None in sys.modules: `import numpy` fails and importlib.util.find_spec finds nothing,
# as when it is not installed.)
_NO_NUMPY = textwrap.dedent(
    """
    import sys

    sys.modules["numpy"] = None
    from torchwise.cli import main
    main(sys.argv[1:])
    """
)


def without_numpy(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _NO_NUMPY, *args],
        capture_output=True, text=True, cwd=cwd, check=False, timeout=600,
    )  # fmt: skip


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "net.py").write_text(
        "import torch.nn as nn\n\nclass Net(nn.Module):\n    def __init__(self):\n"
        "        super().__init__()\n        self.fc = nn.Linear(4, 2)\n\n"
        "    def forward(self, x):\n        return self.fc(x)\n"
    )
    return tmp_path


def test_torchs_numpy_warning_is_not_printed_without_verbose(project: Path) -> None:
    result = without_numpy("inspect", "net.py:Net", "--input", "f32[2,4]", cwd=project)
    assert result.returncode == 0, result.stderr
    assert "NumPy" not in result.stderr and "Warning" not in result.stderr, result.stderr
    assert "Net" in result.stdout


def test_verbose_shows_torchs_import_warnings(project: Path) -> None:
    result = without_numpy("inspect", "net.py:Net", "--input", "f32[2,4]", "-v", cwd=project)
    assert result.returncode == 0, result.stderr
    assert "Failed to initialize NumPy" in result.stderr


def test_the_torch_extra_brings_what_the_model_commands_need() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    names = {requirement.split(">")[0].split("=")[0] for requirement in extras["torch"]}
    # numpy: without it torch warns at import and ckpt convert cannot write tensors
    assert {"torch", "safetensors", "numpy"} <= names


def test_the_torch_hint_says_what_the_default_costs_and_gives_the_cpu_index() -> None:
    error = missing("torch", purpose="torchwise doctor")
    assert str(error).startswith("torchwise doctor needs PyTorch, which is not installed")
    assert error.hint is not None and "CUDA build" in error.hint
    assert f"pip install torch --index-url {TORCH_CPU_INDEX}" in error.hint
    assert missing("jinja2").hint is None  # only torch has a costly default


def test_the_readme_installs_from_a_clone_and_gives_the_cpu_index() -> None:
    readme = (ROOT / "README.md").read_text()
    for command in ("pip install .", "pipx install .", "uv tool install ."):
        assert command in readme, command
    assert TORCH_CPU_INDEX in readme


def test_the_newcomer_script_is_there_and_parses() -> None:
    script = ROOT / "scripts" / "newcomer.sh"
    assert script.stat().st_mode & 0o111, "scripts/newcomer.sh must be executable"
    subprocess.run(["bash", "-n", str(script)], check=True)
