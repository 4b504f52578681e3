#include "client/client.h"

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <fstream>
#include <future>
#include <map>
#include <sstream>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "client/append_stream_call.h"
#include "api_errors/error_info.h"
#include "raftlog/v1/client.grpc.pb.h"

namespace raftlog::client {

namespace pb = raftlog::v1;
using Clock = std::chrono::steady_clock;
using Milliseconds = std::chrono::milliseconds;

const char* to_string(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "OK";
    case StatusCode::kCancelled: return "CANCELLED";
    case StatusCode::kUnknown: return "UNKNOWN";
    case StatusCode::kInvalidArgument: return "INVALID_ARGUMENT";
    case StatusCode::kDeadlineExceeded: return "DEADLINE_EXCEEDED";
    case StatusCode::kNotFound: return "NOT_FOUND";
    case StatusCode::kAlreadyExists: return "ALREADY_EXISTS";
    case StatusCode::kPermissionDenied: return "PERMISSION_DENIED";
    case StatusCode::kResourceExhausted: return "RESOURCE_EXHAUSTED";
    case StatusCode::kFailedPrecondition: return "FAILED_PRECONDITION";
    case StatusCode::kAborted: return "ABORTED";
    case StatusCode::kOutOfRange: return "OUT_OF_RANGE";
    case StatusCode::kUnimplemented: return "UNIMPLEMENTED";
    case StatusCode::kInternal: return "INTERNAL";
    case StatusCode::kUnavailable: return "UNAVAILABLE";
    case StatusCode::kDataLoss: return "DATA_LOSS";
    case StatusCode::kUnauthenticated: return "UNAUTHENTICATED";
  }
  return "UNKNOWN_CODE";
}

std::string Status::to_string() const {
  if (ok()) return "OK";
  return std::string(client::to_string(code_)) + ": " + message_;
}

const char* to_string(EntryType type) {
  switch (type) {
    case EntryType::kNormal: return "normal";
    case EntryType::kNoop: return "noop";
    case EntryType::kConfig: return "config";
  }
  return "unknown";
}

const char* to_string(Role role) {
  switch (role) {
    case Role::kUnknown: return "unknown";
    case Role::kFollower: return "follower";
    case Role::kPreCandidate: return "pre-candidate";
    case Role::kCandidate: return "candidate";
    case Role::kLeader: return "leader";
  }
  return "unknown";
}

const char* to_string(FlushMode flush_mode) {
  switch (flush_mode) {
    case FlushMode::kUnknown: return "unknown";
    case FlushMode::kSync: return "sync";
    case FlushMode::kAsync: return "async";
  }
  return "unknown";
}

