// raftlog C++ client library (used by raftlogctl and raftlog-bench).
//
// Bootstraps from any subset of the cluster's client endpoints, finds the leader (following the
// leader named in a NOT_LEADER error in one hop), and retries with exponential backoff within an
// overall deadline. Appends are idempotent: each append() call takes the next sequence number of this
// client's (client_id, sequence) pair and every retry of that call reuses it, so a retry after a lost
// answer or a leader change returns the original indexes instead of writing twice.
//
// Retried: UNAVAILABLE, DEADLINE_EXCEEDED, FAILED_PRECONDITION whose ErrorInfo reason is
// NOT_LEADER or NO_LEADER, and RESOURCE_EXHAUSTED whose reason is TOO_MANY_PENDING (after a backoff,
// on the same node; docs/client-protocol.md). Everything else (INVALID_ARGUMENT, OUT_OF_RANGE, DISK_FULL, ...) is
// returned at once. When the retry deadline runs out the call returns DEADLINE_EXCEEDED whose
// message names the attempts made and the last error seen.
//
// No exceptions cross this API: every call returns a Status or a Result<T>. A Client is thread-safe;
// appends from one Client are serialized (one in flight at a time) so the server sees each client's
// sequence numbers in increasing order. Use one Client per concurrent writer (raftlog-bench does), or
// a Producer (producer.h) to share Append calls between threads.
//
// Appends travel on an AppendStream call (Options::append_stream) to the endpoint that last
// answered, shared by the Clients of the process that append to that endpoint (Options::
// share_append_stream; appends of several Clients then leave in one message), or one per Client;
// a broken stream is reopened by the next attempt. Threads: a watchdog thread per shared stream (or
// per Client, started by its first append) cancels a stream whose answer is late.
#pragma once

#include <cassert>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "api_errors/error_details.h"

namespace raftlog::client {

// The error vocabulary the client shares with the server (src/api_errors), under the client's own
// names: Status::details() is an ErrorDetails whose reason is one of the reason:: words.
using ErrorDetails = api_errors::ErrorDetails;
namespace reason = api_errors::reason;

// The gRPC status codes, numerically identical (so callers need no gRPC header).
enum class StatusCode : int {
  kOk = 0,
  kCancelled = 1,
  kUnknown = 2,
  kInvalidArgument = 3,
  kDeadlineExceeded = 4,
  kNotFound = 5,
  kAlreadyExists = 6,
  kPermissionDenied = 7,
  kResourceExhausted = 8,
  kFailedPrecondition = 9,
  kAborted = 10,
  kOutOfRange = 11,
  kUnimplemented = 12,
  kInternal = 13,
  kUnavailable = 14,
  kDataLoss = 15,
  kUnauthenticated = 16,
};

// "UNAVAILABLE", "FAILED_PRECONDITION", ... (the gRPC spelling).
const char* to_string(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string message, std::optional<ErrorDetails> details = std::nullopt)
      : code_(code), message_(std::move(message)), details_(std::move(details)) {}

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // The server's ErrorInfo, when it attached one (leader hint, reason word, index hints).
  const std::optional<ErrorDetails>& details() const { return details_; }
  // "OK" or "<CODE>: <message>".
  std::string to_string() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
  std::optional<ErrorDetails> details_;
};

// Either a value or a non-OK Status.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}         // NOLINT(google-explicit-constructor)
  Result(Status status) : status_(std::move(status)) {  // NOLINT(google-explicit-constructor)
    assert(!status_.ok() && "Result constructed from an OK status without a value");
  }

  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }
  T& value() & {
    assert(ok());
    return *value_;
  }
  const T& value() const& {
    assert(ok());
    return *value_;
  }
  T&& value() && {
    assert(ok());
    return std::move(*value_);
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  Status status_;
  std::optional<T> value_;
};

inline constexpr std::size_t kMaxEndpoints = 64;

// Parses "host:port,host:port,...". Spaces around items are ignored; empty items, a missing or
// non-numeric port, a port outside 1..65535, duplicates and more than kMaxEndpoints items are
// INVALID_ARGUMENT. IPv6 hosts are written in brackets: "[::1]:7001".
Result<std::vector<std::string>> parse_endpoints(std::string_view text);

// TLS towards the nodes (docs/security.md). The server's certificate must name the host of the
// endpoint dialled (an IP SAN for an IP address).
struct TlsOptions {
  bool enabled = false;
  std::string ca_file;  // PEM CA certificates that sign the nodes' certificates; "" = system roots
  std::string cert_file;  // with key_file: a client certificate, for nodes started with --tls-ca
  std::string key_file;
};

