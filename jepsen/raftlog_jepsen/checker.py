"""Checkers over a history and the final logs of every node.

`final` is {"nodes": {node_id: {"commit_index": int, "entries": [entry, ...]} or {"error": str}}}
where entry = [index, term, type, client_id, sequence, payload] (the committed log read from that
node after healing), and optionally "leader": the node id that led the healed cluster. The reference
log is the leader's (what the cluster serves from now on), else the longest readable one; `agreement`
proves the others are prefixes of it, so checking against it is checking against every node.
Each checker returns {"valid": bool, "checked": n, "anomalies": [...]}.
"""
import bisect

from . import membership_checker

NORMAL = 0
MAX_ANOMALIES_KEPT = 20

INDEX, TERM, TYPE, CLIENT_ID, SEQUENCE, PAYLOAD = range(6)


def _result(checked, anomalies):
    return {"valid": not anomalies, "checked": checked, "anomaly_count": len(anomalies),
            "anomalies": anomalies[:MAX_ANOMALIES_KEPT]}


def reference_log(final):
    leader = final.get("leader")
    if leader is not None and final["nodes"].get(leader, {}).get("entries") is not None:
        return final["nodes"][leader]["entries"]
    best = []
    for node in final["nodes"].values():
        entries = node.get("entries")
        if entries is not None and len(entries) > len(best):
            best = entries
    return best


def ops_of(history, f, types=None):
    return [op for op in history if op.get("f") == f and (types is None or op.get("type") in types)]


def check_agreement(final):
    """All nodes' committed logs are gap-free from index 1 and byte-identical on their common prefix."""
    anomalies = []
    ref = reference_log(final)
    for node_id, node in sorted(final["nodes"].items()):
        entries = node.get("entries")
        if entries is None:
            continue
        for position, entry in enumerate(entries):
            if entry[INDEX] != position + 1:
                anomalies.append({"node": node_id, "kind": "gap", "position": position + 1, "index": entry[INDEX]})
                break
            if position >= len(ref):
                break  # beyond the reference: `converged` reports the difference in length
            if list(entry) != list(ref[position]):
                anomalies.append({"node": node_id, "kind": "diverged", "index": position + 1,
                                  "entry": entry, "reference": ref[position]})
                break
    return _result(len(final["nodes"]), anomalies)


def check_converged(final):
    """After healing, every node answers and has committed the same number of entries."""
    anomalies = []
    commits = {}
    for node_id, node in sorted(final["nodes"].items()):
        if node.get("entries") is None:
            anomalies.append({"node": node_id, "kind": "unreadable", "error": node.get("error", "")})
        else:
            commits[node_id] = len(node["entries"])
    if len(set(commits.values())) > 1:
        anomalies.append({"kind": "commit-index-differs", "entries_per_node": commits})
    return _result(len(final["nodes"]), anomalies)


def check_lost_writes(history, ref):
    """Every ok append is in the final log at exactly the indexes it was acknowledged with."""
    anomalies = []
    appends = ops_of(history, "append", {"ok"})
    for op in appends:
        first, last = op["first_index"], op["last_index"]
        if last - first + 1 != len(op["values"]):
            anomalies.append({"op": op["id"], "kind": "bad-range", "first": first, "last": last})
            continue
        for k, value in enumerate(op["values"]):
            index = first + k
            entry = ref[index - 1] if 1 <= index <= len(ref) else None
            if entry is None or entry[PAYLOAD] != value or entry[CLIENT_ID] != op["client_id"] \
                    or entry[SEQUENCE] != op["sequence"]:
                anomalies.append({"op": op["id"], "kind": "lost", "value": value, "index": index,
                                  "found": entry})
                break
    return _result(len(appends), anomalies)


def check_duplicates(ref):
    """No payload twice; one (client_id, sequence) occupies one contiguous range."""
    anomalies = []
    seen_payload = {}
    ranges = {}
    for entry in ref:
        if entry[TYPE] != NORMAL:
            continue
        if entry[PAYLOAD] in seen_payload:
            anomalies.append({"kind": "duplicate-value", "value": entry[PAYLOAD],
                              "indexes": [seen_payload[entry[PAYLOAD]], entry[INDEX]]})
        seen_payload[entry[PAYLOAD]] = entry[INDEX]
        if entry[CLIENT_ID]:
            key = (entry[CLIENT_ID], entry[SEQUENCE])
            previous = ranges.get(key)
            if previous is not None and previous != entry[INDEX] - 1:
                anomalies.append({"kind": "duplicate-sequence", "client_id": entry[CLIENT_ID],
                                  "sequence": entry[SEQUENCE], "indexes": [previous, entry[INDEX]]})
            ranges[key] = entry[INDEX]
    return _result(len(ref), anomalies)


