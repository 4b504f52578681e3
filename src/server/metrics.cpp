// Metrics: the Prometheus endpoint, its sources and the events it counts (metrics.h). The families
// themselves are registered and refreshed per part of the node in metrics_*_families.cpp.
#include "server/metrics.h"

#include <grpcpp/support/server_interceptor.h>
#include <prometheus/exposer.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include "server/metrics_families.h"
#include "server/metrics_rpc_interceptor.h"
#include "util/host_port.h"

namespace raftlog::server {

using metrics::seconds;

// The registry and its families, the sources read at scrape time, and the HTTP listener.
class Metrics::Impl final : public prometheus::Collectable {
 public:
  Impl(std::uint64_t node_id, std::string data_dir)
      : data_dir_(std::move(data_dir)),
        registry_(std::make_shared<prometheus::Registry>()),
        builder_(*registry_, node_id),
        node_(builder_),
        client_(builder_),
        peers_(builder_),
        snapshots_(builder_),
        store_(builder_),
        derived_(builder_),
        process_(builder_) {}

  std::vector<prometheus::MetricFamily> Collect() const override {
    refresh();
    return registry_->Collect();
  }

  // Sets the gauges (and the counters that follow a total) from the sources.
  void refresh() const {
    std::lock_guard lock(source_mu_);
    process_.refresh();
    store_.refresh_disk(data_dir_);
    if (watermark_source_) store_.refresh_watermark(watermark_source_());
    if (admission_source_) peers_.refresh_admission(admission_source_());
    if (outbound_source_) peers_.refresh_outbound(outbound_source_());
    if (dispatch_source_) derived_.refresh_dispatch(dispatch_source_());
    if (!status_source_) return;
    const NodeStatus status = status_source_();
    node_.refresh(status);
    store_.refresh(status);
    derived_.refresh(status);
    const SnapshotTransfers transfers =
        snapshot_source_ ? snapshot_source_(status) : SnapshotTransfers{};
    snapshots_.refresh(status, transfers);
    peers_.refresh(status, transfers);
  }

  const std::string data_dir_;
  std::shared_ptr<prometheus::Registry> registry_;
  metrics::FamilyBuilder builder_;
  // Registered in this order: the page lists each type's families in it.
  metrics::NodeMetrics node_;
  metrics::ClientMetrics client_;
  metrics::PeerMetrics peers_;
  metrics::SnapshotMetrics snapshots_;
  metrics::StoreMetrics store_;
  metrics::DerivedMetrics derived_;
  metrics::ProcessMetrics process_;

