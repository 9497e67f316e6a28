"""The pipeline's output is the same bytes in every process, whatever PYTHONHASHSEED a process
draws: a memo shared by workers and a cache upstream both depend on it."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from bodies import STALE, with_schemas
from toolslim.core.pipeline import Pipeline


def test_the_output_is_the_same_bytes_under_every_hash_seed() -> None:
    script = (
        "import sys; from toolslim.core.pipeline import Pipeline; "
        "body = sys.stdin.buffer.read(); "
        "sys.stdout.buffer.write(Pipeline(['tooldefs', 'toolschema']).run(body).body)"
    )
    body = with_schemas(
        STALE, {**STALE, "definitions": {"A": {}, "B": {"$ref": "#/definitions/A"}}}
    )
    outputs = {
        subprocess.run(
            [sys.executable, "-c", script],
            input=body,
            capture_output=True,
            check=True,
            env={"PYTHONHASHSEED": seed, "PATH": "/usr/bin:/bin"},
        ).stdout
        for seed in ("0", "1", "4242")
    }
    assert len(outputs) == 1
    assert outputs.pop() == Pipeline(["tooldefs", "toolschema"]).run(body).body


def test_the_output_is_byte_stable_across_processes() -> None:
    catalogue = [{"name": n, "input_schema": {"type": "object", "title": n}} for n in "qwertyé"]
    tools = json.dumps(catalogue, separators=(", ", ": "), ensure_ascii=False).encode()
    body = b'{"model":"m","messages":[],"tools":' + tools + b',"stream":true}'
    code = (
        "import sys; from toolslim.core.pipeline import Pipeline\n"
        "body = sys.stdin.buffer.read()\n"
        "sys.stdout.buffer.write(Pipeline(['toolorder', 'toolschema']).run(body).body)"
    )
    outputs = set()
    for seed in ("0", "1", "12345"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        done = subprocess.run(
            [sys.executable, "-c", code], input=body, capture_output=True, check=True, env=env
        )
        outputs.add(done.stdout)
    assert outputs == {Pipeline(["toolorder", "toolschema"]).run(body).body}
