"""Generates the Python gRPC stubs for proto/raftlog/v1 (client.proto, error_model.proto,
topics.proto, groups.proto) at run time, and makes the repository's Python client package (clients/python,
`import raftlog`) importable with them: the harness reads error details with that package's
decoding (raftlog.errors) and retries by its rules (raftlog._retry), the one implementation of
docs/client-protocol.md in Python.

Generated code is never checked in: it is produced with python3-grpc-tools into a cache directory
(keyed by the protos' content) and imported from there, so the stubs always match the protos.
The raftlog package joins that directory to its own (pkgutil.extend_path in its __init__), so the
directory is put on sys.path before the package is first imported.
"""
import hashlib
import importlib
import os
import subprocess
import sys
import tempfile

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROTO_ROOT = os.path.join(REPO_ROOT, "proto")
CLIENT_PACKAGE_ROOT = os.path.join(REPO_ROOT, "clients", "python")
PROTOS = [os.path.join("raftlog", "v1", "client.proto"), os.path.join("raftlog", "v1", "error_model.proto"),
          os.path.join("raftlog", "v1", "topics.proto"), os.path.join("raftlog", "v1", "groups.proto")]


def default_cache_root():
    """Where stubs go when the caller names no directory (per user: runs as root and tests as a user)."""
    return os.path.join(tempfile.gettempdir(), "raftlog-jepsen-stubs-%d" % os.getuid())


def generate(cache_root):
    """Generates (once per proto content) and imports the stubs; returns (client_pb2, client_pb2_grpc).
    Afterwards `import raftlog` (clients/python) works, over these stubs."""
    digest = hashlib.sha256()
    for proto in PROTOS:
        with open(os.path.join(PROTO_ROOT, proto), "rb") as f:
            digest.update(f.read())
    out_dir = os.path.join(cache_root, "pystubs-" + digest.hexdigest()[:16])
    marker = os.path.join(out_dir, "raftlog", "v1", "topics_pb2_grpc.py")
    if not os.path.exists(marker):
        tmp_dir = out_dir + ".tmp%d" % os.getpid()
        os.makedirs(tmp_dir, exist_ok=True)
        # The Debian interpreter (sys.executable is /usr/bin/python3 when run through jepsen/run)
        # has python3-grpc-tools; a pyenv interpreter would not.
        subprocess.run([sys.executable, "-m", "grpc_tools.protoc", "-I", PROTO_ROOT,
                        "--python_out=" + tmp_dir, "--grpc_python_out=" + tmp_dir] + PROTOS,
                       check=True)
        try:
            os.rename(tmp_dir, out_dir)
        except OSError:  # another run generated it at the same moment
            subprocess.run(["rm", "-rf", tmp_dir], check=False)
    # A second call (another cache root, the same protos) finds the package imported already.
    if "raftlog" not in sys.modules:
        for path in (out_dir, CLIENT_PACKAGE_ROOT):
            if path not in sys.path:
                sys.path.insert(0, path)  # CLIENT_PACKAGE_ROOT ends up first: the regular package
    importlib.import_module("raftlog")
    pb2 = importlib.import_module("raftlog.v1.client_pb2")
    pb2_grpc = importlib.import_module("raftlog.v1.client_pb2_grpc")
    return pb2, pb2_grpc


def topics_modules():
    """(topics_pb2, topics_pb2_grpc) for raftlog.v1.Topics; generate() must have run."""
    return (importlib.import_module("raftlog.v1.topics_pb2"),
            importlib.import_module("raftlog.v1.topics_pb2_grpc"))
