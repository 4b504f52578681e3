"""Unit tests of the checkers: for each, a clean synthetic history passes and a history containing
the anomaly it exists for is flagged. Run: /usr/bin/python3 -m unittest discover -s jepsen/tests"""
import copy
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from raftlog_jepsen import checker  # noqa: E402

NOOP = 1


def entry(index, term, client_id, sequence, payload, type_=0):
    return [index, term, type_, client_id, sequence, payload]


class Builder:
    """A small clean world: three clients' appends, each committed, logged identically on 3 nodes."""

    def __init__(self):
        self.ops = []
        self.log = [entry(1, 1, 0, 0, "", NOOP)]

    def op(self, **fields):
        fields["id"] = len(self.ops)
        self.ops.append(fields)
        return fields

    def append(self, client_id, sequence, values, invoke, complete, type_="ok", in_log=True):
        op = self.op(f="append", process=client_id, client_id=client_id, sequence=sequence, values=list(values),
                     invoke=invoke, complete=complete, type=type_)
        if in_log:
            first = len(self.log) + 1
            for k, value in enumerate(values):
                self.log.append(entry(first + k, 1, client_id, sequence, value))
            if type_ == "ok":
                op.update(first_index=first, last_index=first + len(values) - 1, term=1)
        return op

    def final(self, nodes=3):
        return {"nodes": {n: {"commit_index": len(self.log), "entries": copy.deepcopy(self.log)}
                          for n in range(1, nodes + 1)}}


def clean_world():
    b = Builder()
    b.append(2, 1, ["a1"], 0.0, 0.1)
    b.append(3, 1, ["b1", "b2"], 0.05, 0.2)
    b.append(2, 2, ["a2"], 0.3, 0.4)
    b.append(3, 2, ["b3"], 0.35, 0.5, type_="info")          # unknown, and it did commit
    b.append(4, 1, ["c1"], 0.6, 0.7, type_="info", in_log=False)  # unknown, never committed
    b.append(4, 2, ["c2"], 0.8, 0.9, type_="fail", in_log=False)  # definitely failed
    log = b.log
    b.op(f="read", process=100, linearizable=True, from_index=2, max_entries=64, invoke=0.45, complete=0.46,
         type="ok", commit_index=6, entries=copy.deepcopy(log[1:6]), node=1)
    b.op(f="read", process=100, linearizable=False, from_index=3, max_entries=64, invoke=0.5, complete=0.51,
         type="ok", commit_index=4, entries=copy.deepcopy(log[2:4]), node=2)
    b.op(f="tail", process=200, session=0, node=1, from_index=1, entries=copy.deepcopy(log[0:3]), code="OK",
         invoke=0.0, complete=1.0, type="ok")
    b.op(f="tail", process=200, session=1, node=2, from_index=4, entries=copy.deepcopy(log[3:]), code="OK",
         invoke=1.0, complete=2.0, type="ok")
    return b


