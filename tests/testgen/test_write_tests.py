"""``write_tests`` and ``torchwise tests``: what the module says, where it goes, and how.

Most tests ask for one doctor check (``checks=["nan-inf"]``): generation runs every
test it writes once, and one check keeps that to a second or two. The full
selection of checks is exercised once, on the small classifier.
"""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

sys.path.insert(0, str(Path(__file__).parent))
from testgen_models import BUGS, NET

from torchwise.cli import app
from torchwise.doctor import CHECK_IDS
from torchwise.errors import OutputError, TorchwiseError, UserCodeError
from torchwise.testgen import write_tests

RUFF = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
NET_INPUT = "f32[batch=8,12]"
ONE_CHECK = ["nan-inf"]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    (tmp_path / "net.py").write_text(NET)
    return tmp_path


def _functions(text: str) -> list[str]:
    tree = ast.parse(text)
    return [node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)]


def test_the_module_states_the_contract_and_every_check_has_a_reason(project: Path) -> None:
    result = write_tests(str(project / "net.py:Net"), inputs=[NET_INPUT])
    text = result.text
    assert result.path == project / "tests" / "test_net.py"
    assert result.status == "generated" and not (project / "tests").exists()
    # The shape contract, symbolic, tested away from the measured batch of 8.
    assert "x (batch, 12) -> (batch, 5)" in text
    assert "assert out.shape == (batch, 5)" in text
    assert '@pytest.mark.parametrize("batch", [1, 3])' in text
    # Built the way the resolver says, imported from the project: no placeholders.
    assert "from net import Net  # noqa: E402" in text and "return Net()" in text
    assert "..." not in text.replace("tuple[Any, ...]", "")
    assert "weights_only=True" in text
    for name in ("test_output_shape", "test_eval_is_deterministic", "test_state_dict_round_trip",
                 "test_runs_in_float64", "test_runs_in_bfloat16", "test_runs_on_cuda",
                 "test_runs_on_mps", "test_doctor"):  # fmt: skip
        assert name in _functions(text), name
    assert 'reason="needs a CUDA device"' in text
    # Every doctor check is accounted for, in or out, with its reason.
    assert [c.id for c in result.checks] == list(CHECK_IDS)
    assert all(c.reason for c in result.checks)
    chosen = set(result.included_checks)
    assert {"grad-flow", "batch-independence", "param-update", "nan-inf"} <= chosen
    assert "causal-leak" not in chosen and "amp-drift" not in chosen
    assert all(f'"{check}",' in text for check in chosen)
    # Budgets are steps: the overfit budget comes from the steps it took.
    if "overfit-batch" in chosen:
        assert isinstance(result.doctor_options["overfit_steps"], int)
    assert "seconds" not in str(result.doctor_options)


@pytest.mark.skipif(RUFF is None, reason="needs ruff (the dev extra)")
def test_a_formatter_and_a_linter_leave_the_module_alone(project: Path) -> None:
    out = project / "tests" / "test_net.py"
    write_tests(str(project / "net.py:Net"), inputs=[NET_INPUT], output=out, checks=ONE_CHECK)
    assert RUFF is not None
    for command in (["format", "--diff"], ["check", "--select", "E,F,W,I,B,UP,SIM"]):
        run = subprocess.run([RUFF, *command, "--isolated", str(out)], capture_output=True,
                             text=True, cwd=project)  # fmt: skip
        assert run.returncode == 0, run.stdout + run.stderr


def test_output_is_written_only_when_new_or_forced(project: Path) -> None:
    out = project / "tests" / "test_net.py"
    result = write_tests(str(project / "net.py:Net"), inputs=[NET_INPUT], output=out,
                         checks=ONE_CHECK)  # fmt: skip
    assert result.status == "written" and out.read_text() == result.text
    compile(out.read_text(), str(out), "exec")
    out.write_text("# my own edits\n")
    with pytest.raises(OutputError, match="exists; not replacing it"):
        write_tests(str(project / "net.py:Net"), inputs=[NET_INPUT], output=out)
    assert out.read_text() == "# my own edits\n"
    write_tests(str(project / "net.py:Net"), inputs=[NET_INPUT], output=out, force=True,
                checks=ONE_CHECK)  # fmt: skip
    assert out.read_text() == result.text


def test_never_writes_inside_site_packages(project: Path) -> None:
    inside = Path(sysconfig.get_paths()["purelib"]) / "torchwise_tests_probe" / "test_net.py"
    with pytest.raises(OutputError, match="installed package"):
        write_tests(str(project / "net.py:Net"), inputs=[NET_INPUT], output=inside)
    assert not inside.parent.exists()


