"""jepsen/run: command line, run orchestration, cleanup on every exit path."""
import argparse
import json
import os
import random
import shutil
import signal
import threading
import time

from . import checker, client, cluster as cluster_mod, final_state, history as history_mod, membership, nemesis, netns
from . import proto_gen, workload

REPO_ROOT = proto_gen.REPO_ROOT
EXIT_VALID, EXIT_INVALID, EXIT_ERROR = 0, 1, 2
NODE_FLAGS = ["--segment-size", "256KiB", "--max-entry-size", "64KiB", "--append-timeout-ms", "3000", "--log-level", "info"]
TMPFS_SIZE_BYTES = 64 << 20
MAX_TIME_LIMIT_S = 3600


class Terminated(Exception):
    pass


def on_sigterm(signum, frame):
    raise Terminated("signal %d" % signum)


def parse_args(argv):
    p = argparse.ArgumentParser(prog="jepsen/run", description="Fault-injection test of a raftlog cluster "
                                "(docs/jepsen.md).")
    p.add_argument("--nodes", type=int, choices=[3, 5], default=3)
    p.add_argument("--time-limit", type=float, default=30.0, help="seconds of workload under faults")
    p.add_argument("--nemesis", default="kill,pause,partition",
                   help="comma list of %s, or 'all' or 'none'" % ",".join(nemesis.ALL))
    p.add_argument("--seed", type=int, default=None, help="schedule and workload seed (default: random)")
    p.add_argument("--out", default=None, help="output directory (default: build/jepsen/<time>-seed<seed>)")
    p.add_argument("--raftlogd", default=os.environ.get("RAFTLOGD", os.path.join(REPO_ROOT, "build", "bin", "raftlogd")))
    p.add_argument("--writers", type=int, default=4, help="concurrent appending clients")
    p.add_argument("--interval-ms", type=float, default=20.0, help="mean pause between one client's ops")
    p.add_argument("--flush-mode", choices=["sync", "async"], default="sync")
    p.add_argument("--append-rpc", choices=list(workload.APPEND_RPCS), default="mixed",
                   help="how writers append: unary Log/Append, Log/AppendStream, or mixed (even writers "
                        "stream, odd ones unary; the default)")
    p.add_argument("--overwrite", action="store_true", help="replace the results of an earlier run in --out")
    p.add_argument("--loopback", action="store_true", help="do not use network namespaces")
    p.add_argument("--cleanup", action="store_true", help="remove namespaces, links and mounts left by a dead run")
    p.add_argument("--check-only", metavar="DIR", help="re-run the checkers on DIR/history.jsonl + final-logs.json")
    args = p.parse_args(argv)
    if not 1 <= args.time_limit <= MAX_TIME_LIMIT_S:
        p.error("--time-limit must be in 1..%d" % MAX_TIME_LIMIT_S)
    if not 1 <= args.writers <= 64:
        p.error("--writers must be in 1..64")
    if args.nemesis in ("all",):
        args.nemeses = list(nemesis.ALL)
    elif args.nemesis in ("none", ""):
        args.nemeses = []
    else:
        args.nemeses = [n.strip() for n in args.nemesis.split(",") if n.strip()]
        unknown = [n for n in args.nemeses if n not in nemesis.ALL]
        if "delay" in unknown:
            p.error("nemesis 'delay' is not available: tc netem is absent on this kernel (docs/jepsen.md)")
        if unknown:
            p.error("unknown nemesis %s; choose from %s" % (",".join(unknown), ",".join(nemesis.ALL)))
    if args.seed is None:
        args.seed = random.SystemRandom().randrange(1, 1 << 31)
    if args.out is None:
        args.out = os.path.join(REPO_ROOT, "build", "jepsen", time.strftime("%Y%m%dT%H%M%S") + "-seed%d" % args.seed)
    return args


def corrupt_flags(args, kinds):
    """With the corrupt nemesis, the start-up dedup rebuild (which reads and CRC-checks the last
    --dedup-rebuild-entries entries, default 1,000,000: every entry of a short run) covers only about
    three times what the writers can append within one append's timeout (what a retry after a restart can still
    need for exact idempotency). Flips in older entries are then left to the background scrub: the node
    finds them while running and exits 1, so the watchdog's restart path is exercised too."""
    if "corrupt" not in kinds:
        return []
    entries = max(1000, int(args.writers * workload.OP_TIMEOUT_S * 1000.0 / max(args.interval_ms, 1.0) * 3))
    return ["--dedup-rebuild-entries", str(entries)]


def evaluate(history, final, out_dir, meta):
    checks = checker.check_all(history, final)
    valid = all(c["valid"] for c in checks.values()) and not meta.get("harness_error")
    results = {"valid": valid, "checkers": checks, "outcomes": checker.outcome_counts(history)}
    results.update(meta)
    with open(os.path.join(out_dir, "results.json"), "w") as f:
        json.dump(results, f, indent=2, sort_keys=True)
    return results


