"""The raftlogd processes under test: start, kill -9, pause, resume, graceful stop, restart.

In namespace mode each node runs in its own network namespace (`ip netns exec` execs raftlogd, so the
child's pid is raftlogd's own) and listens on 10.77.0.<id>:7001. In loopback mode (no root) every
node listens on a free 127.0.0.1 port. With disk-full enabled (namespace mode only, it needs mount)
each node's data directory is a small tmpfs mounted with the source name "rlj-tmpfs".
Nodes the membership nemesis adds (membership.py) join during the run: each gets its own namespace
(or loopback port) and starts with --join; a node removed from the configuration is retired, and a
retired node is never started again (its id is never reused).
Every run is its own cluster: a random --cluster-id, and a random --peer-secret-file (mode 600) that
authenticates the plaintext peer streams (docs/security.md).
"""
import os
import secrets
import signal
import socket
import subprocess
import threading
import time

from . import netns

TMPFS_SOURCE = "rlj-tmpfs"
FAKETIME_LIBRARY_CANDIDATES = [
    "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1",
    "/usr/lib/aarch64-linux-gnu/faketime/libfaketimeMT.so.1",
]
NODE_PORT = 7001


def faketime_library():
    for path in FAKETIME_LIBRARY_CANDIDATES:
        if os.path.exists(path):
            return path
    return None


def free_loopback_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Node:
    def __init__(self, node_id, address, root_dir):
        self.id = node_id
        self.address = address
        self.dir = os.path.join(root_dir, "n%d" % node_id)
        self.data_dir = os.path.join(self.dir, "data")
        self.log_path = os.path.join(self.dir, "raftlogd.log")
        self.process = None
        self.paused = False
        self.faketime = None     # FAKETIME value while the clock nemesis holds this node
        self.exits = []          # (time, returncode, expected) of every exit seen
        self.expect_exit = False # set before the harness kills or stops it
        self.joined = False      # added during the run: starts with --join, its own address only
        self.extra_flags = []    # raftlogd flags for this node only (after the cluster's)