struct Options {
  std::vector<std::string> endpoints;    // "host:port" each (see parse_endpoints), 1..kMaxEndpoints
  std::uint32_t call_timeout_ms = 2000;  // one attempt (one RPC)
  std::uint32_t retry_deadline_ms = 10000;  // all attempts of one call together
  std::uint32_t backoff_min_ms = 20;        // sleep between attempts: doubles from min to max,
  std::uint32_t backoff_max_ms = 500;  // plus up to 25% jitter; a one-hop redirect does not sleep
  std::uint64_t client_id = 0;         // 0: a random non-zero id (std::random_device)
  std::uint64_t first_sequence = 1;    // sequence number of this client's first append (>= 1)
  std::size_t max_message_bytes = (64u << 20) + (64u << 10);  // gRPC send/receive bound per message
  // Send appends as messages on one long-lived AppendStream call (cheaper per append than a unary
  // call) rather than as unary Append calls. A node that does not know AppendStream (UNIMPLEMENTED)
  // or has too many streams open is sent unary calls instead; the behaviour is the same either way.
  bool append_stream = true;
  // A stream with no append for this long is closed (the next append opens a new one), so idle
  // Clients do not hold stream slots of the connection all Clients of a process share.
  std::uint32_t append_stream_idle_ms = 30000;
  // With append_stream: every Client of the process whose endpoint and connection options are the
  // same appends on one shared AppendStream call per endpoint, and appends of several Clients
  // waiting at the same moment leave in one message (each keeps its own client id, sequence,
  // retries and answer). false: each Client has a stream of its own, one append per message.
  bool share_append_stream = true;
  TlsOptions tls;  // plaintext unless tls.enabled
};

// Empty when usable, otherwise a sentence naming the first problem.
std::string validate_options(const Options& options);

struct AppendResult {
  std::uint64_t first_index = 0;
  std::uint64_t last_index = 0;
  std::uint64_t term = 0;
  bool duplicate =
      false;  // the server answered from its dedup table (an earlier attempt committed)
  std::uint64_t sequence = 0;  // the sequence number this append used
};

// kGroupCommit: a consumer group's offset commit (Topics::commit_offset), not client data.
enum class EntryType { kNormal = 0, kNoop = 1, kConfig = 2, kGroupCommit = 3 };
const char* to_string(EntryType type);  // "normal", "noop", "config", "group-commit"

struct Entry {
  std::uint64_t index = 0;
  std::uint64_t term = 0;
  EntryType type = EntryType::kNormal;  // kNoop: a new leader's empty entry, not client data
  std::string payload;
  std::uint64_t client_id = 0;
  std::uint64_t sequence = 0;
  // An entry appended with attributes: its topic and keys, and the leader's append time (ms since
  // the Unix epoch); payload is then the user's bytes only.
  bool has_attributes = false;
  std::string topic;
  std::vector<std::string> keys;
  std::uint64_t timestamp_ms = 0;

  friend bool operator==(const Entry&, const Entry&) = default;
};

// An entry's optional topic and keys (proto raftlog.v1.EntryAttributes has the bounds).
struct EntryAttributes {
  std::string topic;
  std::vector<std::string> keys;
};

struct ReadResult {
  std::vector<Entry> entries;
  std::uint64_t commit_index = 0;
  std::string served_by;  // the endpoint that answered
};

enum class Role { kUnknown, kFollower, kPreCandidate, kCandidate, kLeader };
enum class FlushMode { kUnknown, kSync, kAsync };

struct TrimResult {
  std::uint64_t first_index = 0;  // the node's first retained index afterwards
  std::uint64_t limit = 0;        // the highest before_index it would accept at that moment
};
const char* to_string(Role role);             // "follower", "leader", ...
const char* to_string(FlushMode flush_mode);  // "sync", "async", "unknown"

// A snapshot being sent or received (client.proto's SnapshotTransfer).
struct SnapshotTransfer {
  std::string state;  // "sending", "sent", "receiving", "installing"
  std::uint64_t peer = 0;  // the follower it goes to, or the leader it comes from
  std::uint64_t index = 0;
  std::uint64_t term = 0;
  std::uint64_t bytes_done = 0;
  std::uint64_t bytes_total = 0;
  std::uint64_t bytes_skipped = 0;  // a resumed send: held by the follower already (in bytes_done)
  // A send that started at 0 although the follower held a partial: why it could not resume from it
  // ("point", "bytes", "beyond_sent", "head", "continuation", "digest"; "" otherwise).
  std::string resume_missed;
};