def check_only(directory):
    history = history_mod.load(os.path.join(directory, "history.jsonl"))
    with open(os.path.join(directory, "final-logs.json")) as f:
        final = json.load(f)
    final["nodes"] = {int(k): v for k, v in final["nodes"].items()}
    final["leader"] = int(final["leader"]) if final.get("leader") is not None else None
    results = evaluate(history, final, directory, {"rechecked": True})
    print(summary(results))
    return EXIT_VALID if results["valid"] else EXIT_INVALID


def summary(results):
    lines = ["valid: %s" % results["valid"]]
    for name, c in sorted(results["checkers"].items()):
        lines.append("  %-20s %-5s checked %-7d anomalies %d" % (name, "ok" if c["valid"] else "FAIL", c["checked"],
                                                               c["anomaly_count"]))
        for anomaly in c["anomalies"][:3]:
            lines.append("      %s" % json.dumps(anomaly)[:300])
        for stopped in c.get("stopped", [])[:3]:
            lines.append("      stopped, not an anomaly: %s" % json.dumps(stopped)[:300])
    lines.append("  outcomes: %s" % json.dumps(results["outcomes"], sort_keys=True))
    return "\n".join(lines)


_LOG_START = time.monotonic()
_log_file = None


def log(message):
    """Progress on stdout, and into DIR/run.log once the output directory exists."""
    line = "[%6.1fs] %s" % (time.monotonic() - _LOG_START, message)
    print(line, flush=True)
    if _log_file is not None:
        _log_file.write(line + "\n")
        _log_file.flush()


