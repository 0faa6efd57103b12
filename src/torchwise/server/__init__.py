"""``torchwise server``: review's findings in the editor, over the Language Server
Protocol (on pygls). Never imports torch.

Diagnostics on open, change and save (files, unsaved buffers and notebooks),
the rule's documentation on hover, fixes and ``# noqa`` as code actions, and
``source.fixAll.torchwise``; settings from ``[tool.torchwise]`` as ``torchwise
review`` reads them. See docs/server.md.

    from torchwise.server import build_server
    build_server().start_io()      # what `torchwise server` does
"""

from torchwise.server.features import build_server
from torchwise.server.lsp import TorchwiseLanguageServer

__all__ = ["TorchwiseLanguageServer", "build_server"]
