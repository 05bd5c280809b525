"""Ragline as an MCP client: the tools of the MCP servers the operator lists (settings
agent_mcp_servers), for agent mode (nodes/tools/mcp.py). client.py speaks MCP (the official SDK,
imported only there); names.py is how the model names a server's tool. The MCP door, where
Ragline is the server, is api/mcp.py."""
