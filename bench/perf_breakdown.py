#!/usr/bin/python3
"""Where a raftlogd process spends its CPU: reads `perf script -F tid,comm,ip,sym,dso` output (samples
with call chains, from `perf record -g --call-graph dwarf`) and prints the share of samples

  - per thread, named by the outermost raftlog function on its stacks (flusher, Raft loop, ...),
  - per activity: the kernel work a sample is in (fsync/msync, page faults, futex wake-ups and sleeps,
    network syscalls, other syscalls), else the user-space owner of the innermost frame (gRPC and
    protobuf libraries, the Raft core, the store, the server layer, allocator, copies).

Used by bench/profile-raftlog.sh; the classification is heuristic by symbol name, documented below.
"""
import collections
import re
import sys

# Kernel activity, by the first matching frame name anywhere in the kernel part of the stack.
KERNEL_CLASSES = [
    ("fsync/msync (data to disk)", re.compile(r"__do_sys_msync|ext4_sync_file|__x64_sys_fdatasync|__x64_sys_fsync")),
    ("page faults (mapping)", re.compile(r"exc_page_fault|do_user_addr_fault|handle_mm_fault")),
    ("futex: sleep/wake-up", re.compile(r"futex")),
    ("network: send/recv/epoll", re.compile(r"sendmsg|recvmsg|sock_|tcp_|epoll|__sys_recvfrom|__sys_sendto")),
    ("scheduler (context switch)", re.compile(r"schedule|finish_task_switch|try_to_wake_up")),
    ("other syscalls", re.compile(r"do_syscall_64")),
]

USER_OWNERS = [
    ("user: malloc/free", re.compile(r"^(malloc|free|cfree|_int_malloc|_int_free|sysmalloc|malloc_consolidate|"
                                     r"unlink_chunk|operator new|operator delete|tcache|_int_realloc|realloc)")),
    ("user: memcpy/memset", re.compile(r"^__(memmove|memcpy|memset|memcmp)")),
    ("user: raft core", re.compile(r"raftlog::raft::")),
    ("user: store", re.compile(r"raftlog::store::")),
    ("user: server (node, services, transport)", re.compile(r"raftlog::server::|raftlog::proto|raftlog::v1|raftlog::peer")),
]
LIB_OWNERS = [
    ("user: gRPC/absl/protobuf libraries", re.compile(r"libgrpc|libgpr|libprotobuf|libabsl|libaddress_sorting|libupb|libre2|libssl|libcrypto")),
]


def samples(stream):
    header = None
    frames = []
    for line in stream:
        line = line.rstrip("\n")
        if not line.strip():
            if header is not None:
                yield header, frames
            header, frames = None, []
            continue
        if not line.startswith(("\t", " ")) and header is None:
            parts = line.split()
            header = (parts[0], parts[1] if len(parts) > 1 else "?")
            continue
        m = re.match(r"\s*([0-9a-f]+)\s+(.*?)\s+\((.*)\)$", line)
        if m:
            frames.append((m.group(2), m.group(3)))
    if header is not None:
        yield header, frames


def classify(frames):
    kernel = [sym for sym, dso in frames if "kernel" in dso]
    if kernel:
        for name, pattern in KERNEL_CLASSES:
            if any(pattern.search(sym) for sym in kernel):
                return name
        return "kernel: interrupts/other"
    for sym, dso in frames:  # innermost first
        for name, pattern in USER_OWNERS:
            if pattern.search(sym):
                return name
        for name, pattern in LIB_OWNERS:
            if pattern.search(dso):
                return name
        if "raftlogd" in dso:
            return "user: other raftlog code"
    return "user: other (libc, libstdc++)"


def thread_role(stacks):
    """The outermost raftlog (or gRPC) function most common on a thread's stacks."""
    roots = collections.Counter()
    for frames in stacks:
        root = None
        for sym, dso in reversed(frames):  # outermost first
            if "raftlog::" in sym or sym.startswith("grpc") or "grpc_core::" in sym:
                root = sym
                break
        roots[root or "?"] += 1
    name = roots.most_common(1)[0][0]
    name = re.sub(r"\(.*", "", name)
    return name[:70]


def main():
    by_tid = collections.defaultdict(list)
    for (comm, tid), frames in samples(sys.stdin):
        by_tid[tid].append(frames)
    total = sum(len(v) for v in by_tid.values())
    if total == 0:
        print("no samples", file=sys.stderr)
        return 1
    print(f"{total} samples")
    print("\nby thread (role = outermost raftlog/gRPC function on its stacks):")
    for tid, stacks in sorted(by_tid.items(), key=lambda kv: -len(kv[1]))[:12]:
        print(f"  {100 * len(stacks) / total:5.1f} %  tid {tid:>7}  {thread_role(stacks)}")
    activity = collections.Counter()
    per_role = collections.defaultdict(collections.Counter)
    for tid, stacks in by_tid.items():
        role = thread_role(stacks)
        for frames in stacks:
            c = classify(frames)
            activity[c] += 1
            per_role[role][c] += 1
    print("\nby activity:")
    for name, n in activity.most_common():
        print(f"  {100 * n / total:5.1f} %  {name}")
    print("\nactivity per thread role (share of all samples):")
    for role, counter in sorted(per_role.items(), key=lambda kv: -sum(kv[1].values())):
        share = sum(counter.values())
        if 100 * share / total < 2:
            continue
        print(f"  {100 * share / total:5.1f} %  {role}")
        for name, n in counter.most_common(6):
            print(f"           {100 * n / total:5.1f} %  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
