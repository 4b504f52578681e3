#include "server/server.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpc/grpc.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/support/server_interceptor.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "server/client_services.h"
#include "server/dispatcher.h"
#include "server/groups_service.h"
#include "server/topics_service.h"
#include "server/health_reporter.h"
#include "server/join.h"
#include "server/membership_service.h"
#include "server/metrics.h"
#include "server/snapshot_formats.h"
#include "server/snapshot_progress.h"
#include "server/node.h"
#include "server/node_tls.h"
#include "server/transport.h"

namespace raftlog::server {

namespace {

// The node's outbound messages go to the transport, which never blocks.
class TransportSender final : public MessageSender {
 public:
  void send(raft::Message message) override {
    if (transport != nullptr) transport->send(std::move(message));
  }
  // The node names its peers when it opens, before the transport exists: kept for attach().
  void set_peers(const std::map<std::uint64_t, std::string>& peers) override {
    std::lock_guard lock(mu);
    latest_peers = peers;
    if (transport != nullptr) transport->set_peers(peers);
  }
  // The append lane's latest snapshot to `peer`, while it is being sent or was sent whole (an
  // abandoned one is no progress).
  SnapshotSendMark snapshot_send_mark(std::uint64_t peer) override {
    if (transport == nullptr) return {};
    for (const PeerStats& stats : transport->peer_stats()) {
      if (stats.id != peer || !stats.append.snapshot) continue;
      const SnapshotSendProgress& progress = *stats.append.snapshot;
      if (progress.state == SnapshotSendProgress::State::kAbandoned) return {};
      return SnapshotSendMark{progress.index, progress.sent_bytes};
    }
    return {};
  }
  // What the peer said on its latest message (snapshot_format_for); before any (or without a
  // transport): versions 1..3, which every node decodes.
  replica::SnapshotDataFormat snapshot_format(std::uint64_t peer) {
    std::lock_guard lock(mu);
    return transport != nullptr ? snapshot_format_for(transport->peer_snapshot_formats(peer))
                                : replica::SnapshotDataFormat::kPlain;
  }
  bool takes_framed_snapshot_data(std::uint64_t peer) override {
    return snapshot_format(peer) != replica::SnapshotDataFormat::kPlain;
  }
  bool takes_stamped_snapshot_data(std::uint64_t peer) override {
    return snapshot_format(peer) == replica::SnapshotDataFormat::kFramedWithStamp;
  }
  void snapshots_useless_through(std::uint64_t committed) override {
    if (transport != nullptr) transport->drop_snapshot_partials_through(committed);
  }
  void attach(PeerTransport* attached) {
    std::lock_guard lock(mu);
    transport = attached;
    if (transport != nullptr && latest_peers) transport->set_peers(*latest_peers);
  }
  PeerTransport* transport = nullptr;
  std::mutex mu;
  std::optional<std::map<std::uint64_t, std::string>> latest_peers;
};

// The one listen port serves clients and peers. Without TLS: plaintext. With TLS: the node's
// certificate; callers' certificates are checked against the cluster CA (peers) and the client CA
// (when given, which also makes a certificate mandatory). Without a client CA a caller may connect
// without a certificate; the Peer service then refuses its streams (peer_stream_auth.cpp).
std::shared_ptr<grpc::ServerCredentials> server_credentials(const NodeTls& tls) {
  if (!tls.enabled) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions ssl;
  ssl.pem_key_cert_pairs.push_back({tls.port.key_pem, tls.port.cert_pem});
  std::string roots = tls.peers_enabled ? tls.peer.ca_pem : "";
  if (!tls.port.ca_pem.empty())
    roots += (roots.empty() || roots.back() == '\n' ? "" : "\n") + tls.port.ca_pem;
  ssl.pem_root_certs = roots;
  if (!tls.port.ca_pem.empty()) {
    ssl.client_certificate_request = GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
  } else if (tls.peers_enabled) {
    ssl.client_certificate_request = GRPC_SSL_REQUEST_CLIENT_CERTIFICATE_AND_VERIFY;
  } else {
    ssl.client_certificate_request = GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE;
  }
  return grpc::SslServerCredentials(ssl);
}

// For the start-up log line: what the port demands.
std::string describe(const NodeTls& tls, bool peer_secret) {
  std::string text = tls.enabled ? "TLS" : "plaintext";
  if (tls.enabled && !tls.port.ca_pem.empty()) text += ", client certificates required";
  if (tls.peers_enabled) text += ", mutual TLS between peers";
  if (peer_secret) text += ", peers authenticated by the peer secret";
  return text;
}

// Counts the server's live calls (an interceptor lives exactly as long as its call), so that
// shutdown can tell "every in-flight call is answered" from "only idle connections remain".
class CallCounter final : public grpc::experimental::Interceptor {
 public:
  explicit CallCounter(std::atomic<std::int64_t>* live) : live_(live) { live_->fetch_add(1); }
  ~CallCounter() override { live_->fetch_sub(1); }
  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    methods->Proceed();
  }