def test_check_says_fresh_stale_or_missing(project: Path) -> None:
    out = project / "tests" / "test_net.py"
    target, kwargs = str(project / "net.py:Net"), {"inputs": [NET_INPUT], "checks": ONE_CHECK}
    assert write_tests(target, output=out, check=True, **kwargs).status == "missing"
    written = write_tests(target, output=out, **kwargs)
    assert write_tests(target, output=out, check=True, **kwargs).status == "fresh"
    out.write_text(written.text.replace("batch: int = 4", "batch: int = 5"))
    stale = write_tests(target, output=out, check=True, **kwargs)
    assert stale.status == "stale"
    assert "-    batch: int = 5" in stale.diff and "+    batch: int = 4" in stale.diff
    assert out.read_text() != written.text  # check never writes


def test_the_project_style_is_followed(project: Path) -> None:
    (project / "pyproject.toml").write_text(
        "[project]\nname = 'demo'\n\n[tool.ruff]\nline-length = 100\n"
    )
    (project / "test").mkdir()
    (project / "test" / "test_data.py").write_text(
        textwrap.dedent(
            """
            class TestData:
                def test_loads(self):
                    assert True
            """
        )
    )
    result = write_tests(str(project / "net.py:Net"), inputs=[NET_INPUT], checks=ONE_CHECK)
    assert result.path == project / "test" / "test_net.py"
    assert "class TestNet:" in result.text
    assert "    def test_output_shape(self, batch):" in result.text
    assert "-> None" not in result.text and "from __future__" not in result.text
    assert max(len(line) for line in result.text.splitlines()) <= 100
    # Generation ran the class's tests as pytest would: they passed.
    assert {t.name for t in result.tests} >= {"test_eval_is_deterministic", "test_runs_in_float64"}


def test_a_configured_pythonpath_needs_no_sys_path_line(project: Path) -> None:
    (project / "pyproject.toml").write_text(
        "[project]\nname = 'demo'\n\n[tool.pytest.ini_options]\npythonpath = ['.']\n"
    )
    result = write_tests(str(project / "net.py:Net"), inputs=[NET_INPUT], checks=ONE_CHECK)
    assert "sys.path" not in result.text and "\nfrom net import Net\n" in result.text


def test_instances_and_factories_are_built_as_the_resolver_says(project: Path) -> None:
    (project / "net.py").write_text(
        NET + "\n\nnet = Net()\n\n\ndef make_net():\n    return Net(), torch.randn(4, 12)\n"
    )
    instance = write_tests(str(project / "net.py:net"), inputs=[NET_INPUT], checks=ONE_CHECK)
    assert "import copy" in instance.text and "return copy.deepcopy(net)" in instance.text
    factory = write_tests(str(project / "net.py:make_net"), checks=ONE_CHECK)
    assert "model, _ = make_net()" in factory.text


def test_a_model_that_fails_a_test_now_gets_it_left_out_and_a_warning(project: Path) -> None:
    bug = next(b for b in BUGS if b.name == "dropout-on-in-eval")
    (project / "net.py").write_text(bug.plant(NET))
    result = write_tests(str(project / "net.py:Net"), inputs=[NET_INPUT], checks=ONE_CHECK)
    assert "test_eval_is_deterministic" not in result.text
    left = {t.name: t.why for t in result.left_out}
    assert "test_eval_is_deterministic" in left and "assertion failed" in left[
        "test_eval_is_deterministic"]  # fmt: skip
    assert any("test_eval_is_deterministic would fail" in w for w in result.warnings)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"checks": ["grad-flwo"]}, "unknown check id"),
        ({"loss": "bogus"}, "is not one of auto, ce, mse, bce"),
        ({"causal_dim": 5}, "--causal 5 is beyond the inputs' dims"),
        ({"output": "net.py/test_net.py"}, "cannot write net.py/test_net.py"),
    ],
)
def test_bad_options_are_refused_before_the_work_is_announced(
    project: Path, monkeypatch: pytest.MonkeyPatch, options: dict, message: str
) -> None:
    monkeypatch.chdir(project)
    announced: list[str] = []
    with pytest.raises(TorchwiseError, match=message):
        write_tests("net.py:Net", inputs=[NET_INPUT], on_start=announced.append, **options)
    assert announced == []


