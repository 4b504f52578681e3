// Client: each call builds its request, hands its attempts to the retry engine (retry.h) or asks one
// node once, and checks the answer. Appends go on the AppendStream call (append_stream_call.h) or
// as unary calls; the address list, the connections, the wire conversions and the tail live in
// endpoints.h, channels.h, wire.h and tail.h.
#include "client/client.h"

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <future>
#include <optional>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "client/append_stream_call.h"
#include "client/channels.h"
#include "client/endpoints.h"
#include "client/retry.h"
#include "client/shared_append_stream.h"
#include "client/tail.h"
#include "client/wire.h"
#include "raftlog/v1/client.grpc.pb.h"

namespace raftlog::client {

using internal::Clock;
using internal::endpoint_problem;
using internal::from_grpc;
using internal::Milliseconds;
namespace pb = raftlog::v1;

namespace {

constexpr std::size_t kMaxMessageBytesBound = std::size_t{1} << 30;
// How long an endpoint gets unary Appends after refusing AppendStream (see append_on_stream).
constexpr Clock::duration kUnaryAfterUnimplemented = std::chrono::seconds(60);
constexpr Clock::duration kUnaryAfterStreamRefused = std::chrono::seconds(5);

std::uint64_t random_client_id() {
  std::random_device device;
  // Bounded: a zero draw from 64 random bits is practically impossible; the loop only guards it.
  for (int tries = 0; tries < 16; ++tries) {
    const std::uint64_t id = (std::uint64_t{device()} << 32) ^ device();
    if (id != 0) return id;
  }
  return 1;
}

}  // namespace

std::string validate_options(const Options& options) {
  if (options.endpoints.empty()) return "no endpoints given";
  if (options.endpoints.size() > kMaxEndpoints)
    return "more than " + std::to_string(kMaxEndpoints) + " endpoints";
  std::set<std::string> seen;
  for (const std::string& endpoint : options.endpoints) {
    if (std::string problem = endpoint_problem(endpoint); !problem.empty()) return problem;
    if (!seen.insert(endpoint).second) return "endpoint \"" + endpoint + "\" is listed twice";
  }
  if (options.call_timeout_ms == 0) return "call_timeout_ms must be positive";
  if (options.retry_deadline_ms == 0) return "retry_deadline_ms must be positive";
  if (options.backoff_min_ms == 0) return "backoff_min_ms must be positive";
  if (options.append_stream_idle_ms == 0) return "append_stream_idle_ms must be positive";
  if (options.backoff_min_ms > options.backoff_max_ms)
    return "backoff_min_ms must not exceed backoff_max_ms";
  if (options.first_sequence == 0) return "first_sequence must be at least 1";
  if (options.max_message_bytes < 1024 || options.max_message_bytes > kMaxMessageBytesBound) {
    return "max_message_bytes must be in [1024, " + std::to_string(kMaxMessageBytesBound) + "]";
  }
  if (!options.tls.enabled && (!options.tls.ca_file.empty() || !options.tls.cert_file.empty() ||
                               !options.tls.key_file.empty())) {
    return "TLS files are given but tls.enabled is false";
  }
  if (options.tls.cert_file.empty() != options.tls.key_file.empty()) {
    return "a TLS client certificate needs both cert_file and key_file";
  }
  return {};
}

class Client::Impl {
 public:
  Impl(Options options, std::shared_ptr<grpc::ChannelCredentials> credentials);
  // The watchdog may be watching the idle stream: stop that before the stream goes.
  ~Impl() {
    watchdog_.end_idle_watch();
    append_stream_.reset();
    shared_stream_.reset();
  }

  std::uint64_t client_id() const { return client_id_; }
  std::uint64_t next_sequence() const {
    std::lock_guard lock(sequence_mu_);
    return next_sequence_;
  }
  std::string preferred_endpoint() const { return endpoints_.preferred(); }

  Result<AppendResult> append(const std::vector<std::string>& payloads,
                              const std::vector<EntryAttributes>* attributes = nullptr);
  Result<ReadResult> read(std::uint64_t from_index, std::uint32_t max_entries,
                          std::uint64_t max_bytes, bool linearizable);
  Result<std::uint64_t> tail(const TailOptions& options, const TailCallback& on_entry) {
    return internal::follow_log(
        options, on_entry,
        {endpoints_, channels_, retry_, options_.retry_deadline_ms, options_.call_timeout_ms});
  }
  Result<NodeStatus> status(const std::string& endpoint);
  std::vector<EndpointStatus> status_all();
  Result<TransferResult> transfer_leadership(std::uint64_t target_id);
  Result<std::uint64_t> flush(const std::string& endpoint);
  Result<TrimResult> trim(const std::string& endpoint, std::uint64_t before_index);
  Result<HealthState> health(const std::string& endpoint, const std::string& service);

