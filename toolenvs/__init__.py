"""Tool-use environments: task records, the answer protocol, local MCP apps and their client."""
