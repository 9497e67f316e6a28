"""toolslim: a reverse proxy that losslessly compacts the tool catalogues LLM agents re-send."""

__version__ = "0.1.0"
