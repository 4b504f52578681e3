"""Generates the Python gRPC stubs for proto/raftlog/v1/client.proto at run time.

Generated code is never checked in: it is produced with python3-grpc-tools into a cache directory
(keyed by the proto's content) and imported from there, so the stubs always match the proto.
"""
import hashlib
import importlib
import os
import subprocess
import sys

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROTO_ROOT = os.path.join(REPO_ROOT, "proto")
CLIENT_PROTO = os.path.join("raftlog", "v1", "client.proto")


def generate(cache_root):
    """Generates (once per proto content) and imports the stubs; returns (client_pb2, client_pb2_grpc)."""
    with open(os.path.join(PROTO_ROOT, CLIENT_PROTO), "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()[:16]
    out_dir = os.path.join(cache_root, "pystubs-" + digest)
    marker = os.path.join(out_dir, "raftlog", "v1", "client_pb2_grpc.py")
    if not os.path.exists(marker):
        tmp_dir = out_dir + ".tmp%d" % os.getpid()
        os.makedirs(tmp_dir, exist_ok=True)
        # The Debian interpreter (sys.executable is /usr/bin/python3 when run through jepsen/run)
        # has python3-grpc-tools; a pyenv interpreter would not.
        subprocess.run([sys.executable, "-m", "grpc_tools.protoc", "-I", PROTO_ROOT,
                        "--python_out=" + tmp_dir, "--grpc_python_out=" + tmp_dir, CLIENT_PROTO],
                       check=True)
        try:
            os.rename(tmp_dir, out_dir)
        except OSError:  # another run generated it at the same moment
            subprocess.run(["rm", "-rf", tmp_dir], check=False)
    if out_dir not in sys.path:
        sys.path.insert(0, out_dir)
    pb2 = importlib.import_module("raftlog.v1.client_pb2")
    pb2_grpc = importlib.import_module("raftlog.v1.client_pb2_grpc")
    return pb2, pb2_grpc