 private:
  std::atomic<std::int64_t>* live_;
};

class CallCounterFactory final : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit CallCounterFactory(std::atomic<std::int64_t>* live) : live_(live) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo*) override {
    return new CallCounter(live_);
  }

 private:
  std::atomic<std::int64_t>* live_;
};

}  // namespace

class Server::Impl {
 public:
  // The metrics endpoint reads the node's status when scraped: cut that link before the node goes.
  ~Impl() {
    if (metrics != nullptr) {
      metrics->set_status_source({});
      metrics->set_watermark_source({});
      metrics->set_admission_source({});
      metrics->set_snapshot_source({});
      metrics->set_dispatch_source({});
    }
  }
  std::unique_ptr<Metrics> metrics;  // before node: the node reports events into it until destroyed
  NodeConfig config;
  TransportSender sender;
  std::unique_ptr<Node> node;
  std::unique_ptr<PeerTransport> transport;
  std::unique_ptr<ClientServices> services;
  std::unique_ptr<Dispatcher> dispatcher;  // null when the derived indexes cannot be used
  std::uint64_t groups_hold_without_table = 0;  // the retention hold when `dispatcher` is null
  std::unique_ptr<TopicsService> topics;
  std::unique_ptr<GroupsService> groups;
  std::unique_ptr<MembershipService> membership;
  std::unique_ptr<grpc::Server> grpc_server;
  std::unique_ptr<HealthReporter> health;
  std::string bound_address;
  bool shut_down = false;
  std::atomic<std::int64_t> live_calls{0};  // CallCounter
};

