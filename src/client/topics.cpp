#include "client/topics.h"

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <thread>

#include "client/channels.h"
#include "client/wire.h"
#include "raftlog/v1/topics.grpc.pb.h"

namespace raftlog::client {

namespace pb = raftlog::v1;
using Clock = std::chrono::steady_clock;

class Topics::Impl {
 public:
  Impl(Options options, std::shared_ptr<grpc::ChannelCredentials> credentials)
      : options_(std::move(options)), channels_(options_, std::move(credentials)) {}

  // Runs `call` against each endpoint in turn until one answers with anything but UNAVAILABLE or
  // DEADLINE_EXCEEDED, within retry_deadline_ms. `call` gets the stub and a context with one
  // attempt's deadline.
  template <typename Call>
  Status run(const char* what, Call&& call, std::string* served_by) {
    const auto give_up = Clock::now() + std::chrono::milliseconds(options_.retry_deadline_ms);
    Status last(StatusCode::kUnavailable, std::string(what) + ": no endpoint answered");
    std::uint32_t backoff_ms = options_.backoff_min_ms;
    for (std::size_t attempt = 0; attempt < 10000; ++attempt) {
      const std::string& endpoint = options_.endpoints[(start_ + attempt) % options_.endpoints.size()];
      grpc::ClientContext context;
      context.set_deadline(std::chrono::system_clock::now() +
                           std::chrono::milliseconds(options_.call_timeout_ms));
      auto stub = pb::Topics::NewStub(channels_.get(endpoint));
      const grpc::Status status = call(*stub, context);
      if (status.ok()) {
        start_ = (start_ + attempt) % options_.endpoints.size();
        if (served_by != nullptr) *served_by = endpoint;
        return Status();
      }
      last = internal::from_grpc(status, context, endpoint);
      if (status.error_code() != grpc::StatusCode::UNAVAILABLE &&
          status.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED) {
        return last;
      }
      if (Clock::now() + std::chrono::milliseconds(backoff_ms) >= give_up) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(backoff_ms));
      backoff_ms = std::min(backoff_ms * 2, options_.backoff_max_ms);
    }
    return last;
  }

  const Options options_;
  internal::Channels channels_;
  std::size_t start_ = 0;
};

Result<std::unique_ptr<Topics>> Topics::create(Options options) {
  if (std::string problem = validate_options(options); !problem.empty())
    return Status(StatusCode::kInvalidArgument, problem);
  auto credentials = internal::channel_credentials(options.tls);
  if (!credentials.ok()) return credentials.status();
  return std::unique_ptr<Topics>(
      new Topics(std::make_unique<Impl>(std::move(options), std::move(credentials.value()))));
}

