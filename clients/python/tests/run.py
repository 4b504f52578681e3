"""Runs the Python client's tests: `run.py unit` (test_unit_*.py) or `run.py cluster` (test_cluster_*.py).
Exit 77 (ctest's SKIP_RETURN_CODE) when python3-grpcio or python3-protobuf is missing, 1 on a failure."""
import os
import sys
import unittest

try:
    import grpc  # noqa: F401
    import google.protobuf  # noqa: F401
except ImportError as missing:
    print("skipping: python3-grpcio / python3-protobuf not available (%s)" % missing)
    sys.exit(77)

if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in ("unit", "cluster"):
        print("usage: run.py unit|cluster", file=sys.stderr)
        sys.exit(2)
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, here)
    suite = unittest.defaultTestLoader.discover(here, pattern="test_%s_*.py" % sys.argv[1], top_level_dir=here)
    result = unittest.TextTestRunner(verbosity=2).run(suite)
    sys.exit(0 if result.wasSuccessful() and result.testsRun > 0 else 1)