namespace {

// Hard cap on attempts of one call, in case the deadline is huge and every attempt fails at once.
constexpr std::uint32_t kMaxAttemptsPerCall = 10000;
// Endpoints learned from leader hints are cached too; past this many the cache is reset.
constexpr std::size_t kMaxCachedChannels = 2 * kMaxEndpoints;
constexpr std::size_t kMaxMessageBytesBound = std::size_t{1} << 30;
// How long an endpoint gets unary Appends after refusing AppendStream (see append_on_stream).
constexpr Clock::duration kUnaryAfterUnimplemented = std::chrono::seconds(60);
constexpr Clock::duration kUnaryAfterStreamRefused = std::chrono::seconds(5);

std::string_view trim(std::string_view text) {
  const auto first = text.find_first_not_of(" \t");
  if (first == std::string_view::npos) return {};
  const auto last = text.find_last_not_of(" \t");
  return text.substr(first, last - first + 1);
}

// Empty when `item` is a usable "host:port", else the problem.
std::string endpoint_problem(std::string_view item) {
  const std::string quoted = "endpoint \"" + std::string(item) + "\"";
  std::string_view host;
  std::string_view port;
  if (!item.empty() && item.front() == '[') {
    const auto close = item.find(']');
    if (close == std::string_view::npos || close + 1 >= item.size() || item[close + 1] != ':') {
      return quoted + " is not \"[ipv6]:port\"";
    }
    host = item.substr(1, close - 1);
    port = item.substr(close + 2);
  } else {
    const auto colon = item.rfind(':');
    if (colon == std::string_view::npos) return quoted + " has no port (expected host:port)";
    host = item.substr(0, colon);
    port = item.substr(colon + 1);
    if (host.find(':') != std::string_view::npos) return quoted + ": write IPv6 hosts as [addr]:port";
  }
  if (host.empty()) return quoted + " has no host";
  if (host.find_first_of(" \t,/") != std::string_view::npos) return quoted + " has a malformed host";
  std::uint32_t number = 0;
  const auto [end, error] = std::from_chars(port.data(), port.data() + port.size(), number);
  if (port.empty() || error != std::errc() || end != port.data() + port.size() || number == 0 ||
      number > 65535) {
    return quoted + " has a bad port (expected 1..65535)";
  }
  return {};
}

std::chrono::system_clock::time_point to_system(Clock::time_point deadline) {
  return std::chrono::system_clock::now() +
         std::chrono::duration_cast<std::chrono::system_clock::duration>(deadline - Clock::now());
}

Status from_grpc(const grpc::Status& status, const grpc::ClientContext& context, const std::string& endpoint) {
  return Status(static_cast<StatusCode>(status.error_code()), endpoint + ": " + status.error_message(),
                api_errors::error_details(context));
}

bool is_leader_error(const Status& status) {
  const auto& details = status.details();
  return status.code() == StatusCode::kFailedPrecondition && details &&
         (details->reason == reason::kNotLeader || details->reason == reason::kNoLeader);
}

Entry from_wire(const pb::Entry& wire) {
  Entry entry;
  entry.index = wire.index();
  entry.term = wire.term();
  entry.payload = wire.payload();
  switch (wire.type()) {
    case pb::ENTRY_TYPE_NOOP: entry.type = EntryType::kNoop; break;
    case pb::ENTRY_TYPE_CONFIG: entry.type = EntryType::kConfig; break;
    default: entry.type = EntryType::kNormal; break;
  }
  entry.client_id = wire.client_id();
  entry.sequence = wire.sequence();
  return entry;
}

Role role_from_wire(pb::Role role) {
  switch (role) {
    case pb::ROLE_FOLLOWER: return Role::kFollower;
    case pb::ROLE_PRE_CANDIDATE: return Role::kPreCandidate;
    case pb::ROLE_CANDIDATE: return Role::kCandidate;
    case pb::ROLE_LEADER: return Role::kLeader;
    default: return Role::kUnknown;
  }
}

FlushMode flush_mode_from_wire(pb::FlushMode mode) {
  switch (mode) {
    case pb::FLUSH_MODE_SYNC: return FlushMode::kSync;
    case pb::FLUSH_MODE_ASYNC: return FlushMode::kAsync;
    default: return FlushMode::kUnknown;
  }
}

NodeStatus status_from_wire(const pb::StatusResponse& wire, const std::string& endpoint) {
  NodeStatus status;
  status.endpoint = endpoint;
  status.node_id = wire.node_id();
  status.address = wire.address();
  status.role = role_from_wire(wire.role());
  status.term = wire.term();
  status.leader_id = wire.leader_id();
  status.leader_address = wire.leader_address();
  status.first_index = wire.first_index();
  status.last_index = wire.last_index();
  status.commit_index = wire.commit_index();
  status.flushed_index = wire.flushed_index();
  status.flush_mode = flush_mode_from_wire(wire.flush_mode());
  status.catching_up = wire.catching_up();
  status.catching_up_to_index = wire.catching_up_to_index();
  status.storage_fault = wire.storage_fault();
  status.corrupt_index = wire.corrupt_index();
  status.scrub_bytes_verified = wire.scrub_bytes_verified();
  status.scrub_passes = wire.scrub_passes();
  for (const pb::PeerStatus& peer_wire : wire.peers()) {
    PeerStatus& peer = status.peers.emplace_back();
    peer.id = peer_wire.id();
    peer.address = peer_wire.address();
    peer.match_index = peer_wire.match_index();
    peer.lag_entries = peer_wire.lag_entries();
    peer.last_contact_ms = peer_wire.last_contact_ms();
    peer.probing = peer_wire.probing();
    peer.behind_first_index = peer_wire.behind_first_index();
    peer.lag_bytes = peer_wire.lag_bytes();
  }
  return status;
}

// Sleeps `duration` unless `stop` is requested first. Returns false when stopped.
bool sleep_unless_stopped(Clock::duration duration, const std::stop_token& stop) {
  std::mutex mutex;
  std::condition_variable_any wakeup;
  std::unique_lock lock(mutex);
  return !wakeup.wait_for(lock, stop, duration, [] { return false; }) && !stop.stop_requested();
}

}  // namespace