Topics::Topics(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Topics::~Topics() = default;

Result<TopicListing> Topics::list() {
  pb::ListTopicsResponse response;
  TopicListing out;
  const Status status = impl_->run(
      "list topics",
      [&](pb::Topics::Stub& stub, grpc::ClientContext& context) {
        response.Clear();
        return stub.ListTopics(&context, pb::ListTopicsRequest(), &response);
      },
      &out.served_by);
  if (!status.ok()) return status;
  for (const pb::TopicInfo& topic : response.topics())
    out.topics.push_back(TopicSummary{topic.topic(), topic.first_offset(), topic.end_offset()});
  out.commit_index = response.commit_index();
  out.indexed_through = response.indexed_through();
  return out;
}

namespace {

TopicReadResult read_from_wire(const pb::ReadTopicResponse& response) {
  TopicReadResult out;
  for (const pb::TopicEntry& entry : response.entries())
    out.entries.push_back(TopicEntry{entry.offset(), internal::entry_from_wire(entry.entry())});
  out.first_offset = response.first_offset();
  out.end_offset = response.end_offset();
  out.indexed_through = response.indexed_through();
  return out;
}

}  // namespace

Result<TopicReadResult> Topics::read(const std::string& topic, std::uint64_t from_offset,
                                     std::uint32_t max_entries) {
  pb::ReadTopicRequest request;
  request.set_topic(topic);
  request.set_from_offset(from_offset);
  request.set_max_entries(max_entries);
  pb::ReadTopicResponse response;
  std::string served_by;
  const Status status = impl_->run(
      "read topic",
      [&](pb::Topics::Stub& stub, grpc::ClientContext& context) {
        response.Clear();
        return stub.ReadTopic(&context, request, &response);
      },
      &served_by);
  if (!status.ok()) return status;
  TopicReadResult out = read_from_wire(response);
  out.served_by = served_by;
  return out;
}

Result<std::uint64_t> Topics::tail(const std::string& topic, std::uint64_t from_offset,
                                   std::uint64_t duration_ms, std::stop_token stop,
                                   const TopicTailCallback& on_entry) {
  const auto ends = duration_ms == 0 ? Clock::time_point::max()
                                     : Clock::now() + std::chrono::milliseconds(duration_ms);
  std::uint64_t next = from_offset;
  std::size_t endpoint = 0;
  auto last_progress = Clock::now();
  std::uint32_t backoff_ms = impl_->options_.backoff_min_ms;
  while (!stop.stop_requested() && Clock::now() < ends) {
    grpc::ClientContext context;
    if (ends != Clock::time_point::max()) {
      context.set_deadline(std::chrono::system_clock::now() +
                           std::chrono::duration_cast<std::chrono::milliseconds>(ends - Clock::now()));
    }
    std::stop_callback cancel(stop, [&context] { context.TryCancel(); });
    pb::ReadTopicRequest request;
    request.set_topic(topic);
    request.set_from_offset(next);
    const std::string& address =
        impl_->options_.endpoints[endpoint % impl_->options_.endpoints.size()];
    auto stub = pb::Topics::NewStub(impl_->channels_.get(address));
    auto reader = stub->TailTopic(&context, request);
    pb::ReadTopicResponse response;
    while (reader->Read(&response)) {
      for (const pb::TopicEntry& wire : response.entries()) {
        if (wire.offset() < next) continue;  // overlap after a reconnect
        if (wire.offset() > next) {
          return Status(StatusCode::kDataLoss, "topic " + topic + " jumped from offset " +
                                                   std::to_string(next) + " to " +
                                                   std::to_string(wire.offset()));
        }
        next = wire.offset() + 1;
        last_progress = Clock::now();
        if (!on_entry(TopicEntry{wire.offset(), internal::entry_from_wire(wire.entry())})) {
          context.TryCancel();
          return next;
        }
      }
    }
    const grpc::Status status = reader->Finish();
    if (stop.stop_requested() || Clock::now() >= ends) break;
    const grpc::StatusCode code = status.error_code();
    if (code == grpc::StatusCode::INVALID_ARGUMENT || code == grpc::StatusCode::OUT_OF_RANGE)
      return internal::from_grpc(status, context, address);
    if (Clock::now() - last_progress > std::chrono::milliseconds(impl_->options_.retry_deadline_ms))
      return internal::from_grpc(status, context, address);
    ++endpoint;  // the node went away or refused: the next one resumes at `next`
    std::this_thread::sleep_for(std::chrono::milliseconds(backoff_ms));
    backoff_ms = std::min(backoff_ms * 2, impl_->options_.backoff_max_ms);
  }
  return next;
}

Result<std::vector<Entry>> Topics::lookup_key(const std::string& key, std::uint32_t max_entries) {
  pb::LookupKeyRequest request;
  request.set_key(key);
  request.set_max_entries(max_entries);
  pb::LookupKeyResponse response;
  const Status status = impl_->run(
      "look up key",
      [&](pb::Topics::Stub& stub, grpc::ClientContext& context) {
        response.Clear();
        return stub.LookupKey(&context, request, &response);
      },
      nullptr);
  if (!status.ok()) return status;
  std::vector<Entry> out;
  for (const pb::Entry& entry : response.entries()) out.push_back(internal::entry_from_wire(entry));
  return out;
}

Result<TimeLookup> Topics::find_by_time(std::uint64_t timestamp_ms, const std::string& topic) {
  pb::FindByTimeRequest request;
  request.set_timestamp_ms(timestamp_ms);
  request.set_topic(topic);
  pb::FindByTimeResponse response;
  const Status status = impl_->run(
      "find by time",
      [&](pb::Topics::Stub& stub, grpc::ClientContext& context) {
        response.Clear();
        return stub.FindByTime(&context, request, &response);
      },
      nullptr);
  if (!status.ok()) return status;
  return TimeLookup{response.found(), response.index(), response.offset()};
}

bool parse_time(const std::string& text, std::uint64_t* timestamp_ms) {
  if (!text.empty() && text.find_first_not_of("0123456789") == std::string::npos) {
    if (text.size() > 19) return false;
    *timestamp_ms = std::stoull(text);
    return true;
  }
  int year = 0, month = 0, day = 0, hour = 0, minute = 0, second = 0, millis = 0;
  char tail[8] = {0};
  int consumed = 0;
  std::tm tm{};
  if (std::sscanf(text.c_str(), "%4d-%2d-%2d%n", &year, &month, &day, &consumed) != 3) return false;
  std::string rest = text.substr(static_cast<std::size_t>(consumed));
  if (!rest.empty()) {
    int n = 0;
    if (std::sscanf(rest.c_str(), "T%2d:%2d%n", &hour, &minute, &n) != 2) return false;
    rest = rest.substr(static_cast<std::size_t>(n));
    if (!rest.empty() && rest[0] == ':') {
      if (std::sscanf(rest.c_str(), ":%2d%n", &second, &n) != 1) return false;
      rest = rest.substr(static_cast<std::size_t>(n));
      if (!rest.empty() && rest[0] == '.') {
        if (std::sscanf(rest.c_str(), ".%3d%n", &millis, &n) != 1 || n != 4) return false;
        rest = rest.substr(static_cast<std::size_t>(n));
      }
    }
    if (rest != "Z") return false;
  }
  (void)tail;
  if (month < 1 || month > 12 || day < 1 || day > 31 || hour > 23 || minute > 59 || second > 60)
    return false;
  tm.tm_year = year - 1900;
  tm.tm_mon = month - 1;
  tm.tm_mday = day;
  tm.tm_hour = hour;
  tm.tm_min = minute;
  tm.tm_sec = second;
  const std::time_t seconds = timegm(&tm);
  if (seconds < 0) return false;
  *timestamp_ms = static_cast<std::uint64_t>(seconds) * 1000 + static_cast<std::uint64_t>(millis);
  return true;
}

}  // namespace raftlog::client
