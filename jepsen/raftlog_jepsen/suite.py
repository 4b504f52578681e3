"""jepsen/suite: many runs in a row (the long suite), one summary line per run and a total."""
import argparse
import json
import os
import subprocess
import sys
import time

RUN = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "run")
MAX_RUNS = 10000


def main(argv):
    p = argparse.ArgumentParser(prog="jepsen/suite", description="Runs jepsen/run repeatedly (docs/jepsen.md).")
    p.add_argument("--runs", type=int, default=50)
    p.add_argument("--time-limit", type=float, default=60.0)
    p.add_argument("--nodes", default="3,5", help="comma list; runs alternate between them")
    p.add_argument("--nemesis", default="all")
    p.add_argument("--seed-start", type=int, default=1)
    p.add_argument("--out", default=os.path.join(os.path.dirname(RUN), "..", "build", "jepsen", "suite"))
    p.add_argument("--raftlogd", default=None)
    p.add_argument("--append-rpc", choices=["unary", "stream", "mixed"], default="mixed")
    args = p.parse_args(argv)
    if not 1 <= args.runs <= MAX_RUNS:
        p.error("--runs must be in 1..%d" % MAX_RUNS)
    node_counts = [int(n) for n in args.nodes.split(",")]
    os.makedirs(args.out, exist_ok=True)
    summary_path = os.path.join(args.out, "summary.jsonl")
    invalid = 0
    with open(summary_path, "a") as summary:
        for k in range(args.runs):
            seed = args.seed_start + k
            nodes = node_counts[k % len(node_counts)]
            out = os.path.join(args.out, "seed%d-n%d" % (seed, nodes))
            cmd = [sys.executable, RUN, "--nodes", str(nodes), "--time-limit", str(args.time_limit),
                   "--nemesis", args.nemesis, "--seed", str(seed), "--out", out, "--overwrite",
                   "--append-rpc", args.append_rpc]
            if args.raftlogd:
                cmd += ["--raftlogd", args.raftlogd]
            started = time.monotonic()
            with open(os.path.join(args.out, "seed%d-n%d.log" % (seed, nodes)), "w") as log:
                code = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT).returncode
            line = {"seed": seed, "nodes": nodes, "exit": code, "seconds": round(time.monotonic() - started, 1)}
            try:
                with open(os.path.join(out, "results.json")) as f:
                    results = json.load(f)
                line["valid"] = results.get("valid")
                line["appends"] = results.get("outcomes", {}).get("append", {})
                line["appends_by_transport"] = results.get("outcomes", {}).get("append_by_transport", {})
                line["nemeses"] = results.get("outcomes", {}).get("nemesis", {})
                line["failed_checkers"] = [n for n, c in results.get("checkers", {}).items() if not c["valid"]]
            except (OSError, ValueError):
                line["valid"] = False
            invalid += 0 if line["valid"] else 1
            summary.write(json.dumps(line, sort_keys=True) + "\n")
            summary.flush()
            print("run %d/%d seed %d nodes %d: %s %s" % (k + 1, args.runs, seed, nodes,
                  "valid" if line["valid"] else "INVALID (exit %d)" % code, json.dumps(line.get("appends", {}))),
                  flush=True)
    print("%d run(s), %d invalid; summary in %s" % (args.runs, invalid, summary_path))
    return 1 if invalid else 0
