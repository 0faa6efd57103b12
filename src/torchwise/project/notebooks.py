"""A notebook's code, read as one Python source, and the shell commands its cells run.

Models are often defined in notebooks (tutorials, experiments), and their cells run
the project's scripts (``!python train.py``). The code cells are joined in order into
one source; IPython lines that are not Python (``%magic``, ``!shell``, ``cmd?``) become
blank lines so the line numbers still map back to their cell. Nothing is executed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

#: Notebooks larger than this are not read (outputs with images make them huge).
MAX_NOTEBOOK_BYTES = 20_000_000


@dataclass
class NotebookCode:
    """The code cells of a notebook as one source."""

    source: str = ""
    #: 1-based line of ``source`` -> 1-based code-cell number (as review counts cells).
    cells: list[int] = field(default_factory=list)
    #: (cell number, line in the cell, command) for each ``!command`` line.
    shell: list[tuple[int, int, str]] = field(default_factory=list)

    def where(self, line: int) -> tuple[int, int] | None:
        """(code cell, line in that cell) of a line of :attr:`source`."""
        if not 0 < line <= len(self.cells):
            return None
        cell = self.cells[line - 1]
        first = self.cells.index(cell) + 1
        return cell, line - first + 1


def _lines(cell: dict[str, object]) -> list[str]:
    source = cell.get("source", "")
    text = "".join(source) if isinstance(source, list) else str(source)
    return text.splitlines()


def read_notebook(text: str) -> NotebookCode | None:
    """The code of a notebook's text (``.ipynb`` JSON), or None when it is not one."""
    try:
        document = json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        return None
    cells = document.get("cells") if isinstance(document, dict) else None
    if not isinstance(cells, list):
        return None
    code = NotebookCode()
    lines: list[str] = []
    number = 0
    for cell in cells:
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        number += 1
        cell_lines = _lines(cell)
        magic = cell_lines[0].strip() if cell_lines else ""
        shell_cell = magic.startswith(("%%bash", "%%sh", "%%script bash", "%%script sh"))
        whole_cell = magic.startswith("%%")  # a cell magic: no line of it is Python
        for at, line in enumerate(cell_lines, 1):
            stripped = line.strip()
            if stripped.startswith("!"):
                code.shell.append((number, at, stripped[1:].strip()))
            elif shell_cell and at > 1 and stripped:
                code.shell.append((number, at, stripped))
            if whole_cell or stripped.startswith(("!", "%")) or stripped.endswith("?"):
                line = ""  # IPython, not Python
            lines.append(line)
            code.cells.append(number)
    code.source = "\n".join(lines) + "\n"
    return code
