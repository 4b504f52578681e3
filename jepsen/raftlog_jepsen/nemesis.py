"""Nemeses: faults injected on a schedule drawn from the run's seed.

Each nemesis has start(), an optional tick() called every TICK_S while its window is open, and
heal(). The scheduler alternates quiet periods with fault windows; a window holds one nemesis, or two
of different kinds when several are enabled. Node-level nemeses never pick a node another open window
already holds. Which node, which partition and which fault parameters are chosen comes from the seed;
the wall-clock timing of the run itself is not reproducible.
"""
import errno
import os
import threading
import time

import grpc

from . import corrupt, membership, torn_write

ALL = ["kill", "pause", "partition", "loss", "torn-write", "disk-full", "clock", "leader-transfer", "corrupt",
       "membership"]
# "delay" is not offered: tc netem is absent on these kernels and a delaying proxy is not built yet.
NEEDS_NAMESPACES = {"partition", "loss", "disk-full"}
TICK_S = 0.25


class Context:
    def __init__(self, cluster, network, client_cluster, history, rng):
        self.cluster = cluster
        self.network = network
        self.client = client_cluster
        self.history = history
        self.rng = rng
        self.held = set()  # nodes held by an open node-level fault
        self.corrupted = {}  # node -> scrub bytes through the entry the corrupt nemesis damaged, until repaired
        self.last_restart = {}  # node -> monotonic time of the watchdog's last restart

    def restart_exited(self, log=print):
        """The watchdog (a supervisor's Restart=on-failure): restarts every node that exited by itself
        and that no open fault holds, and records it. The exit stays in the history (node-exit,
        expected false), so the nodes checker still judges it. At most one restart per node a second."""
        cluster = self.cluster
        cluster.reap()
        restarted = []
        with cluster.lock:
            for node_id, node in sorted(cluster.nodes.items()):
                if cluster.closed or node_id in self.held or node.process is None or cluster.running(node_id):
                    continue
                if not node.exits or node.exits[-1][2]:
                    continue  # the harness stopped it; whoever did restarts it
                if time.monotonic() - self.last_restart.get(node_id, -1e9) < 1.0:
                    continue
                self.last_restart[node_id] = time.monotonic()
                returncode = node.process.returncode
                t0 = self.history.now()
                cluster.start(node_id)
                self.history.record({"f": "node-restart", "node": node_id, "invoke": t0,
                                     "complete": self.history.now(), "type": "info", "reason": "watchdog",
                                     "after_returncode": returncode})
                log("t=%6.1fs watchdog: node %d exited with %s by itself, restarted" % (t0, node_id, returncode))
                restarted.append(node_id)
        return restarted

    def repaired(self, node_id):
        """True once a corrupted node runs, is not catching up, reports no corrupt entry and its scrub
        has verified, since it started, at least the log's bytes up to the damaged entry (a full pass
        may never end while the log grows). A node not in `corrupted` is repaired."""
        if node_id not in self.corrupted:
            return True
        if not self.cluster.running(node_id) or self.cluster.nodes[node_id].paused:
            return False
        st = self.client.status(node_id)
        return (st is not None and not st.catching_up and st.corrupt_index == 0
                and (st.scrub_passes >= 1 or st.scrub_bytes_verified >= self.corrupted[node_id]))

    def forget_repaired(self):
        for node_id in sorted(self.corrupted):
            if self.repaired(node_id):
                del self.corrupted[node_id]
        return sorted(self.corrupted)

    def wait_corrupt_repaired(self, timeout_s, log=print):
        """Before the final reads: a latent corrupt entry would make a node exit under them."""
        deadline = time.monotonic() + timeout_s
        while self.forget_repaired() and time.monotonic() < deadline:
            self.restart_exited(log)
            time.sleep(TICK_S)
        return sorted(self.corrupted)

    def leader(self):
        return self.client.find_leader(self.cluster.live_ids(), timeout_s=0.3)

    def pick_node(self, prefer_leader=True):
        free = [i for i in self.cluster.live_ids() if i not in self.held]
        if not free:
            return None
        if prefer_leader and self.rng.random() < 0.5:
            leader = self.leader()
            if leader in free:
                return leader
        return self.rng.choice(free)


