"""Where a suite run's time went, from the lines PPO_LAB_TEST_TIMELINE=FILE wrote
(tests/conftest.py): each worker's busy time, when it finished, and its longest tests; then the
CPU the tests used (in the test process and in the processes they started and waited for), by
file and by test. The cores are the suite's limit (both busy nearly all of a run): CPU is what
a change must save.

    PPO_LAB_TEST_TIMELINE=/tmp/t.jsonl make test && python scripts/test_timeline.py /tmp/t.jsonl
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict


def cpu(row: dict) -> float:
    return row.get("cpu", 0.0) + row.get("children_cpu", 0.0)


def print_workers(rows: list[dict], top: int) -> None:
    t0 = min(r["start"] for r in rows)
    end = max(r["end"] for r in rows)
    by_worker = defaultdict(list)
    for r in rows:
        by_worker[r["worker"]].append(r)
    print(f"{len(rows)} tests, {end - t0:.0f} s from the first start to the last end")
    for worker, tests in sorted(by_worker.items()):
        busy = sum(r["end"] - r["start"] for r in tests)
        last = max(r["end"] for r in tests) - t0
        print(f"\n{worker}: {len(tests)} tests, busy {busy:.0f} s, done at {last:.0f} s (idle at the end {end - t0 - last:.0f} s)")
        for r in sorted(tests, key=lambda r: r["start"] - r["end"])[:top]:
            print(f"  {r['end'] - r['start']:6.1f} s  from {r['start'] - t0:5.0f} s  {r['test']}")


def print_cpu(rows: list[dict], top: int) -> None:
    """CPU by file and by test (lines written before the CPU was recorded have none)."""
    if not any("cpu" in r for r in rows):
        return
    own, children = sum(r.get("cpu", 0.0) for r in rows), sum(r.get("children_cpu", 0.0) for r in rows)
    print(f"\nCPU: {own + children:.0f} s ({own:.0f} in the test processes, {children:.0f} in processes they waited for; "
          "SLURM jobs and killed processes are not counted)")
    by_file = defaultdict(float)
    for r in rows:
        by_file[r["test"].split("::", 1)[0]] += cpu(r)
    print("\nby file:")
    for name, seconds in sorted(by_file.items(), key=lambda kv: -kv[1])[:top]:
        print(f"  {seconds:7.1f} s  {name}")
    print("\nby test (own + children):")
    for r in sorted(rows, key=lambda r: -cpu(r))[:top]:
        print(f"  {cpu(r):7.1f} s  ({r.get('cpu', 0.0):5.1f} + {r.get('children_cpu', 0.0):5.1f})  {r['test'].split('@')[0]}")


def main(path: str, top: int = 8) -> None:
    rows = [json.loads(line) for line in open(path)]
    print_workers(rows, top)
    print_cpu(rows, 3 * top)


if __name__ == "__main__":
    main(sys.argv[1])
