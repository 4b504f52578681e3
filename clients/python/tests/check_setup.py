"""The installation path of the package: `setup.py build` into a temporary directory generates the
modules from proto/, and the package imports from there alone (not from the source or build tree) and
reaches the generated stubs. Exit 77 (skip) without python3-grpcio, python3-protobuf or python3-grpc-tools."""
import os
import subprocess
import sys
import tempfile

try:
    import grpc  # noqa: F401
    import google.protobuf  # noqa: F401
    import grpc_tools  # noqa: F401
except ImportError as missing:
    print("skipping: %s" % missing)
    sys.exit(77)

PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHECK = """
import os, sys, raftlog
from raftlog.v1 import client_pb2, error_model_pb2
assert raftlog.__file__.startswith(sys.argv[1]), raftlog.__file__
assert client_pb2.__file__.startswith(sys.argv[1]), client_pb2.__file__
client = raftlog.Client("127.0.0.1:1")
assert client.next_sequence == 1
print("ok", raftlog.__version__)
"""

with tempfile.TemporaryDirectory(prefix="raftlog-setup-") as tmp:
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    env.pop("PYTHONPATH", None)
    subprocess.run([sys.executable, "setup.py", "-q", "build", "--build-base", os.path.join(tmp, "build")],
                   cwd=PACKAGE_DIR, env=env, check=True)
    lib = os.path.join(tmp, "build", "lib")
    env["PYTHONPATH"] = lib
    result = subprocess.run([sys.executable, "-c", CHECK, lib], cwd=tmp, env=env, capture_output=True, text=True)
    print(result.stdout, result.stderr)
    if result.returncode != 0 or not result.stdout.startswith("ok"):
        sys.exit(1)
    for leftover in ("build", "raftlog.egg-info"):  # the source tree stays clean
        if os.path.exists(os.path.join(PACKAGE_DIR, leftover)):
            print("setup.py left %s in %s" % (leftover, PACKAGE_DIR))
            sys.exit(1)
