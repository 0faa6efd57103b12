"""torchwise as an MCP server: ``build_server(root)``; ``torchwise mcp`` serves it over stdio.

Needs the ``mcp`` extra (the official MCP SDK, 2.x). See docs/mcp.md.
"""