def test_the_work_is_announced_once_the_options_fit(project: Path) -> None:
    announced: list[str] = []
    write_tests(str(project / "net.py:Net"), inputs=[NET_INPUT], checks=ONE_CHECK,
                on_start=announced.append)  # fmt: skip
    assert len(announced) == 1 and announced[0].startswith("measuring ")


def test_a_forward_that_raises_names_the_users_line(project: Path) -> None:
    (project / "net.py").write_text(NET.replace("x = self.standardize(x)", "x = x @ x"))
    with pytest.raises(UserCodeError, match=r"net\.py:\d+"):
        write_tests(str(project / "net.py:Net"), inputs=[NET_INPUT], checks=ONE_CHECK)


# -- the command -------------------------------------------------------------------


def test_tests_is_listed_and_documents_itself() -> None:
    listing = CliRunner().invoke(app, ["--help"])
    assert "tests" in listing.output and "pytest module" in listing.output
    help_text = CliRunner().invoke(app, ["tests", "--help"]).output
    assert "--check" in help_text and "--force" in help_text and "--causal" in help_text


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--check"], "--check needs -o/--output"),
        (["--build-on", "meta"], "--build-on meta does not apply"),
        (["--batch-dim", "none"], "--batch-dim none is not supported by tests yet"),
    ],
)
def test_usage_errors_are_one_line_and_exit_2(
    project: Path, extra: list[str], message: str
) -> None:
    result = CliRunner().invoke(
        app, ["tests", str(project / "net.py:Net"), "-i", NET_INPUT, *extra]
    )
    assert result.exit_code == 2 and message in result.stderr
    assert "Traceback" not in result.stderr


def test_the_command_writes_then_checks(project: Path) -> None:
    args = ["tests", str(project / "net.py:Net"), "-i", NET_INPUT, "--checks", "nan-inf",
            "-o", str(project / "tests" / "test_net.py")]  # fmt: skip
    written = CliRunner().invoke(app, args)
    assert written.exit_code == 0, written.stderr
    assert "wrote" in written.stderr and "test_doctor: nan-inf" in written.stderr
    again = CliRunner().invoke(app, args)
    assert again.exit_code == 2 and "--force" in again.stderr
    fresh = CliRunner().invoke(app, [*args, "--check"])
    assert fresh.exit_code == 0 and "up to date" in fresh.stderr
    path = project / "tests" / "test_net.py"
    path.write_text(path.read_text() + "# edited\n")
    stale = CliRunner().invoke(app, [*args, "--check"])
    assert stale.exit_code == 1 and "stale" in stale.stderr and "-# edited" in stale.output


def test_without_output_the_module_goes_to_stdout(project: Path) -> None:
    result = CliRunner().invoke(
        app, ["tests", str(project / "net.py:Net"), "-i", NET_INPUT, "--checks", "nan-inf", "-q"]
    )
    assert result.exit_code == 0, result.stderr
    compile(result.output, "test_net.py", "exec")
    assert result.stderr == ""  # --quiet: no notes


_NO_TORCH = textwrap.dedent(
    """
    import importlib.abc, sys

    class NoTorch(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == "torch" or name.startswith("torch."):
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None

    sys.meta_path.insert(0, NoTorch())
    if sys.argv[1] == "cli":
        from torchwise.cli import main
        main(sys.argv[2:])
    else:
        from torchwise.errors import MissingDependencyError
        from torchwise.testgen import write_tests
        try:
            write_tests("net.py:Net")
        except MissingDependencyError as exc:
            print(exc)
    """
)


@pytest.mark.parametrize("how", ["cli", "api"])
def test_without_torch_it_says_so_in_one_line(project: Path, how: str) -> None:
    args = ["cli", "tests", "net.py:Net"] if how == "cli" else ["api"]
    run = subprocess.run(
        [sys.executable, "-c", _NO_TORCH, *args],
        capture_output=True, text=True, cwd=project, check=False,
    )  # fmt: skip
    said = run.stderr if how == "cli" else run.stdout
    assert "needs PyTorch, which is not installed: pip install torch" in said, run.stderr
    assert "Traceback" not in run.stderr
    if how == "cli":
        assert run.returncode == 2


def test_the_result_serializes_with_its_summary(project: Path) -> None:
    result = write_tests(str(project / "net.py:Net"), inputs=[NET_INPUT], checks=ONE_CHECK)
    data = result.to_dict()
    assert data["status"] == "generated" and data["path"].endswith("test_net.py")
    assert data["included_checks"] == ["nan-inf"]
    assert "test_doctor: nan-inf" in data["summary"]
    assert any(line.startswith("test_state_dict_round_trip") for line in data["summary"])
    json.dumps(data)
