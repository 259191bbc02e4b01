"""Benchmark: two checkouts of vmrt side by side in one run (is a change slower?).

    python benchmarks/compare_commits.py BASE_TREE NEW_TREE [--rounds 4]

Runs benchmarks/vm_bench.py and benchmarks/native_bench.py (`--json`) of each tree
against that tree's own vmrt (PYTHONPATH), alternating BASE and NEW for --rounds
rounds, keeps the best figure of each benchmark per tree and prints NEW / BASE.
Make a tree of an older commit with `git worktree add /tmp/base REV` and copy
vmrt/_cnative*.so into it (or build it there). The code cache is off (VMRT_CACHE=0)
so both trees compile what they run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

SCRIPTS = {
    "vm_bench": ["--json", "--no-reference", "--repeat", "3"],
    "native_bench": ["--json", "--repeat", "3"],
}


def run(tree: str, script: str, args: list[str]) -> dict:
    env = dict(os.environ, PYTHONPATH=tree, VMRT_CACHE="0")
    out = subprocess.run([sys.executable, f"{tree}/benchmarks/{script}.py", *args], env=env,
                         capture_output=True, text=True, check=True, timeout=1800).stdout
    return json.loads(out[out.index("{"):])


def figures(script: str, report: dict) -> dict[str, float]:
    """name -> figure of every timed row of one report, oriented so lower is better
    (ns per call; for throughputs, seconds per GB)."""
    found = {}
    for row in report.get("benchmarks", []):
        for key, suffix in (("vmrt_ns", ""), ("limits_ns", " (limits)")):
            if isinstance(row.get(key), (int, float)):
                found[f"{script}: {row['name']}{suffix}"] = row[key]
    for row in report.get("import_calls", []):
        if row["runner"].startswith("vmrt"):
            found[f"{script}: import call, {row['runner']}"] = row["ns_per_call"]
    gather = report.get("gather") or {}
    for key in ("c_GBps", "twin_GBps"):
        if gather.get(key):
            found[f"{script}: gather {key[:-5]} (ns/KB)"] = 1e3 / gather[key]
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("base")
    parser.add_argument("new")
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    best: dict[str, dict[str, float]] = {"base": {}, "new": {}}
    for _ in range(args.rounds):
        for label, tree in (("base", args.base), ("new", args.new)):
            for script, script_args in SCRIPTS.items():
                for name, ns in figures(script, run(tree, script, script_args)).items():
                    best[label][name] = min(ns, best[label].get(name, ns))
    print(f"{'benchmark':58} {'base ns':>10} {'new ns':>10} {'new/base':>9}")
    for name in sorted(best["base"]):
        base, new = best["base"][name], best["new"].get(name)
        if new is not None:
            print(f"{name:58} {base:10.1f} {new:10.1f} {new / base:9.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
