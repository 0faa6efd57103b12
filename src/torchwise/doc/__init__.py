"""``torchwise doc``: measured shapes and counts written into docstrings and model pages.

Built on :mod:`torchwise.model` (the measurements) and read top to bottom:

- :mod:`~torchwise.doc.shapes`: symbolic shapes by running the model at several sizes;
- :mod:`~torchwise.doc.returns`: what optional ``forward`` arguments change in its outputs;
- :mod:`~torchwise.doc.modes`: what changes between ``train()`` and ``eval()``;
- :mod:`~torchwise.doc.example`: the ``Example:`` block and the usage script, run to prove them;
- :mod:`~torchwise.doc.docstrings`: Google-style docstrings as data (parse, merge, render);
- :mod:`~torchwise.doc.entries`: the ``(TYPE)`` of every generated entry and of ``Returns``;
- :mod:`~torchwise.doc.generate`: measurements -> the class and ``forward`` docstrings;
- :mod:`~torchwise.doc.source`: byte-exact rewriting of the docstrings in a source file;
- :mod:`~torchwise.doc.mermaid` and :mod:`~torchwise.doc.page`: the Markdown model page;
- :mod:`~torchwise.doc.run`: the command's workflow (print, ``--write``, ``--check``, ``--diff``).

Public API::

    from torchwise.doc import document, run_doc
"""

from torchwise.doc.generate import ModelDoc, document
from torchwise.doc.run import run_doc
from torchwise.doc.shapes import SymbolicShapes

__all__ = ["ModelDoc", "SymbolicShapes", "document", "run_doc"]