Result<std::vector<std::string>> parse_endpoints(std::string_view text) {
  std::vector<std::string> endpoints;
  if (trim(text).empty()) return Status(StatusCode::kInvalidArgument, "no endpoints given (expected host:port,...)");
  std::set<std::string> seen;
  std::size_t start = 0;
  // One iteration per comma-separated item; bounded by kMaxEndpoints.
  while (true) {
    const std::size_t comma = text.find(',', start);
    const std::string_view item = trim(text.substr(start, comma == std::string_view::npos ? text.npos : comma - start));
    if (item.empty()) return Status(StatusCode::kInvalidArgument, "empty item in endpoint list \"" + std::string(text) + "\"");
    if (std::string problem = endpoint_problem(item); !problem.empty()) {
      return Status(StatusCode::kInvalidArgument, std::move(problem));
    }
    if (!seen.insert(std::string(item)).second) {
      return Status(StatusCode::kInvalidArgument, "endpoint \"" + std::string(item) + "\" is listed twice");
    }
    if (endpoints.size() == kMaxEndpoints) {
      return Status(StatusCode::kInvalidArgument, "more than " + std::to_string(kMaxEndpoints) + " endpoints");
    }
    endpoints.emplace_back(item);
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return endpoints;
}

std::string validate_options(const Options& options) {
  if (options.endpoints.empty()) return "no endpoints given";
  if (options.endpoints.size() > kMaxEndpoints) return "more than " + std::to_string(kMaxEndpoints) + " endpoints";
  std::set<std::string> seen;
  for (const std::string& endpoint : options.endpoints) {
    if (std::string problem = endpoint_problem(endpoint); !problem.empty()) return problem;
    if (!seen.insert(endpoint).second) return "endpoint \"" + endpoint + "\" is listed twice";
  }
  if (options.call_timeout_ms == 0) return "call_timeout_ms must be positive";
  if (options.retry_deadline_ms == 0) return "retry_deadline_ms must be positive";
  if (options.backoff_min_ms == 0) return "backoff_min_ms must be positive";
  if (options.append_stream_idle_ms == 0) return "append_stream_idle_ms must be positive";
  if (options.backoff_min_ms > options.backoff_max_ms) return "backoff_min_ms must not exceed backoff_max_ms";
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

const char* to_string(HealthState state) {
  switch (state) {
    case HealthState::kUnknown: return "UNKNOWN";
    case HealthState::kServing: return "SERVING";
    case HealthState::kNotServing: return "NOT_SERVING";
    case HealthState::kServiceUnknown: return "SERVICE_UNKNOWN";
  }
  return "UNKNOWN";
}

namespace {

// A PEM file is small; a larger one is a mistake.
constexpr std::size_t kMaxPemFileBytes = 1 << 20;

Status read_pem_file(const std::string& what, const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status(StatusCode::kInvalidArgument, "cannot read TLS " + what + " file " + path);
  std::ostringstream buffer;
  buffer << in.rdbuf();
  *out = buffer.str();
  if (out->size() > kMaxPemFileBytes || out->find("-----BEGIN") == std::string::npos) {
    return Status(StatusCode::kInvalidArgument, "TLS " + what + " file " + path + " is not a PEM file");
  }
  return {};
}

Result<std::shared_ptr<grpc::ChannelCredentials>> channel_credentials(const TlsOptions& tls) {
  if (!tls.enabled) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions ssl;
  if (!tls.ca_file.empty()) {
    if (Status s = read_pem_file("CA", tls.ca_file, &ssl.pem_root_certs); !s.ok()) return s;
  }
  if (!tls.cert_file.empty()) {
    if (Status s = read_pem_file("certificate", tls.cert_file, &ssl.pem_cert_chain); !s.ok()) return s;
    if (Status s = read_pem_file("key", tls.key_file, &ssl.pem_private_key); !s.ok()) return s;
  }
  return grpc::SslCredentials(ssl);
}

// grpc.health.v1 messages, encoded by hand: HealthCheckRequest{string service = 1} and
// HealthCheckResponse{ServingStatus status = 1}. Debian ships no generated code for health.proto.
std::string encode_health_request(const std::string& service) {
  std::string out;
  if (service.empty()) return out;
  out.push_back('\x0a');  // field 1, length-delimited
  std::size_t length = service.size();
  while (length >= 0x80) {
    out.push_back(static_cast<char>((length & 0x7f) | 0x80));
    length >>= 7;
  }
  out.push_back(static_cast<char>(length));
  return out + service;
}

// The status field of a HealthCheckResponse (0 when absent, as proto3 omits defaults).
bool decode_health_response(const std::string& bytes, std::uint64_t* status) {
  *status = 0;
  std::size_t at = 0;
  // Bounded by the response size: every iteration consumes at least one byte.
  while (at < bytes.size()) {
    const auto tag = static_cast<unsigned char>(bytes[at++]);
    if (tag != 0x08) return false;  // only field 1 (varint) is defined
    std::uint64_t value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (at >= bytes.size()) return false;
      const auto byte = static_cast<unsigned char>(bytes[at++]);
      value |= std::uint64_t{byte & 0x7fu} << shift;
      if ((byte & 0x80) == 0) break;
    }
    *status = value;
  }
  return true;
}

}  // namespace

class Client::Impl {
 public:
  explicit Impl(Options options);
  // The watchdog may be watching the idle stream: stop that before the stream goes.
  ~Impl() {
    watchdog_.end_idle_watch();
    append_stream_.reset();
  }

  std::uint64_t client_id() const { return client_id_; }
  std::uint64_t next_sequence() const {
    std::lock_guard lock(mu_);
    return next_sequence_;
  }
  std::string preferred_endpoint() const {
    std::lock_guard lock(mu_);
    return preferred_;
  }

  Result<AppendResult> append(const std::vector<std::string>& payloads);
  Result<ReadResult> read(std::uint64_t from_index, std::uint32_t max_entries, std::uint64_t max_bytes,
                          bool linearizable);
  Result<std::uint64_t> tail(const TailOptions& options, const TailCallback& on_entry);
  Result<NodeStatus> status(const std::string& endpoint);
  std::vector<EndpointStatus> status_all();
  Result<TransferResult> transfer_leadership(std::uint64_t target_id);
  Result<std::uint64_t> flush(const std::string& endpoint);
  Result<TrimResult> trim(const std::string& endpoint, std::uint64_t before_index);
  Result<HealthState> health(const std::string& endpoint, const std::string& service);
  void set_credentials(std::shared_ptr<grpc::ChannelCredentials> credentials) { credentials_ = std::move(credentials); }

 private:
  std::shared_ptr<grpc::Channel> channel(const std::string& endpoint);
  void set_preferred(const std::string& endpoint) {
    std::lock_guard lock(mu_);
    preferred_ = endpoint;
  }
  std::string next_endpoint_after(const std::string& endpoint);
  Clock::duration jittered(std::uint32_t backoff_ms);
  void set_call_deadline(grpc::ClientContext& context, Clock::time_point overall_deadline) const;

  // Runs attempt(endpoint, context) -> Status until it succeeds, fails with a non-retryable
  // status, or the retry deadline passes (see client.h). `served_by` receives the endpoint that
  // answered successfully.
  template <typename Attempt>
  Status call_with_retries(std::string_view what, Attempt&& attempt, std::string* served_by);

  const Options options_;
  std::shared_ptr<grpc::ChannelCredentials> credentials_;  // set once by create(), before any call
  const std::uint64_t client_id_;
  // Sends one append on the AppendStream call to `endpoint` (opening it if needed). nullopt: use a
  // unary call for this attempt instead. Called with append_mu_ held.
  std::optional<Status> append_on_stream(const std::string& endpoint, const grpc::ClientContext& context,
                                         pb::AppendStreamRequest* request, pb::AppendResponse* response);

  std::mutex append_mu_;  // one append in flight per client: the server sees sequences in order
  internal::CallWatchdog watchdog_;  // before append_stream_: outlives it
  std::unique_ptr<internal::AppendStreamCall> append_stream_;  // guarded by append_mu_
  // Endpoints sent unary Appends instead of streams, until the time given. Guarded by append_mu_;
  // at most kMaxCachedChannels entries.
  std::map<std::string, Clock::time_point> unary_until_;
  bool unary_only(const std::string& endpoint) {
    const auto found = unary_until_.find(endpoint);
    if (found == unary_until_.end()) return false;
    if (Clock::now() < found->second) return true;
    unary_until_.erase(found);
    return false;
  }
  void use_unary_for(const std::string& endpoint, Clock::duration how_long) {
    if (unary_until_.size() >= kMaxCachedChannels) unary_until_.clear();
    unary_until_[endpoint] = Clock::now() + how_long;
  }

  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<grpc::Channel>> channels_;  // bounded by kMaxCachedChannels
  std::string preferred_;
  std::uint64_t next_sequence_;
  std::size_t round_robin_cursor_ = 0;
  std::minstd_rand jitter_;
};

namespace {
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

Client::Impl::Impl(Options options)
    : options_(std::move(options)),
      client_id_(options_.client_id != 0 ? options_.client_id : random_client_id()),
      watchdog_(Milliseconds(options_.append_stream_idle_ms)),
      preferred_(options_.endpoints.front()),
      next_sequence_(options_.first_sequence),
      jitter_(static_cast<std::minstd_rand::result_type>(client_id_)) {}

std::shared_ptr<grpc::Channel> Client::Impl::channel(const std::string& endpoint) {
  std::lock_guard lock(mu_);
  if (auto found = channels_.find(endpoint); found != channels_.end()) return found->second;
  if (channels_.size() >= kMaxCachedChannels) channels_.clear();
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(static_cast<int>(options_.max_message_bytes));
  args.SetMaxSendMessageSize(static_cast<int>(options_.max_message_bytes));
  // Follow our backoff bounds rather than gRPC's (1 s initial, 120 s max, 20 s connect timeout), so
  // a restarted node is found again quickly.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, static_cast<int>(options_.backoff_min_ms));
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, static_cast<int>(options_.backoff_max_ms));
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, static_cast<int>(options_.call_timeout_ms));
  auto created = grpc::CreateCustomChannel(endpoint, credentials_, args);
  channels_.emplace(endpoint, created);
  return created;
}