def check_unexpected_entries(history, ref):
    """Every normal entry in the final log was written by some invoked append (nothing invented)."""
    invoked = {}
    for op in ops_of(history, "append"):
        for value in op["values"]:
            invoked[value] = (op["client_id"], op["sequence"])
    anomalies = []
    for entry in ref:
        if entry[TYPE] != NORMAL:
            continue
        origin = invoked.get(entry[PAYLOAD])
        if origin is None or origin != (entry[CLIENT_ID], entry[SEQUENCE]):
            anomalies.append({"kind": "unexpected-entry", "entry": entry})
    return _result(len(ref), anomalies)


def check_fail_not_applied(history, ref):
    """An append reported as definitely failed never appears in the final log."""
    present = {entry[PAYLOAD]: entry[INDEX] for entry in ref if entry[TYPE] == NORMAL}
    anomalies = []
    failed = ops_of(history, "append", {"fail"})
    for op in failed:
        for value in op["values"]:
            if value in present:
                anomalies.append({"op": op["id"], "kind": "failed-but-applied", "value": value,
                                  "index": present[value], "attempts": op.get("attempts", [])})
    return _result(len(failed), anomalies)


def check_realtime_order(history):
    """If append A completed before append B was invoked, A's last index < B's first index."""
    appends = ops_of(history, "append", {"ok"})
    by_complete = sorted(appends, key=lambda op: op["complete"])
    by_invoke = sorted(appends, key=lambda op: op["invoke"])
    anomalies = []
    position = 0
    best = None  # the completed append with the highest last index so far
    for op in by_invoke:
        while position < len(by_complete) and by_complete[position]["complete"] < op["invoke"]:
            candidate = by_complete[position]
            if best is None or candidate["last_index"] > best["last_index"]:
                best = candidate
            position += 1
        if best is not None and best["last_index"] >= op["first_index"]:
            anomalies.append({"kind": "reordered", "earlier": best["id"], "earlier_last_index": best["last_index"],
                              "later": op["id"], "later_first_index": op["first_index"]})
    return _result(len(appends), anomalies)


class _CompletedBefore:
    """Highest last index among ok appends that completed strictly before a given time."""

    def __init__(self, history):
        appends = sorted(ops_of(history, "append", {"ok"}), key=lambda op: op["complete"])
        self.times = [op["complete"] for op in appends]
        self.prefix_max = []
        best = 0
        for op in appends:
            best = max(best, op["last_index"])
            self.prefix_max.append(best)

    def at(self, time):
        position = bisect.bisect_left(self.times, time)
        return self.prefix_max[position - 1] if position > 0 else 0


def _entries_match(entries, from_index, ref, what, op, anomalies):
    for k, entry in enumerate(entries):
        if entry[INDEX] != from_index + k:
            anomalies.append({"op": op["id"], "kind": what + "-gap-or-order", "expected_index": from_index + k,
                              "index": entry[INDEX]})
            return False
        if entry[INDEX] > len(ref) or list(entry) != list(ref[entry[INDEX] - 1]):
            anomalies.append({"op": op["id"], "kind": what + "-not-in-final-log", "entry": entry,
                              "final": ref[entry[INDEX] - 1] if entry[INDEX] <= len(ref) else None})
            return False
    return True


def check_reads(history, ref):
    """Reads return only entries of the final log, contiguous from from_index; a linearizable read
    sees every append that completed before it started (commit index and entries)."""
    completed_before = _CompletedBefore(history)
    anomalies = []
    reads = ops_of(history, "read")
    for op in reads:
        must_see = completed_before.at(op["invoke"]) if op.get("linearizable") else 0
        if op["type"] != "ok":
            if op.get("linearizable") and op.get("code") == "OUT_OF_RANGE" and op["from_index"] <= must_see:
                anomalies.append({"op": op["id"], "kind": "stale-linearizable-read",
                                  "detail": "OUT_OF_RANGE for an index acknowledged before the read",
                                  "from_index": op["from_index"], "must_see": must_see})
            continue
        if not _entries_match(op["entries"], op["from_index"], ref, "read", op, anomalies):
            continue
        if op.get("linearizable"):
            if op["commit_index"] < must_see:
                anomalies.append({"op": op["id"], "kind": "stale-linearizable-read",
                                  "commit_index": op["commit_index"], "must_see": must_see})
                continue
            seen_through = op["from_index"] + len(op["entries"]) - 1
            wanted_through = min(must_see, op["from_index"] + op["max_entries"] - 1)
            if seen_through < wanted_through:
                anomalies.append({"op": op["id"], "kind": "stale-linearizable-read",
                                  "seen_through": seen_through, "must_see": must_see})
    return _result(len(reads), anomalies)


