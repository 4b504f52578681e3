"""The membership nemesis: adds, removes and replaces members under load (docs/jepsen.md).

Each window makes one single-server change through the product's own CLI (`raftlogctl members add |
remove | replace`, which wait until the change is committed and, for a new node, until it caught up
and was promoted), while the workload runs and, when the scheduler opens two windows at once, while
another fault (kill, pause, partition, ...) is in place. A new node gets the next unused id, its own
network namespace (cluster.Cluster.add_node) and starts with --join on an empty directory; ids are
never reused. Voters stay within [MIN_VOTERS, MAX_VOTERS]: 3 -> 5 -> 3 and back.

What the harness believes is corrected from the cluster itself before and after every change
(reconcile): raftlogctl may time out on a change that then commits, or fail on one that committed
before the failure. A node not in the committed configuration is retired (stopped, never started
again); a retired node still listed is removed; a learner left by an interrupted add is promoted
(or removed once it cannot be). Every change is recorded as an op {"f": "membership", "action",
"node", "old", "type": ok | info}: "ok" only when raftlogctl said the change committed, which
membership_checker.check holds against the final configuration.
"""
import json
import os
import subprocess
import time

MIN_VOTERS = 3
MAX_VOTERS = 5
MAX_NODE_ID = 99          # bounds the namespaces and data directories one run creates
CHANGE_TIMEOUT_MS = 20000  # one raftlogctl change, catch-up included
LIST_TIMEOUT_MS = 3000
JOIN_WAIT_S = 12.0         # a joining node fetches the member list (--join-timeout-ms below)
JOIN_FLAGS = ["--join-timeout-ms", "8000"]
SETTLE_S = 90.0


def choose_action(rng, voters, min_voters, max_voters, ids_left):
    """Which change to make: add while below max_voters, remove while above min_voters, replace any
    time; None when none is possible. Pure (unit-tested)."""
    possible = []
    if ids_left > 0 and len(voters) < max_voters:
        possible.append("add")
    if len(voters) > min_voters:
        possible.append("remove")
    if ids_left > 0 and voters:
        possible.append("replace")
    return rng.choice(possible) if possible else None


def choose_target(rng, voters, leader):
    """The voter to remove or replace: the leader a third of the time (a removed leader must hand
    over), else any voter."""
    if leader in voters and rng.random() < 1.0 / 3.0:
        return leader
    return rng.choice(sorted(voters))


def plan_reconcile(config, active, retired):
    """What to do so that the harness and the committed configuration agree. Pure (unit-tested).
    config: {"voters": [...], "learners": [...]}; active: ids the harness runs or may restart;
    retired: ids it stopped for good. Returns {"retire": ids the harness still has but the
    configuration does not (removed, or never added), "remove": retired ids still listed,
    "promote": learners to promote, "unknown": listed ids the harness never made}."""
    listed = set(config["voters"]) | set(config["learners"])
    known = set(active) | set(retired)
    return {"retire": sorted(set(active) - listed),
            "remove": sorted(listed & set(retired)),
            "promote": sorted(set(config["learners"]) - set(retired)),
            "unknown": sorted(listed - known)}


def parse_list(text):
    """`raftlogctl members list --json` -> {"voters", "learners", "committed", "leader"} or None."""
    try:
        doc = json.loads(text)
        voters = sorted(int(m["id"]) for m in doc["members"] if m["role"] == "voter")
        learners = sorted(int(m["id"]) for m in doc["members"] if m["role"] == "learner")
        return {"voters": voters, "learners": learners, "committed": bool(doc["config_committed"]),
                "leader": int(doc["leader_id"]) or None}
    except (ValueError, KeyError, TypeError):
        return None


