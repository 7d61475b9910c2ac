"""`toolpath mcp serve`: toolpath's registered tools as an MCP server (the official `mcp` SDK), over stdio or
streamable HTTP on 127.0.0.1.

server.py builds the SDK's low-level Server (tools/list from each Tool's schema, tools/call through Tool.call)
and runs it on a transport; sessions.py holds what each MCP session owns: its ToolContext (inputs, named
images, artifacts) and its sandbox, opened on its first call and closed when the session ends. The other
direction (MCP servers as a task's tool source) is tools/mcp_client.py.
"""