struct PeerStatus {
  std::uint64_t id = 0;
  std::string address;
  std::uint64_t match_index = 0;
  std::uint64_t lag_entries = 0;
  std::uint64_t last_contact_ms = 0;
  bool probing = false;
  bool behind_first_index = false;  // needs trimmed entries: caught up by a snapshot
  std::uint64_t lag_bytes = 0;
  std::optional<SnapshotTransfer> snapshot;  // in flight to this peer
  bool disk_over_watermark = false;          // it reports no room (client.proto's PeerStatus)
};

struct NodeStatus {
  std::string endpoint;  // where this answer came from
  std::uint64_t node_id = 0;
  std::string address;
  Role role = Role::kUnknown;
  std::uint64_t term = 0;
  std::uint64_t leader_id = 0;
  std::string leader_address;
  std::uint64_t first_index = 0;
  std::uint64_t last_index = 0;
  std::uint64_t commit_index = 0;
  std::uint64_t flushed_index = 0;
  FlushMode flush_mode = FlushMode::kUnknown;
  std::vector<PeerStatus> peers;  // leader only
  // Storage faults (client.proto's StatusResponse says what each means).
  bool catching_up = false;
  std::uint64_t catching_up_to_index = 0;
  std::string storage_fault;
  bool unvouched = false;          // waits for a leader to catch it up (client.proto)
  std::string unvouched_hint;      // unvouched without a leader for long: may wait for an operator
  std::string committed_conflict;  // a leader's append contradicted a committed entry ("": none)
  std::string second_leader;       // a second leader of its term is refused ("": none lately)
  std::string leadership_refused;  // a node refuses its leadership of a term ("": none lately)
  std::uint64_t stranded_below_index = 0;  // needs entries the leader trimmed (0 = not stranded)
  bool removed = false;  // a member said this node was removed (client.proto's StatusResponse)
  std::uint64_t removed_by = 0;  // that member (0: the node's own log holds its removal)
  // The disk (client.proto's StatusResponse): use (0..1), the high watermark, past it, and a leader
  // past it keeping leadership because no follower reports room, or waiting this long before
  // handing leadership to one that does (the bound between two handovers; 0 = not waiting).
  double disk_used_ratio = 0.0;
  double disk_high_watermark = 0.0;
  bool disk_over_high_watermark = false;
  bool disk_keeping_leadership = false;
  std::uint64_t disk_handover_wait_ms = 0;
  // The configuration in force on the node (empty from a node that predates these fields).
  std::vector<std::uint64_t> voters;
  std::vector<std::uint64_t> learners;
  std::uint64_t learner_catching_up_to_index = 0;  // a learner still catching up (0 = not)
  // Any follower catching up to its leader (not ready for reads): the leader's commit index it
  // catches up to (0 = not); the entries its log lacks of it (any follower with a leader); why
  // health is NOT_SERVING ("" when SERVING or from older nodes).
  std::uint64_t catching_up_to_leader_commit = 0;
  std::uint64_t behind_leader_commit_entries = 0;
  std::string not_serving_reason;
  // The node's derived indexes (topics, keys, time): how far they reach, how far behind the
  // commit index they are, why they stopped ("" = running).
  std::uint64_t derived_indexed_through = 0;
  std::uint64_t derived_lag_entries = 0;
  std::string derived_problem;
  // The consumer group table: the last index it applied, where retention is held for it, and the
  // commits it could not decode or refused past its stored bounds (Status RPC, client.proto).
  std::uint64_t groups_applied_through = 0;
  std::uint64_t groups_retention_hold = 0;
  std::uint64_t groups_bad_commits = 0;
  std::uint64_t groups_refused_commits = 0;
  std::uint64_t corrupt_index = 0;
  std::uint64_t scrub_bytes_verified = 0;
  std::uint64_t scrub_passes = 0;
  // The node's raftlogd version and git revision; empty from a node that predates them.
  std::string version;
  std::string revision;
  // A snapshot this follower is receiving or installing, and the node's snapshot counters.
  std::optional<SnapshotTransfer> receiving_snapshot;
  std::uint64_t snapshots_sent = 0;
  std::uint64_t snapshots_abandoned = 0;
  std::uint64_t snapshots_received = 0;
  std::uint64_t snapshot_chunks_refused = 0;
  std::uint64_t snapshots_above_first_index = 0;  // sent with the point above the first index - 1
  // Snapshot data encoded / encodings reused as leader; transfers resumed at a follower's receipt
  // and the bytes they skipped; partials continued by a new leader (client.proto).
  std::uint64_t snapshot_encodes = 0;
  std::uint64_t snapshot_encodings_reused = 0;
  std::uint64_t snapshots_resumed = 0;
  std::uint64_t snapshot_bytes_skipped = 0;
  std::uint64_t snapshot_partials_continued = 0;
  // Partials restored from SNAPSHOT.partial at the node's start, their bytes, and such files
  // dropped at start (client.proto).
  std::uint64_t snapshot_partials_restored = 0;
  std::uint64_t snapshot_bytes_restored = 0;
  std::uint64_t snapshot_partial_files_dropped = 0;
  // Continuations sent as leader and the bytes they saved; partials spliced and continuations
  // refused as follower (client.proto).
  std::uint64_t snapshots_continued = 0;
  std::uint64_t snapshot_resume_saved_bytes = 0;
  std::uint64_t snapshot_partials_spliced = 0;
  std::uint64_t snapshot_splices_refused = 0;
};