std::string Client::Impl::next_endpoint_after(const std::string& endpoint) {
  const auto& endpoints = options_.endpoints;
  const auto found = std::find(endpoints.begin(), endpoints.end(), endpoint);
  std::lock_guard lock(mu_);
  if (found != endpoints.end()) {
    return endpoints[(static_cast<std::size_t>(found - endpoints.begin()) + 1) % endpoints.size()];
  }
  return endpoints[round_robin_cursor_++ % endpoints.size()];
}

Clock::duration Client::Impl::jittered(std::uint32_t backoff_ms) {
  std::lock_guard lock(mu_);
  std::uniform_int_distribution<std::uint32_t> extra(0, backoff_ms / 4);
  return Milliseconds(backoff_ms + extra(jitter_));
}

void Client::Impl::set_call_deadline(grpc::ClientContext& context, Clock::time_point overall_deadline) const {
  const Clock::time_point call_deadline = Clock::now() + Milliseconds(options_.call_timeout_ms);
  context.set_deadline(to_system(std::min(call_deadline, overall_deadline)));
}

template <typename Attempt>
Status Client::Impl::call_with_retries(std::string_view what, Attempt&& attempt, std::string* served_by) {
  const Clock::time_point started = Clock::now();
  const Clock::time_point deadline = started + Milliseconds(options_.retry_deadline_ms);
  std::string target = preferred_endpoint();
  std::uint32_t backoff_ms = options_.backoff_min_ms;
  bool previous_was_redirect = false;
  Status last(StatusCode::kDeadlineExceeded, "no attempt was made");
  std::uint32_t attempts = 0;
  while (attempts < kMaxAttemptsPerCall) {
    const Clock::time_point now = Clock::now();
    if (now >= deadline) break;
    ++attempts;
    grpc::ClientContext context;
    set_call_deadline(context, deadline);
    Status result = attempt(target, context);
    if (result.ok()) {
      set_preferred(target);
      if (served_by != nullptr) *served_by = target;
      return {};
    }
    last = std::move(result);
    const bool leader_error = is_leader_error(last);
    if (last.code() != StatusCode::kUnavailable && last.code() != StatusCode::kDeadlineExceeded && !leader_error) {
      return last;  // not retryable: the request itself is wrong or refused
    }
    const auto& details = last.details();
    const bool redirect = leader_error && details->reason == reason::kNotLeader &&
                          !details->leader_address.empty() && details->leader_address != target;
    if (redirect) {
      target = details->leader_address;
      set_preferred(target);
      if (!previous_was_redirect) {
        previous_was_redirect = true;
        continue;  // one hop straight to the named leader, no sleep
      }
    } else {
      target = next_endpoint_after(target);
    }
    previous_was_redirect = redirect;
    const Clock::duration remaining = deadline - Clock::now();
    std::this_thread::sleep_for(std::min(jittered(backoff_ms), remaining));
    backoff_ms = std::min(backoff_ms * 2, options_.backoff_max_ms);
  }
  const auto elapsed_ms = std::chrono::duration_cast<Milliseconds>(Clock::now() - started).count();
  return Status(StatusCode::kDeadlineExceeded,
                std::string(what) + ": gave up after " + std::to_string(attempts) + " attempt(s) in " +
                    std::to_string(elapsed_ms) + " ms (retry deadline " + std::to_string(options_.retry_deadline_ms) +
                    " ms); last error: " + last.to_string(),
                last.details());
}

