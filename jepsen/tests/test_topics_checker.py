"""Unit tests of the topic and key checkers (raftlog_jepsen/topics_checker.py): a clean synthetic
world passes, and each kind of bad derived state is flagged by the checker that exists for it.
Run: /usr/bin/python3 -m unittest discover -s jepsen/tests"""
import copy
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from raftlog_jepsen import checker, derived_state, topics_checker  # noqa: E402

NOOP = 1


def entry(index, client_id, sequence, payload, attributes=None, type_=0):
    e = [index, 1, type_, client_id, sequence, payload]
    if attributes is not None:
        e.extend([attributes[0], list(attributes[1])])
    return e


class World:
    """Appends with and without topics and keys, all committed, logged identically on 3 nodes whose
    indexes serve exactly what the log implies."""

    def __init__(self):
        self.ops = []
        self.log = [entry(1, 0, 0, "", type_=NOOP)]

    def append(self, client_id, sequence, values, attributes=None, type_="ok", in_log=True):
        op = {"id": len(self.ops), "f": "append", "process": client_id, "client_id": client_id,
              "sequence": sequence, "values": list(values), "invoke": len(self.ops) * 0.1,
              "complete": len(self.ops) * 0.1 + 0.05, "type": type_}
        if attributes is not None:
            op["attributes"] = [list(a) for a in attributes]
        self.ops.append(op)
        if in_log:
            first = len(self.log) + 1
            for k, value in enumerate(values):
                self.log.append(entry(first + k, client_id, sequence, value,
                                      attributes[k] if attributes is not None else None))
            if type_ == "ok":
                op.update(first_index=first, last_index=first + len(values) - 1, term=1)
        return op

    def derived(self):
        """What a correct node serves for this log."""
        topics = {}
        for e in self.log:
            topic = topics_checker.topic_of(e)
            if topic:
                served = topics.setdefault(topic, {"first_offset": 0, "end_offset": 0, "entries": []})
                served["entries"].append([len(served["entries"]), copy.deepcopy(e)])
                served["end_offset"] = len(served["entries"])
        keys = {key: [] for key in derived_state.keys_used(self.ops)}
        for e in self.log:
            for key in topics_checker.keys_of(e):
                keys[key].append(copy.deepcopy(e))
        return {"indexed_through": len(self.log), "topics": topics, "keys": keys, "problem": ""}

    def final(self, nodes=3):
        return {"nodes": {n: {"commit_index": len(self.log), "entries": copy.deepcopy(self.log),
                              "derived": self.derived()} for n in range(1, nodes + 1)}}


def clean_world():
    w = World()
    w.append(2, 1, ["a1"], [["orders", ["k1"]]])
    w.append(3, 1, ["b1", "b2"], [["payments", ["k1", "k2"]], ["orders", []]])
    w.append(2, 2, ["a2"])                                                # no attributes
    w.append(3, 2, ["b3"], [["", ["k2"]]], type_="info")                  # keys only; unknown, committed
    w.append(4, 1, ["c1"], [["orders", ["k3"]]], type_="info", in_log=False)  # never committed
    w.append(4, 2, ["c2"], [["audit", ["k1"]]], type_="fail", in_log=False)   # definitely failed
    w.append(2, 3, ["a3", "a4"], [["orders", ["k2"]], ["orders", ["k1"]]])
    return w


def topic_entries(final, node, topic):
    return final["nodes"][node]["derived"]["topics"][topic]["entries"]


