"""Network namespaces, a bridge and veth pairs for the nodes, and iptables rules inside them.

Layout (tag = a few hex digits unique to the run; k = the first 10.77.k.0/24 no bridge in the root
namespace uses yet, so concurrent runs do not collide):
  bridge  rlj<tag>br   in the root namespace, address 10.77.k.254/24 (the clients' side)
  netns   rlj<tag>n<i> one per node; interface eth0 = 10.77.k.<i>/24, lo up
  veth    rlj<tag>h<i> the root-namespace end of node i's pair, enslaved to the bridge
Partitions and packet loss are iptables rules in the *nodes'* namespaces that match only node
addresses, so the clients (root namespace, 10.77.0.254) always reach every live node: faults cut
nodes off from each other, as in a Jepsen test where the control node keeps talking to every node.
Everything created here is named with the prefix "rlj" so `jepsen/run --cleanup` can find leftovers.
"""
import json
import os
import re
import subprocess

PREFIX = "rlj"
SUBNET_PREFIX = "10.77"
MAX_SUBNETS = 250


def free_subnet():
    """The first 10.77.k (k < MAX_SUBNETS) that no interface of the root namespace has an address in."""
    addresses = run(["ip", "-o", "-4", "addr", "show"], check=False).stdout
    used = set(re.findall(r"inet %s\.(\d+)\." % re.escape(SUBNET_PREFIX), addresses))
    for k in range(MAX_SUBNETS):
        if str(k) not in used:
            return "%s.%d" % (SUBNET_PREFIX, k)
    raise RuntimeError("every 10.77.k.0/24 subnet is in use: run `jepsen/run --cleanup`")


def run(args, check=True):
    result = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if check and result.returncode != 0:
        raise RuntimeError("%s failed: %s" % (" ".join(args), result.stderr.strip()))
    return result


def available():
    """(True, "") when this process can create namespaces and iptables rules, else (False, why)."""
    if os.geteuid() != 0:
        return False, "not root"
    for tool in ("ip", "iptables"):
        if run(["which", tool], check=False).returncode != 0:
            return False, tool + " not installed"
    probe = PREFIX + "probe%d" % os.getpid()
    made = run(["ip", "netns", "add", probe], check=False)
    if made.returncode != 0:
        return False, "ip netns add failed: " + made.stderr.strip()
    rules = run(["ip", "netns", "exec", probe, "iptables", "-S"], check=False)
    run(["ip", "netns", "del", probe], check=False)
    if rules.returncode != 0:
        return False, "iptables inside a namespace failed: " + rules.stderr.strip()
    return True, ""


class Network:
    def __init__(self, tag, node_ids):
        assert re.fullmatch(r"[0-9a-f]{1,6}", tag), tag
        assert len(node_ids) <= 9 and max(node_ids) <= 250
        self.tag = tag
        self.node_ids = list(node_ids)
        self.bridge = "%s%sbr" % (PREFIX, tag)
        self.created_namespaces = []
        self.created_links = []
        self.forward_rule_bridges = []
        self.subnet = free_subnet()

    def namespace(self, node):
        return "%s%sn%d" % (PREFIX, self.tag, node)

    def address(self, node):
        return "%s.%d" % (self.subnet, node)

    def exec_prefix(self, node):
        return ["ip", "netns", "exec", self.namespace(node)]

    def create(self):
        register_run(self.tag)
        run(["ip", "link", "add", self.bridge, "type", "bridge"])
        self.created_links.append(self.bridge)
        # With br_netfilter loaded and net.bridge.bridge-nf-call-iptables=1, bridged frames traverse
        # the root namespace's FORWARD chain, whose policy a running dockerd sets to DROP: no node
        # then reached another and no leader was ever elected. The bridge's own nf_call_iptables
        # switch cannot turn that off (the kernel ORs it with the sysctl), so accept the bridge's
        # frames first in FORWARD; removed by destroy() or by cleanup_leftovers() (the rule names
        # the bridge).
        run(["iptables", "-w"] + forward_rule_args("-I", self.bridge))
        self.forward_rule_bridges.append(self.bridge)
        run(["ip", "addr", "add", self.subnet + ".254/24", "dev", self.bridge])
        run(["ip", "link", "set", self.bridge, "up"])
        for node in self.node_ids:
            self._create_node(node)

    def add_node(self, node):
        """A namespace for a node that joins during the run (the membership nemesis)."""
        assert 1 <= node <= 250 and node not in self.node_ids, node
        self._create_node(node)
        self.node_ids = self.node_ids + [node]  # replaced, not mutated: heal() may iterate it meanwhile

    def _create_node(self, node):
        ns = self.namespace(node)
        host_end = "%s%sh%d" % (PREFIX, self.tag, node)
        peer_end = "%s%sp%d" % (PREFIX, self.tag, node)
        run(["ip", "netns", "add", ns])
        self.created_namespaces.append(ns)
        run(["ip", "link", "add", host_end, "type", "veth", "peer", "name", peer_end])
        self.created_links.append(host_end)
        run(["ip", "link", "set", peer_end, "netns", ns])
        run(["ip", "link", "set", host_end, "master", self.bridge])
        run(["ip", "link", "set", host_end, "up"])
        run(self.exec_prefix(node) + ["ip", "link", "set", peer_end, "name", "eth0"])
        run(self.exec_prefix(node) + ["ip", "addr", "add", self.address(node) + "/24", "dev", "eth0"])
        run(self.exec_prefix(node) + ["ip", "link", "set", "eth0", "up"])
        run(self.exec_prefix(node) + ["ip", "link", "set", "lo", "up"])

    # --- faults ---------------------------------------------------------------------------------

    def _iptables(self, node, args, check=True):
        return run(self.exec_prefix(node) + ["iptables", "-w"] + args, check=check)

    def cut(self, node, peer):
        """Drops every packet between `node` and `peer`, in both directions, on node's side."""
        self._iptables(node, ["-A", "INPUT", "-s", self.address(peer), "-j", "DROP"])
        self._iptables(node, ["-A", "OUTPUT", "-d", self.address(peer), "-j", "DROP"])

    def lose(self, node, peer, probability):
        """Drops packets from peer to node at random with `probability` (iptables statistic)."""
        self._iptables(node, ["-A", "INPUT", "-s", self.address(peer), "-m", "statistic", "--mode", "random",
                              "--probability", "%.3f" % probability, "-j", "DROP"])

    def heal(self):
        for node in self.node_ids:
            self._iptables(node, ["-F", "INPUT"], check=False)
            self._iptables(node, ["-F", "OUTPUT"], check=False)

    def destroy(self):
        for ns in reversed(self.created_namespaces):
            kill_namespace_processes(ns)
            run(["ip", "netns", "del", ns], check=False)
        for link in reversed(self.created_links):
            run(["ip", "link", "del", link], check=False)  # deleting one veth end removes both
        for bridge in self.forward_rule_bridges:
            run(["iptables", "-w"] + forward_rule_args("-D", bridge), check=False)
        self.forward_rule_bridges.clear()
        self.created_namespaces.clear()
        self.created_links.clear()
        unregister_run(self.tag)


