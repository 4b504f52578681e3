#!/usr/bin/env python3
"""Follows a raftlog cluster's log from an index on, printing every client entry; it carries on
across a leader failure (try `deploy/local/cluster kill 1` while it runs). Ctrl-C ends it.

    PYTHONPATH=clients/python:build/clients/python/gen python3 clients/python/examples/tail.py --from 1
"""
import argparse
import os
import sys

import raftlog

DEFAULT_ENDPOINTS = os.environ.get("RAFTLOG_ENDPOINTS", "127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--endpoints", default=DEFAULT_ENDPOINTS, help="host:port,... (default %(default)s)")
    parser.add_argument("--from", dest="from_index", type=int, default=1, help="first index (default 1)")
    parser.add_argument("--count", type=int, default=0, help="stop after this many entries (0: never)")
    args = parser.parse_args()
    seen = 0
    with raftlog.Client(args.endpoints) as client, client.tail(args.from_index) as tail:
        try:
            for entry in tail:
                if entry.type == "normal":  # skip the leaders' no-op and membership entries
                    print("%d\t%s" % (entry.index, entry.payload.decode(errors="replace")), flush=True)
                seen += 1
                if args.count and seen >= args.count:
                    break
        except raftlog.IndexTrimmedError as error:
            print("index %d is gone (retention); the log starts at %s" % (tail.next_index, error.first_index),
                  file=sys.stderr)
            return 1
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
