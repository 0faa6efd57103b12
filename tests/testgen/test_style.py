"""The project's test style and layout, read from its config and its existing tests."""

from __future__ import annotations

import textwrap
from pathlib import Path

from torchwise.testgen.style import DEFAULT_LINE_LENGTH, detect_style, find_root

CLASS_STYLE = textwrap.dedent(
    """
    import torch

    class TestModel:
        def test_one(self):
            assert torch.ones(1).sum() == 1

        def test_two(self):
            assert True
    """
)

FUNCTION_STYLE = textwrap.dedent(
    """
    from __future__ import annotations

    def test_one() -> None:
        assert True

    def test_two() -> None:
        assert True
    """
)


def _project(root: Path, pyproject: str = "", tests: dict[str, str] | None = None) -> Path:
    (root / "pyproject.toml").write_text(pyproject)
    for name, text in (tests or {}).items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_a_project_without_tests_gets_modern_defaults(tmp_path: Path) -> None:
    style = detect_style(_project(tmp_path))
    assert style.tests_dir == tmp_path / "tests"
    assert (style.future_annotations, style.typed, style.test_classes) == (True, True, False)
    assert style.line_length == DEFAULT_LINE_LENGTH
    assert style.scanned == 0


def test_class_style_untyped_tests_are_followed(tmp_path: Path) -> None:
    style = detect_style(_project(tmp_path, tests={"test/test_model.py": CLASS_STYLE}))
    assert style.tests_dir == tmp_path / "test"
    assert (style.future_annotations, style.typed, style.test_classes) == (False, False, True)


def test_function_style_typed_tests_are_followed(tmp_path: Path) -> None:
    style = detect_style(_project(tmp_path, tests={"tests/test_a.py": FUNCTION_STYLE}))
    assert (style.future_annotations, style.typed, style.test_classes) == (True, True, False)


def test_the_file_being_regenerated_does_not_vote(tmp_path: Path) -> None:
    project = _project(tmp_path, tests={"tests/test_model.py": CLASS_STYLE})
    style = detect_style(project, exclude=(project / "tests" / "test_model.py").resolve())
    assert style.scanned == 0 and not style.test_classes


def test_pytest_and_formatter_settings_are_read(tmp_path: Path) -> None:
    pyproject = textwrap.dedent(
        """
        [tool.ruff]
        line-length = 110

        [tool.pytest.ini_options]
        testpaths = ["checks"]
        pythonpath = ["src", "."]
        """
    )
    style = detect_style(_project(tmp_path, pyproject))
    assert style.tests_dir == tmp_path / "checks"
    assert style.line_length == 110
    assert style.import_roots == ((tmp_path / "src").resolve(), tmp_path.resolve())


def test_setup_cfg_pytest_section_and_black_line_length(tmp_path: Path) -> None:
    _project(tmp_path, "[tool.black]\nline-length = 79\n")
    (tmp_path / "setup.cfg").write_text("[tool:pytest]\ntestpaths = unit\npythonpath = lib\n")
    style = detect_style(tmp_path)
    assert style.tests_dir == tmp_path / "unit"
    assert style.import_roots == ((tmp_path / "lib").resolve(),)
    assert style.line_length == 79


def test_find_root_walks_up_to_a_project_marker(tmp_path: Path) -> None:
    (tmp_path / "setup.py").write_text("")
    deep = tmp_path / "src" / "pkg"
    deep.mkdir(parents=True)
    assert find_root(deep) == tmp_path.resolve()
