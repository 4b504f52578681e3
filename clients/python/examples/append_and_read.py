#!/usr/bin/env python3
"""Appends a few entries to a raftlog cluster and reads them back.

    deploy/local/cluster up --nodes 3
    PYTHONPATH=clients/python:build/clients/python/gen python3 clients/python/examples/append_and_read.py
"""
import argparse
import os
import sys

import raftlog

DEFAULT_ENDPOINTS = os.environ.get("RAFTLOG_ENDPOINTS", "127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--endpoints", default=DEFAULT_ENDPOINTS, help="host:port,... (default %(default)s)")
    parser.add_argument("entries", nargs="*", default=["hello", "from", "python"])
    args = parser.parse_args()
    with raftlog.Client(args.endpoints) as client:
        try:
            result = client.append([entry.encode() for entry in args.entries])
        except raftlog.AppendOutcomeUnknownError as error:
            print("gave up; the entries may or may not be in the log:", error, file=sys.stderr)
            return 1
        except raftlog.RaftlogError as error:  # refused: nothing was written
            print("refused (%s):" % error.reason, error, file=sys.stderr)
            return 1
        print("appended at %d..%d (term %d) via %s" % (result.first_index, result.last_index, result.term,
                                                        result.endpoint))
        read = client.read(result.first_index, count=len(args.entries), linearizable=True)
        for entry in read.entries:
            print("%d\t%s" % (entry.index, entry.payload.decode(errors="replace")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
