"""The offline commands: the core without HTTP (compact, report)."""
