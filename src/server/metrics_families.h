// The metric families of raftlogd's /metrics page (docs/metrics.md), one group per part of the node
// they describe: the node and its Raft state, client requests, the store, the derived indexes, the
// snapshot transfers, the peers, the process. Each group registers its families when it is built
// and sets its gauges from the node's state when Metrics::Impl refreshes them at scrape time;
// counters and histograms fed by events are public members. Internal to metrics*.cpp:
// prometheus-cpp stays behind metrics.h.
#pragma once

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "server/dispatch_stats.h"
#include "server/metrics_process.h"
#include "server/node_types.h"
#include "server/snapshot_progress.h"

namespace raftlog::server::metrics {

using prometheus::Counter;
using prometheus::Gauge;
using prometheus::Histogram;

double seconds(std::chrono::steady_clock::duration d);
// Exponential bucket bounds: start, start*factor, ... (count bounds).
Histogram::BucketBoundaries exponential(double start, double factor, int count);
// A counter that follows a total which only grows (the node's and the transport's own totals).
void follow_total(Counter& counter, double total);

// Registers families on one registry; every series carries the constant label node_id.
class FamilyBuilder {
 public:
  FamilyBuilder(prometheus::Registry& registry, std::uint64_t node_id);

  prometheus::Family<Gauge>& gauges(const char* name, const char* help);
  prometheus::Family<Counter>& counters(const char* name, const char* help);
  prometheus::Family<Histogram>& histograms(const char* name, const char* help);
  // A family's one unlabelled series.
  Gauge& gauge(const char* name, const char* help) { return gauges(name, help).Add({}); }
  Counter& counter(const char* name, const char* help) { return counters(name, help).Add({}); }
  Histogram& histogram(const char* name, const char* help, Histogram::BucketBoundaries buckets) {
    return histograms(name, help).Add({}, std::move(buckets));
  }

 private:
  prometheus::Registry& registry_;
  const prometheus::Labels node_;
};

// One row of a table of metrics read from a `Source` at scrape time.
template <typename Source>
struct Reading {
  const char* name;
  const char* help;
  double (*value)(const Source&);
};

// A field of `Source` as a metric's value: `&field<&NodeStatus::term>`.
template <typename>
struct MemberOf;
template <typename Class, typename Type>
struct MemberOf<Type Class::*> {
  using Source = Class;
};
template <auto Member>
double field(const typename MemberOf<decltype(Member)>::Source& source) {
  return static_cast<double>(source.*Member);
}

// Gauges set to, and counters that follow, values read from a `Source` at each scrape; registered
// from tables of Reading rows, in the rows' order.
template <typename Source>
class Readings {
 public:
  void add_gauges(FamilyBuilder& builder, std::initializer_list<Reading<Source>> rows) {
    for (const Reading<Source>& row : rows)
      gauges_.emplace_back(&builder.gauge(row.name, row.help), row.value);
  }
  // Counters that follow a total of `Source` which only grows.
  void add_totals(FamilyBuilder& builder, std::initializer_list<Reading<Source>> rows) {
    for (const Reading<Source>& row : rows)
      totals_.emplace_back(&builder.counter(row.name, row.help), row.value);
  }
  void refresh(const Source& source) const {
    for (const auto& [gauge, value] : gauges_) gauge->Set(value(source));
    for (const auto& [counter, value] : totals_) follow_total(*counter, value(source));
  }

 private:
  std::vector<std::pair<Gauge*, double (*)(const Source&)>> gauges_;
  std::vector<std::pair<Counter*, double (*)(const Source&)>> totals_;
};

// The build, the Raft state and the Raft loop (metrics_node_families.cpp).
class NodeMetrics {
 public:
  explicit NodeMetrics(FamilyBuilder& builder);
  void refresh(const NodeStatus& status) const;

  Counter* leader_changes = nullptr;
  Counter* elections_won = nullptr;
  Counter* elections_lost = nullptr;
  Histogram* loop_round = nullptr;

