"""Installs the raftlog Python client. The modules raftlog/v1/*_pb2*.py are generated from the
repository's proto/ directory (or $RAFTLOG_PROTO_DIR) while building, by python3-grpc-tools'
grpc_tools.protoc; they are never committed.

    cd clients/python && python3 setup.py build && python3 setup.py install --user
    # or: pip install ./clients/python   (from the repository root)
"""
import os
import subprocess
import sys

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
PROTOS = ["raftlog/v1/client.proto", "raftlog/v1/error_model.proto", "raftlog/v1/groups.proto"]


def proto_dir():
    directory = os.environ.get("RAFTLOG_PROTO_DIR") or os.path.join(HERE, "..", "..", "proto")
    if not os.path.isfile(os.path.join(directory, PROTOS[0])):
        sys.exit("raftlog setup: %s not found; set RAFTLOG_PROTO_DIR to the repository's proto/ directory"
                 % os.path.join(directory, PROTOS[0]))
    return directory


class BuildWithStubs(build_py):
    """build_py, then the generated modules into the build directory's raftlog/v1/."""

    def run(self):
        super().run()
        try:
            import grpc_tools  # noqa: F401
        except ImportError:
            sys.exit("raftlog setup: generating the gRPC modules needs grpc_tools (Debian: apt-get install "
                     "python3-grpc-tools)")
        out = self.build_lib
        os.makedirs(os.path.join(out, "raftlog", "v1"), exist_ok=True)
        subprocess.run([sys.executable, "-m", "grpc_tools.protoc", "-I", proto_dir(), "--python_out=" + out,
                        "--grpc_python_out=" + out] + PROTOS, check=True)
        open(os.path.join(out, "raftlog", "v1", "__init__.py"), "a").close()


setup(
    name="raftlog",
    version="0.1.0",
    description="Python client for raftlog, a Raft-replicated durable append-only log",
    packages=["raftlog"],
    python_requires=">=3.9",
    # Debian 12: python3-grpcio and python3-protobuf (apt), not PyPI wheels.
    install_requires=["grpcio", "protobuf"],
    cmdclass={"build_py": BuildWithStubs},
)
