#include "client/groups.h"

#include <grpcpp/grpcpp.h>

#include <chrono>

#include "client/channels.h"
#include "client/endpoints.h"
#include "client/retry.h"
#include "client/wire.h"
#include "raftlog/v1/groups.grpc.pb.h"

namespace raftlog::client {

namespace pb = raftlog::v1;
using Clock = std::chrono::steady_clock;

class Groups::Impl {
 public:
  Impl(Options options, std::shared_ptr<grpc::ChannelCredentials> credentials)
      : options_(std::move(options)),
        endpoints_(options_.endpoints),
        channels_(options_, std::move(credentials)),
        retry_(options_, &endpoints_, Clock::now().time_since_epoch().count()) {}

  // One call to the leader through the retry engine; `call` gets the stub and the context.
  template <typename Call>
  Status run(std::string_view what, Call&& call, std::string* served_by) {
    return retry_.run(
        what,
        [&](const std::string& endpoint, grpc::ClientContext& context) {
          auto stub = pb::Groups::NewStub(channels_.get(endpoint));
          return internal::from_grpc(call(*stub, context), context, endpoint);
        },
        served_by);
  }

 private:
  const Options options_;
  internal::Endpoints endpoints_;
  internal::Channels channels_;
  internal::RetryEngine retry_;
};

Result<std::unique_ptr<Groups>> Groups::create(Options options) {
  if (std::string problem = validate_options(options); !problem.empty())
    return Status(StatusCode::kInvalidArgument, problem);
  auto credentials = internal::channel_credentials(options.tls);
  if (!credentials.ok()) return credentials.status();
  return std::unique_ptr<Groups>(
      new Groups(std::make_unique<Impl>(std::move(options), std::move(credentials.value()))));
}

Groups::Groups(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Groups::~Groups() = default;

Result<GroupCommitResult> Groups::commit(const std::string& group, const std::string& topic,
                                         std::uint64_t offset) {
  pb::CommitOffsetRequest request;
  request.set_group(group);
  request.set_topic(topic);
  request.set_offset(offset);
  pb::CommitOffsetResponse response;
  const Status status = impl_->run(
      "commit group offset",
      [&](pb::Groups::Stub& stub, grpc::ClientContext& context) {
        response.Clear();
        return stub.CommitOffset(&context, request, &response);
      },
      nullptr);
  if (!status.ok()) return status;
  return GroupCommitResult{response.index(), response.term()};
}

Result<GroupOffsets> Groups::fetch(const std::string& group,
                                   const std::vector<std::string>& topics) {
  pb::FetchOffsetsRequest request;
  request.set_group(group);
  for (const std::string& topic : topics) request.add_topics(topic);
  pb::FetchOffsetsResponse response;
  GroupOffsets out;
  const Status status = impl_->run(
      "fetch group offsets",
      [&](pb::Groups::Stub& stub, grpc::ClientContext& context) {
        response.Clear();
        return stub.FetchOffsets(&context, request, &response);
      },
      &out.served_by);
  if (!status.ok()) return status;
  for (const pb::GroupTopicOffset& offset : response.offsets()) {
    out.offsets.push_back(GroupTopicOffset{offset.topic(), offset.offset(), offset.commit_index()});
  }
  out.read_index = response.read_index();
  return out;
}

Result<GroupListing> Groups::list() {
  pb::ListGroupsResponse response;
  GroupListing out;
  const Status status = impl_->run(
      "list groups",
      [&](pb::Groups::Stub& stub, grpc::ClientContext& context) {
        response.Clear();
        return stub.ListGroups(&context, pb::ListGroupsRequest(), &response);
      },
      &out.served_by);
  if (!status.ok()) return status;
  for (const pb::GroupSummary& group : response.groups()) {
    out.groups.push_back(GroupSummary{group.group(), group.topics(), group.unknown_topics()});
  }
  out.complete = response.complete();
  out.read_index = response.read_index();
  return out;
}

}  // namespace raftlog::client
