"""Unit tests of the membership nemesis (its choices, its reconciliation, a simulated cluster over
many windows) and of the membership checker, without a real cluster."""
import json
import os
import random
import sys
import tempfile
import threading
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from raftlog_jepsen import checker, membership, membership_checker, nemesis  # noqa: E402


class ChoiceTest(unittest.TestCase):
    def test_actions_keep_voters_in_bounds(self):
        rng = random.Random(1)
        for _ in range(200):
            self.assertNotIn(membership.choose_action(rng, [1, 2, 3], 3, 5, 10), ("remove", None))
            self.assertNotIn(membership.choose_action(rng, [1, 2, 3, 4, 5], 3, 5, 10), ("add", None))
            self.assertEqual(membership.choose_action(rng, [1, 2, 3, 4], 3, 5, 0), "remove")
        self.assertIsNone(membership.choose_action(rng, [1, 2, 3], 3, 5, 0))
        seen = {membership.choose_action(rng, [1, 2, 3, 4], 3, 5, 10) for _ in range(200)}
        self.assertEqual(seen, {"add", "remove", "replace"})

    def test_target_is_a_voter_and_sometimes_the_leader(self):
        rng = random.Random(2)
        targets = [membership.choose_target(rng, [1, 4, 7], 4) for _ in range(300)]
        self.assertTrue(set(targets) <= {1, 4, 7})
        self.assertGreater(targets.count(4), 100)  # a third directly, plus its share of the rest
        self.assertLess(targets.count(4), 250)
        self.assertTrue(all(t in (1, 7) for t in [membership.choose_target(rng, [1, 7], 9) for _ in range(50)]))


class ReconcileTest(unittest.TestCase):
    def test_plan(self):
        plan = membership.plan_reconcile({"voters": [1, 2, 4], "learners": [6]}, active=[1, 2, 3, 4, 6, 7],
                                         retired={5})
        self.assertEqual(plan, {"retire": [3, 7], "remove": [], "promote": [6], "unknown": []})
        plan = membership.plan_reconcile({"voters": [1, 2, 5, 9], "learners": []}, active=[1, 2], retired={5})
        self.assertEqual(plan, {"retire": [], "remove": [5], "promote": [], "unknown": [9]})
        plan = membership.plan_reconcile({"voters": [1, 2], "learners": [5]}, active=[1, 2], retired={5})
        self.assertEqual(plan["promote"], [], "a retired learner is removed, not promoted")
        self.assertEqual(plan["remove"], [5])

    def test_parse_list(self):
        text = json.dumps({"leader_id": 2, "term": 3, "config_index": 9, "config_committed": True, "commit_index": 20,
                           "members": [{"id": 1, "role": "voter"}, {"id": 2, "role": "voter"},
                                       {"id": 6, "role": "learner"}]})
        self.assertEqual(membership.parse_list(text),
                         {"voters": [1, 2], "learners": [6], "committed": True, "leader": 2})
        self.assertIsNone(membership.parse_list("members list: UNAVAILABLE"))
        self.assertIsNone(membership.parse_list('{"members": [{"id": 1}]}'))


# ---- a simulated cluster: enough of cluster.Cluster, raftlogctl and the history for the nemesis ----
class FakeProcess:
    def __init__(self):
        self.returncode = None

    def poll(self):
        return self.returncode


class FakeNode:
    def __init__(self, node_id, root):
        self.id = node_id
        self.address = "10.0.0.%d:7001" % node_id
        self.data_dir = os.path.join(root, "n%d" % node_id)
        os.makedirs(self.data_dir, exist_ok=True)
        self.process = None
        self.joined = False
        self.expect_exit = False
        self.extra_flags = []


class FakeCluster:
    def __init__(self, ids, root, fail_joins=()):
        self.root = root
        self.raftlogd = "/nonexistent/raftlogd"
        self.nodes = {i: FakeNode(i, root) for i in ids}
        self.retired = set()
        self.started = []
        self.fail_joins = set(fail_joins)
        self.lock = threading.RLock()
        for i in ids:
            self.start(i)

    def add_node(self, node_id):
        assert node_id not in self.nodes, "id %d reused" % node_id
        node = FakeNode(node_id, self.root)
        node.joined = True
        self.nodes = {**self.nodes, node_id: node}
        return node

    def start(self, node_id):
        assert node_id not in self.retired, "a retired node was started"
        node = self.nodes[node_id]
        node.process = FakeProcess()
        self.started.append(node_id)
        if node.joined:
            if node_id in self.fail_joins:
                node.process.returncode = 1
            else:
                open(os.path.join(node.data_dir, "JOIN"), "w").close()

    def retire(self, node_id):
        self.retired.add(node_id)
        if self.nodes[node_id].process is not None and self.nodes[node_id].process.returncode is None:
            self.nodes[node_id].process.returncode = 0

    def active_ids(self):
        return [i for i in sorted(self.nodes) if i not in self.retired]

    def reap(self):
        return []


