// Metrics: raftlogd's Prometheus endpoint (`--metrics-addr`), every metric named in docs/metrics.md.
//
// Three sources feed it:
//   - NodeEvents (this class implements it): counters and histograms updated where things happen
//     (proposals, commits, elections, store flushes);
//   - a gRPC server interceptor: client RPCs by method and status code, their latency, and
//     refusals by the ErrorInfo reason word; for AppendStream, whose call the interceptor skips,
//     ClientRequestObserver reports each append answered on the stream instead;
//   - the node's status snapshot, read when Prometheus scrapes: gauges (role, term, indexes, peer
//     lag, disk use), so a scrape always shows the state at that moment and the Raft loop does no
//     metrics work for them.
// prometheus-cpp stays inside metrics.cpp.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "server/client_request_observer.h"
#include "server/dispatch_stats.h"
#include "server/node_types.h"
#include "server/snapshot_progress.h"

namespace grpc::experimental {
class ServerInterceptorFactoryInterface;
}  // namespace grpc::experimental

namespace raftlog::server {

class Metrics final : public NodeEvents, public ClientRequestObserver {
 public:
  // Serves http://<listen_address>/metrics ("host:port"; port 0 picks a free one). nullptr with
  // `error` set when the address cannot be bound.
  static std::unique_ptr<Metrics> start(std::uint64_t node_id, const std::string& listen_address,
                                        const std::string& data_dir, std::string* error);
  ~Metrics() override;
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  // Where the status gauges come from at scrape time. Until set (and after set_status_source({}))
  // a scrape shows only counters and histograms. The function must stay callable while set.
  void set_status_source(std::function<NodeStatus()> source);
  // The node's snapshot transfers (snapshot_progress.h), read with the status at scrape time.
  void set_snapshot_source(std::function<SnapshotTransfers(const NodeStatus&)> source);
  // Whether appends are refused above the disk watermark, for raftlog_store_disk_watermark_exceeded.
  void set_watermark_source(std::function<bool()> source);
  // The peer transport's inbound admission (raftlog_peer_unconfigured_*), read at each scrape.
  void set_admission_source(std::function<InboundStats()> source);
  // The peer transport's outbound totals (raftlog_peer_queue_full_drops_total), read at each scrape.
  void set_outbound_source(std::function<OutboundTotals()> source);
  // The dispatcher's time (raftlog_derived_persist*, raftlog_derived_apply_seconds_total).
  void set_dispatch_source(std::function<DispatchStats()> source);

  // "host:port" actually bound.
  const std::string& bound_address() const;

  // A factory for ServerBuilder::experimental().SetInterceptorCreators(); it records client RPCs
  // (peer streams are not client requests and are skipped). Keeps a pointer to this object.
  std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> interceptor_factory();

  // NodeEvents
  void append_proposed() override;
  void append_committed(std::uint64_t entries, std::uint64_t payload_bytes,
                        std::chrono::steady_clock::duration latency) override;
  void leader_changed() override;
  void election_finished(bool won) override;
  void segments_deleted(std::uint64_t count) override;
  void store_flushed(const store::CommitLog::FlushCycle& cycle) override;
  void loop_round_finished(std::chrono::steady_clock::duration duration) override;

  // ClientRequestObserver
  void request_answered(std::string_view method, int grpc_code,
                        std::chrono::steady_clock::duration latency,
                        std::string_view reason) override;

  class Impl;

 private:
  explicit Metrics(std::shared_ptr<Impl> impl);
  std::shared_ptr<Impl> impl_;
};

}  // namespace raftlog::server