Result<AppendResult> Client::Impl::append(const std::vector<std::string>& payloads) {
  if (payloads.empty()) return Status(StatusCode::kInvalidArgument, "append needs at least one entry");
  std::lock_guard append_lock(append_mu_);
  std::uint64_t sequence = 0;
  {
    std::lock_guard lock(mu_);
    sequence = next_sequence_++;
  }
  // Built once, as the stream message; the unary fallback sends its inner AppendRequest.
  pb::AppendStreamRequest stream_request;
  pb::AppendRequest& request = *stream_request.mutable_append();
  request.mutable_entries()->Reserve(static_cast<int>(payloads.size()));
  for (const std::string& payload : payloads) request.add_entries(payload);
  request.set_client_id(client_id_);
  request.set_sequence(sequence);

  pb::AppendResponse response;
  const Status status = call_with_retries(
      "append",
      [&](const std::string& endpoint, grpc::ClientContext& context) -> Status {
        response.Clear();
        if (options_.append_stream && !unary_only(endpoint)) {
          std::optional<Status> answered = append_on_stream(endpoint, context, &stream_request, &response);
          if (answered) return *std::move(answered);
        }
        return from_grpc(pb::Log::NewStub(channel(endpoint))->Append(&context, request, &response), context, endpoint);
      },
      nullptr);
  if (!status.ok()) return status;
  if (response.first_index() == 0 || response.last_index() < response.first_index() ||
      response.last_index() - response.first_index() + 1 != payloads.size()) {
    return Status(StatusCode::kInternal, "server answered an append of " + std::to_string(payloads.size()) +
                                             " entries with indexes " + std::to_string(response.first_index()) +
                                             ".." + std::to_string(response.last_index()));
  }
  AppendResult result;
  result.first_index = response.first_index();
  result.last_index = response.last_index();
  result.term = response.term();
  result.duplicate = response.duplicate();
  result.sequence = sequence;
  return result;
}

