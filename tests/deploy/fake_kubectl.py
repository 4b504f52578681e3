#!/usr/bin/env python3
"""A stand-in for kubectl, enough for deploy/k8s/raftlog-members (tests/deploy/k8s_members_test.sh).

State lives in $FAKE_K8S_DIR/state.json: the raftlog-members ConfigMap, the StatefulSet's replicas,
pods, claims (a directory each, the pod's volume) and the cluster's members. Creating a pod runs the
real deploy/docker/k8s-start.sh with that volume, the ConfigMap's values in its environment and
stand-ins for `hostname` and `raftlog-entrypoint`, and records the node id it started; a pod whose
start script exits non-zero is left in CrashLoopBackOff. `exec ... raftlogctl members ...` acts on
the member list and refuses what the real leader refuses (ALREADY_A_MEMBER, ADDRESS_IN_USE,
NOT_A_MEMBER), and also an add whose id is not the one the pod at that address started with."""
import json
import os
import subprocess
import sys

STATE_DIR = os.environ["FAKE_K8S_DIR"]
STATE = os.path.join(STATE_DIR, "state.json")
START_SCRIPT = os.environ["K8S_START_SCRIPT"]
NAMESPACE = "raftlog"
STS = "raftlog"
SERVICE = "raftlog-headless"
DOMAIN = "%s.%s.svc.cluster.local" % (SERVICE, NAMESPACE)


def load():
    with open(STATE) as f:
        return json.load(f)


def save(state):
    with open(STATE + ".tmp", "w") as f:
        json.dump(state, f, indent=1, sort_keys=True)
    os.replace(STATE + ".tmp", STATE)


def address(ordinal):
    return "%s-%d.%s:7001" % (STS, ordinal, DOMAIN)