  std::unique_ptr<prometheus::Exposer> exposer_;
  std::string bound_address_;
  // Guards the sources, and the peer series refresh() keeps (scrapes may run concurrently).
  mutable std::mutex source_mu_;
  std::function<NodeStatus()> status_source_;
  std::function<bool()> watermark_source_;
  std::function<InboundStats()> admission_source_;
  std::function<OutboundTotals()> outbound_source_;
  std::function<DispatchStats()> dispatch_source_;
  std::function<SnapshotTransfers(const NodeStatus&)> snapshot_source_;
};

std::unique_ptr<Metrics> Metrics::start(std::uint64_t node_id, const std::string& listen_address,
                                        const std::string& data_dir, std::string* error) {
  auto impl = std::make_shared<Impl>(node_id, data_dir);
  try {
    // Two threads: a scrape is quick; a second serves a concurrent scraper.
    impl->exposer_ = std::make_unique<prometheus::Exposer>(listen_address, 2);
  } catch (const std::exception& e) {
    *error = "cannot serve metrics on " + listen_address + ": " + e.what();
    return nullptr;
  }
  const std::vector<int> ports = impl->exposer_->GetListeningPorts();
  if (ports.empty()) {
    *error = "cannot serve metrics on " + listen_address + " (address in use or invalid?)";
    return nullptr;
  }
  impl->bound_address_ =
      listen_address.substr(0, listen_address.rfind(':')) + ":" + std::to_string(ports.front());
  impl->exposer_->RegisterCollectable(impl);
  return std::unique_ptr<Metrics>(new Metrics(std::move(impl)));
}

Metrics::Metrics(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}

namespace {

// One connection to the metrics listener, closed at once (its only purpose is to wake the listener).
void connect_once(const util::HostPort& address) {
  std::string host(address.host);
  if (host == "0.0.0.0") host = "127.0.0.1";  // a wildcard listener: reach it over loopback
  if (host == "::") host = "::1";
  sockaddr_storage storage{};
  socklen_t length = 0;
  auto* v4 = reinterpret_cast<sockaddr_in*>(&storage);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&storage);
  if (::inet_pton(AF_INET, host.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(static_cast<std::uint16_t>(address.port));
    length = sizeof(sockaddr_in);
  } else if (::inet_pton(AF_INET6, host.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(static_cast<std::uint16_t>(address.port));
    length = sizeof(sockaddr_in6);
  } else {
    return;  // a host name: not worth resolving during shutdown (the stop then takes its 2 s)
  }
  const int fd = ::socket(storage.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return;
  (void)::connect(fd, reinterpret_cast<const sockaddr*>(&storage), length);
  ::close(fd);
}

}  // namespace

Metrics::~Metrics() {
  // Stop serving first: a scrape in progress must not outlive the sources it reads.
  // civetweb's mg_stop() (inside the Exposer's destructor) waits for its listener thread, which sees
  // the stop only when its poll() returns: up to 2 s later without a new connection (civetweb's
  // SOCKET_TIMEOUT_QUANTUM), which made every SIGTERM of a node with --metrics-addr take ~2 s. A
  // thread connects every 20 ms until the destructor has returned (at most ~100 connections), so
  // the listener wakes, sees the stop and exits at once.
  util::HostPort address;
  const bool parsed =
      util::parse_host_port(impl_->bound_address_, util::PortZero::kRefused, &address).empty();
  std::atomic<bool> stopped{false};
  std::thread waker;
  if (parsed) {
    waker = std::thread([&] {
      constexpr int kMaxWakeups = 100;  // 2 s: civetweb's own bound, in case a wake-up is missed
      for (int i = 0; i < kMaxWakeups && !stopped.load(); ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        if (!stopped.load()) connect_once(address);
      }
    });
  }
  impl_->exposer_.reset();
  stopped.store(true);
  if (waker.joinable()) waker.join();
}

void Metrics::set_status_source(std::function<NodeStatus()> source) {
  std::lock_guard lock(impl_->source_mu_);
  impl_->status_source_ = std::move(source);
}

void Metrics::set_snapshot_source(std::function<SnapshotTransfers(const NodeStatus&)> source) {
  std::lock_guard lock(impl_->source_mu_);
  impl_->snapshot_source_ = std::move(source);
}

void Metrics::set_admission_source(std::function<InboundStats()> source) {
  std::lock_guard lock(impl_->source_mu_);
  impl_->admission_source_ = std::move(source);
}

void Metrics::set_outbound_source(std::function<OutboundTotals()> source) {
  std::lock_guard lock(impl_->source_mu_);
  impl_->outbound_source_ = std::move(source);
}

void Metrics::set_dispatch_source(std::function<DispatchStats()> source) {
  std::lock_guard lock(impl_->source_mu_);
  impl_->dispatch_source_ = std::move(source);
}

void Metrics::set_watermark_source(std::function<bool()> source) {
  std::lock_guard lock(impl_->source_mu_);
  impl_->watermark_source_ = std::move(source);
}

const std::string& Metrics::bound_address() const { return impl_->bound_address_; }

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>
Metrics::interceptor_factory() {
  return metrics::rpc_interceptor_factory(&impl_->client_);
}

void Metrics::append_proposed() { impl_->client_.append_requests->Increment(); }

void Metrics::append_committed(std::uint64_t entries, std::uint64_t payload_bytes,
                               std::chrono::steady_clock::duration latency) {
  impl_->client_.appended_entries->Increment(static_cast<double>(entries));
  impl_->client_.appended_bytes->Increment(static_cast<double>(payload_bytes));
  impl_->client_.commit_latency->Observe(seconds(latency));
}

void Metrics::leader_changed() { impl_->node_.leader_changes->Increment(); }

void Metrics::election_finished(bool won) {
  (won ? impl_->node_.elections_won : impl_->node_.elections_lost)->Increment();
}

void Metrics::segments_deleted(std::uint64_t count) {
  impl_->store_.segments_deleted->Increment(static_cast<double>(count));
}

void Metrics::store_flushed(const store::CommitLog::FlushCycle& cycle) {
  impl_->store_.fsync->Observe(seconds(cycle.sync_duration));
  if (cycle.entries > 0) impl_->store_.group_commit->Observe(static_cast<double>(cycle.entries));
}

void Metrics::loop_round_finished(std::chrono::steady_clock::duration duration) {
  impl_->node_.loop_round->Observe(seconds(duration));
}

void Metrics::request_answered(std::string_view method, int grpc_code,
                               std::chrono::steady_clock::duration latency,
                               std::string_view reason) {
  impl_->client_.record_rpc(std::string(method), grpc_code, seconds(latency), std::string(reason));
}

}  // namespace raftlog::server