std::optional<Status> Client::Impl::append_on_stream(const std::string& endpoint, const grpc::ClientContext& context,
                                                     pb::AppendStreamRequest* request, pb::AppendResponse* response) {
  // Closed by the watchdog after being idle: open a new one rather than fail an attempt on it.
  if (watchdog_.end_idle_watch()) append_stream_.reset();
  if (append_stream_ == nullptr || append_stream_->endpoint() != endpoint || !append_stream_->usable()) {
    append_stream_.reset();
    append_stream_ = std::make_unique<internal::AppendStreamCall>(channel(endpoint), endpoint, &watchdog_);
  }
  // The attempt's deadline, as call_with_retries set it on the unary context.
  const Clock::time_point deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(context.deadline() - std::chrono::system_clock::now());
  internal::StreamAppendOutcome outcome = append_stream_->append(request, deadline, response);
  if (append_stream_->usable()) watchdog_.watch_idle(append_stream_->context());
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
      return std::move(outcome.status);  // UNAVAILABLE, DEADLINE_EXCEEDED, ...: retried as for unary calls
  }
}

Result<ReadResult> Client::Impl::read(std::uint64_t from_index, std::uint32_t max_entries, std::uint64_t max_bytes,
                                      bool linearizable) {
  if (from_index == 0) return Status(StatusCode::kInvalidArgument, "read from index 0: indexes start at 1");
  pb::ReadRequest request;
  request.set_from_index(from_index);
  request.set_max_entries(max_entries);
  request.set_max_bytes(max_bytes);
  request.set_linearizable(linearizable);
  pb::ReadResponse response;
  ReadResult result;
  const Status status = call_with_retries(
      "read",
      [&](const std::string& endpoint, grpc::ClientContext& context) {
        response.Clear();
        return from_grpc(pb::Log::NewStub(channel(endpoint))->Read(&context, request, &response), context, endpoint);
      },
      &result.served_by);
  if (!status.ok()) return status;
  result.entries.reserve(static_cast<std::size_t>(response.entries_size()));
  std::uint64_t expected = from_index;
  for (const pb::Entry& wire : response.entries()) {
    if (wire.index() != expected) {
      return Status(StatusCode::kInternal, result.served_by + ": read returned index " + std::to_string(wire.index()) +
                                               " where " + std::to_string(expected) + " was expected");
    }
    result.entries.push_back(from_wire(wire));
    ++expected;
  }
  result.commit_index = response.commit_index();
  return result;
}