def check_tails(history, ref):
    """Each tail session is gap-free from its from_index, in order, without duplicates, and equal to
    the final log; consecutive sessions of one tailer continue where the previous one ended."""
    anomalies = []
    sessions = ops_of(history, "tail")
    next_of_process = {}
    for op in sorted(sessions, key=lambda o: (o["process"], o["session"])):
        expected = next_of_process.get(op["process"])
        if expected is not None and op["from_index"] != expected:
            anomalies.append({"op": op["id"], "kind": "tail-resumed-wrong", "from_index": op["from_index"],
                              "expected": expected})
        _entries_match(op["entries"], op["from_index"], ref, "tail", op, anomalies)
        next_of_process[op["process"]] = op["entries"][-1][INDEX] + 1 if op["entries"] else op["from_index"]
    return _result(len(sessions), anomalies)


def check_nodes(history):
    """Nodes exit only when the harness stops them, or with exit 1 while their disk is full or after
    the corrupt nemesis damaged one of their entries."""
    windows = {}
    for op in history:
        if op.get("f") == "nemesis" and op.get("kind") == "disk-full":
            windows.setdefault(op["window"], {})[op["phase"]] = op
    disk_full = [(w["start"]["detail"].get("node"), w["start"]["invoke"], w.get("end", {}).get("complete", 1e18))
                 for w in windows.values() if "start" in w]
    # A node the corrupt nemesis damaged exits 1 when it finds the entry while running (the scrub or a
    # read): any time after the damage, which stays latent until found.
    corrupted = [(op["detail"].get("node"), op["invoke"]) for op in history
                 if op.get("f") == "nemesis" and op.get("kind") == "corrupt" and op.get("phase") == "start"
                 and "skipped" not in op.get("detail", {}).get("flip", {"skipped": True})]
    anomalies = []
    exits = [op for op in history if op.get("f") == "node-exit" and not op.get("expected")]
    for op in exits:
        explained = op.get("returncode") == 1 and (
            any(node == op["node"] and start <= op["invoke"] <= end + 1.0 for node, start, end in disk_full)
            or any(node == op["node"] and start <= op["invoke"] for node, start in corrupted))
        if not explained:
            anomalies.append({"kind": "unexpected-exit", "node": op["node"], "returncode": op.get("returncode"),
                              "time": op["invoke"]})
    return _result(len(exits), anomalies)


def check_stream_protocol(history):
    """No append saw an AppendStream answer that breaks the API's contract (append_stream.py: a wrong
    request_id, several results for one request, code 0 without a response, a stream ending OK before
    the client half-closed). Such an attempt is classified unknown for the other checkers; this one
    reports it. Checks the appends made over AppendStream."""
    anomalies = []
    checked = 0
    for op in ops_of(history, "append"):
        if op.get("transport") == "stream":
            checked += 1
        if op.get("protocol_error_count"):
            anomalies.append({"op": op.get("id"), "process": op.get("process"), "client_id": op.get("client_id"),
                              "sequence": op.get("sequence"), "count": op["protocol_error_count"],
                              "errors": op.get("protocol_errors", [])})
    return _result(checked, anomalies)


def check_all(history, final):
    from . import topics_checker  # it builds on this module's helpers
    ref = reference_log(final)
    return {
        "agreement": check_agreement(final),
        "converged": check_converged(final),
        "lost-writes": check_lost_writes(history, ref),
        "duplicates": check_duplicates(ref),
        "unexpected-entries": check_unexpected_entries(history, ref),
        "fail-not-applied": check_fail_not_applied(history, ref),
        "realtime-order": check_realtime_order(history),
        "reads": check_reads(history, ref),
        "tails": check_tails(history, ref),
        "nodes": check_nodes(history),
        "stream-protocol": check_stream_protocol(history),
        "membership": membership_checker.check(history, final),
        "attributes": topics_checker.check_attributes(history, ref),
        "topics": topics_checker.check_topics(history, final, ref),
        "keys": topics_checker.check_keys(history, final, ref),
    }


def outcome_counts(history):
    counts = {}
    for op in history:
        f = op.get("f")
        if f in ("append", "read", "tail"):
            key = op["type"]
            if f == "read":
                key = ("linearizable-" if op.get("linearizable") else "ordinary-") + op["type"]
            counts.setdefault(f, {}).setdefault(key, 0)
            counts[f][key] += 1
            if f == "append" and op.get("process") != "final":
                # Per transport (ops recorded before the transport was recorded count as unary).
                by_transport = counts.setdefault("append_by_transport", {}).setdefault(
                    op.get("transport", "unary"), {})
                by_transport[key] = by_transport.get(key, 0) + 1
                if op.get("streams_opened"):
                    counts["append_streams_opened"] = counts.get("append_streams_opened", 0) + op["streams_opened"]
        elif f == "nemesis" and op.get("phase") == "start":
            counts.setdefault("nemesis", {}).setdefault(op["kind"], 0)
            counts["nemesis"][op["kind"]] += 1
    return counts
