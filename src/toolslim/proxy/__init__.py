"""The aiohttp shell: the wiring, the HTTP flow, the WebSocket relay, connection limits, the
watchdog, the worker-thread offload and the admin endpoints."""