def forward_rule_args(action, bridge):
    """iptables arguments that insert (-I) or delete (-D) the root FORWARD rule for `bridge`."""
    return [action, "FORWARD", "-i", bridge, "-o", bridge, "-j", "ACCEPT"]


def kill_namespace_processes(ns):
    pids = run(["ip", "netns", "pids", ns], check=False).stdout.split()
    for pid in pids:
        try:
            os.kill(int(pid), 9)
        except (ProcessLookupError, ValueError):
            pass


# Each run that creates namespaces registers itself here (tag -> harness pid and its mounts), so
# `--cleanup` removes only what belongs to runs whose harness is gone, never a run still going.
STATE_DIR = "/run/raftlog-jepsen"


def register_run(tag, mounts=()):
    os.makedirs(STATE_DIR, exist_ok=True)
    with open(os.path.join(STATE_DIR, tag + ".json"), "w") as f:
        json.dump({"pid": os.getpid(), "mounts": list(mounts)}, f)


def unregister_run(tag):
    try:
        os.unlink(os.path.join(STATE_DIR, tag + ".json"))
    except FileNotFoundError:
        pass


def live_runs():
    """{tag: state} of registered runs whose harness process is still alive."""
    live = {}
    if not os.path.isdir(STATE_DIR):
        return live
    for name in os.listdir(STATE_DIR):
        try:
            with open(os.path.join(STATE_DIR, name)) as f:
                state = json.load(f)
            os.kill(state["pid"], 0)
            live[name[: -len(".json")]] = state
        except (OSError, ValueError, KeyError):
            continue
    return live


def tag_of(name):
    """The run tag inside a harness name: rlj<tag>br, rlj<tag>n<i>, rlj<tag>h<i>, rlj<tag>p<i>. The
    tag is hex, so it ends where "br" or the last n/h/p starts (node ids above 9 joined during a run)."""
    m = re.fullmatch(PREFIX + r"([0-9a-f]+)(?:br|[nhp]\d+)", name)
    return m.group(1) if m else name[len(PREFIX):-2]


def cleanup_leftovers():
    """Removes namespaces and links named with the harness prefix whose run is no longer alive."""
    removed = []
    if os.geteuid() != 0:
        return removed
    live = live_runs()
    for line in run(["ip", "netns", "list"], check=False).stdout.splitlines():
        ns = line.split()[0] if line.split() else ""
        if ns.startswith(PREFIX) and tag_of(ns) not in live:
            kill_namespace_processes(ns)
            run(["ip", "netns", "del", ns], check=False)
            removed.append("netns " + ns)
    for line in run(["ip", "-o", "link", "show"], check=False).stdout.splitlines():
        m = re.match(r"\d+: ([^:@]+)", line)
        if m and m.group(1).startswith(PREFIX) and tag_of(m.group(1)) not in live:
            run(["ip", "link", "del", m.group(1)], check=False)
            removed.append("link " + m.group(1))
    for line in run(["iptables", "-w", "-S", "FORWARD"], check=False).stdout.splitlines():
        m = re.match(r"-A FORWARD -i (%s\w+br) -o \1 -j ACCEPT$" % PREFIX, line)
        if m and tag_of(m.group(1)) not in live:
            run(["iptables", "-w"] + forward_rule_args("-D", m.group(1)), check=False)
            removed.append("forward rule " + m.group(1))
    if os.path.isdir(STATE_DIR):
        for name in os.listdir(STATE_DIR):
            if name[: -len(".json")] not in live:
                unregister_run(name[: -len(".json")])
    return removed
