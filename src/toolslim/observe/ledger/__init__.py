"""The tool ledger: what each tool and MCP server costs, offered and called, per client
(book), how /stats shows it (render), its money (prices) and its file (state)."""
