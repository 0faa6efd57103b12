"""The one reader of packaging files (torchwise.packaging), and review's torch range on it."""

from __future__ import annotations

from pathlib import Path

from torchwise.packaging import requirements_in
from torchwise.review.index.declared import declared_in


def test_setup_py_lists_given_directly_or_through_a_name(tmp_path: Path) -> None:
    setup = tmp_path / "setup.py"
    setup.write_text(
        "from setuptools import setup\n"
        "deps = ['torch>=2.1,<2.6', 'numpy']\n"
        "setup(name='p', install_requires=deps, extras_require={'hf': ['transformers']})\n",
        encoding="utf-8",
    )
    found, _ = requirements_in(setup, "setup.py")
    assert [(r.name, r.spec, r.line) for r in found] == [
        ("torch", ">=2.1,<2.6", 2),
        ("numpy", "", 2),
        ("transformers", "", 3),
    ]
    declared = declared_in(tmp_path)
    assert declared is not None and (declared.minimum, declared.below) == ((2, 1), (2, 6))


def test_pyproject_groups_and_requires_python(tmp_path: Path) -> None:
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text(
        '[project]\nname = "p"\nrequires-python = ">=3.10"\ndependencies = ["numpy"]\n'
        '[dependency-groups]\ngpu = ["torch==2.1.2+cu118"]\n',
        encoding="utf-8",
    )
    found, python = requirements_in(pyproject, "pyproject.toml")
    assert python == ">=3.10"
    assert ("torch", "==2.1.2+cu118") in [(r.name, r.spec) for r in found]
    declared = declared_in(tmp_path)
    assert declared is not None and (declared.minimum, declared.below) == ((2, 1), (2, 2))


def test_an_unpinned_torch_and_an_unreadable_file_say_nothing(tmp_path: Path) -> None:
    (tmp_path / "requirements.txt").write_text("torch\n-e .\n", encoding="utf-8")
    (tmp_path / "setup.py").write_text("setup(install_requires=[\n", encoding="utf-8")
    assert declared_in(tmp_path) is None
    assert requirements_in(tmp_path / "setup.py", "setup.py") == ([], None)