class CheckerTest(unittest.TestCase):
    def assert_flags(self, results, name, kind):
        self.assertFalse(results[name]["valid"], results[name])
        self.assertIn(kind, [a["kind"] for a in results[name]["anomalies"]])
        others = [n for n, r in results.items() if n != name and not r["valid"]]
        return others

    def test_clean_history_is_valid(self):
        b = clean_world()
        results = checker.check_all(b.ops, b.final())
        for name, result in results.items():
            self.assertTrue(result["valid"], (name, result))
        self.assertEqual(results["lost-writes"]["checked"], 3)
        self.assertEqual(results["reads"]["checked"], 2)
        self.assertEqual(results["tails"]["checked"], 2)

    def test_lost_write(self):
        b = clean_world()
        final = b.final()
        for node in final["nodes"].values():
            del node["entries"][3:]  # a2 (acknowledged at index 5) and later are gone everywhere
        results = checker.check_all(b.ops, final)
        self.assert_flags(results, "lost-writes", "lost")

    def test_write_at_wrong_index(self):
        b = clean_world()
        b.ops[2]["first_index"] = b.ops[2]["last_index"] = 4  # acknowledged index holds b2, not a2
        self.assert_flags(checker.check_all(b.ops, b.final()), "lost-writes", "lost")

    def test_duplicate_value(self):
        b = clean_world()
        b.log.append(entry(len(b.log) + 1, 2, 2, 3, "a1"))  # a1 written again under another sequence
        self.assert_flags(checker.check_all(b.ops, b.final()), "duplicates", "duplicate-value")

    def test_duplicate_sequence(self):
        b = clean_world()
        b.op(f="append", process=2, client_id=2, sequence=1, values=["a1-retry"], invoke=2, complete=3, type="info")
        b.log.append(entry(len(b.log) + 1, 2, 2, 1, "a1-retry"))  # the retry of (2, 1) written twice
        self.assert_flags(checker.check_all(b.ops, b.final()), "duplicates", "duplicate-sequence")

    def test_agreement_divergence(self):
        b = clean_world()
        final = b.final()
        final["nodes"][3]["entries"][2] = entry(3, 1, 3, 1, "other")
        self.assert_flags(checker.check_all(b.ops, final), "agreement", "diverged")

    def test_reference_is_the_leaders_log(self):
        b = clean_world()
        final = b.final()
        final["nodes"][3]["entries"][2] = entry(3, 2, 0, 0, "", NOOP)  # node 3 overwrote index 3
        final["leader"] = 3
        results = checker.check_all(b.ops, final)
        flagged = sorted(a["node"] for a in results["agreement"]["anomalies"])
        self.assertEqual(flagged, [1, 2])
        del final["nodes"][3]["entries"][4:]  # the leader's log is also the shortest
        results = checker.check_all(b.ops, final)
        self.assertEqual(sorted(a["node"] for a in results["agreement"]["anomalies"]), [1, 2])
        self.assertFalse(results["converged"]["valid"])
        self.assert_flags(results, "lost-writes", "lost")  # b1,b2 acknowledged at 2..3 are not at 3 any more

    def test_agreement_gap(self):
        b = clean_world()
        final = b.final()
        del final["nodes"][2]["entries"][1]
        self.assert_flags(checker.check_all(b.ops, final), "agreement", "gap")

    def test_not_converged(self):
        b = clean_world()
        final = b.final()
        del final["nodes"][2]["entries"][-1]
        results = checker.check_all(b.ops, final)
        self.assert_flags(results, "converged", "commit-index-differs")
        self.assertTrue(results["agreement"]["valid"])  # a shorter prefix is not a disagreement
        final["nodes"][3] = {"error": "UNAVAILABLE"}
        self.assert_flags(checker.check_all(b.ops, final), "converged", "unreadable")

    def test_realtime_order(self):
        b = clean_world()
        # a2 was invoked after a1 completed but was acknowledged at a lower index.
        b.ops[0].update(first_index=5, last_index=5)
        b.ops[2].update(first_index=2, last_index=2)
        self.assert_flags(checker.check_all(b.ops, b.final()), "realtime-order", "reordered")

    def test_concurrent_appends_may_commit_in_any_order(self):
        b = clean_world()
        # b1,b2 (invoked at 0.05, before a1 completed) landing before a1 is allowed.
        results = checker.check_realtime_order(b.ops)
        self.assertTrue(results["valid"])
        b.ops[1].update(invoke=0.15)  # now invoked after a1 completed, and still after it in the log
        self.assertTrue(checker.check_realtime_order(b.ops)["valid"])
        b.ops[0].update(first_index=3, last_index=3)  # a1 after b1 although b was invoked after a1 ended
        self.assertFalse(checker.check_realtime_order(b.ops)["valid"])

    def test_failed_but_applied(self):
        b = clean_world()
        b.log.append(entry(len(b.log) + 1, 2, 4, 2, "c2"))  # the definitely failed append is there
        self.assert_flags(checker.check_all(b.ops, b.final()), "fail-not-applied", "failed-but-applied")

    def test_unexpected_entry(self):
        b = clean_world()
        b.log.append(entry(len(b.log) + 1, 2, 9, 9, "never-written"))
        self.assert_flags(checker.check_all(b.ops, b.final()), "unexpected-entries", "unexpected-entry")

    def test_stale_linearizable_read_commit_index(self):
        b = clean_world()
        read = b.ops[6]
        read.update(commit_index=4, entries=copy.deepcopy(b.log[1:4]))  # a2 at 5 completed at 0.4 < 0.45
        self.assert_flags(checker.check_all(b.ops, b.final()), "reads", "stale-linearizable-read")

    def test_stale_linearizable_read_missing_entries(self):
        b = clean_world()
        b.ops[6].update(entries=copy.deepcopy(b.log[1:3]))  # commit index claims 6 but a2 is not returned
        self.assert_flags(checker.check_all(b.ops, b.final()), "reads", "stale-linearizable-read")

    def test_stale_linearizable_read_out_of_range(self):
        b = clean_world()
        b.op(f="read", process=100, linearizable=True, from_index=5, max_entries=64, invoke=0.45, complete=0.46,
             type="fail", code="OUT_OF_RANGE", reason="BAD_INDEX_RANGE", node=1)
        self.assert_flags(checker.check_all(b.ops, b.final()), "reads", "stale-linearizable-read")

    def test_stale_ordinary_read_is_allowed(self):
        b = clean_world()
        b.ops[7].update(invoke=5.0, commit_index=2, entries=copy.deepcopy(b.log[2:2]))
        self.assertTrue(checker.check_all(b.ops, b.final())["reads"]["valid"])

    def test_dirty_read(self):
        b = clean_world()
        b.ops[7]["entries"][1] = entry(4, 1, 7, 7, "aborted")  # a read returned what never committed
        self.assert_flags(checker.check_all(b.ops, b.final()), "reads", "read-not-in-final-log")

    def test_read_beyond_final_log(self):
        b = clean_world()
        b.ops[7].update(from_index=7, entries=[entry(7, 3, 7, 7, "lost")])
        self.assert_flags(checker.check_all(b.ops, b.final()), "reads", "read-not-in-final-log")

    def test_tail_gap(self):
        b = clean_world()
        del b.ops[8]["entries"][1]
        self.assert_flags(checker.check_all(b.ops, b.final()), "tails", "tail-gap-or-order")

    def test_tail_duplicate(self):
        b = clean_world()
        b.ops[9]["entries"].insert(1, copy.deepcopy(b.ops[9]["entries"][0]))
        self.assert_flags(checker.check_all(b.ops, b.final()), "tails", "tail-gap-or-order")

    def test_tail_resumed_at_wrong_index(self):
        b = clean_world()
        b.ops[9].update(from_index=5, entries=copy.deepcopy(b.log[4:]))  # index 4 was skipped between sessions
        self.assert_flags(checker.check_all(b.ops, b.final()), "tails", "tail-resumed-wrong")

    def test_tail_inconsistent_with_final_log(self):
        b = clean_world()
        b.ops[8]["entries"][2] = entry(3, 1, 3, 1, "b1-changed")
        self.assert_flags(checker.check_all(b.ops, b.final()), "tails", "tail-not-in-final-log")

    def test_unexpected_node_exit(self):
        b = clean_world()
        b.op(f="node-exit", node=2, invoke=1.0, complete=1.0, type="info", returncode=-6, expected=False)
        self.assert_flags(checker.check_all(b.ops, b.final()), "nodes", "unexpected-exit")

    def test_exit_1_while_disk_full_is_expected(self):
        b = clean_world()
        b.op(f="nemesis", kind="disk-full", phase="start", window=0, invoke=1.0, complete=1.0, type="info",
             detail={"node": 2})
        b.op(f="node-exit", node=2, invoke=1.5, complete=1.5, type="info", returncode=1, expected=False)
        b.op(f="nemesis", kind="disk-full", phase="end", window=0, invoke=3.0, complete=3.0, type="info", detail={})
        self.assertTrue(checker.check_all(b.ops, b.final())["nodes"]["valid"])
        b.op(f="node-exit", node=3, invoke=1.5, complete=1.5, type="info", returncode=1, expected=False)
        self.assertFalse(checker.check_all(b.ops, b.final())["nodes"]["valid"])


if __name__ == "__main__":
    unittest.main()
