"""Where a suite run's time went, from the lines PPO_LAB_TEST_TIMELINE=FILE wrote
(tests/conftest.py): each worker's busy time, when it finished, and its longest tests.

    PPO_LAB_TEST_TIMELINE=/tmp/t.jsonl make test && python scripts/test_timeline.py /tmp/t.jsonl
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict


def main(path: str, top: int = 8) -> None:
    rows = [json.loads(line) for line in open(path)]
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


if __name__ == "__main__":
    main(sys.argv[1])
