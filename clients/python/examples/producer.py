#!/usr/bin/env python3
"""Many threads writing one entry at a time through a raftlog.Producer, which batches them into
shared appends; prints the throughput and checks every entry got its own index.

    PYTHONPATH=clients/python:build/clients/python/gen python3 clients/python/examples/producer.py --entries 2000
"""
import argparse
import concurrent.futures
import os
import sys
import time

import raftlog

DEFAULT_ENDPOINTS = os.environ.get("RAFTLOG_ENDPOINTS", "127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--endpoints", default=DEFAULT_ENDPOINTS, help="host:port,... (default %(default)s)")
    parser.add_argument("--entries", type=int, default=1000)
    parser.add_argument("--threads", type=int, default=16)
    args = parser.parse_args()
    started = time.monotonic()
    with raftlog.Client(args.endpoints) as client, raftlog.Producer(client, linger=0.002) as producer:
        with concurrent.futures.ThreadPoolExecutor(args.threads) as pool:
            futures = list(pool.map(lambda i: producer.send(b"entry-%d" % i), range(args.entries)))
        indexes = [future.result(timeout=60) for future in futures]
    elapsed = time.monotonic() - started
    if len(set(indexes)) != args.entries:
        print("two entries share an index", file=sys.stderr)
        return 1
    print("%d entries in %.2f s (%.0f/s), indexes %d..%d" % (args.entries, elapsed, args.entries / elapsed,
                                                             min(indexes), max(indexes)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
