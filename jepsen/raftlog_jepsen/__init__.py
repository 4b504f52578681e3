"""raftlog's Jepsen-style fault-injection harness (see docs/jepsen.md)."""
