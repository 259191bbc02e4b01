"""Hostile modules using the hal module, under Limits, for longer than CI runs them.

    python scripts/fuzz_limits.py [--cases=N] [--device=local-sync|local-task|both]
                                  [--seed=S] [--report=SECONDS]

Runs tests/vm/hostile_hal.py's Fuzzer (the CI suite runs 1,000 + 200 cases of
it): queue allocations of any size, dispatches of the MLP's VMVX executable on
grids up to 65535 x 65535, recorded commands, and byte-mutated VMVX executables,
each call under Limits(fuel=200000, max_depth=200, max_memory=4 MiB,
timeout=0.05). Every call must end within its deadline + 100 ms, fail only with
a vmrt error that is not INTERNAL, and leave memory_in_use at 0. A crash ends
the process (the count run so far is printed every --report seconds). Prints the
outcome counts and any problem; the exit status is 1 when there was one.
Not run by CI.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def run(device: str, cases: int, seed: int, report: float) -> tuple[int, list[str]]:
    from tests.vm.hostile_hal import Fuzzer

    fuzzer = Fuzzer(device)
    rng = random.Random(seed)
    start = last = time.monotonic()
    for done in range(1, cases + 1):
        fuzzer.case(rng)
        if time.monotonic() - last >= report:
            last = time.monotonic()
            print(f"  {device}: {done} cases, {last - start:.0f} s", flush=True)
    elapsed = time.monotonic() - start
    print(f"{device}: {cases} cases in {elapsed:.1f} s, longest call {fuzzer.longest:.3f} s "
          f"(deadline {fuzzer.limits.timeout} s + 0.1), {len(fuzzer.problems)} problems")
    for key, count in sorted(fuzzer.outcomes.items()):
        print(f"  {key:40} {count}")
    return cases, fuzzer.problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=20_000, help="cases per device")
    parser.add_argument("--device", choices=("local-sync", "local-task", "both"),
                        default="both")
    parser.add_argument("--seed", type=int, default=2024)
    parser.add_argument("--report", type=float, default=30.0, metavar="SECONDS")
    args = parser.parse_args()
    devices = ("local-sync", "local-task") if args.device == "both" else (args.device,)
    total, problems = 0, []
    for index, device in enumerate(devices):
        count, found = run(device, args.cases, args.seed + index, args.report)
        total += count
        problems += found
    print(f"{total} cases, {len(problems)} problems")
    for problem in problems[:50]:
        print(f"  {problem}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