std::unique_ptr<Server> Server::start(const NodeConfig& config, std::string* error) {
  if (std::string problem = validate(config); !problem.empty()) {
    *error = "bad configuration: " + problem;
    return nullptr;
  }
  auto impl = std::make_unique<Impl>();
  impl->config = config;
  if (impl->config.listen_address.empty())
    impl->config.listen_address = config.members.at(config.node_id);
  NodeTls tls;
  if (std::string problem = load_node_tls(impl->config, &tls); !problem.empty()) {
    *error = problem;
    return nullptr;
  }
  std::string peer_secret;
  if (std::string problem = load_peer_secret(impl->config, &peer_secret); !problem.empty()) {
    *error = problem;
    return nullptr;
  }

  if (!impl->config.metrics_address.empty()) {
    impl->metrics = Metrics::start(impl->config.node_id, impl->config.metrics_address,
                                   impl->config.data_dir, error);
    if (impl->metrics == nullptr) return nullptr;
  }

  NodeError node_error;
  impl->node = Node::open(impl->config, &impl->sender, &node_error, impl->metrics.get());
  if (impl->node == nullptr) {
    *error = node_error.message;
    return nullptr;
  }

  PeerTransportOptions transport_options = peer_transport_options_for(impl->config);
  if (tls.peers_enabled)
    transport_options.tls = PeerTlsOptions{tls.peer.cert_pem, tls.peer.key_pem, tls.peer.ca_pem};
  transport_options.peer_secret = peer_secret;
  // A partial snapshot kept on disk that the log already covers (its install happened, or the
  // entries arrived by replication) is stale: Raft would ignore it.
  transport_options.snapshot_partial_stale_through =
      std::max<std::uint64_t>(impl->node->log_bounds().first - 1, impl->node->commit_index());
  if (std::string problem = validate_options(transport_options); !problem.empty()) {
    *error = "peer transport: " + problem;
    return nullptr;
  }
  Node* node = impl->node.get();
  impl->transport = std::make_unique<PeerTransport>(
      transport_options, [node](raft::Message message) { node->receive(std::move(message)); });
  impl->sender.attach(impl->transport.get());

  ClientServiceLimits service_limits;
  service_limits.max_tail_streams = impl->config.max_tail_streams;
  service_limits.max_tail_streams_per_connection = impl->config.max_tail_streams_per_connection;
  service_limits.max_append_streams = impl->config.max_append_streams;
  service_limits.max_append_streams_per_connection = impl->config.max_append_streams_per_connection;
  service_limits.max_appends_per_stream = impl->config.max_appends_per_stream;
  service_limits.stall_timeout_ms = impl->config.stream_stall_timeout_ms;
  impl->services = std::make_unique<ClientServices>(node, service_limits, impl->metrics.get());
  impl->services->set_snapshot_transfers_source(snapshot_transfers_source(impl->transport.get()));
  std::string dispatcher_problem;
  impl->dispatcher = Dispatcher::open(node, impl->config, &dispatcher_problem);
  if (impl->dispatcher == nullptr) {
    spdlog::error("node {}: serving without topic and key queries: {}", impl->config.node_id,
                  dispatcher_problem);
    impl->groups_hold_without_table = Dispatcher::hold_retention_without_table(node, impl->config);
  }
  impl->topics = std::make_unique<TopicsService>(
      node, impl->dispatcher.get(), impl->config.max_read_bytes,
      std::chrono::milliseconds(impl->config.stream_stall_timeout_ms));
  impl->groups = std::make_unique<GroupsService>(node, impl->dispatcher.get());
  if (impl->dispatcher != nullptr) {
    // The consumer group table travels in snapshots (Dispatcher::snapshot_section).
    Dispatcher* dispatcher = impl->dispatcher.get();
    node->set_snapshot_section(Node::SnapshotSection{
        [dispatcher](std::uint64_t index) { return dispatcher->snapshot_section(index); },
        [cluster_id = impl->config.cluster_id](std::string_view section, std::uint64_t index) {
          return Dispatcher::check_snapshot_section(section, index, cluster_id);
        },
        [dispatcher](std::uint64_t, const std::string& section) {
          dispatcher->adopt_snapshot_section(section);
        }});
  }
  node->set_status_extension([dispatcher = impl->dispatcher.get(),
                              hold = impl->groups_hold_without_table,
                              transport = impl->transport.get()](NodeStatus* status) {
    // Why a peer this leader tracks cannot be reached (drills7 M2: `members add` said "is it
    // running?" while the transport knew another node answered at that address).
    if (transport != nullptr && !status->peers.empty()) {
      for (const PeerStats& stats : transport->peer_stats()) {
        if (stats.connected || stats.last_error.empty()) continue;
        for (PeerStatus& peer : status->peers) {
          if (peer.id == stats.id) peer.unreachable = stats.last_error;
        }
      }
    }
    if (dispatcher == nullptr) {
      status->derived_problem = "no indexes";
      status->groups_retention_hold = hold;
      return;
    }
    const derived::GroupTable& groups = dispatcher->groups();
    status->groups_applied_through = groups.boundary() - 1;
    status->groups_retention_hold = groups.persisted_boundary();
    status->groups_bad_commits = groups.bad_commits();
    status->groups_refused_commits = groups.refused_commits();
    status->derived_indexed_through = dispatcher->indexes().boundary() - 1;
    status->derived_lag_entries = dispatcher->lag();
    status->derived_unqueued_entries = dispatcher->indexes().unqueued_entries();
    status->derived_problem = dispatcher->failure();
  });
  impl->membership = std::make_unique<MembershipService>(node, member_channel_credentials(tls));

  // Both process-wide switches act on builders created afterwards; repeating them is harmless.
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  int bound_port = 0;
  builder.AddListeningPort(impl->config.listen_address, server_credentials(tls), &bound_port);
  // gRPC sets SO_REUSEPORT by default: a second process on this address (another node given the
  // same port, or this node started twice) would bind too and take half of the connections, clients'
  // and peers' alike, while answering as another node or from other files. Off, its bind fails and
  // it exits with "cannot listen" before its node or transport starts.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  const std::size_t max_receive = std::max<std::size_t>(
      impl->transport->max_receive_message_bytes(), impl->config.max_append_bytes + (1 << 20));
  const std::size_t max_send =
      std::max<std::size_t>(max_receive, impl->config.max_read_bytes + (1 << 20));
  builder.SetMaxReceiveMessageSize(static_cast<int>(max_receive));
  builder.SetMaxSendMessageSize(static_cast<int>(max_send));
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS,
                             static_cast<int>(impl->config.max_concurrent_streams_per_connection));
  // Ping every connection with calls open once a minute (gRPC's default is two hours) and drop it
  // when 20 s pass without an answer: a client that vanished without closing its TCP connection
  // (a dropped NAT, a pulled cable) then frees its AppendStream and Tail slots within 80 s. A client
  // that answers pings but reads nothing is the stream stall timeout's (stream_limits.h).
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, 60000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 20000);
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> interceptors;
  interceptors.push_back(std::make_unique<CallCounterFactory>(&impl->live_calls));
  if (impl->metrics != nullptr) interceptors.push_back(impl->metrics->interceptor_factory());
  builder.experimental().SetInterceptorCreators(std::move(interceptors));
  builder.RegisterService(impl->transport->service());
  for (grpc::Service* service : impl->services->services()) builder.RegisterService(service);
  builder.RegisterService(impl->topics.get());
  builder.RegisterService(impl->groups.get());
  builder.RegisterService(impl->membership->service());
  impl->grpc_server = builder.BuildAndStart();
  if (impl->grpc_server == nullptr || bound_port == 0) {
    *error = "cannot listen on " + impl->config.listen_address + " (address in use or invalid?)";
    impl->node->stop();
    return nullptr;
  }
  // At once: gRPC's default health service starts out SERVING for "", and the node knows no leader yet.
  impl->health = std::make_unique<HealthReporter>(
      impl->config.node_id, impl->grpc_server->GetHealthCheckService(),
      [node, transfers = snapshot_transfers_source(impl->transport.get())] {
        const NodeStatus status = node->status();
        return not_serving_reason(status, transfers(status));
      });
  const std::string host =
      impl->config.listen_address.substr(0, impl->config.listen_address.rfind(':'));
  impl->bound_address = host + ":" + std::to_string(bound_port);

  spdlog::info(
      "node {}: limits: gRPC messages {} bytes in / {} bytes out, {} streams per connection, {} "
      "Tail "
      "streams ({} per connection), {} AppendStreams ({} per connection) of {} unanswered appends "
      "each, "
      "streams stalled for {} ms are ended, Append {} entries / {} bytes, Read {} entries / {} "
      "bytes",
      impl->config.node_id, max_receive, max_send,
      impl->config.max_concurrent_streams_per_connection, impl->config.max_tail_streams,
      impl->config.max_tail_streams_per_connection, impl->config.max_append_streams,
      impl->config.max_append_streams_per_connection, impl->config.max_appends_per_stream,
      impl->config.stream_stall_timeout_ms, impl->config.max_entries_per_append,
      impl->config.max_append_bytes, impl->config.max_read_entries, impl->config.max_read_bytes);
  if (impl->metrics != nullptr) {
    impl->metrics->set_status_source([node] { return node->status(); });
    impl->metrics->set_snapshot_source(snapshot_transfers_source(impl->transport.get()));
    impl->metrics->set_watermark_source([node] { return node->disk_watermark_exceeded(); });
    impl->metrics->set_admission_source(
        [transport = impl->transport.get()] { return transport->inbound_stats(); });
    impl->metrics->set_outbound_source(
        [transport = impl->transport.get()] { return transport->outbound_totals(); });
    if (impl->dispatcher != nullptr) {
      impl->metrics->set_dispatch_source(
          [dispatcher = impl->dispatcher.get()] { return dispatcher->stats(); });
    }
    spdlog::info("node {}: metrics on http://{}/metrics", impl->config.node_id,
                 impl->metrics->bound_address());
  }
  impl->transport->start();
  impl->node->start();
  if (impl->dispatcher != nullptr) impl->dispatcher->start();
  // The addresses it starts with, not its configuration: that comes from its log (a joined node's
  // and a founder's after a membership change), and a joined node may not be a member yet.
  const std::string addresses =
      impl->config.bootstrap_voters.empty()
          ? std::to_string(impl->config.members.size()) + " addresses from --members"
          : "joined: " + std::to_string(impl->config.members.size()) +
                " addresses from its JOIN record";
  spdlog::info("node {}: serving on {} (cluster '{}', {}, flush mode {}, {})", impl->config.node_id,
               impl->bound_address, impl->config.cluster_id, addresses,
               store::to_string(impl->config.store.flush_mode),
               describe(tls, !peer_secret.empty()));
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Server::~Server() { shutdown(); }

