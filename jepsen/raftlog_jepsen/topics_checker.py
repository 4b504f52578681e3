"""Checkers of the derived indexes (topics and keys) against the reference log.

Each readable node's `final["nodes"][n]["derived"]` (derived_state.py) holds every topic as
ReadTopic served it ([offset, entry] pairs) and every key's LookupKey answer. Entries are the
history's tuples (workload.entry_tuple): an entry appended with attributes ends with [topic, keys].

`attributes`: every entry of the reference log carries exactly the topic and keys its append was
                invoked with (none for an append without attributes).
`topics`:     on every node, each topic holds exactly the reference log's entries of that topic, in
              log order, at dense offsets from 0 (the runs use no retention), with the same offset
              for an entry on every node; every acknowledged entry of a topic is there and nothing
              else is (no entry of another topic, none the log does not hold); the listing's first
              and end offsets agree with what ReadTopic served.
`keys`:       on every node, a key's lookup returns exactly the reference log's entries carrying
              that key, oldest first (the first LOOKUP_MAX_ENTRIES of them), each equal to the log's.
A node answers from its own indexes, which may trail its log (the answers say how far they reach:
indexed_through), so each node is checked against the log up to its indexed_through. Indexes that
did not reach the node's last index are an anomaly (`indexes-behind`) unless the node reports why
(its dispatcher stopped on a storage error, e.g. a full disk: documented, they stay there until a
restart); those are listed under `stopped`, not as anomalies.
Both hold whether a node numbers offsets itself or the leader writes them into the envelope: either
way the committed log decides the numbering.
"""
from .checker import INDEX, NORMAL, PAYLOAD, TYPE, _result, ops_of

TOPIC, KEYS = 6, 7
LOOKUP_MAX_ENTRIES = 1024


def topic_of(entry):
    return entry[TOPIC] if len(entry) > TOPIC else ""


def keys_of(entry):
    return list(entry[KEYS]) if len(entry) > KEYS else []


def _invoked_attributes(history):
    """compact payload -> (topic, keys) as invoked, for every append (with or without attributes)."""
    invoked = {}
    for op in ops_of(history, "append"):
        attributes = op.get("attributes")
        for k, value in enumerate(op["values"]):
            topic, keys = attributes[k] if attributes else ("", [])
            invoked[value] = (topic, list(keys))
    return invoked


def check_attributes(history, ref):
    """Every normal entry of the reference log has the topic and keys its append was invoked with."""
    invoked = _invoked_attributes(history)
    anomalies = []
    checked = 0
    for entry in ref:
        if entry[TYPE] != NORMAL or entry[PAYLOAD] not in invoked:
            continue  # an entry nobody invoked is `unexpected-entries`' finding
        checked += 1
        topic, keys = invoked[entry[PAYLOAD]]
        if (topic_of(entry), keys_of(entry)) != (topic, keys):
            anomalies.append({"kind": "attributes-differ", "index": entry[INDEX], "entry": entry,
                              "invoked": [topic, keys]})
    return _result(checked, anomalies)


def _derived_nodes(final):
    """(node, derived) for every node whose log was read; derived may hold "error"."""
    for node_id, node in sorted(final["nodes"].items()):
        if node.get("entries") is not None and "derived" in node:
            yield node_id, node


def _acked_indexes_by_topic(history):
    """topic -> {index: compact payload} of every acknowledged entry appended with a topic."""
    acked = {}
    for op in ops_of(history, "append", {"ok"}):
        attributes = op.get("attributes")
        if not attributes:
            continue
        for k, value in enumerate(op["values"]):
            topic = attributes[k][0]
            if topic:
                acked.setdefault(topic, {})[op["first_index"] + k] = value
    return acked


def _checked_through(node):
    """The last log index a node's indexes are checked through: its log's last index, or less when
    its indexes say they reach less far."""
    log_last = node["entries"][-1][INDEX] if node["entries"] else 0
    return min(log_last, node["derived"].get("indexed_through", log_last))


