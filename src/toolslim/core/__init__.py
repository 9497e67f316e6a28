"""The pure core: JSON-Schema tables, catalogue shapes, facts, the memo, the envelope around a
body and the pipeline of components. Values in, values out: pyproject's contracts keep I/O out."""
