"""Same-run A/B of two builds of the proxy (issue 23): the working tree against a git revision,
each `toolslim serve` pinned to CPU 1, taking turns under wrk at concurrency 32; the median of
the per-turn ratios of CPU per request.

The hot path's goals sit a few per cent from where the proxy is, about as far as
proxy_bench.py moves from one run to the next on a shared machine (bench/README.md). Two
proxies that take turns for a few seconds see the same machine, so a change of 1-2 % shows.
`--base HEAD` (the default) against an unchanged tree is the A/A run: its ratio is the noise.

Run: `python bench/ab_bench.py --base HEAD~1 --pipeline toolschema` (~1 min).

Two more uses, both on one build (`--base HEAD` with an unchanged tree):
- `--pipeline '' --pipeline-b toolschema`: the issue's own ratio, `[toolschema]` against `[]`,
  finer than proxy_bench.py's separate runs;
- `--switch-off ledger,lint`: what a part of the per-request observing costs, B running with it
  replaced by a no-op (a measuring aid of this bench only: toolslim has no such switch).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from common import Proxy, revision, start_proxy, start_upstream, stop
from compact_bench import SIZES, bodies, catalogue
from proxy_bench import EVENTS, Cell, run_cell, warm

HERE = Path(__file__).resolve().parent
REPO = HERE.parent

# The per-request observing B can run without (--switch-off), each as the lines that replace
# it with a no-op at start-up (a sitecustomize module B imports before toolslim serves).
SWITCHES: dict[str, str] = {
    # The tool ledger's count of a model call (issue 22).
    "ledger": "from toolslim.observe.exchange import Ledger\n"
    "Ledger._offered = lambda self, *args, **kwargs: None\n",
    # Lint's findings counted per request (issue 24).
    "lint": "from toolslim.observe.health import Linter\n"
    "Linter.request = lambda self, *args, **kwargs: ()\n",
    # Drift's decision per request (the session is still named: the ledger reads it).
    "drift": "from toolslim.observe.drift import Tracker\n"
    "Tracker.observe = lambda self, *args, **kwargs: None\n",
}


def export(rev: str, into: Path) -> Path:
    """The `src` of revision `rev`, written under `into`; the folder to put on PYTHONPATH."""
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", rev, "src"], check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    source = into / "src"
    found = subprocess.run(
        [sys.executable, "-c", "import toolslim; print(toolslim.__file__)"],
        env={"PYTHONPATH": str(source), "PATH": "/usr/bin:/bin"},
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    if not found.startswith(str(source)):  # an install that shadows PYTHONPATH
        raise SystemExit(f"the base build would not be the one imported: {found}")
    return source


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default="HEAD", help="the revision to compare against")
    parser.add_argument("--pipeline", default="toolschema", help="'' for the pass-through")
    parser.add_argument("--pipeline-b", default=None, help="B's, if not --pipeline's")
    parser.add_argument(
        "--switch-off", default="", help=f"B without these, comma-separated: {', '.join(SWITCHES)}"
    )
    parser.add_argument("--size", default="80KB", choices=sorted(SIZES))
    parser.add_argument("--mode", default="nonstream", choices=("nonstream", "stream"))
    parser.add_argument("--reps", type=int, default=8)
    parser.add_argument("--duration", type=int, default=2, help="seconds per turn")
    args = parser.parse_args()
    switched = [part for part in args.switch_off.split(",") if part]
    if unknown := sorted(set(switched) - set(SWITCHES)):
        parser.error(f"--switch-off: unknown part {', '.join(unknown)}")
    pipeline_b = args.pipeline if args.pipeline_b is None else args.pipeline_b

    with tempfile.TemporaryDirectory(prefix="toolslim-ab-") as tmp:
        folder = Path(tmp)
        base = export(args.base, folder)
        items = bodies(catalogue(), SIZES[args.size], 16, seed=SIZES[args.size])
        if args.mode == "nonstream":
            items = [b.replace(b',"stream":true}', b',"stream":false}') for b in items]
        paths = []
        for index, body in enumerate(items):
            path = folder / f"{index:02d}.json"
            path.write_bytes(body)
            paths.append(str(path))
        body_list = folder / "bodies.list"
        body_list.write_text("\n".join(paths) + "\n")
        processes = []
        try:
            upstream, upstream_port = start_upstream(folder, cpu=0, events=EVENTS)
            processes.append(upstream)
            env_b = {}
            if switched:
                site = folder / "switched"
                site.mkdir()
                (site / "sitecustomize.py").write_text("".join(SWITCHES[p] for p in switched))
                env_b["PYTHONPATH"] = str(site)
            builds = (("A", args.pipeline, {"PYTHONPATH": str(base)}), ("B", pipeline_b, env_b))
            proxies: dict[str, Proxy] = {}
            for name, pipeline, env in builds:
                own = folder / name  # its log and its state file
                own.mkdir()
                flags = ["--pipeline", pipeline, "--log-level", "info"]
                proxies[name] = start_proxy(
                    name, own, {"anthropic": upstream_port}, flags, cpu=1, env=env
                )
                processes.append(proxies[name].process)
                warm(proxies[name].port, body_list, 0, folder)
            turns: dict[str, list[Cell]] = {"A": [], "B": []}
            for rep in range(args.reps):
                for name in ("A", "B") if rep % 2 == 0 else ("B", "A"):
                    cell = Cell(name, args.size, args.mode, 32, rep)
                    run_cell(
                        cell,
                        proxies[name].port,
                        body_list,
                        args.duration,
                        0,
                        upstream,
                        upstream_port,
                        proxies,
                        folder,
                    )
                    turns[name].append(cell)
        finally:
            stop(processes)

    def cpu(cells: list[Cell]) -> list[float]:
        """µs per request (run_cell measures it for every target that is a proxy)."""
        if any(c.cpu_ms is None for c in cells):
            raise SystemExit("a turn measured no CPU")
        return [c.cpu_ms * 1000 for c in cells if c.cpu_ms is not None]

    a, b = cpu(turns["A"]), cpu(turns["B"])
    ratios = [y / x for x, y in zip(a, b, strict=True)]
    other = max(c.other_cores for c in turns["A"] + turns["B"])
    print(
        f"ab_bench: A = {args.base} with pipeline {args.pipeline or '[]'!r},"
        f" B = the working tree ({revision()}) with pipeline {pipeline_b or '[]'!r}"
        f"{' without ' + ', '.join(switched) if switched else ''};"
        f" {args.size} {args.mode}, c=32, {args.reps} turns of {args.duration} s each"
    )
    print("CPU µs per request, A:", " ".join(f"{x:.1f}" for x in a))
    print("CPU µs per request, B:", " ".join(f"{x:.1f}" for x in b))
    print(
        f"median A {statistics.median(a):.1f} µs, B {statistics.median(b):.1f} µs;"
        f" B/A per turn, median {statistics.median(ratios):.3f}x"
        f" (least {min(ratios):.3f}, most {max(ratios):.3f}); other cores at most {other:.2f}"
    )


if __name__ == "__main__":
    main()
