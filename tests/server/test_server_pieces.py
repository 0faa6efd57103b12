"""The server's pieces without a client: positions in the client's encoding,
where a ``# noqa`` can go, and which files an import names."""

from __future__ import annotations

import ast
from pathlib import Path

from lsprotocol import types

from torchwise.review import Finding, ReviewSettings, Severity, Workspace, project_imports
from torchwise.server.actions import _minimal_edit, noqa_action
from torchwise.server.analysis import Analysis, Placer, Source
from torchwise.server.imports import ImportGraph
from torchwise.server.positions import LineIndex


def test_columns_count_utf16_code_units_by_default() -> None:
    text = 'x = "😋"; y = torch.norm(a)\r\nz = 1\n'
    utf16, utf32 = LineIndex(text), LineIndex(text, types.PositionEncodingKind.Utf32)
    offset = text.index("torch")
    assert utf16.position(offset) == types.Position(line=0, character=14)  # the emoji is 2
    assert utf32.position(offset) == types.Position(line=0, character=13)
    assert LineIndex(text, types.PositionEncodingKind.Utf8).position(offset).character == 16
    assert utf16.offset(types.Position(line=0, character=14)) == offset
    assert utf16.at(1, 14) == types.Position(line=0, character=14)  # review's 1-based column 14
    assert utf16.position(text.index("z")) == types.Position(line=1, character=0)  # after \r\n
    assert utf16.offset(types.Position(line=9, character=0)) == len(text)


def _analysis(text: str, finding: Finding) -> tuple[Analysis, Placer]:
    source = Source("file:///t.py", "/t.py", 1, text)
    return Analysis(source, ReviewSettings(), (finding,)), Placer(source, "utf-16")


def _finding(line: int, end_line: int) -> Finding:
    return Finding("TW406", "m", "/t.py", line, 1, end_line, 2, Severity.WARNING)


def _noqa_text(text: str, finding: Finding) -> str | None:
    analysis, placer = _analysis(text, finding)
    action = noqa_action(analysis, placer, finding, None)
    if action is None:
        return None
    assert action.edit is not None and action.edit.changes is not None
    (edit,) = action.edit.changes["file:///t.py"]
    index = placer.joined
    start, end = index.offset(edit.range.start), index.offset(edit.range.end)
    return text[:start] + edit.new_text + text[end:]


def test_noqa_goes_where_a_comment_can_end_the_line() -> None:
    # The first line ends inside a string: the comment goes on the last line.
    text = 'y = f("""a\nb""", torch.norm(x))\n'
    assert _noqa_text(text, _finding(1, 2)) == 'y = f("""a\nb""", torch.norm(x))  # noqa: TW406\n'
    # A backslash continuation cannot take a comment either.
    text = "y = torch.norm(x) + \\\n    1\n"
    assert _noqa_text(text, _finding(1, 2)) == "y = torch.norm(x) + \\\n    1  # noqa: TW406\n"
    # Trailing blanks are replaced, a comment already there is kept.
    text = "y = torch.norm(x)   # why\n"
    assert _noqa_text(text, _finding(1, 1)) == "y = torch.norm(x)   # why  # noqa: TW406\n"
    # Nowhere to put it: no action.
    text = 'y = f("""a\nb""" + \\\n"""c\nd""")\n'
    assert _noqa_text(text, _finding(2, 3)) is None
    ast.parse(text)


def test_fix_all_changes_only_what_changed() -> None:
    edit = _minimal_edit("abcXYZdef", "abc123def")
    assert (edit.start, edit.end, edit.text) == (3, 6, "123")
    edit = _minimal_edit("aaa", "aaaa")
    assert (edit.start, edit.end, edit.text) == (3, 3, "a")


def test_imports_name_project_files_beside_the_importer_and_its_package(tmp_path: Path) -> None:
    (tmp_path / "pkg" / "sub").mkdir(parents=True)
    for name in ("pkg/__init__.py", "pkg/sub/__init__.py", "pkg/sub/layers.py", "pkg/models.py"):
        (tmp_path / name).write_text("")
    (tmp_path / "util.py").write_text("from pkg.models import Net\n")
    importer = tmp_path / "pkg" / "train.py"
    code = (
        "import torch\nfrom . import models\nfrom .sub.layers import Block\n"
        "import pkg.sub\nfrom util import helper\nimport missing\n"
    )
    found = set(project_imports(str(importer), code))
    assert found == {
        str(tmp_path / "pkg" / "models.py"),
        str(tmp_path / "pkg" / "__init__.py"),
        str(tmp_path / "pkg" / "sub" / "layers.py"),
        str(tmp_path / "util.py"),
    }
    workspace = Workspace()
    graph = ImportGraph(workspace)
    workspace.set_buffer(str(tmp_path / "main.py"), "import util\n")
    # main.py (a buffer, not on disk) -> util.py (on disk) -> pkg/models.py
    assert graph.dependents(str(tmp_path / "pkg" / "models.py"), [str(tmp_path / "main.py")])
    assert not graph.dependents(str(tmp_path / "pkg" / "train.py"), [str(tmp_path / "main.py")])


def test_without_pygls_the_command_says_what_to_install(tmp_path: Path) -> None:
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent(
        """
        import importlib.abc, sys

        class NoPygls(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in ("pygls", "lsprotocol"):
                    raise ModuleNotFoundError(f"No module named {name!r}", name=name)
                return None

        sys.meta_path.insert(0, NoPygls())
        from torchwise.cli import main
        main(["server"])
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path, check=False
    )
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "error: torchwise server needs pygls, which is not installed: "
        "pip install pygls (or pip install 'torchwise[server]')"
    ]