class Cluster:
    def __init__(self, raftlogd, root_dir, node_ids, network, tmpfs_size_bytes, extra_flags, history):
        self.raftlogd = raftlogd
        self.network = network  # netns.Network or None (loopback)
        self.history = history
        self.extra_flags = list(extra_flags)
        self.tmpfs_size_bytes = tmpfs_size_bytes
        self.lock = threading.RLock()
        self.mounted = []
        self.closed = False  # set by shutdown(): a nemesis healing late must not start a node again
        self.cluster_id = "jepsen-" + secrets.token_hex(8)
        self.peer_secret_file = os.path.join(root_dir, "peer-secret")
        os.makedirs(root_dir, exist_ok=True)
        # raftlogd refuses a secret file other users could read.
        descriptor = os.open(self.peer_secret_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w") as secret:
            secret.write(secrets.token_hex(32) + "\n")
        os.chmod(self.peer_secret_file, 0o600)  # a file left by an earlier run kept its mode
        self.root_dir = root_dir
        self.retired = set()  # removed from the configuration: stopped, never started again
        self.nodes = {}
        for node_id in node_ids:
            self.nodes[node_id] = Node(node_id, self._new_address(node_id), root_dir)
        try:
            for node in self.nodes.values():
                self._prepare_data_dir(node)
        except BaseException:
            self.unmount()  # the caller never gets this object, so it cannot clean up after it
            raise

    def _new_address(self, node_id):
        if self.network is not None:
            return "%s:%d" % (self.network.address(node_id), NODE_PORT)
        return "127.0.0.1:%d" % free_loopback_port()

    def _prepare_data_dir(self, node):
        os.makedirs(node.data_dir, exist_ok=True)
        if self.tmpfs_size_bytes:
            subprocess.run(["mount", "-t", "tmpfs", "-o", "size=%d" % self.tmpfs_size_bytes, TMPFS_SOURCE,
                            node.data_dir], check=True)
            self.mounted.append(node.data_dir)
            if self.network is not None:
                netns.register_run(self.network.tag, self.mounted)

    def add_node(self, node_id):
        """A new node that will join (not started): its namespace, address and empty data directory."""
        with self.lock:
            assert node_id not in self.nodes, node_id
            if self.network is not None:
                self.network.add_node(node_id)
            node = Node(node_id, self._new_address(node_id), self.root_dir)
            node.joined = True
            self._prepare_data_dir(node)
            # Replaced, not mutated: other threads iterate self.nodes without the lock.
            self.nodes = {**self.nodes, node_id: node}
            return node

    def retire(self, node_id):
        """The node left the configuration: stop it (SIGTERM) and never start it again."""
        with self.lock:
            self.retired.add(node_id)
            self.stop(node_id)

    def active_ids(self):
        """Every node not retired, running or not."""
        return [i for i in sorted(self.nodes) if i not in self.retired]

    def addresses(self):
        return {i: n.address for i, n in self.nodes.items()}

    def members(self):
        """The founders' --members list (joined nodes learn the configuration from the cluster)."""
        return ",".join("%d=%s" % (i, n.address) for i, n in sorted(self.nodes.items()) if not n.joined)

    def running(self, node_id):
        node = self.nodes[node_id]
        return node.process is not None and node.process.poll() is None

    def live_ids(self):
        return [i for i in sorted(self.nodes) if self.running(i) and not self.nodes[i].paused]

    def start(self, node_id, faketime=None):
        with self.lock:
            node = self.nodes[node_id]
            if self.closed or node_id in self.retired:
                return
            assert not self.running(node_id), "node %d already running" % node_id
            members = ["--members", self.members()]
            if node.joined:  # DIR/JOIN decides after its first start; --join is then ignored
                seeds = ",".join(self.nodes[i].address for i in self.active_ids() if i != node_id)
                members = ["--members", "%d=%s" % (node_id, node.address), "--join", seeds]
            args = [self.raftlogd, "--id", str(node_id)] + members + [
                    "--data-dir", node.data_dir, "--cluster-id", self.cluster_id,
                    "--peer-secret-file", self.peer_secret_file] + self.extra_flags + node.extra_flags
            if self.network is not None:
                args = self.network.exec_prefix(node_id) + args
            env = dict(os.environ)
            node.faketime = faketime
            if faketime is not None:
                env["LD_PRELOAD"] = faketime_library()
                env["FAKETIME"] = faketime["spec"]
                if not faketime.get("monotonic", False):
                    env["FAKETIME_DONT_FAKE_MONOTONIC"] = "1"
            log = open(node.log_path, "a")
            log.write("=== harness: starting node %d at t=%.3f %s\n" % (
                node_id, self.history.now(), "faketime=" + faketime["spec"] if faketime else ""))
            log.flush()
            # Own session: a Ctrl-C in the terminal reaches the harness, which stops the nodes itself.
            node.process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=env,
                                            start_new_session=True)
            log.close()
            node.paused = False
            node.expect_exit = False

    def kill(self, node_id):
        with self.lock:
            node = self.nodes[node_id]
            if not self.running(node_id):
                return False
            node.expect_exit = True
            node.process.send_signal(signal.SIGKILL)
            node.process.wait(timeout=10)
            node.paused = False
            self._note_exit(node)
            return True

    def pause(self, node_id):
        with self.lock:
            node = self.nodes[node_id]
            if self.running(node_id) and not node.paused:
                node.process.send_signal(signal.SIGSTOP)
                node.paused = True
                return True
            return False

    def resume(self, node_id):
        with self.lock:
            node = self.nodes[node_id]
            if self.running(node_id) and node.paused:
                node.process.send_signal(signal.SIGCONT)
            node.paused = False

    def stop(self, node_id, timeout_s=8.0):
        """SIGTERM (graceful), SIGKILL after timeout_s. Returns the exit code or None."""
        with self.lock:
            node = self.nodes[node_id]
            if not self.running(node_id):
                return None
            node.expect_exit = True
            node.process.send_signal(signal.SIGCONT)
            node.paused = False
            node.process.send_signal(signal.SIGTERM)
            try:
                node.process.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                node.process.kill()
                node.process.wait(timeout=10)
            self._note_exit(node)
            return node.process.returncode

    def _note_exit(self, node):
        if node.exits and node.exits[-1][3] is node.process:
            return
        node.exits.append((self.history.now(), node.process.returncode, node.expect_exit, node.process))
        self.history.record({"f": "node-exit", "node": node.id, "invoke": self.history.now(),
                             "complete": self.history.now(), "type": "info",
                             "returncode": node.process.returncode, "expected": node.expect_exit})

    def reap(self):
        """Records nodes that exited by themselves (e.g. a follower whose disk filled). Returns their ids."""
        died = []
        with self.lock:
            for node in self.nodes.values():
                if node.process is not None and node.process.poll() is not None:
                    if not node.exits or node.exits[-1][3] is not node.process:
                        self._note_exit(node)
                        died.append(node.id)
        return died

    def ensure_all_running(self):
        """Resumes paused nodes and restarts dead ones (without faketime)."""
        with self.lock:
            for node_id in sorted(self.nodes):
                if self.running(node_id):
                    self.resume(node_id)
                else:
                    self.start(node_id)

    def unexpected_exits(self):
        """Exits the harness did not cause: (node, returncode, time)."""
        out = []
        for node in self.nodes.values():
            for when, code, expected, _ in node.exits:
                if not expected:
                    out.append({"node": node.id, "returncode": code, "time": round(when, 3)})
        return out

    def shutdown(self, timeout_s=5.0):
        """Stops every node at once (SIGTERM, so their logs end cleanly; SIGKILL after timeout_s),
        then unmounts their data directories."""
        with self.lock:
            self.closed = True
            live = [n for n in self.nodes.values() if n.process is not None and n.process.poll() is None]
            for node in live:
                node.expect_exit = True
                node.process.send_signal(signal.SIGCONT)
                node.process.send_signal(signal.SIGTERM)
                node.paused = False
            deadline = time.monotonic() + timeout_s
            for node in live:
                try:
                    node.process.wait(timeout=max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    node.process.kill()
                    node.process.wait(timeout=10)
                self._note_exit(node)
        self.unmount()

    def unmount(self):
        for path in reversed(self.mounted):
            subprocess.run(["umount", "-l", path], check=False, stderr=subprocess.DEVNULL)
        self.mounted.clear()


def cleanup_mounts(under="/"):
    """Unmounts the harness's tmpfs data directories below `under`, except those of live runs."""
    removed = []
    under = os.path.join(os.path.abspath(under), "")
    in_use = {path for state in netns.live_runs().values() for path in state.get("mounts", [])}
    with open("/proc/mounts") as f:
        for line in f:
            fields = line.split()
            if fields and fields[0] == TMPFS_SOURCE and os.path.join(fields[1], "").startswith(under) \
                    and fields[1] not in in_use:
                subprocess.run(["umount", "-l", fields[1]], check=False)
                removed.append("mount " + fields[1])
    return removed