class FakeCtl:
    """raftlogctl members against a configuration in memory; `flaky` makes some changes commit but
    report failure (a timeout), as a real raftlogctl can."""

    def __init__(self, voters, rng, flaky=0.0):
        self.voters = set(voters)
        self.learners = set()
        self.rng = rng
        self.flaky = flaky
        self.calls = []

    def run(self, args, timeout_ms):
        self.calls.append(args)
        command = args[1]
        if command == "list":
            members = [{"id": i, "role": "voter"} for i in sorted(self.voters)]
            members += [{"id": i, "role": "learner"} for i in sorted(self.learners)]
            return 0, json.dumps({"leader_id": min(self.voters), "config_committed": True, "members": members})
        node = int(args[2])
        if command == "add":
            if node in self.voters | self.learners:
                return 1, "ALREADY_A_MEMBER"
            self.learners.add(node)
            if self.rng.random() < self.flaky:
                return 1, "DEADLINE_EXCEEDED (the learner was added)"
            self.learners.discard(node)
            self.voters.add(node)
        elif command == "promote":
            if node not in self.learners:
                return 1, "NOT_A_LEARNER"
            self.learners.discard(node)
            self.voters.add(node)
        elif command == "remove":
            if node not in self.voters | self.learners:
                return 1, "NOT_A_MEMBER"
            if len(self.voters - {node}) < 1:
                return 1, "WOULD_LOSE_QUORUM"
            self.voters.discard(node)
            self.learners.discard(node)
        elif command == "replace":
            new = int(args[3])
            self.voters.add(new)
            if self.rng.random() < self.flaky:
                return 1, "DEADLINE_EXCEEDED (added, not yet removed)"
            self.voters.discard(node)
        if self.rng.random() < self.flaky:
            return -1, "raftlogctl did not return"  # committed all the same
        return 0, "done"


class FakeHistory:
    def __init__(self):
        self.ops = []
        self.t = 0.0

    def now(self):
        self.t += 0.01
        return self.t

    def record(self, op):
        self.ops.append(op)


class FakeClient:
    def __init__(self, addresses):
        self.addresses = dict(addresses)
        self.by_address = {}


def simulated_context(seed, initial, flaky=0.0, fail_joins=()):
    root = tempfile.mkdtemp(prefix="membership-test-")
    cluster = FakeCluster(range(1, initial + 1), root, fail_joins)
    history = FakeHistory()
    client = FakeClient({i: n.address for i, n in cluster.nodes.items()})
    ctx = nemesis.Context(cluster, None, client, history, random.Random(seed))
    ctx.log = lambda message: None
    ctl = FakeCtl(cluster.nodes, random.Random(seed + 1000), flaky)
    ctx.membership = membership.State(ctx, ctl=ctl)
    return ctx, cluster, ctl, history, root


class NemesisTest(unittest.TestCase):
    def run_windows(self, seed, initial, windows, **kwargs):
        ctx, cluster, ctl, history, root = simulated_context(seed, initial, **kwargs)
        sizes = []
        for _ in range(windows):
            m = membership.Membership(ctx)
            described = m.start()
            m.tick()  # the scheduler's interface (nemesis.Nemesis): start, tick while open, heal
            m.heal()
            sizes.append(len(ctl.voters))
            if described is not None and described.get("voters_after") is not None:
                self.assertEqual(described["voters_after"], sorted(ctl.voters))
            # The harness agrees with the configuration after every window.
            self.assertEqual(set(cluster.active_ids()), ctl.voters | ctl.learners)
            self.assertFalse(ctl.learners, "a learner was left after a window")
            self.assertEqual(set(ctx.client.addresses), ctl.voters)
        return ctx, cluster, ctl, history, sizes

    def test_voters_stay_within_bounds_and_ids_are_never_reused(self):
        for seed in range(10):
            for initial in (3, 5):
                _, cluster, ctl, history, sizes = self.run_windows(seed, initial, 40)
                self.assertTrue(all(3 <= n <= 5 for n in sizes), sizes)
                self.assertIn(3, sizes, "never shrank to 3")
                self.assertIn(5, sizes, "never grew to 5")
                ops = [op for op in history.ops if op["f"] == "membership"]
                self.assertEqual({op["action"] for op in ops}, {"add", "remove", "replace"})
                # Retired nodes are never started again (FakeCluster.start asserts it) and each id
                # was made once (FakeCluster.add_node asserts it).
                self.assertTrue(cluster.retired)
                final = {"voters": sorted(ctl.voters), "learners": [], "founders": list(range(1, initial + 1))}
                result = membership_checker.check(history.ops, {"configuration": final,
                                                                "nodes": {i: {} for i in ctl.voters}})
                self.assertTrue(result["valid"], result)

    def test_changes_that_commit_but_report_failure_are_reconciled(self):
        for seed in range(10):
            _, cluster, ctl, history, _ = self.run_windows(seed, 3, 40, flaky=0.3)
            ops = [op for op in history.ops if op["f"] == "membership"]
            self.assertTrue(any(op["type"] == "info" for op in ops))
            self.assertEqual(set(cluster.active_ids()), ctl.voters)

    def test_a_failed_join_uses_up_the_id_and_changes_nothing(self):
        ctx, cluster, ctl, history, _ = simulated_context(3, 3, fail_joins={4})
        ctx.rng = random.Random(0)
        while True:  # the first add or replace
            described = membership.Membership(ctx).start()
            if described.get("join_failed"):
                break
        self.assertIn(4, cluster.retired)
        self.assertTrue(cluster.nodes[4].expect_exit, "an exit 1 before JOIN was written is expected")
        self.assertNotIn(4, ctl.voters | ctl.learners)
        self.assertTrue(any(op.get("action") == "join" and op["type"] == "fail" for op in history.ops))
        self.assertEqual(ctx.membership.next_id(), 5)

    def test_no_ids_left_means_only_removals(self):
        ctx, cluster, ctl, history, _ = simulated_context(4, 3)
        for node_id in range(4, membership.MAX_NODE_ID + 1):
            cluster.add_node(node_id)
            cluster.retire(node_id)
        self.assertIsNone(ctx.membership.next_id())
        self.assertIsNone(membership.Membership(ctx).start(), "3 voters and no id left: nothing to do")

    def test_listed_in_all_nemeses(self):
        self.assertIn("membership", nemesis.ALL)
        self.assertIs(nemesis.KINDS["membership"], membership.Membership)


