# toolslim: the proxy in a small image. Build: docker build -t toolslim .
# Run:   docker run -p 8788:8788 -e TOOLSLIM_ADMIN_TOKEN=... toolslim
# The server refuses to listen on a non-loopback address such as 0.0.0.0 without an admin
# token, so TOOLSLIM_ADMIN_TOKEN must be passed with -e (or --env-file); it is never baked in.
FROM python:3.11-slim

# The tool ledger's state file is off in a container: Prometheus keeps the history there
# (set TOOLSLIM_STATE_FILE to a path on a mounted volume to keep it anyway).
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    TOOLSLIM_STATE_FILE=none

# A fixed numeric id, so `USER` resolves the same way on every host and in Kubernetes.
RUN groupadd --system --gid 10001 toolslim \
    && useradd --system --uid 10001 --gid 10001 --home-dir /home/toolslim --create-home \
        --shell /usr/sbin/nologin toolslim

WORKDIR /app
COPY pyproject.toml README.md ./
COPY src/ ./src/
RUN pip install --no-cache-dir . \
    && rm -rf build src/*.egg-info

# The sources stay root-owned and read-only for the server; mount a volume for --capture.
USER 10001:10001
WORKDIR /home/toolslim
EXPOSE 8788

# slim has no curl; urlopen raises on a non-2xx answer or a refused connection.
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8788/healthz', timeout=4)"]

CMD ["toolslim", "serve", "--host", "0.0.0.0", "--port", "8788"]