class Nemesis:
    kind = ""

    def __init__(self, ctx):
        self.ctx = ctx
        self.node = None

    def start(self):
        """Injects the fault; returns a JSON-able description, or None when nothing could be done."""
        raise NotImplementedError

    def tick(self):
        pass

    def heal(self):
        raise NotImplementedError


class Kill(Nemesis):
    kind = "kill"

    def start(self):
        self.node = self.ctx.pick_node()
        if self.node is None or not self.ctx.cluster.kill(self.node):
            return None
        self.ctx.held.add(self.node)
        return {"node": self.node}

    def heal(self):
        if not self.ctx.cluster.running(self.node):
            self.ctx.cluster.start(self.node)
        self.ctx.held.discard(self.node)


class TornWrite(Kill):
    kind = "torn-write"

    def start(self):
        described = super().start()
        if described is None:
            return None
        described["torn"] = torn_write.tear(os.path.join(self.ctx.cluster.nodes[self.node].data_dir, "log"),
                                            self.ctx.rng)
        return described


class Corrupt(Nemesis):
    """SIGKILLs one node, XORs one payload byte of an entry it made durable (corrupt.py), restarts it.
    Only one node carries corruption at a time: the nemesis does nothing while an earlier victim has
    not shown it is repaired (Context.repaired), so a majority always holds intact copies. A node that
    then finds the entry corrupt while running exits 1; the watchdog (or heal) restarts it."""
    kind = "corrupt"

    def start(self):
        pending = self.ctx.forget_repaired()
        if pending:
            return None
        self.node = self.ctx.pick_node()
        if self.node is None or not self.ctx.cluster.kill(self.node):
            return None
        self.ctx.held.add(self.node)
        described = {"node": self.node}
        described["flip"] = corrupt.flip(os.path.join(self.ctx.cluster.nodes[self.node].data_dir, "log"),
                                         self.ctx.rng)
        if "skipped" not in described["flip"]:
            self.ctx.corrupted[self.node] = described["flip"]["scrub_bytes_through"]
        self.ctx.cluster.start(self.node)
        return described

    restarts = 0

    def _restart_if_exited(self, reason):
        """It found the entry corrupt while running and exited 1: restart it (recorded)."""
        self.ctx.cluster.reap()
        if self.ctx.cluster.running(self.node) or self.ctx.cluster.closed:
            return
        node = self.ctx.cluster.nodes[self.node]
        t0 = self.ctx.history.now()
        self.ctx.cluster.start(self.node)
        self.restarts += 1
        self.ctx.history.record({"f": "node-restart", "node": self.node, "invoke": t0,
                                 "complete": self.ctx.history.now(), "type": "info", "reason": reason,
                                 "after_returncode": node.exits[-1][1] if node.exits else None})

    def tick(self):
        self._restart_if_exited("corrupt-tick")

    def heal(self):
        self._restart_if_exited("corrupt-heal")
        self.ctx.held.discard(self.node)
        return {"node": self.node, "restarts": self.restarts, "repaired": self.ctx.repaired(self.node)}


class Pause(Nemesis):
    kind = "pause"

    def start(self):
        self.node = self.ctx.pick_node()
        if self.node is None or not self.ctx.cluster.pause(self.node):
            return None
        self.ctx.held.add(self.node)
        return {"node": self.node}

    def heal(self):
        self.ctx.cluster.resume(self.node)
        self.ctx.held.discard(self.node)


