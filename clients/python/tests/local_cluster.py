"""A local cluster of real raftlogd processes on 127.0.0.1 for the Python client's tests: free ports,
data in a temporary directory, kill -9 / restart of single nodes. The same command line as
src/testing/local_cluster.cpp (small segments, a peer secret, watermarks that ignore the shared
disk). The binary comes from $RAFTLOGD (set by clients/python/CMakeLists.txt).
"""
import os
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time

import raftlog

START_TIMEOUT_S = 20.0


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(condition, timeout_s, what, interval_s=0.02):
    """Polls condition() until it returns a true value (returned) or timeout_s passes (AssertionError)."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError("timed out after %.1f s waiting for %s" % (timeout_s, what))
        time.sleep(interval_s)


class LocalCluster:
    def __init__(self, nodes=3, extra_flags=()):
        self.raftlogd = os.environ.get("RAFTLOGD", "")
        if not os.access(self.raftlogd, os.X_OK):
            raise RuntimeError("RAFTLOGD=%r is not an executable raftlogd" % self.raftlogd)
        self.root = tempfile.mkdtemp(prefix="raftlog-python-")
        self.ports = {node: free_port() for node in range(1, nodes + 1)}
        self.extra_flags = list(extra_flags)
        self.processes = {}
        self.secret_file = os.path.join(self.root, "peer-secret")
        with open(os.open(self.secret_file, os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
            f.write(secrets.token_hex(16) + "\n")
        self.cluster_id = "python-" + secrets.token_hex(4)

    def address(self, node):
        return "127.0.0.1:%d" % self.ports[node]

    @property
    def endpoints(self):
        return [self.address(node) for node in sorted(self.ports)]

    def node_of(self, address):
        return next(node for node in self.ports if self.address(node) == address)

    def start(self, node):
        assert node not in self.processes, "node %d already running" % node
        members = ",".join("%d=%s" % (n, self.address(n)) for n in sorted(self.ports))
        data_dir = os.path.join(self.root, "n%d" % node)
        args = [self.raftlogd, "--id", str(node), "--members", members, "--data-dir", data_dir,
                "--cluster-id", self.cluster_id, "--peer-secret-file", self.secret_file,
                "--segment-size", str(1 << 20), "--max-entry-size", str(16 << 10),
                "--disk-high-watermark=1.0", "--disk-low-watermark=0.99"] + self.extra_flags
        if len(self.ports) == 1 and not os.path.exists(data_dir):
            # A one-node cluster is founded only when told (docs/operations.md, "Starting and
            # stopping a node"); later starts find its directory and need nothing.
            args.append("--bootstrap-new-cluster")
        log = open(os.path.join(self.root, "n%d.log" % node), "ab")
        self.processes[node] = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        log.close()

    def start_all(self):
        for node in sorted(self.ports):
            self.start(node)

    def kill(self, node):
        """kill -9, and waits until the process is gone."""
        process = self.processes.pop(node)
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=10)

    def stop_all(self):
        for node in list(self.processes):
            process = self.processes.pop(node)
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)

    def close(self):
        self.stop_all()
        shutil.rmtree(self.root, ignore_errors=True)

    def log_tail(self, node, lines=20):
        try:
            with open(os.path.join(self.root, "n%d.log" % node), "rb") as f:
                return b"\n".join(f.read().splitlines()[-lines:]).decode("utf-8", "replace")
        except OSError:
            return ""

    def leader(self, client, timeout_s=START_TIMEOUT_S, among=None):
        """The node id every running node (or `among`) agrees leads, once there is one."""
        nodes = sorted(among or self.processes)

        def agreed():
            leaders = set()
            for node in nodes:
                try:
                    status = client.status(self.address(node), timeout=0.5)
                except raftlog.RaftlogError:
                    return None
                leaders.add(status.leader_id)
            leader = leaders.pop() if len(leaders) == 1 else 0
            return leader if leader in nodes else None

        return wait_until(agreed, timeout_s, "a leader that nodes %s agree on" % nodes)