def create_pod(state, ordinal):
    """The StatefulSet controller: a claim if there is none, then the container's start."""
    key = str(ordinal)
    volume = os.path.join(STATE_DIR, "pvc-%d-%d" % (ordinal, state["next_volume"]))
    if key not in state["pvcs"]:
        state["next_volume"] += 1
        os.makedirs(volume)
        state["pvcs"][key] = volume
    volume = state["pvcs"][key]
    fake_bin = os.path.join(STATE_DIR, "bin-%d" % ordinal)
    os.makedirs(fake_bin, exist_ok=True)
    with open(os.path.join(fake_bin, "hostname"), "w") as f:
        f.write("#!/bin/sh\necho %s-%d\n" % (STS, ordinal))
    with open(os.path.join(fake_bin, "raftlog-entrypoint"), "w") as f:
        f.write('#!/bin/sh\necho "id=$RAFTLOG_ID $*"\n')
    for name in ("hostname", "raftlog-entrypoint"):
        os.chmod(os.path.join(fake_bin, name), 0o755)
    data = state["configmap"]
    env = {"PATH": fake_bin + ":/usr/bin:/bin", "RAFTLOG_DATA_DIR": volume, "RAFTLOG_PEER_DOMAIN": DOMAIN,
           "RAFTLOG_BOOTSTRAP_ORDINALS": data["bootstrap-ordinals"], "RAFTLOG_JOIN_IDS": data["join-ids"],
           "RAFTLOG_JOIN_SEEDS": data["join-seeds"], "RAFTLOG_NEXT_ID": data["next-id"]}
    done = subprocess.run(["sh", START_SCRIPT], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    pod = {"phase": "Running", "output": done.stdout.strip()}
    if done.returncode != 0:
        pod = {"phase": "CrashLoopBackOff", "output": done.stdout.strip()}
    else:
        pod["node_id"] = int(done.stdout.split()[0].split("=")[1])
        # A node whose volume is a founder's and whose id is listed as a founder: already a member.
    state["pods"][key] = pod
    state["events"].append("pod %d started: %s" % (ordinal, pod["output"]))


def reconcile_statefulset(state):
    for key in list(state["pods"]):
        if int(key) >= state["replicas"]:
            del state["pods"][key]
    for ordinal in range(state["replicas"]):
        if str(ordinal) not in state["pods"]:
            create_pod(state, ordinal)


def raftlogctl(state, args):
    args = args[:args.index("--endpoints")] if "--endpoints" in args else args
    while "--timeout-ms" in args:
        i = args.index("--timeout-ms")
        args = args[:i] + args[i + 2:]
    members = state["members"]
    if args[:2] == ["members", "list"]:
        print("configuration entry 9 (committed), leader 1, term 2, commit 20")
        # As raftlogctl prints them: the ids a new node must not take.
        print("bootstrap voters: 1, 2, 3")
        retired = sorted(state["retired_ids"])
        print("retired ids: " + (", ".join(str(i) for i in retired) if retired else "none"))
        print("ID\tADDRESS\tROLE\tMATCH\tLAG\tCAUGHT_UP")
        for m in members:
            print("%d\t%s\tvoter\t20\t0\tyes" % (m["id"], m["address"]))
        return 0
    if args[:2] == ["members", "add"]:
        node_id, addr = int(args[2]), args[3]
        if any(m["id"] == node_id for m in members):
            print("members add: ALREADY_A_MEMBER", file=sys.stderr)
            return 1
        if any(m["address"] == addr for m in members):
            print("members add: ADDRESS_IN_USE", file=sys.stderr)
            return 1
        pod = next((p for k, p in state["pods"].items() if address(int(k)) == addr), None)
        if pod is None or pod.get("node_id") != node_id:
            print("members add: LEARNER_BEHIND (no node %d at %s: %s)" % (node_id, addr, pod), file=sys.stderr)
            return 1
        if node_id in state["retired_ids"]:
            print("members add: id %d was a member before (the fake forbids reuse)" % node_id, file=sys.stderr)
            return 1
        members.append({"id": node_id, "address": addr})
        print("node %d added" % node_id)
        return 0
    if args[:2] == ["members", "remove"]:
        node_id = int(args[2])
        if not any(m["id"] == node_id for m in members):
            print("members remove: NOT_A_MEMBER", file=sys.stderr)
            return 1
        state["members"] = [m for m in members if m["id"] != node_id]
        state["retired_ids"].append(node_id)
        print("node %d removed" % node_id)
        return 0
    print("fake raftlogctl: unsupported %s" % args, file=sys.stderr)
    return 2


def go_template(obj, template):
    if template.startswith('{{index .data "'):
        return obj["data"][template[len('{{index .data "'):-len('"}}')]]
    if template.startswith("{{range"):
        return "".join("%s: %s\n" % (k, v) for k, v in sorted(obj["data"].items()))
    path = template.strip("{}").strip(".").split(".")
    for part in path:
        obj = obj[part]
    return str(obj)


def main(argv):
    assert argv[:2] == ["-n", NAMESPACE], argv
    args = argv[2:]
    state = load()
    state["events"].append("kubectl " + " ".join(args))
    verb = args[0]
    code = 0
    out = ""
    if verb == "get":
        kind, name = args[1], args[2]
        template = args[args.index("-o") + 1][len("go-template="):] if "-o" in args else None
        obj = None
        if kind == "configmap" and name == "raftlog-members":
            obj = {"data": state["configmap"]}
        elif kind == "statefulset" and name == STS:
            obj = {"spec": {"replicas": state["replicas"], "serviceName": SERVICE}}
        elif kind == "pod" and name.startswith(STS + "-") and name[len(STS) + 1:] in state["pods"]:
            obj = {"status": {"phase": state["pods"][name[len(STS) + 1:]]["phase"]}}
        elif kind == "pvc" and name.startswith("data-%s-" % STS) and name[len(STS) + 6:] in state["pvcs"]:
            obj = {}
        if obj is None:
            print('Error from server (NotFound): %s "%s" not found' % (kind, name), file=sys.stderr)
            code = 1
        elif template:
            out = go_template(obj, template)
    elif verb == "patch":
        assert args[1:3] == ["configmap", "raftlog-members"], args
        state["configmap"].update(json.loads(args[args.index("-p") + 1])["data"])
    elif verb == "scale":
        state["replicas"] = int(args[3].split("=")[1])
        reconcile_statefulset(state)
    elif verb == "wait":
        pass  # deletions here are immediate
    elif verb == "delete":
        kind, name = args[1], args[2]
        if kind == "pvc":
            volume = state["pvcs"].pop(name[len(STS) + 6:], None)
            if volume:
                subprocess.run(["rm", "-rf", volume], check=True)
        elif kind == "pod":
            state["pods"].pop(name[len(STS) + 1:], None)
            reconcile_statefulset(state)
    elif verb == "exec":
        pod = args[1]
        rest = args[args.index("--") + 1:]
        assert state["pods"][pod[len(STS) + 1:]]["phase"] == "Running", pod
        assert rest[0] == "raftlogctl", rest
        code = raftlogctl(state, rest[1:])
    else:
        print("fake kubectl: unsupported %s" % args, file=sys.stderr)
        code = 2
    save(state)
    if out:
        sys.stdout.write(out)
    return code


if __name__ == "__main__":
    if sys.argv[1:2] == ["--init"]:
        state = {"configmap": json.loads(sys.argv[2]), "replicas": 3, "pods": {}, "pvcs": {}, "members": [],
                 "retired_ids": [], "next_volume": 0, "events": []}
        reconcile_statefulset(state)
        state["members"] = [{"id": p["node_id"], "address": address(int(k))} for k, p in sorted(state["pods"].items())]
        save(state)
        sys.exit(0)
    sys.exit(main(sys.argv[1:]))