def partition_components(rng, node_ids, leader, mode):
    """Returns (mode, list of (a, b) node pairs to cut)."""
    ids = sorted(node_ids)
    n = len(ids)
    all_pairs = [(a, b) for i, a in enumerate(ids) for b in ids[i + 1:]]
    if mode == "isolate-leader" and leader is None:
        mode = "halves"
    if mode == "majority-ring" and n < 5:
        mode = "halves"  # with 3 nodes a ring of majorities is the full mesh
    if mode == "halves":
        shuffled = ids[:]
        rng.shuffle(shuffled)
        minority = set(shuffled[: n // 2])
        return mode, [(a, b) for a, b in all_pairs if (a in minority) != (b in minority)]
    if mode == "isolate-leader":
        return mode, [(a, b) for a, b in all_pairs if leader in (a, b)]
    if mode == "majority-ring":
        ring = ids[:]
        rng.shuffle(ring)
        # Each node keeps links to its two ring neighbours: it sees a majority (itself + 2 of 5), but
        # no two nodes see the same majority.
        keep = {frozenset((ring[i], ring[(i + 1) % n])) for i in range(n)}
        return mode, [(a, b) for a, b in all_pairs if frozenset((a, b)) not in keep]
    if mode == "bridge":
        shuffled = ids[:]
        rng.shuffle(shuffled)
        bridge = shuffled[0]
        rest = shuffled[1:]
        left = set(rest[: len(rest) // 2])
        return mode, [(a, b) for a, b in all_pairs
                      if bridge not in (a, b) and (a in left) != (b in left)]
    raise ValueError("unknown partition mode " + mode)


class Partition(Nemesis):
    kind = "partition"
    MODES = ["halves", "isolate-leader", "majority-ring", "bridge"]

    def start(self):
        mode = self.ctx.rng.choice(self.MODES)
        leader = self.ctx.leader() if mode == "isolate-leader" else None
        mode, cuts = partition_components(self.ctx.rng, self.ctx.cluster.active_ids(), leader, mode)
        for a, b in cuts:
            self.ctx.network.cut(a, b)
            self.ctx.network.cut(b, a)
        return {"mode": mode, "cuts": [list(c) for c in cuts], "leader": leader}

    def heal(self):
        self.ctx.network.heal()


class Loss(Nemesis):
    kind = "loss"

    def start(self):
        probability = round(self.ctx.rng.uniform(0.1, 0.5), 2)
        ids = self.ctx.cluster.active_ids()
        for a in ids:
            for b in ids:
                if a != b:
                    self.ctx.network.lose(a, b, probability)
        return {"probability": probability}

    def heal(self):
        self.ctx.network.heal()


class DiskFull(Nemesis):
    kind = "disk-full"
    # Fill completely (the next segment or index block cannot be allocated): 1 MiB chunks, then
    # smaller ones for the rest. MAX_CHUNKS bounds each pass (the tmpfs is 64 MiB).
    CHUNKS_BYTES = (1 << 20, 64 << 10, 4 << 10)
    MAX_CHUNKS = 4096

    def start(self):
        self.node = self.ctx.pick_node()
        if self.node is None:
            return None
        self.ctx.held.add(self.node)
        data_dir = self.ctx.cluster.nodes[self.node].data_dir
        self.ballast = os.path.join(data_dir, "ballast")
        size = 0
        # The node keeps writing while the ballast grows, so "free space" is a moving target: grow the
        # ballast in shrinking chunks until the file system refuses even the smallest one.
        with open(self.ballast, "wb") as f:
            for chunk in self.CHUNKS_BYTES:
                for _ in range(self.MAX_CHUNKS):
                    try:
                        os.posix_fallocate(f.fileno(), size, chunk)
                    except OSError as e:
                        if e.errno != errno.ENOSPC:
                            raise
                        break
                    size += chunk
        return {"node": self.node, "ballast_bytes": size}

    def heal(self):
        try:
            os.unlink(self.ballast)
        except FileNotFoundError:
            pass
        # A follower whose store could not write stops (exit 1, docs/operations.md): restart it.
        self.ctx.cluster.reap()
        if not self.ctx.cluster.running(self.node):
            self.ctx.cluster.start(self.node)
        self.ctx.held.discard(self.node)


class Clock(Nemesis):
    """Restarts one node under libfaketime: a wall clock hours off, or a monotonic clock running at
    another rate (a drifting oscillator). Raft's safety must not depend on either."""
    kind = "clock"

    def start(self):
        self.node = self.ctx.pick_node()
        if self.node is None:
            return None
        self.ctx.held.add(self.node)
        rng = self.ctx.rng
        if rng.random() < 0.5:
            spec = {"spec": "%+d" % (rng.choice([-1, 1]) * rng.randint(60, 86400)), "monotonic": False}
        else:
            spec = {"spec": "+0 x%.2f" % rng.uniform(0.5, 2.0), "monotonic": True}
        self.ctx.cluster.stop(self.node)
        self.ctx.cluster.start(self.node, faketime=spec)
        return {"node": self.node, "faketime": spec}

    def heal(self):
        self.ctx.cluster.stop(self.node)
        self.ctx.cluster.start(self.node)
        self.ctx.held.discard(self.node)


class LeaderTransfer(Nemesis):
    kind = "leader-transfer"

    def start(self):
        self.transfers = []
        self.next_at = 0.0
        return {}

    def tick(self):
        if time.monotonic() < self.next_at:
            return
        self.next_at = time.monotonic() + self.ctx.rng.uniform(0.3, 1.2)
        leader = self.ctx.leader()
        if leader is None:
            return
        targets = [i for i in self.ctx.cluster.live_ids() if i != leader]
        if not targets:
            return
        target = self.ctx.rng.choice(targets)
        pb2 = self.ctx.client.pb2
        try:
            response = self.ctx.client.admin_stub(leader).TransferLeadership(
                pb2.TransferLeadershipRequest(target_id=target), timeout=2.0)
            self.transfers.append({"from": leader, "to": target, "ok": True, "term": response.term})
        except grpc.RpcError as e:
            self.transfers.append({"from": leader, "to": target, "ok": False, "code": e.code().name})

    def heal(self):
        return {"transfers": self.transfers}


KINDS = {"kill": Kill, "pause": Pause, "partition": Partition, "loss": Loss, "torn-write": TornWrite,
         "disk-full": DiskFull, "clock": Clock, "leader-transfer": LeaderTransfer, "corrupt": Corrupt,
         "membership": membership.Membership}


class Scheduler(threading.Thread):
    """Runs fault windows until `end_at` (history time), then heals everything."""

    def __init__(self, ctx, kinds, end_at, quiet_s=(1.0, 3.0), window_s=(2.0, 6.0), log=print):
        super().__init__(name="nemesis", daemon=True)
        self.ctx = ctx
        self.kinds = kinds
        self.end_at = end_at
        self.quiet_s = quiet_s
        self.window_s = window_s
        self.stop_event = threading.Event()
        self.log = log
        self.windows = 0
        self.error = None
        self.open = []

    def run(self):
        try:
            self._run()
        except Exception as e:  # recorded; the run is then reported as not valid
            self.error = repr(e)
            self.log("nemesis error: %r" % e)
        finally:
            self.heal_all()

    def _sleep_until(self, deadline, ticking):
        while not self.stop_event.is_set() and self.ctx.history.now() < min(deadline, self.end_at):
            for nemesis, _ in ticking:
                nemesis.tick()
            self.ctx.restart_exited(self.log)
            time.sleep(TICK_S)

    def _run(self):
        rng = self.ctx.rng
        if not self.kinds:
            return
        for _ in range(100000):  # bounded; the time limit ends the loop
            self._sleep_until(self.ctx.history.now() + rng.uniform(*self.quiet_s), [])
            if self.stop_event.is_set() or self.ctx.history.now() >= self.end_at:
                return
            count = 2 if len(self.kinds) > 1 and rng.random() < 0.3 else 1
            chosen = rng.sample(self.kinds, count)
            window = self.windows
            self.windows += 1
            for kind in chosen:
                nemesis = KINDS[kind](self.ctx)
                t0 = self.ctx.history.now()
                detail = nemesis.start()
                if detail is None:
                    continue
                self.open.append((nemesis, window))
                self.ctx.history.record({"f": "nemesis", "kind": kind, "phase": "start", "window": window,
                                         "invoke": t0, "complete": self.ctx.history.now(), "type": "info",
                                         "detail": detail})
                self.log("t=%6.1fs nemesis %s start %s" % (t0, kind, detail))
            self._sleep_until(self.ctx.history.now() + rng.uniform(*self.window_s), list(self.open))
            self.heal_all()

    def heal_all(self):
        while self.open:
            nemesis, window = self.open.pop()
            t0 = self.ctx.history.now()
            detail = nemesis.heal()
            self.ctx.history.record({"f": "nemesis", "kind": nemesis.kind, "phase": "end", "window": window,
                                     "invoke": t0, "complete": self.ctx.history.now(), "type": "info",
                                     "detail": detail or {}})
            self.log("t=%6.1fs nemesis %s healed" % (t0, nemesis.kind))