void Server::shutdown() {
  if (impl_->shut_down) return;
  impl_->shut_down = true;
  const auto started = std::chrono::steady_clock::now();
  spdlog::info("node {}: shutting down", impl_->config.node_id);
  // Tails end first (clients resume elsewhere), then the node fails whatever is pending and closes
  // the store cleanly; only then does the gRPC server stop.
  // The transport stops before the gRPC server: inbound peer streams never end by themselves, and
  // Shutdown() would otherwise wait out its whole deadline for them.
  // Probes fail first, so load balancers and Kubernetes stop sending work while the node drains.
  impl_->health->stop();
  impl_->services->shutdown();
  impl_->topics->shutdown();
  impl_->groups->shutdown();
  if (impl_->dispatcher != nullptr) impl_->dispatcher->stop();  // persists what it indexed
  impl_->node->stop();
  impl_->transport->stop();
  impl_->sender.attach(nullptr);
  stop_grpc_server();
  const auto took_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - started);
  spdlog::info("node {}: shut down in {} ms", impl_->config.node_id, took_ms.count());
}

void Server::stop_grpc_server() {
  // grpc::Server::Shutdown(deadline) returns once every call has finished *and* every connection has
  // closed; a client that keeps an idle connection answers the closing GOAWAY's ping only when it
  // next polls, so an idle channel held every SIGTERM up for the whole grace (3,026 ms measured).
  // Shutdown runs on its own thread; once no call is alive (CallCounter: all in-flight calls are
  // answered) the remaining connections are closed (grpc_server_cancel_all_calls, which only
  // closes connections then), repeated every 20 ms because a connection may still be accepted until
  // Shutdown has begun. The grace still bounds everything: at the deadline gRPC cancels what is left.
  const auto deadline =
      std::chrono::system_clock::now() + std::chrono::milliseconds(impl_->config.shutdown_grace_ms);
  std::atomic<bool> finished{false};
  std::thread shutter([this, deadline, &finished] {
    impl_->grpc_server->Shutdown(deadline);
    finished.store(true);
  });
  while (!finished.load() && std::chrono::system_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (!finished.load() && impl_->live_calls.load() == 0)
      grpc_server_cancel_all_calls(impl_->grpc_server->c_server());
  }
  shutter.join();
}

bool Server::failed() const { return impl_->node->failed(); }

const std::string& Server::bound_address() const { return impl_->bound_address; }

std::string Server::metrics_address() const {
  return impl_->metrics == nullptr ? std::string() : impl_->metrics->bound_address();
}

std::size_t Server::open_tail_streams() const { return impl_->services->open_tail_streams(); }

std::size_t Server::open_append_streams() const { return impl_->services->open_append_streams(); }

}  // namespace raftlog::server