Result<std::uint64_t> Client::Impl::tail(const TailOptions& options, const TailCallback& on_entry) {
  if (options.from_index == 0) return Status(StatusCode::kInvalidArgument, "tail from index 0: indexes start at 1");
  if (!on_entry) return Status(StatusCode::kInvalidArgument, "tail needs a callback");
  const bool bounded = options.duration_ms > 0;
  const Clock::time_point end_at = Clock::now() + Milliseconds(options.duration_ms);
  const auto finished = [&] { return options.stop.stop_requested() || (bounded && Clock::now() >= end_at); };

  std::uint64_t next = options.from_index;
  std::string target = preferred_endpoint();
  Clock::time_point last_progress = Clock::now();
  std::uint32_t backoff_ms = options_.backoff_min_ms;
  // Ends when stopped, when the duration elapses, on a terminal error, or when no node has made
  // progress for retry_deadline_ms; an unbounded tail of a healthy cluster runs until stopped.
  while (!finished()) {
    grpc::ClientContext context;
    if (bounded) context.set_deadline(to_system(end_at));
    const std::stop_callback cancel_on_stop(options.stop, [&context] { context.TryCancel(); });
    pb::TailRequest request;
    request.set_from_index(next);
    request.set_max_bytes_per_message(options.max_bytes_per_message);
    auto stub = pb::Log::NewStub(channel(target));
    std::unique_ptr<grpc::ClientReader<pb::TailResponse>> reader = stub->Tail(&context, request);

    pb::TailResponse response;
    bool progressed = false;
    std::optional<Status> verdict;  // set when the tail must end for a reason found while reading
    while (!verdict && reader->Read(&response)) {
      for (const pb::Entry& wire : response.entries()) {
        if (wire.index() < next) continue;  // delivered before the reconnect: skip the overlap
        if (wire.index() > next) {
          verdict = Status(StatusCode::kDataLoss, target + ": tail jumped from index " + std::to_string(next) +
                                                      " to " + std::to_string(wire.index()));
          break;
        }
        ++next;
        progressed = true;
        if (!on_entry(from_wire(wire))) {
          verdict = Status();
          break;
        }
      }
    }
    if (verdict) context.TryCancel();
    const grpc::Status finish = reader->Finish();
    if (verdict) {
      if (verdict->ok()) return next;
      return *verdict;
    }
    if (progressed) {
      last_progress = Clock::now();
      backoff_ms = options_.backoff_min_ms;
      set_preferred(target);
    }
    if (finished()) break;

    const Status ended = finish.ok() ? Status(StatusCode::kUnavailable, target + ": the server ended the tail stream")
                                     : from_grpc(finish, context, target);
    switch (ended.code()) {
      case StatusCode::kUnavailable:
      case StatusCode::kCancelled:
      case StatusCode::kDeadlineExceeded:
      case StatusCode::kAborted:
      case StatusCode::kResourceExhausted:
        break;
      case StatusCode::kFailedPrecondition:
        if (!is_leader_error(ended)) return ended;
        break;
      default:
        return ended;  // the node refuses this range or request: another node will too
    }
    const auto stalled = Clock::now() - last_progress;
    if (stalled > Milliseconds(options_.retry_deadline_ms)) {
      return Status(StatusCode::kUnavailable,
                    "tail: no node served index " + std::to_string(next) + " for " +
                        std::to_string(std::chrono::duration_cast<Milliseconds>(stalled).count()) +
                        " ms; last error: " + ended.to_string(),
                    ended.details());
    }
    target = next_endpoint_after(target);
    Clock::duration pause = jittered(backoff_ms);
    if (bounded) pause = std::min(pause, std::max(Clock::duration::zero(), end_at - Clock::now()));
    if (!sleep_unless_stopped(pause, options.stop)) break;
    backoff_ms = std::min(backoff_ms * 2, options_.backoff_max_ms);
  }
  return next;
}

Result<NodeStatus> Client::Impl::status(const std::string& endpoint) {
  if (std::string problem = endpoint_problem(endpoint); !problem.empty()) {
    return Status(StatusCode::kInvalidArgument, std::move(problem));
  }
  grpc::ClientContext context;
  set_call_deadline(context, Clock::now() + Milliseconds(options_.call_timeout_ms));
  pb::StatusResponse response;
  const grpc::Status result =
      pb::Log::NewStub(channel(endpoint))->Status(&context, pb::StatusRequest(), &response);
  if (!result.ok()) return from_grpc(result, context, endpoint);
  return status_from_wire(response, endpoint);
}