struct EndpointStatus {
  std::string endpoint;
  Result<NodeStatus> status;
};

// grpc.health.v1 answers (the numbers are the protocol's).
enum class HealthState { kUnknown = 0, kServing = 1, kNotServing = 2, kServiceUnknown = 3 };
const char* to_string(HealthState state);  // "SERVING", "NOT_SERVING", ...

struct TransferResult {
  std::uint64_t leader_id = 0;
  std::uint64_t term = 0;
};

struct TailOptions {
  std::uint64_t from_index = 1;   // >= 1
  std::stop_token stop;           // request_stop() ends the tail promptly (cancels the RPC)
  std::uint32_t duration_ms = 0;  // 0: until stopped; else the tail ends (OK) after this long
  std::uint64_t max_bytes_per_message = 0;  // 0: server default
};

// Called for each entry, in index order, each index exactly once. Return false to end the tail.
using TailCallback = std::function<bool(const Entry& entry)>;

class Client {
 public:
  // INVALID_ARGUMENT when validate_options fails or a TLS file cannot be read.
  static Result<std::unique_ptr<Client>> create(Options options);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  std::uint64_t client_id() const;
  // The sequence number the next append() will use. Every append() call takes one, even one that
  // fails: a call that gave up may still commit later, so its number is never reused for other data.
  std::uint64_t next_sequence() const;
  // The endpoint calls go to first: the last one that answered or that was named as leader.
  std::string preferred_endpoint() const;

  // Appends `payloads` (1 or more) atomically; returns once committed.
  Result<AppendResult> append(const std::vector<std::string>& payloads);
  // The same with a topic and keys per entry: `attributes` has one element per payload.
  Result<AppendResult> append(const std::vector<std::string>& payloads,
                              const std::vector<EntryAttributes>& attributes);
  // Committed entries from `from_index`. max_entries/max_bytes 0 = server defaults. linearizable
  // reads go to the leader (redirected); others are served by whichever node answers.
  Result<ReadResult> read(std::uint64_t from_index, std::uint32_t max_entries,
                          std::uint64_t max_bytes, bool linearizable);
  // Follows the log from options.from_index, calling on_entry for each entry. When a stream breaks
  // (node down, node shutting down) it reconnects to the next endpoint and resumes at the next
  // index, skipping any entry it already delivered. Returns the next index not yet delivered when
  // the tail ends normally (stop requested, duration elapsed, callback returned false); an error
  // when the server refuses the range (e.g. OUT_OF_RANGE below the first retained index), when it
  // sends a gap, or when no node served it for retry_deadline_ms, counted from the end of its last
  // working stream (one the node accepted, which it signals at once even on a quiet log, or that
  // delivered an entry). A node that does not accept a stream within call_timeout_ms is left for
  // the next endpoint.
  Result<std::uint64_t> tail(const TailOptions& options, const TailCallback& on_entry);
  // One node's view (no retries; `endpoint` need not be in the endpoint list).
  Result<NodeStatus> status(const std::string& endpoint);
  // status() of every configured endpoint, queried in parallel, in endpoint-list order.
  std::vector<EndpointStatus> status_all();
  // Asks the leader (found with redirects) to hand leadership to `target_id`.
  Result<TransferResult> transfer_leadership(std::uint64_t target_id);
  // Forces a flush on `endpoint`; returns that node's flushed index. No retries.
  Result<std::uint64_t> flush(const std::string& endpoint);
  // Asks `endpoint` to delete its whole segments below `before_index` (as far as its safety limit
  // allows; see proto Admin.Trim). No retries.
  Result<TrimResult> trim(const std::string& endpoint, std::uint64_t before_index);
  // One grpc.health.v1.Health/Check call to `endpoint` for `service` ("" = the whole node,
  // "raftlog.v1.Log"). No retries. NOT_FOUND from the server comes back as kServiceUnknown.
  Result<HealthState> health(const std::string& endpoint, const std::string& service);

 private:
  class Impl;
  explicit Client(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace raftlog::client
