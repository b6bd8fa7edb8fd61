"""`--once --json` at scale: the CPU of turning one poll's snapshot into the printed document, old and new way.

    .venv/bin/python -m bench.bench_json [--partitions 100000] [--groups 10000] [--per-group 10] [--runs 5]

The snapshot is the synthetic cluster's (bench/synthetic.py), with its alerts. "old" is what `--once --json`
did before: the standard library's `json.dump(..., indent=1)` straight to the stream (millions of small writes);
"new" is `collectors.runtime.loop.write_document` (orjson, one write). Both write to /dev/null, so the figure
is the CPU the collector spends, not the terminal's.
"""

from __future__ import annotations

import json
import time

from bench.common import median_of, size_of, size_parser, warmed
from collectors.model.poll import PollResult
from collectors.runtime.loop import document, write_document


def main() -> None:
    a = size_parser(__doc__, partitions=100_000, groups=10_000).parse_args()
    _, snap, alerts = warmed(size_of(a), time.time(), track=True)
    snap.alerts = alerts
    results = [PollResult(snapshot=snap)]
    print(f"snapshot: {len(snap.partitions):,} partitions, {len(snap.group_partitions):,} group-partitions, "
          f"{len(snap.alerts):,} alerts")
    for mode in ("old", "new"):
        cpu: list[float] = []
        size = 0
        for _ in range(a.runs):
            t0 = time.process_time()
            if mode == "old":
                with open("/dev/null", "w") as out:
                    json.dump(document(results, snap.time), out, indent=1, default=str)
                    out.write("\n")
            else:
                with open("/dev/null", "wb") as out:
                    write_document(results, snap.time, out)
            cpu.append(time.process_time() - t0)
        if mode == "new":
            import io

            buf = io.BytesIO()
            write_document(results, snap.time, buf)
            size = len(buf.getvalue())
        print(f"{mode}: CPU median {median_of(cpu)}" + (f"; {size / 1e6:.0f} MB of JSON" if size else ""))


if __name__ == "__main__":
    main()