 private:
  // A fresh context with one call's deadline, for the calls that ask one node once.
  void set_single_call_deadline(grpc::ClientContext& context) const {
    retry_.set_call_deadline(context, Clock::now() + Milliseconds(options_.call_timeout_ms));
  }

  // Sends one append on the AppendStream call to `endpoint` (opening it if needed). nullopt: use a
  // unary call for this attempt instead. Called with append_mu_ held.
  std::optional<Status> append_on_stream(const std::string& endpoint,
                                         const grpc::ClientContext& context,
                                         pb::AppendStreamRequest* request,
                                         pb::AppendResponse* response);
  internal::StreamAppendOutcome append_on_own_stream(const std::string& endpoint,
                                                     Clock::time_point deadline,
                                                     pb::AppendStreamRequest* request,
                                                     pb::AppendResponse* response);
  // What the attempt returns for a stream's outcome; nullopt: a unary call instead.
  std::optional<Status> stream_outcome_status(const std::string& endpoint,
                                              internal::StreamAppendOutcome outcome);
  // Clients share a stream only when everything that shapes its channel is the same.
  std::string shared_stream_key(const std::string& endpoint) const {
    const TlsOptions& tls = options_.tls;
    return endpoint + '\n' + (tls.enabled ? "tls\n" : "plain\n") + tls.ca_file + '\n' +
           tls.cert_file + '\n' + tls.key_file + '\n' + std::to_string(options_.max_message_bytes) +
           '\n' + std::to_string(options_.append_stream_idle_ms) + '\n' +
           std::to_string(options_.backoff_min_ms) + '\n' + std::to_string(options_.backoff_max_ms) +
           '\n' + std::to_string(options_.call_timeout_ms);
  }
  bool unary_only(const std::string& endpoint) {
    const auto found = unary_until_.find(endpoint);
    if (found == unary_until_.end()) return false;
    if (Clock::now() < found->second) return true;
    unary_until_.erase(found);
    return false;
  }
  void use_unary_for(const std::string& endpoint, Clock::duration how_long) {
    if (unary_until_.size() >= internal::kMaxCachedChannels) unary_until_.clear();
    unary_until_[endpoint] = Clock::now() + how_long;
  }

  const Options options_;
  const std::uint64_t client_id_;
  internal::Endpoints endpoints_;
  internal::Channels channels_;
  internal::RetryEngine retry_;

  std::mutex append_mu_;  // one append in flight per client: the server sees sequences in order
  internal::CallWatchdog watchdog_;                            // before append_stream_: outlives it
  std::unique_ptr<internal::AppendStreamCall> append_stream_;  // guarded by append_mu_
  // With options_.share_append_stream, instead of append_stream_. Guarded by append_mu_.
  std::shared_ptr<internal::SharedAppendStream> shared_stream_;
  // Endpoints sent unary Appends instead of streams, until the time given. Guarded by append_mu_;
  // at most kMaxCachedChannels entries.
  std::map<std::string, Clock::time_point> unary_until_;

