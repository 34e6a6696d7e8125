"""MCP tools over the one turn pipeline.

``contract`` is the tools' names and schemas (light: ``function_app`` reads it at indexing);
``tools`` runs them, protocol-neutral (arguments and headers in, a ``ToolResult`` out);
``trigger`` is the Functions MCP extension's side (the host's tool context in, its result
envelope out). ``devtools/mcp_server.py`` serves the same tools locally with the ``mcp`` SDK.
"""
