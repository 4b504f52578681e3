"""Makes one call that a raftlog node refuses and reports its standard error details as Python's grpc
sees them: the grpc-status-details-bin trailer parsed with the protobuf runtime into the
google.rpc.Status / google.rpc.ErrorInfo declared in proto/raftlog/v1/error_model.proto (the
grpc_status helper package is not part of Debian 12; it decodes the same bytes).

Run by tests/cluster/error_model_test.cpp, which checks the printed `key=value` lines:
  code, status_code_matches, status_message_matches, details, type_url, unpacked, reason, domain,
  metadata.<key> for every metadata entry, raftlog_error_bin (whether the older trailer is there).
Exit 0 after reporting, 1 when the call was not refused, 77 when python3-grpcio or python3-protobuf
is missing (the test then skips).
"""
import argparse
import sys

try:
    import grpc
    import google.protobuf  # noqa: F401  (the generated modules below need the runtime)
except ImportError as missing:
    print("python3-grpcio / python3-protobuf not available: %s" % missing)
    sys.exit(77)

STATUS_DETAILS_KEY = "grpc-status-details-bin"
RAFTLOG_ERROR_KEY = "raftlog-error-bin"


def refused_call(channel, client_pb2, call, from_index):
    """The unary call to make, and its request."""
    if call == "append":
        method, response_type = "/raftlog.v1.Log/Append", client_pb2.AppendResponse
        request = client_pb2.AppendRequest(entries=[b"from python"])
    else:
        method, response_type = "/raftlog.v1.Log/Read", client_pb2.ReadResponse
        request = client_pb2.ReadRequest(from_index=from_index)
    rpc = channel.unary_unary(method, request_serializer=type(request).SerializeToString,
                              response_deserializer=response_type.FromString)
    return rpc, request


def report(error, error_model_pb2):
    trailers = dict(error.trailing_metadata() or ())
    print("code=%s" % error.code().name)
    print("raftlog_error_bin=%s" % (RAFTLOG_ERROR_KEY in trailers))
    if STATUS_DETAILS_KEY not in trailers:
        return
    status = error_model_pb2.Status.FromString(trailers[STATUS_DETAILS_KEY])
    print("status_code_matches=%s" % (status.code == error.code().value[0]))
    print("status_message_matches=%s" % (status.message == error.details()))
    print("details=%d" % len(status.details))
    if not status.details:
        return
    detail = status.details[0]
    print("type_url=%s" % detail.type_url)
    info = error_model_pb2.ErrorInfo()
    print("unpacked=%s" % detail.Unpack(info))
    print("reason=%s" % info.reason)
    print("domain=%s" % info.domain)
    for key in sorted(info.metadata):
        print("metadata.%s=%s" % (key, info.metadata[key]))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--proto-dir", required=True, help="where protoc --python_out put raftlog/v1/*_pb2.py")
    parser.add_argument("--address", required=True, help="host:port of the node to call")
    parser.add_argument("--call", choices=("append", "read"), required=True)
    parser.add_argument("--from-index", type=int, default=0, help="for --call read")
    args = parser.parse_args()
    sys.path.insert(0, args.proto_dir)
    from raftlog.v1 import client_pb2, error_model_pb2

    with grpc.insecure_channel(args.address) as channel:
        rpc, request = refused_call(channel, client_pb2, args.call, args.from_index)
        try:
            rpc(request, timeout=10)
        except grpc.RpcError as error:
            report(error, error_model_pb2)
            return 0
    print("the call was not refused")
    return 1


if __name__ == "__main__":
    sys.exit(main())