class Ctl:
    """Runs raftlogctl against the nodes the harness has (replaced in tests)."""

    def __init__(self, raftlogctl, endpoints):
        self.raftlogctl = raftlogctl
        self.endpoints = endpoints  # callable -> "host:port,..."

    def run(self, args, timeout_ms):
        command = [self.raftlogctl] + args + ["--endpoints", self.endpoints(), "--timeout-ms", str(timeout_ms)]
        try:
            done = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                  timeout=timeout_ms / 1000.0 + 10.0)
            return done.returncode, done.stdout.strip()
        except subprocess.TimeoutExpired:
            return -1, "raftlogctl did not return"


class State:
    """The run's membership, shared by every window (kept on the nemesis Context)."""

    def __init__(self, ctx, ctl=None):
        self.ctx = ctx
        cluster = ctx.cluster
        self.max_voters = max(MAX_VOTERS, len(cluster.nodes))
        self.ctl = ctl or Ctl(os.path.join(os.path.dirname(cluster.raftlogd), "raftlogctl"),
                              lambda: ",".join(cluster.nodes[i].address for i in cluster.active_ids()))
        self.last_config = None

    def next_id(self):
        candidate = max(self.ctx.cluster.nodes) + 1
        return candidate if candidate <= MAX_NODE_ID else None

    def record(self, op):
        op.setdefault("f", "membership")
        self.ctx.history.record(op)

    def config(self, attempts=3):
        """The committed configuration (a few tries: a leader change makes one list fail), or None."""
        for _ in range(attempts):
            code, out = self.ctl.run(["members", "list", "--json"], LIST_TIMEOUT_MS)
            config = parse_list(out) if code == 0 else None
            if config is not None and config["committed"]:
                self.last_config = config
                return config
            time.sleep(0.3)
        return None

    def retire(self, node):
        """Stops a node that left the configuration for good; no fault holds it any more."""
        self.ctx.cluster.retire(node)
        self.ctx.held.discard(node)
        self.ctx.corrupted.pop(node, None)  # a retired node's damage needs no repair

    def update_clients(self, config):
        """Clients talk to the members only (replaced, never mutated: other threads iterate them)."""
        client = self.ctx.client
        nodes = self.ctx.cluster.nodes
        ids = [i for i in config["voters"] + config["learners"] if i in nodes and i not in self.ctx.cluster.retired]
        client.addresses = {i: nodes[i].address for i in ids}
        client.by_address = {a: i for i, a in client.addresses.items()}

    def reconcile(self, log=print):
        """Brings the harness in line with the committed configuration. Returns it, or None."""
        config = self.config()
        if config is None:
            return None
        cluster = self.ctx.cluster
        plan = plan_reconcile(config, cluster.active_ids(), cluster.retired)
        for node in plan["retire"]:
            log("membership: node %d is not in the configuration %s: retired" % (node, config))
            self.retire(node)
        for node in plan["remove"]:
            code, out = self.ctl.run(["members", "remove", str(node)], CHANGE_TIMEOUT_MS)
            self.record_change("remove", node, None, code, out, time_invoked=None)
        for node in plan["promote"]:
            code, out = self.ctl.run(["members", "promote", str(node)], CHANGE_TIMEOUT_MS)
            self.record_change("promote", node, None, code, out, time_invoked=None)
        if plan["unknown"]:
            log("membership: the configuration lists ids the harness never made: %s" % plan["unknown"])
        if plan["remove"] or plan["promote"]:
            config = self.config() or config
        self.update_clients(config)
        return config

    def record_change(self, action, node, old, code, out, time_invoked):
        now = self.ctx.history.now()
        self.record({"action": action, "node": node, "old": old, "invoke": now if time_invoked is None else time_invoked,
                     "complete": now, "type": "ok" if code == 0 else "info", "returncode": code,
                     "output": out[-300:]})

    def start_joining_node(self, log=print):
        """A new node with an empty directory, started with --join; its id, or None when the join
        failed (exit 1 before it wrote DIR/JOIN: the cluster could not be asked, e.g. under a
        partition). Its id is used up either way."""
        cluster = self.ctx.cluster
        node_id = self.next_id()
        if node_id is None:
            return None
        node = cluster.add_node(node_id)
        node.extra_flags = list(JOIN_FLAGS)
        cluster.start(node_id)
        deadline = time.monotonic() + JOIN_WAIT_S
        join_record = os.path.join(node.data_dir, "JOIN")
        while time.monotonic() < deadline and not os.path.exists(join_record):
            if node.process.poll() is not None:
                break
            time.sleep(0.1)
        if os.path.exists(join_record) and node.process.poll() is None:
            return node_id
        returncode = node.process.poll()
        if returncode == 1 and not os.path.exists(join_record):
            node.expect_exit = True  # a refused or unanswered join is not a crash
        log("membership: node %d did not join (exit %s); its id is retired" % (node_id, returncode))
        self.record({"action": "join", "node": node_id, "old": None, "invoke": self.ctx.history.now(),
                     "complete": self.ctx.history.now(), "type": "fail", "returncode": returncode})
        cluster.retire(node_id)
        cluster.reap()
        return None


