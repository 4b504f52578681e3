"""The generated protobuf and gRPC modules for proto/raftlog/v1, imported from wherever the build put
them. They are never committed: CMake generates them into the build tree (clients/python/CMakeLists.txt)
and `setup.py build` into the installed package, both from proto/ (clients/python/README.md).

raftlog/__init__.py extends the package's __path__ over sys.path (pkgutil.extend_path), so
`raftlog.v1` may live in another directory than these sources: the build tree's gen/ directory.
"""
try:
    from raftlog.v1 import client_pb2, client_pb2_grpc, error_model_pb2, groups_pb2, groups_pb2_grpc
except ImportError as missing:  # pragma: no cover - depends on the installation
    raise ImportError(
        "raftlog: the generated modules raftlog.v1.client_pb2 / client_pb2_grpc / error_model_pb2 / groups_pb2 are "
        "missing (%s). Build them with CMake (build/clients/python/gen on PYTHONPATH) or install the "
        "package with `python3 setup.py install` from clients/python; see clients/python/README.md." % missing
    ) from missing

__all__ = ["client_pb2", "client_pb2_grpc", "error_model_pb2", "groups_pb2", "groups_pb2_grpc"]
