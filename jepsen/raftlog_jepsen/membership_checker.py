"""The membership checker: every change raftlogctl acknowledged holds in the final configuration, and
the final reads covered exactly its members (membership.py records the changes; cli.py adds the final
configuration to final-logs.json as "configuration").

- an acknowledged add, promote or replace leaves its new node a voter, unless a later change tried
  to remove that node;
- a node whose removal (remove, or replace as the old node) was acknowledged is in no later
  configuration: ids are never reused, so finding it again means a committed change was lost;
- the final configuration lists only ids the harness made, and the nodes read at the end (the
  converged/agreement checkers' input) are exactly its voters and learners: a removed node is not
  expected to hold later entries, a member must.
"""
MAX_ANOMALIES_KEPT = 20


def _result(checked, anomalies):
    return {"valid": not anomalies, "checked": checked, "anomaly_count": len(anomalies),
            "anomalies": anomalies[:MAX_ANOMALIES_KEPT]}


def _removed_by(op):
    """The node an op tries to take out of the configuration, or None."""
    if op.get("action") == "remove":
        return op.get("node")
    if op.get("action") == "replace":
        return op.get("old")
    return None


def check(history, final):
    ops = [op for op in history if op.get("f") == "membership"]
    config = final.get("configuration")
    if not ops and config is None:
        return _result(0, [])
    if config is None:
        return _result(len(ops), [{"kind": "configuration-unreadable"}])
    voters, learners = set(config["voters"]), set(config["learners"])
    members = voters | learners
    anomalies = []
    for position, op in enumerate(ops):
        if op.get("type") != "ok":
            continue
        removed = _removed_by(op)
        if removed is not None and removed in members:
            anomalies.append({"kind": "removed-member-back", "op": op.get("action"), "node": removed,
                              "acknowledged_at": op.get("complete"), "final": config})
        added = op.get("node") if op.get("action") in ("add", "promote", "replace") else None
        if added is None:
            continue
        later_removal = any(_removed_by(later) == added for later in ops[position + 1:])
        if not later_removal and added not in voters:
            anomalies.append({"kind": "added-voter-missing", "op": op.get("action"), "node": added,
                              "acknowledged_at": op.get("complete"), "final": config})
    made = {op.get("node") for op in ops} | {op.get("old") for op in ops} | set(config.get("founders", []))
    unknown = sorted(members - made) if config.get("founders") is not None else []
    if unknown:
        anomalies.append({"kind": "unknown-member", "nodes": unknown, "final": config})
    read = sorted(int(n) for n in final.get("nodes", {}))
    if read != sorted(members):
        anomalies.append({"kind": "reads-not-members", "read": read, "members": sorted(members)})
    return _result(len(ops), anomalies)