def op(action, node, old=None, type_="ok", t=1.0):
    return {"f": "membership", "action": action, "node": node, "old": old, "type": type_, "invoke": t, "complete": t}


def final_of(voters, learners=(), read=None, founders=(1, 2, 3)):
    return {"configuration": {"voters": list(voters), "learners": list(learners), "founders": list(founders)},
            "nodes": {i: {} for i in (read if read is not None else list(voters) + list(learners))}}


class CheckerTest(unittest.TestCase):
    def test_valid_history(self):
        history = [op("add", 4), op("add", 5), op("remove", 2), op("replace", 6, old=4)]
        result = membership_checker.check(history, final_of([1, 3, 5, 6]))
        self.assertTrue(result["valid"], result)
        self.assertEqual(result["checked"], 4)

    def test_acknowledged_add_lost(self):
        result = membership_checker.check([op("add", 4)], final_of([1, 2, 3]))
        self.assertEqual([a["kind"] for a in result["anomalies"]], ["added-voter-missing"])

    def test_acknowledged_removal_rolled_back(self):
        result = membership_checker.check([op("remove", 2)], final_of([1, 2, 3]))
        self.assertEqual([a["kind"] for a in result["anomalies"]], ["removed-member-back"])
        result = membership_checker.check([op("replace", 4, old=1)], final_of([1, 2, 3, 4]))
        self.assertEqual([a["kind"] for a in result["anomalies"]], ["removed-member-back"])

    def test_later_removal_attempt_excuses_an_absent_voter(self):
        self.assertTrue(membership_checker.check([op("add", 4), op("remove", 4, type_="info")],
                                                 final_of([1, 2, 3]))["valid"])
        self.assertTrue(membership_checker.check([op("add", 4), op("replace", 5, old=4, type_="info")],
                                                 final_of([1, 2, 3, 5]))["valid"])

    def test_info_ops_are_not_facts(self):
        self.assertTrue(membership_checker.check([op("add", 4, type_="info")], final_of([1, 2, 3]))["valid"])
        self.assertTrue(membership_checker.check([op("remove", 2, type_="info")], final_of([1, 2, 3]))["valid"])

    def test_final_reads_must_cover_exactly_the_members(self):
        result = membership_checker.check([op("remove", 3)], final_of([1, 2], read=[1, 2, 3]))
        self.assertEqual([a["kind"] for a in result["anomalies"]], ["reads-not-members"])
        result = membership_checker.check([op("add", 4)], final_of([1, 2, 3, 4], read=[1, 2, 3]))
        self.assertEqual([a["kind"] for a in result["anomalies"]], ["reads-not-members"])

    def test_unknown_member_and_unreadable_configuration(self):
        result = membership_checker.check([op("add", 4)], final_of([1, 2, 3, 4, 9]))
        self.assertIn("unknown-member", [a["kind"] for a in result["anomalies"]])
        result = membership_checker.check([op("add", 4)], {"configuration": None, "nodes": {}})
        self.assertEqual([a["kind"] for a in result["anomalies"]], ["configuration-unreadable"])

    def test_runs_without_membership_are_unaffected(self):
        result = membership_checker.check([{"f": "append", "type": "ok"}], {"nodes": {1: {}}})
        self.assertEqual(result, {"valid": True, "checked": 0, "anomaly_count": 0, "anomalies": []})
        self.assertIn("membership", checker.check_all([], {"leader": None, "nodes": {}}))


if __name__ == "__main__":
    unittest.main()
