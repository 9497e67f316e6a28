"""The process: listening, signals, the shutdown sequence and gunicorn workers."""