class TopicsCheckerTest(unittest.TestCase):
    def assert_flags(self, results, name, kind):
        self.assertFalse(results[name]["valid"], results[name])
        self.assertIn(kind, [a["kind"] for a in results[name]["anomalies"]], results[name])

    def test_clean_world_is_valid(self):
        w = clean_world()
        results = checker.check_all(w.ops, w.final())
        for name, result in results.items():
            self.assertTrue(result["valid"], (name, result))
        self.assertEqual(results["topics"]["checked"], 3)
        # k1, k2, k3 and the absent key, on 3 nodes
        self.assertEqual(results["keys"]["checked"], 12)
        self.assertEqual(results["attributes"]["checked"], 7)
        orders = topic_entries(w.final(), 1, "orders")
        self.assertEqual([o for o, _ in orders], [0, 1, 2, 3])

    def test_a_run_without_topics_is_valid_and_checks_nothing(self):
        w = World()
        w.append(2, 1, ["a1"])
        results = checker.check_all(w.ops, w.final())
        self.assertTrue(all(r["valid"] for r in results.values()), results)
        final = w.final()
        for node in final["nodes"].values():
            del node["derived"]  # a run recorded before the topics checkers
        self.assertTrue(checker.check_all(w.ops, final)["topics"]["valid"])

    def test_attributes_differ_from_the_invoked_ones(self):
        w = clean_world()
        w.log[1][topics_checker.TOPIC] = "payments"  # a1 was appended to orders
        self.assert_flags(checker.check_all(w.ops, w.final()), "attributes", "attributes-differ")
        w = clean_world()
        w.log[1][topics_checker.KEYS] = []  # a1's key dropped
        self.assert_flags(checker.check_all(w.ops, w.final()), "attributes", "attributes-differ")
        w = clean_world()
        w.log[4].extend(["orders", []])  # a2 was appended without attributes
        self.assert_flags(checker.check_all(w.ops, w.final()), "attributes", "attributes-differ")

    def test_offsets_with_a_gap(self):
        w = clean_world()
        final = w.final()
        for pair in topic_entries(final, 2, "orders")[2:]:
            pair[0] += 1
        final["nodes"][2]["derived"]["topics"]["orders"]["end_offset"] += 1
        results = checker.check_all(w.ops, final)
        self.assert_flags(results, "topics", "offset-not-dense")
        self.assert_flags(results, "topics", "offset-differs-between-nodes")

    def test_offsets_numbered_differently_on_one_node(self):
        w = clean_world()
        final = w.final()
        served = final["nodes"][3]["derived"]["topics"]["orders"]
        for pair in served["entries"]:
            pair[0] += 5  # dense, but not the offsets the other nodes serve
        served["first_offset"], served["end_offset"] = 5, 5 + len(served["entries"])
        results = checker.check_all(w.ops, final)
        self.assert_flags(results, "topics", "offset-differs-between-nodes")

    def test_acknowledged_entry_missing_from_its_topic(self):
        w = clean_world()
        final = w.final()
        served = final["nodes"][1]["derived"]["topics"]["orders"]
        del served["entries"][0]  # a1, acknowledged; the rest renumbered densely
        for position, pair in enumerate(served["entries"]):
            pair[0] = position
        served["end_offset"] = len(served["entries"])
        results = checker.check_all(w.ops, final)
        self.assert_flags(results, "topics", "acknowledged-missing")
        self.assert_flags(results, "topics", "topic-differs-from-log")

    def test_unacknowledged_entry_invented_in_a_topic(self):
        w = clean_world()
        final = w.final()
        served = final["nodes"][2]["derived"]["topics"]["orders"]
        ghost = entry(len(w.log) + 1, 4, 1, "c1", ["orders", ["k3"]])  # never committed
        served["entries"].append([len(served["entries"]), ghost])
        served["end_offset"] += 1
        results = checker.check_all(w.ops, final)
        self.assert_flags(results, "topics", "topic-differs-from-log")
        anomaly = [a for a in results["topics"]["anomalies"] if a["kind"] == "topic-differs-from-log"][0]
        self.assertEqual(anomaly["invented_indexes"], [ghost[0]])

    def test_topic_out_of_log_order(self):
        w = clean_world()
        final = w.final()
        served = topic_entries(final, 1, "orders")
        served[1][1], served[2][1] = served[2][1], served[1][1]  # offsets stay dense
        self.assert_flags(checker.check_all(w.ops, final), "topics", "topic-differs-from-log")

    def test_entry_of_another_topic(self):
        w = clean_world()
        final = w.final()
        served = final["nodes"][3]["derived"]["topics"]["orders"]
        payments_entry = topic_entries(final, 3, "payments")[0][1]
        served["entries"].insert(1, [1, payments_entry])
        for position, pair in enumerate(served["entries"]):
            pair[0] = position
        served["end_offset"] = len(served["entries"])
        self.assert_flags(checker.check_all(w.ops, final), "topics", "entry-of-another-topic")

    def test_topic_nobody_appended_to(self):
        w = clean_world()
        final = w.final()
        final["nodes"][1]["derived"]["topics"]["invented"] = {"first_offset": 0, "end_offset": 0, "entries": []}
        self.assert_flags(checker.check_all(w.ops, final), "topics", "topic-invented")

    def test_topic_missing_on_one_node(self):
        w = clean_world()
        final = w.final()
        del final["nodes"][2]["derived"]["topics"]["payments"]
        results = checker.check_all(w.ops, final)
        self.assert_flags(results, "topics", "topic-differs-from-log")
        self.assert_flags(results, "topics", "acknowledged-missing")

    def test_listing_disagrees_with_the_entries(self):
        w = clean_world()
        final = w.final()
        final["nodes"][1]["derived"]["topics"]["orders"]["end_offset"] = 7
        self.assert_flags(checker.check_all(w.ops, final), "topics", "listing-differs")

    def test_indexes_behind_or_unreadable(self):
        w = clean_world()
        final = w.final()
        final["nodes"][1]["derived"]["indexed_through"] = 3
        self.assert_flags(checker.check_all(w.ops, final), "topics", "indexes-behind")
        final = w.final()
        final["nodes"][2]["derived"] = {"error": "UNAVAILABLE: no usable indexes"}
        self.assert_flags(checker.check_all(w.ops, final), "topics", "indexes-unreadable")

    def test_indexes_stopped_by_a_storage_error_are_checked_as_far_as_they_reach(self):
        w = clean_world()
        final = w.final()
        through = 5  # the dispatcher stopped (a full disk) after index 5: a3 and a4 not indexed
        derived = final["nodes"][2]["derived"]
        derived.update(indexed_through=through, problem="persisting: NO_SPACE: no space left on device")
        for served in derived["topics"].values():
            served["entries"] = [pair for pair in served["entries"] if pair[1][0] <= through]
            served["end_offset"] = len(served["entries"])
        for key in derived["keys"]:
            derived["keys"][key] = [e for e in derived["keys"][key] if e[0] <= through]
        results = checker.check_all(w.ops, final)
        self.assertTrue(results["topics"]["valid"], results["topics"])
        self.assertTrue(results["keys"]["valid"], results["keys"])
        self.assertEqual([s["node"] for s in results["topics"]["stopped"]], [2])
        # What it does serve must still be the log's: an entry past indexed_through is invented.
        derived["keys"]["k2"].append(copy.deepcopy(w.log[-2]))
        self.assert_flags(checker.check_all(w.ops, final), "keys", "key-lookup-invented")
        # Without a reason, indexes that stayed behind are an anomaly.
        derived["problem"] = ""
        self.assert_flags(checker.check_all(w.ops, final), "topics", "indexes-behind")

    def test_topic_entry_differs_from_the_log(self):
        w = clean_world()
        final = w.final()
        topic_entries(final, 2, "payments")[0][1][5] = "b1|9|00000000"  # a changed payload
        self.assert_flags(checker.check_all(w.ops, final), "topics", "topic-differs-from-log")

    def test_key_lookup_missing_an_acknowledged_entry(self):
        w = clean_world()
        final = w.final()
        del final["nodes"][3]["derived"]["keys"]["k1"][0]  # a1
        results = checker.check_all(w.ops, final)
        self.assert_flags(results, "keys", "key-lookup-missing")
        anomaly = results["keys"]["anomalies"][0]
        self.assertEqual(anomaly["acknowledged_missing"], [2])

    def test_key_lookup_invents_an_entry(self):
        w = clean_world()
        final = w.final()
        # The absent key answered with a committed entry that does not carry it.
        final["nodes"][1]["derived"]["keys"][derived_state.ABSENT_KEY] = [copy.deepcopy(w.log[1])]
        self.assert_flags(checker.check_all(w.ops, final), "keys", "key-lookup-invented")
        final = w.final()
        # An entry never committed (c1 was invoked with k3).
        final["nodes"][2]["derived"]["keys"]["k3"] = [entry(len(w.log) + 1, 4, 1, "c1", ["orders", ["k3"]])]
        self.assert_flags(checker.check_all(w.ops, final), "keys", "key-lookup-invented")

    def test_key_lookup_out_of_order_or_changed(self):
        w = clean_world()
        final = w.final()
        served = final["nodes"][1]["derived"]["keys"]["k1"]
        served[0], served[1] = served[1], served[0]
        self.assert_flags(checker.check_all(w.ops, final), "keys", "key-lookup-differs")
        final = w.final()
        final["nodes"][1]["derived"]["keys"]["k2"][0][5] = "b1|9|00000000"
        self.assert_flags(checker.check_all(w.ops, final), "keys", "key-lookup-differs")

    def test_key_lookup_capped_at_its_maximum(self):
        w = World()
        for sequence in range(1, topics_checker.LOOKUP_MAX_ENTRIES + 3):
            w.append(2, sequence, ["v%d" % sequence], [["", ["hot"]]])
        final = w.final()
        for node in final["nodes"].values():
            node["derived"]["keys"]["hot"] = node["derived"]["keys"]["hot"][:topics_checker.LOOKUP_MAX_ENTRIES]
        results = checker.check_all(w.ops, final)
        self.assertTrue(results["keys"]["valid"], results["keys"])
        del final["nodes"][1]["derived"]["keys"]["hot"][-1]
        self.assert_flags(checker.check_all(w.ops, final), "keys", "key-lookup-missing")


class WorkloadAttributesTest(unittest.TestCase):
    def test_attributes_are_valid_and_one_per_entry(self):
        import random
        from raftlog_jepsen import workload
        rng = random.Random(5)
        with_attributes = 0
        for sequence in range(1, 400):
            attributes = workload.make_attributes(1, sequence, 3, rng)
            if attributes is None:
                continue
            with_attributes += 1
            self.assertEqual(len(attributes), 3)
            for topic, keys in attributes:
                self.assertTrue(topic == "" or topic in workload.TOPICS)
                self.assertLessEqual(len(keys), 2)
                self.assertEqual(len(set(keys)), len(keys))
        self.assertGreater(with_attributes, 100)
        self.assertLess(with_attributes, 300)


if __name__ == "__main__":
    unittest.main()