  mutable std::mutex sequence_mu_;
  std::uint64_t next_sequence_;  // guarded by sequence_mu_
};

Client::Impl::Impl(Options options, std::shared_ptr<grpc::ChannelCredentials> credentials)
    : options_(std::move(options)),
      client_id_(options_.client_id != 0 ? options_.client_id : random_client_id()),
      endpoints_(options_.endpoints),
      channels_(options_, std::move(credentials)),
      retry_(options_, &endpoints_, client_id_),
      watchdog_(Milliseconds(options_.append_stream_idle_ms)),
      next_sequence_(options_.first_sequence) {}

Result<AppendResult> Client::Impl::append(const std::vector<std::string>& payloads,
                                          const std::vector<EntryAttributes>* attributes) {
  if (payloads.empty())
    return Status(StatusCode::kInvalidArgument, "append needs at least one entry");
  std::lock_guard append_lock(append_mu_);
  std::uint64_t sequence = 0;
  {
    std::lock_guard lock(sequence_mu_);
    sequence = next_sequence_++;
  }
  // Built once, as the stream message; the unary fallback sends its inner AppendRequest.
  pb::AppendStreamRequest stream_request;
  pb::AppendRequest& request = *stream_request.mutable_append();
  request.mutable_entries()->Reserve(static_cast<int>(payloads.size()));
  for (const std::string& payload : payloads) request.add_entries(payload);
  request.set_client_id(client_id_);
  request.set_sequence(sequence);
  if (attributes != nullptr) internal::attributes_to_wire(*attributes, &request);

  pb::AppendResponse response;
  const Status status = retry_.run(
      "append",
      [&](const std::string& endpoint, grpc::ClientContext& context) -> Status {
        response.Clear();
        if (options_.append_stream && !unary_only(endpoint)) {
          std::optional<Status> answered =
              append_on_stream(endpoint, context, &stream_request, &response);
          if (answered) return *std::move(answered);
        }
        return from_grpc(
            pb::Log::NewStub(channels_.get(endpoint))->Append(&context, request, &response),
            context, endpoint);
      },
      nullptr);
  if (!status.ok()) return status;
  if (response.first_index() == 0 || response.last_index() < response.first_index() ||
      response.last_index() - response.first_index() + 1 != payloads.size()) {
    return Status(StatusCode::kInternal,
                  "server answered an append of " + std::to_string(payloads.size()) +
                      " entries with indexes " + std::to_string(response.first_index()) + ".." +
                      std::to_string(response.last_index()));
  }
  AppendResult result;
  result.first_index = response.first_index();
  result.last_index = response.last_index();
  result.term = response.term();
  result.duplicate = response.duplicate();
  result.sequence = sequence;
  return result;
}

std::optional<Status> Client::Impl::append_on_stream(const std::string& endpoint,
                                                     const grpc::ClientContext& context,
                                                     pb::AppendStreamRequest* request,
                                                     pb::AppendResponse* response) {
  // The attempt's deadline, as the retry engine set it on the unary context.
  const Clock::time_point deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(context.deadline() -
                                                                 std::chrono::system_clock::now());
  internal::StreamAppendOutcome outcome;
  if (options_.share_append_stream) {
    if (shared_stream_ == nullptr || shared_stream_->endpoint() != endpoint) {
      shared_stream_.reset();
      shared_stream_ = internal::shared_append_stream(shared_stream_key(endpoint), endpoint,
                                                      channels_.get(endpoint),
                                                      Milliseconds(options_.append_stream_idle_ms));
    }
    outcome = shared_stream_->append(request, deadline, response);
  } else {
    outcome = append_on_own_stream(endpoint, deadline, request, response);
  }
  return stream_outcome_status(endpoint, std::move(outcome));
}

internal::StreamAppendOutcome Client::Impl::append_on_own_stream(const std::string& endpoint,
                                                                 Clock::time_point deadline,
                                                                 pb::AppendStreamRequest* request,
                                                                 pb::AppendResponse* response) {
  // Closed by the watchdog after being idle: open a new one rather than fail an attempt on it.
  if (watchdog_.end_idle_watch()) append_stream_.reset();
  if (append_stream_ == nullptr || append_stream_->endpoint() != endpoint ||
      !append_stream_->usable()) {
    append_stream_.reset();
    append_stream_ =
        std::make_unique<internal::AppendStreamCall>(channels_.get(endpoint), endpoint, &watchdog_);
  }
  internal::StreamAppendOutcome outcome = append_stream_->append(request, deadline, response);
  if (append_stream_->usable()) watchdog_.watch_idle(append_stream_->context());
  return outcome;
}

std::optional<Status> Client::Impl::stream_outcome_status(const std::string& endpoint,
                                                          internal::StreamAppendOutcome outcome) {
  if (!outcome.stream_failed) return std::move(outcome.status);
  switch (outcome.status.code()) {
    case StatusCode::kUnimplemented:
      // A node without AppendStream (an older version): unary calls to it for a while (it may be
      // upgraded in place, so not for ever).
      use_unary_for(endpoint, kUnaryAfterUnimplemented);
      return std::nullopt;
    case StatusCode::kResourceExhausted:
      // The node has too many streams open, or the message is over a size limit: the unary call
      // gives the same answer the unary API always gave. Asking for a stream on every append of a
      // saturated node would double its calls, so unary for a short while.
      use_unary_for(endpoint, kUnaryAfterStreamRefused);
      return std::nullopt;
    default:
      return std::move(
          outcome.status);  // UNAVAILABLE, DEADLINE_EXCEEDED, ...: retried as for unary calls
  }
}

Result<ReadResult> Client::Impl::read(std::uint64_t from_index, std::uint32_t max_entries,
                                      std::uint64_t max_bytes, bool linearizable) {
  if (from_index == 0)
    return Status(StatusCode::kInvalidArgument, "read from index 0: indexes start at 1");
  pb::ReadRequest request;
  request.set_from_index(from_index);
  request.set_max_entries(max_entries);
  request.set_max_bytes(max_bytes);
  request.set_linearizable(linearizable);
  pb::ReadResponse response;
  ReadResult result;
  const Status status = retry_.run(
      "read",
      [&](const std::string& endpoint, grpc::ClientContext& context) {
        response.Clear();
        return from_grpc(
            pb::Log::NewStub(channels_.get(endpoint))->Read(&context, request, &response), context,
            endpoint);
      },
      &result.served_by);
  if (!status.ok()) return status;
  result.entries.reserve(static_cast<std::size_t>(response.entries_size()));
  std::uint64_t expected = from_index;
  for (const pb::Entry& wire : response.entries()) {
    if (wire.index() != expected) {
      return Status(StatusCode::kInternal, result.served_by + ": read returned index " +
                                               std::to_string(wire.index()) + " where " +
                                               std::to_string(expected) + " was expected");
    }
    result.entries.push_back(internal::entry_from_wire(wire));
    ++expected;
  }
  result.commit_index = response.commit_index();
  return result;
}

Result<NodeStatus> Client::Impl::status(const std::string& endpoint) {
  if (std::string problem = endpoint_problem(endpoint); !problem.empty()) {
    return Status(StatusCode::kInvalidArgument, std::move(problem));
  }
  grpc::ClientContext context;
  set_single_call_deadline(context);
  pb::StatusResponse response;
  const grpc::Status result =
      pb::Log::NewStub(channels_.get(endpoint))->Status(&context, pb::StatusRequest(), &response);
  if (!result.ok()) return from_grpc(result, context, endpoint);
  return internal::status_from_wire(response, endpoint);
}

std::vector<EndpointStatus> Client::Impl::status_all() {
  const std::vector<std::string>& endpoints = options_.endpoints;
  std::vector<std::optional<Result<NodeStatus>>> answers(endpoints.size());
  std::vector<std::thread> threads;  // at most kMaxEndpoints
  threads.reserve(endpoints.size());
  for (std::size_t i = 0; i < endpoints.size(); ++i) {
    threads.emplace_back(
        [this, &answers, &endpoints, i] { answers[i].emplace(status(endpoints[i])); });
  }
  for (std::thread& thread : threads) thread.join();
  std::vector<EndpointStatus> result;
  result.reserve(endpoints.size());
  for (std::size_t i = 0; i < endpoints.size(); ++i) {
    result.push_back(EndpointStatus{endpoints[i], std::move(*answers[i])});
  }
  return result;
}

Result<TransferResult> Client::Impl::transfer_leadership(std::uint64_t target_id) {
  if (target_id == 0)
    return Status(StatusCode::kInvalidArgument, "transfer target must be a node id (not 0)");
  pb::TransferLeadershipRequest request;
  request.set_target_id(target_id);
  pb::TransferLeadershipResponse response;
  const Status status = retry_.run(
      "transfer-leadership",
      [&](const std::string& endpoint, grpc::ClientContext& context) {
        response.Clear();
        return from_grpc(pb::Admin::NewStub(channels_.get(endpoint))
                             ->TransferLeadership(&context, request, &response),
                         context, endpoint);
      },
      nullptr);
  if (!status.ok()) return status;
  return TransferResult{response.leader_id(), response.term()};
}

Result<std::uint64_t> Client::Impl::flush(const std::string& endpoint) {
  if (std::string problem = endpoint_problem(endpoint); !problem.empty()) {
    return Status(StatusCode::kInvalidArgument, std::move(problem));
  }
  grpc::ClientContext context;
  set_single_call_deadline(context);
  pb::FlushResponse response;
  const grpc::Status result =
      pb::Admin::NewStub(channels_.get(endpoint))->Flush(&context, pb::FlushRequest(), &response);
  if (!result.ok()) return from_grpc(result, context, endpoint);
  return response.flushed_index();
}

Result<TrimResult> Client::Impl::trim(const std::string& endpoint, std::uint64_t before_index) {
  if (std::string problem = endpoint_problem(endpoint); !problem.empty()) {
    return Status(StatusCode::kInvalidArgument, std::move(problem));
  }
  grpc::ClientContext context;
  set_single_call_deadline(context);
  pb::TrimRequest request;
  request.set_before_index(before_index);
  pb::TrimResponse response;
  const grpc::Status result =
      pb::Admin::NewStub(channels_.get(endpoint))->Trim(&context, request, &response);
  if (!result.ok()) return from_grpc(result, context, endpoint);
  return TrimResult{response.first_index(), response.limit()};
}

Result<HealthState> Client::Impl::health(const std::string& endpoint, const std::string& service) {
  if (std::string problem = endpoint_problem(endpoint); !problem.empty()) {
    return Status(StatusCode::kInvalidArgument, std::move(problem));
  }
  grpc::ClientContext context;
  set_single_call_deadline(context);
  const std::string request_bytes = internal::encode_health_request(service);
  grpc::Slice slice(request_bytes);
  grpc::ByteBuffer request(&slice, 1);
  grpc::ByteBuffer response;
  std::promise<grpc::Status> done;
  grpc::GenericStub stub(channels_.get(endpoint));
  stub.UnaryCall(&context, "/grpc.health.v1.Health/Check", grpc::StubOptions(), &request, &response,
                 [&done](grpc::Status status) { done.set_value(std::move(status)); });
  // Bounded by the call deadline set above.
  const grpc::Status result = done.get_future().get();
  if (result.error_code() == grpc::StatusCode::NOT_FOUND) return HealthState::kServiceUnknown;
  if (!result.ok()) return from_grpc(result, context, endpoint);
  std::vector<grpc::Slice> slices;
  std::string bytes;
  if (response.Dump(&slices).ok()) {
    for (const grpc::Slice& part : slices)
      bytes.append(reinterpret_cast<const char*>(part.begin()), part.size());
  }
  std::uint64_t state = 0;
  if (!internal::decode_health_response(bytes, &state) || state > 3) {
    return Status(StatusCode::kInternal, endpoint + ": malformed grpc.health.v1 response");
  }
  return static_cast<HealthState>(state);
}

Result<std::unique_ptr<Client>> Client::create(Options options) {
  if (std::string problem = validate_options(options); !problem.empty()) {
    return Status(StatusCode::kInvalidArgument, std::move(problem));
  }
  Result<std::shared_ptr<grpc::ChannelCredentials>> credentials =
      internal::channel_credentials(options.tls);
  if (!credentials.ok()) return credentials.status();
  auto impl = std::make_unique<Impl>(std::move(options), std::move(credentials).value());
  return std::unique_ptr<Client>(new Client(std::move(impl)));
}

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Client::~Client() = default;
std::uint64_t Client::client_id() const { return impl_->client_id(); }
std::uint64_t Client::next_sequence() const { return impl_->next_sequence(); }
std::string Client::preferred_endpoint() const { return impl_->preferred_endpoint(); }
Result<AppendResult> Client::append(const std::vector<std::string>& payloads) {
  return impl_->append(payloads);
}
Result<AppendResult> Client::append(const std::vector<std::string>& payloads,
                                    const std::vector<EntryAttributes>& attributes) {
  return impl_->append(payloads, &attributes);
}
Result<ReadResult> Client::read(std::uint64_t from_index, std::uint32_t max_entries,
                                std::uint64_t max_bytes, bool linearizable) {
  return impl_->read(from_index, max_entries, max_bytes, linearizable);
}
Result<std::uint64_t> Client::tail(const TailOptions& options, const TailCallback& on_entry) {
  return impl_->tail(options, on_entry);
}
Result<NodeStatus> Client::status(const std::string& endpoint) { return impl_->status(endpoint); }
std::vector<EndpointStatus> Client::status_all() { return impl_->status_all(); }
Result<TransferResult> Client::transfer_leadership(std::uint64_t target_id) {
  return impl_->transfer_leadership(target_id);
}
Result<std::uint64_t> Client::flush(const std::string& endpoint) { return impl_->flush(endpoint); }
Result<TrimResult> Client::trim(const std::string& endpoint, std::uint64_t before_index) {
  return impl_->trim(endpoint, before_index);
}
Result<HealthState> Client::health(const std::string& endpoint, const std::string& service) {
  return impl_->health(endpoint, service);
}

}  // namespace raftlog::client