std::vector<EndpointStatus> Client::Impl::status_all() {
  const std::vector<std::string>& endpoints = options_.endpoints;
  std::vector<std::optional<Result<NodeStatus>>> answers(endpoints.size());
  std::vector<std::thread> threads;  // at most kMaxEndpoints
  threads.reserve(endpoints.size());
  for (std::size_t i = 0; i < endpoints.size(); ++i) {
    threads.emplace_back([this, &answers, &endpoints, i] { answers[i].emplace(status(endpoints[i])); });
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
  if (target_id == 0) return Status(StatusCode::kInvalidArgument, "transfer target must be a node id (not 0)");
  pb::TransferLeadershipRequest request;
  request.set_target_id(target_id);
  pb::TransferLeadershipResponse response;
  const Status status = call_with_retries(
      "transfer-leadership",
      [&](const std::string& endpoint, grpc::ClientContext& context) {
        response.Clear();
        return from_grpc(pb::Admin::NewStub(channel(endpoint))->TransferLeadership(&context, request, &response),
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
  set_call_deadline(context, Clock::now() + Milliseconds(options_.call_timeout_ms));
  pb::FlushResponse response;
  const grpc::Status result = pb::Admin::NewStub(channel(endpoint))->Flush(&context, pb::FlushRequest(), &response);
  if (!result.ok()) return from_grpc(result, context, endpoint);
  return response.flushed_index();
}

Result<TrimResult> Client::Impl::trim(const std::string& endpoint, std::uint64_t before_index) {
  if (std::string problem = endpoint_problem(endpoint); !problem.empty()) {
    return Status(StatusCode::kInvalidArgument, std::move(problem));
  }
  grpc::ClientContext context;
  set_call_deadline(context, Clock::now() + Milliseconds(options_.call_timeout_ms));
  pb::TrimRequest request;
  request.set_before_index(before_index);
  pb::TrimResponse response;
  const grpc::Status result = pb::Admin::NewStub(channel(endpoint))->Trim(&context, request, &response);
  if (!result.ok()) return from_grpc(result, context, endpoint);
  return TrimResult{response.first_index(), response.limit()};
}

Result<HealthState> Client::Impl::health(const std::string& endpoint, const std::string& service) {
  if (std::string problem = endpoint_problem(endpoint); !problem.empty()) {
    return Status(StatusCode::kInvalidArgument, std::move(problem));
  }
  grpc::ClientContext context;
  set_call_deadline(context, Clock::now() + Milliseconds(options_.call_timeout_ms));
  const std::string request_bytes = encode_health_request(service);
  grpc::Slice slice(request_bytes);
  grpc::ByteBuffer request(&slice, 1);
  grpc::ByteBuffer response;
  std::promise<grpc::Status> done;
  grpc::GenericStub stub(channel(endpoint));
  stub.UnaryCall(&context, "/grpc.health.v1.Health/Check", grpc::StubOptions(), &request, &response,
                 [&done](grpc::Status status) { done.set_value(std::move(status)); });
  // Bounded by the call deadline set above.
  const grpc::Status result = done.get_future().get();
  if (result.error_code() == grpc::StatusCode::NOT_FOUND) return HealthState::kServiceUnknown;
  if (!result.ok()) return from_grpc(result, context, endpoint);
  std::vector<grpc::Slice> slices;
  std::string bytes;
  if (response.Dump(&slices).ok()) {
    for (const grpc::Slice& part : slices) bytes.append(reinterpret_cast<const char*>(part.begin()), part.size());
  }
  std::uint64_t state = 0;
  if (!decode_health_response(bytes, &state) || state > 3) {
    return Status(StatusCode::kInternal, endpoint + ": malformed grpc.health.v1 response");
  }
  return static_cast<HealthState>(state);
}

Result<std::unique_ptr<Client>> Client::create(Options options) {
  if (std::string problem = validate_options(options); !problem.empty()) {
    return Status(StatusCode::kInvalidArgument, std::move(problem));
  }
  Result<std::shared_ptr<grpc::ChannelCredentials>> credentials = channel_credentials(options.tls);
  if (!credentials.ok()) return credentials.status();
  auto impl = std::make_unique<Impl>(std::move(options));
  impl->set_credentials(std::move(credentials).value());
  return std::unique_ptr<Client>(new Client(std::move(impl)));
}

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Client::~Client() = default;
std::uint64_t Client::client_id() const { return impl_->client_id(); }
std::uint64_t Client::next_sequence() const { return impl_->next_sequence(); }
std::string Client::preferred_endpoint() const { return impl_->preferred_endpoint(); }
Result<AppendResult> Client::append(const std::vector<std::string>& payloads) { return impl_->append(payloads); }
Result<ReadResult> Client::read(std::uint64_t from_index, std::uint32_t max_entries, std::uint64_t max_bytes,
                                bool linearizable) {
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