class Membership:
    """One window: one change (add, remove or replace), then reconcile."""
    kind = "membership"

    def __init__(self, ctx):
        self.ctx = ctx
        self.node = None
        if getattr(ctx, "membership", None) is None:
            ctx.membership = State(ctx)
        self.state = ctx.membership

    def start(self):
        log = getattr(self.ctx, "log", print)
        state = self.state
        config = state.reconcile(log)
        if config is None:
            return None
        rng = self.ctx.rng
        next_id = state.next_id()
        action = choose_action(rng, config["voters"], MIN_VOTERS, state.max_voters,
                               0 if next_id is None else MAX_NODE_ID - next_id + 1)
        if action is None:
            return None
        invoked = self.ctx.history.now()
        described = {"action": action, "voters_before": config["voters"]}
        if action in ("remove", "replace"):
            old = choose_target(rng, config["voters"], config["leader"])
            described["old"] = old
        if action in ("add", "replace"):
            new = state.start_joining_node(log)
            if new is None:
                described["join_failed"] = True
                return described
            described["node"] = new
            address = self.ctx.cluster.nodes[new].address
        if action == "add":
            code, out = state.ctl.run(["members", "add", str(new), address], CHANGE_TIMEOUT_MS)
            state.record_change("add", new, None, code, out, invoked)
        elif action == "remove":
            code, out = state.ctl.run(["members", "remove", str(old)], CHANGE_TIMEOUT_MS)
            state.record_change("remove", old, None, code, out, invoked)
            if code == 0:
                state.retire(old)  # removed: a non-member idles until stopped
        else:
            code, out = state.ctl.run(["members", "replace", str(old), str(new), address], CHANGE_TIMEOUT_MS)
            state.record_change("replace", new, old, code, out, invoked)
            if code == 0:
                state.retire(old)
        described["ok"] = code == 0
        if code != 0:
            described["output"] = out[-200:]
        after = state.reconcile(log)
        described["voters_after"] = after["voters"] if after else None
        return described

    def tick(self):
        pass  # the change ran in start(); the window only keeps the other fault (if any) open

    def heal(self):
        after = self.state.reconcile(getattr(self.ctx, "log", print))
        return {"voters": after["voters"] if after else None}


def settle(ctx, log=print, timeout_s=SETTLE_S):
    """After the faults: reconcile until the committed configuration has no learner and lists no
    retired node, so that the final reads cover exactly the members. Returns the configuration."""
    state = getattr(ctx, "membership", None)
    if state is None:
        return None
    deadline = time.monotonic() + timeout_s
    config = None
    while time.monotonic() < deadline:
        config = state.reconcile(log)
        if config is not None and not config["learners"] and not set(config["voters"]) & ctx.cluster.retired:
            return config
        time.sleep(0.5)
    log("membership: configuration did not settle within %.0f s: %s" % (timeout_s, config))
    return config