def _check_one_topic(node_id, topic, served, expected, acked, offset_of_index, anomalies, last_index):
    """One node's topic against the reference log's entries of it (through last_index)."""
    entries = served["entries"]
    for position, (offset, entry) in enumerate(entries):
        if offset != position:
            anomalies.append({"node": node_id, "topic": topic, "kind": "offset-not-dense",
                              "position": position, "offset": offset, "index": entry[INDEX]})
            break
    for offset, entry in entries:
        if topic_of(entry) != topic:
            anomalies.append({"node": node_id, "topic": topic, "kind": "entry-of-another-topic", "offset": offset,
                              "entry": entry})
        previous = offset_of_index.setdefault((topic, entry[INDEX]), (node_id, offset))
        if previous[1] != offset:
            anomalies.append({"node": node_id, "topic": topic, "kind": "offset-differs-between-nodes",
                              "index": entry[INDEX], "offset": offset, "other_node": previous[0],
                              "other_offset": previous[1]})
    served_entries = [entry for _offset, entry in entries]
    if served_entries != expected:
        served_indexes = {entry[INDEX] for entry in served_entries}
        expected_indexes = {entry[INDEX] for entry in expected}
        anomalies.append({"node": node_id, "topic": topic, "kind": "topic-differs-from-log",
                          "missing_indexes": sorted(expected_indexes - served_indexes)[:20],
                          "invented_indexes": sorted(served_indexes - expected_indexes)[:20],
                          "served": len(served_entries), "expected": len(expected)})
    served_indexes = {entry[INDEX]: entry[PAYLOAD] for entry in served_entries}
    for index, value in sorted(acked.get(topic, {}).items()):
        if index <= last_index and served_indexes.get(index) != value:
            anomalies.append({"node": node_id, "topic": topic, "kind": "acknowledged-missing", "index": index,
                              "value": value})
            break
    if (served["first_offset"], served["end_offset"]) != (0, len(entries)):
        anomalies.append({"node": node_id, "topic": topic, "kind": "listing-differs",
                          "first_offset": served["first_offset"], "end_offset": served["end_offset"],
                          "served": len(entries)})


def check_topics(history, final, ref):
    """Every node's topics against the reference log (module docstring)."""
    expected = {}
    for entry in ref:
        if entry[TYPE] == NORMAL and topic_of(entry):
            expected.setdefault(topic_of(entry), []).append(list(entry))
    acked = _acked_indexes_by_topic(history)
    anomalies = []
    stopped = []
    offset_of_index = {}  # (topic, log index) -> (first node seen, its offset)
    checked = 0
    for node_id, node in _derived_nodes(final):
        derived = node["derived"]
        if "error" in derived:
            anomalies.append({"node": node_id, "kind": "indexes-unreadable", "error": derived["error"]})
            continue
        checked += 1
        log_last = node["entries"][-1][INDEX] if node["entries"] else 0
        last_index = _checked_through(node)
        if last_index < log_last:
            behind = {"node": node_id, "indexed_through": derived["indexed_through"], "last_index": log_last,
                      "problem": derived.get("problem", "")}
            if behind["problem"]:
                stopped.append(behind)
            else:
                anomalies.append(dict(behind, kind="indexes-behind"))
        node_expected = {t: [e for e in es if e[INDEX] <= last_index] for t, es in expected.items()}
        for topic in sorted(set(derived["topics"]) - set(expected)):
            anomalies.append({"node": node_id, "topic": topic, "kind": "topic-invented",
                              "entries": len(derived["topics"][topic]["entries"])})
        for topic, entries in sorted(node_expected.items()):
            served = derived["topics"].get(topic, {"first_offset": 0, "end_offset": 0, "entries": []})
            _check_one_topic(node_id, topic, served, entries, acked, offset_of_index, anomalies, last_index)
    result = _result(checked, anomalies)
    result["stopped"] = stopped
    return result


def check_keys(history, final, ref):
    """Every node's key lookups against the reference log (module docstring)."""
    expected = {}
    for entry in ref:
        if entry[TYPE] == NORMAL:
            for key in set(keys_of(entry)):
                expected.setdefault(key, []).append(list(entry))
    acked = {}
    for op in ops_of(history, "append", {"ok"}):
        for k, (_topic, keys) in enumerate(op.get("attributes") or ()):
            for key in keys:
                acked.setdefault(key, set()).add(op["first_index"] + k)
    anomalies = []
    checked = 0
    for node_id, node in _derived_nodes(final):
        derived = node["derived"]
        if "error" in derived:
            continue  # `topics` reports it
        last_index = _checked_through(node)
        for key, served in sorted(derived["keys"].items()):
            checked += 1
            wanted = [e for e in expected.get(key, []) if e[INDEX] <= last_index][:LOOKUP_MAX_ENTRIES]
            served = [list(e) for e in served]
            if served == wanted:
                continue
            served_indexes = [e[INDEX] for e in served]
            wanted_indexes = [e[INDEX] for e in wanted]
            kind = "key-lookup-differs"
            if set(served_indexes) - set(wanted_indexes):
                kind = "key-lookup-invented"
            elif set(wanted_indexes) - set(served_indexes):
                kind = "key-lookup-missing"
            anomaly = {"node": node_id, "key": key, "kind": kind,
                       "missing_indexes": sorted(set(wanted_indexes) - set(served_indexes))[:20],
                       "invented_indexes": sorted(set(served_indexes) - set(wanted_indexes))[:20]}
            missing_acked = sorted(acked.get(key, set()) & (set(wanted_indexes) - set(served_indexes)))
            if missing_acked:
                anomaly["acknowledged_missing"] = missing_acked[:20]
            anomalies.append(anomaly)
    return _result(checked, anomalies)
