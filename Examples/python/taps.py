#!/usr/bin/env python3
"""Log an AAC board's symbol taps through LANSync's local API, and follow them.

    taps.py append [--count N] [--stream S]      append N taps, one request each; print latency
    taps.py batch [--count N] [--per-request B]  append N taps, B per request; print the rate
    taps.py follow [--stream S] [--cursor-file F] [--count N] [--give-up-after SECONDS]
                                                 print each new tap's ID as it arrives (from any
                                                 device), resuming after restarts from F

Standard library only. The data directory is $LANSYNC_DATA_DIR (or --data-dir).
"""

import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lansync_api import LANSync  # noqa: E402

SYMBOLS = ["more", "juice", "all done", "help", "play", "outside", "eat", "drink"]


def tap(index):
    return {"symbol_id": index % len(SYMBOLS), "label": SYMBOLS[index % len(SYMBOLS)],
            "grid_position": [index % 6, index // 6 % 6], "session_id": "api-demo"}


def percentile(values, fraction):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mode", choices=["append", "batch", "follow"])
    parser.add_argument("--data-dir")
    parser.add_argument("--stream", default="symbol_taps")
    parser.add_argument("--count", type=int, default=100)
    parser.add_argument("--per-request", type=int, default=500)
    parser.add_argument("--cursor-file")
    parser.add_argument("--give-up-after", type=float)
    options = parser.parse_args()
    node = LANSync(options.data_dir)

    if options.mode == "append":
        latencies, ids = [], []
        for index in range(options.count):
            start = time.perf_counter()
            entry = node.append(options.stream, tap(index))
            latencies.append((time.perf_counter() - start) * 1000)
            ids.append(entry["id"])
        print(json.dumps({"ids": ids, "p50_ms": statistics.median(latencies), "p99_ms": percentile(latencies, 0.99),
                          "max_ms": max(latencies)}))
    elif options.mode == "batch":
        start = time.perf_counter()
        ids = []
        for first in range(0, options.count, options.per_request):
            batch = [tap(i) for i in range(first, min(first + options.per_request, options.count))]
            ids += [entry["id"] for entry in node.append_batch(options.stream, batch)]
        seconds = time.perf_counter() - start
        print(json.dumps({"appended": len(ids), "per_second": len(ids) / seconds}))
    else:
        cursor = None
        if options.cursor_file and os.path.exists(options.cursor_file):
            with open(options.cursor_file, encoding="utf-8") as file:
                cursor = file.read().strip() or None
        seen = 0
        for cursor, batch in node.changes(cursor, give_up_after=options.give_up_after):
            for entry in batch["entries"]:
                if entry["stream"] == options.stream:
                    print(entry["id"], flush=True)
                    seen += 1
            if options.cursor_file:
                with open(options.cursor_file + ".tmp", "w", encoding="utf-8") as file:
                    file.write(cursor)
                os.replace(options.cursor_file + ".tmp", options.cursor_file)
            if options.count and seen >= options.count:
                return


if __name__ == "__main__":
    main()