 private:
  Readings<NodeStatus> readings_;
  std::array<Gauge*, 4> role_{};  // by raft::Role
};

// Client requests: appends, and every RPC by method, status code and refusal reason
// (metrics_node_families.cpp).
class ClientMetrics {
 public:
  explicit ClientMetrics(FamilyBuilder& builder);
  // `reason`: the ErrorInfo reason word of a refusal, "" for none.
  void record_rpc(const std::string& method, int grpc_code, double latency_seconds,
                  const std::string& reason);

  Counter* append_requests = nullptr;
  Counter* appended_entries = nullptr;
  Counter* appended_bytes = nullptr;
  Histogram* commit_latency = nullptr;

 private:
  // Built once: record_rpc() runs for every client RPC.
  const Histogram::BucketBoundaries rpc_latency_buckets_ = exponential(0.0005, 2, 16);
  prometheus::Family<Counter>* rejected_ = nullptr;
  prometheus::Family<Counter>* grpc_requests_ = nullptr;
  prometheus::Family<Histogram>* grpc_duration_ = nullptr;
};

// The process's memory and CPU (metrics_node_families.cpp).
class ProcessMetrics {
 public:
  explicit ProcessMetrics(FamilyBuilder& builder);
  void refresh() const { readings_.refresh(sample_process()); }

 private:
  Readings<ProcessSample> readings_;
};

// The store: its indexes, flushes, scrub, disk and start-up recovery (metrics_store_families.cpp).
class StoreMetrics {
 public:
  explicit StoreMetrics(FamilyBuilder& builder);
  void refresh(const NodeStatus& status) const;
  // The free space of the file system holding `data_dir`.
  void refresh_disk(const std::string& data_dir) const;
  void refresh_watermark(bool exceeded) const { watermark_->Set(exceeded ? 1 : 0); }

  Histogram* fsync = nullptr;
  Histogram* group_commit = nullptr;
  Counter* segments_deleted = nullptr;

 private:
  Readings<NodeStatus> readings_;
  Gauge* disk_free_ratio_ = nullptr;
  Gauge* watermark_ = nullptr;
  std::array<Gauge*, 3> recovery_mode_{};  // by store::RecoveryMode
};

// The derived indexes and the consumer group table (metrics_store_families.cpp).
class DerivedMetrics {
 public:
  explicit DerivedMetrics(FamilyBuilder& builder);
  void refresh(const NodeStatus& status) const { readings_.refresh(status); }
  void refresh_dispatch(const DispatchStats& stats) const { dispatch_.refresh(stats); }

 private:
  Readings<NodeStatus> readings_;
  Readings<DispatchStats> dispatch_;
};

// Snapshots this node encodes, sends and receives (metrics_transfer_families.cpp).
class SnapshotMetrics {
 public:
  explicit SnapshotMetrics(FamilyBuilder& builder);
  void refresh(const NodeStatus& status, const SnapshotTransfers& transfers) const;

 private:
  Readings<SnapshotTransfers> transfers_;
  Readings<NodeStatus> status_;
  std::array<Counter*, kResumeMissReasons> resume_missed_{};  // by ResumeMiss
};

// The leader's view of each peer (series labelled `peer`, on the leader only), and the peer port's
// admission of unconfigured nodes (metrics_transfer_families.cpp).
class PeerMetrics {
 public:
  explicit PeerMetrics(FamilyBuilder& builder);
  // Sets every peer's series and removes those of peers no longer in the status.
  void refresh(const NodeStatus& status, const SnapshotTransfers& transfers) const;
  void refresh_admission(const InboundStats& stats) const { admission_.refresh(stats); }
  void refresh_outbound(const OutboundTotals& totals) const;

  // What a peer's series are read from: its status and its snapshot in flight (nullptr: none).
  struct Peer {
    const PeerStatus& status;
    const SnapshotTransfer* snapshot;
  };

 private:
  std::vector<std::pair<prometheus::Family<Gauge>*, double (*)(const Peer&)>> families_;
  Readings<InboundStats> admission_;
  Counter* queue_full_control_ = nullptr;  // raftlog_peer_queue_full_drops_total, by lane
  Counter* queue_full_append_ = nullptr;
  mutable std::set<std::string> exported_peers_;  // the ids with series (the caller serialises)
};

}  // namespace raftlog::server::metrics