def main(argv):
    args = parse_args(argv)
    if args.cleanup:
        removed = netns.cleanup_leftovers() + cluster_mod.cleanup_mounts()
        log("cleanup: removed %d item(s)%s" % (len(removed), "".join("\n  " + r for r in removed)))
        return EXIT_VALID
    if args.check_only:
        return check_only(args.check_only)
    if not os.access(args.raftlogd, os.X_OK):
        log("raftlogd not found at %s: build first (bash scripts/build.sh) or pass --raftlogd" % args.raftlogd)
        return EXIT_ERROR
    signal.signal(signal.SIGTERM, on_sigterm)
    out_dir = os.path.abspath(args.out)
    previous = [name for name in ("history.jsonl", "results.json", "final-logs.json", "nodes")
                if os.path.exists(os.path.join(out_dir, name))]
    if previous:
        if not args.overwrite:
            log("%s holds an earlier run (%s): pass --overwrite or another --out" % (out_dir, ", ".join(previous)))
            return EXIT_ERROR
        cluster_mod.cleanup_mounts(under=out_dir)
        for name in previous:
            path = os.path.join(out_dir, name)
            shutil.rmtree(path) if os.path.isdir(path) else os.unlink(path)
    os.makedirs(out_dir, exist_ok=True)
    global _log_file
    _log_file = open(os.path.join(out_dir, "run.log"), "w")
    pb2, pb2_grpc = proto_gen.generate(os.path.join(out_dir, ".stubs"))

    use_netns, why_not = (False, "--loopback given") if args.loopback else netns.available()
    kinds = list(args.nemeses)
    skipped = []
    if not use_netns:
        log("network namespaces unavailable (%s): nodes run on 127.0.0.1 ports" % why_not)
        skipped = [k for k in kinds if k in nemesis.NEEDS_NAMESPACES]
        kinds = [k for k in kinds if k not in nemesis.NEEDS_NAMESPACES]
        if skipped:
            log("skipping nemeses that need namespaces and root: %s" % ",".join(skipped))
    if "clock" in kinds and cluster_mod.faketime_library() is None:
        log("skipping nemesis clock: libfaketime (Debian package faketime) is not installed")
        kinds.remove("clock")
        skipped.append("clock")

    if "corrupt" in kinds and args.flush_mode != "sync":
        # Repair from peers needs sync mode; in async mode raftlogd refuses to start on a corrupt entry.
        log("skipping nemesis corrupt: repairing a corrupt entry from peers needs --flush-mode sync")
        kinds.remove("corrupt")
        skipped.append("corrupt")

    meta = {"seed": args.seed, "nodes": args.nodes, "time_limit_s": args.time_limit, "nemeses": kinds,
            "skipped_nemeses": skipped, "network": "netns" if use_netns else "loopback",
            "flush_mode": args.flush_mode, "raftlogd": args.raftlogd, "append_rpc": args.append_rpc,
            "writer_transports": {w: workload.writer_transport(args.append_rpc, w) for w in range(args.writers)}}
    log("jepsen: %d nodes, %.0f s, nemeses [%s], seed %d, out %s, network %s, append rpc %s" % (
        args.nodes, args.time_limit, ",".join(kinds), args.seed, out_dir, meta["network"], args.append_rpc))
    if args.append_rpc == "mixed" and args.writers < 2:
        log("note: --append-rpc mixed with one writer uses only AppendStream")

    rng = random.Random(args.seed)
    history = history_mod.History(os.path.join(out_dir, "history.jsonl"))
    network = None
    cluster = None
    client_cluster = None
    stop = threading.Event()
    threads = []
    scheduler = None
    final = None
    try:
        node_ids = list(range(1, args.nodes + 1))
        if use_netns:
            network = netns.Network("%x" % random.SystemRandom().randrange(0x1000, 0xfffff), node_ids)
            network.create()
        cluster = cluster_mod.Cluster(args.raftlogd, os.path.join(out_dir, "nodes"), node_ids, network,
                                      TMPFS_SIZE_BYTES if "disk-full" in kinds else 0,
                                      NODE_FLAGS + ["--flush-mode", args.flush_mode] + corrupt_flags(args, kinds),
                                      history)
        for node_id in node_ids:
            cluster.start(node_id)
        client_cluster = client.Cluster(pb2, pb2_grpc, cluster.addresses())
        leader = final_state.wait_for_leader(client_cluster, 30.0)
        if leader is None:
            raise RuntimeError("no leader elected within 30 s; see %s/nodes/*/raftlogd.log" % out_dir)
        log("leader: node %d (history time %.1fs)" % (leader, history.now()))

        shared = workload.Shared()
        interval_s = args.interval_ms / 1000.0
        for w in range(args.writers):
            threads.append(workload.Writer(w, client_cluster, history, rng.getrandbits(64), stop, shared, interval_s,
                                           transport=meta["writer_transports"][w]))
        threads.append(workload.Reader(100, client_cluster, history, rng.getrandbits(64), stop, shared, interval_s))
        tailer = workload.Tailer(200, client_cluster, history, rng.getrandbits(64), stop)
        threads.append(tailer)
        start_at = history.now()
        end_at = start_at + args.time_limit
        ctx = nemesis.Context(cluster, network, client_cluster, history, random.Random(rng.getrandbits(64)))
        ctx.log = log
        scheduler = nemesis.Scheduler(ctx, kinds, end_at, log=log)
        for t in threads:
            t.start()
        scheduler.start()
        next_progress = start_at + 5.0
        while history.now() < end_at:
            time.sleep(0.2)
            if history.now() >= next_progress:
                next_progress += 5.0
                counts = checker.outcome_counts(list(history.ops)).get("append", {})
                log("t=%6.1fs appends ok %d fail %d info %d, live nodes %s" % (
                    history.now(), counts.get("ok", 0), counts.get("fail", 0), counts.get("info", 0),
                    cluster.live_ids()))
        log("time limit reached: healing and stopping clients")
        scheduler.stop_event.set()
        scheduler.join(timeout=60.0)
        stop.set()
        tailer.cancel()
        for t in threads:
            t.join(timeout=workload.OP_TIMEOUT_S + 5.0)
        if scheduler.error:
            meta["harness_error"] = "nemesis: " + scheduler.error
        if network is not None:
            network.heal()
        cluster.reap()
        cluster.ensure_all_running()
        if "corrupt" in kinds:
            pending = ctx.wait_corrupt_repaired(60.0, log)
            if pending:
                log("corrupted node(s) %s not repaired (still catching up or scrubbing) after 60 s" % pending)
            meta["corrupt_unrepaired"] = pending
            ctx.restart_exited(log)
        configuration = membership.settle(ctx, log) if "membership" in kinds else None
        final = final_state.collect(client_cluster, history)
        if "membership" in kinds:
            final["configuration"] = dict(configuration, founders=node_ids) if configuration else None
        with open(os.path.join(out_dir, "final-logs.json"), "w") as f:
            json.dump(final, f)
    except (KeyboardInterrupt, Terminated) as e:
        log("interrupted (%s): cleaning up" % (e or "Ctrl-C"))
        meta["harness_error"] = "interrupted"
    except Exception as e:
        log("harness error: %r" % e)
        meta["harness_error"] = repr(e)
    finally:
        # Cleanup must not be cut short by a second Ctrl-C or SIGTERM.
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        stop.set()
        if scheduler is not None:
            scheduler.stop_event.set()
        # Clients, then nodes (a paused node must be continued to stop), then the namespaces.
        if client_cluster is not None:
            client_cluster.close()
        if cluster is not None:
            meta["unexpected_exits"] = cluster.unexpected_exits()
            cluster.shutdown()
        if network is not None:
            network.destroy()
        log("cluster removed")
        history.close()

    if final is None:
        log("no final state: the run is not valid (%s)" % meta.get("harness_error"))
        with open(os.path.join(out_dir, "results.json"), "w") as f:
            json.dump(dict(meta, valid=False), f, indent=2, sort_keys=True)
        return EXIT_ERROR
    ops = history_mod.load(os.path.join(out_dir, "history.jsonl"))
    try:
        results = evaluate(ops, final, out_dir, meta)
    except Exception as e:  # a checker bug is a harness error, not a verdict on raftlog
        log("checker error: %r" % e)
        return EXIT_ERROR
    try:
        from . import plots
        plots.write(ops, out_dir, "raftlog %d nodes, seed %d" % (args.nodes, args.seed))
    except Exception as e:  # plots are a report aid; the verdict stands without them
        log("plots failed: %r" % e)
    log(summary(results))
    log("results: %s/results.json" % out_dir)
    if meta.get("harness_error"):
        log("harness error during the run (%s): not a complete verdict" % meta["harness_error"])
        return EXIT_ERROR
    return EXIT_VALID if results["valid"] else EXIT_INVALID
