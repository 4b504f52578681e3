#include "server/server.h"

#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>

#include "server/client_services.h"
#include "server/node.h"
#include "server/transport.h"

namespace raftlog::server {

namespace {

// The node's outbound messages go to the transport, which never blocks.
class TransportSender final : public MessageSender {
 public:
  void send(raft::Message message) override {
    if (transport != nullptr) transport->send(std::move(message));
  }
  PeerTransport* transport = nullptr;
};

}  // namespace

class Server::Impl {
 public:
  NodeConfig config;
  TransportSender sender;
  std::unique_ptr<Node> node;
  std::unique_ptr<PeerTransport> transport;
  std::unique_ptr<ClientServices> services;
  std::unique_ptr<grpc::Server> grpc_server;
  std::string bound_address;
  bool shut_down = false;
};

std::unique_ptr<Server> Server::start(const NodeConfig& config, std::string* error) {
  auto impl = std::make_unique<Impl>();
  impl->config = config;
  if (impl->config.listen_address.empty()) impl->config.listen_address = config.members.at(config.node_id);

  NodeError node_error;
  impl->node = Node::open(impl->config, &impl->sender, &node_error);
  if (impl->node == nullptr) {
    *error = node_error.message;
    return nullptr;
  }

  PeerTransportOptions transport_options;
  transport_options.cluster_id = impl->config.cluster_id;
  transport_options.self_id = impl->config.node_id;
  for (const auto& [id, address] : impl->config.members) {
    if (id != impl->config.node_id) transport_options.peers.emplace(id, address);
  }
  // One AppendEntries carries at most the core's message bound (derived from the largest Append),
  // plus protobuf framing per entry.
  const std::uint64_t max_entries = std::max<std::uint64_t>(impl->config.max_entries_per_append, 256);
  transport_options.limits.max_entries_per_message =
      std::max<std::size_t>(transport_options.limits.max_entries_per_message, max_entries);
  transport_options.limits.max_message_bytes = std::max<std::size_t>(
      transport_options.limits.max_message_bytes, max_raft_message_bytes(impl->config) + max_entries * 64);
  // Stale messages are useless after a few election timeouts.
  transport_options.max_message_age_ms =
      std::max<std::uint32_t>(500, 2 * impl->config.election_ticks * impl->config.tick_ms);
  if (std::string problem = validate_options(transport_options); !problem.empty()) {
    *error = "peer transport: " + problem;
    return nullptr;
  }
  Node* node = impl->node.get();
  impl->transport = std::make_unique<PeerTransport>(
      transport_options, [node](raft::Message message) { node->receive(std::move(message)); });
  impl->sender.transport = impl->transport.get();

  impl->services = std::make_unique<ClientServices>(node, ClientServiceLimits{});

  grpc::ServerBuilder builder;
  int bound_port = 0;
  builder.AddListeningPort(impl->config.listen_address, grpc::InsecureServerCredentials(), &bound_port);
  const std::size_t max_receive =
      std::max<std::size_t>(impl->transport->max_receive_message_bytes(), impl->config.max_append_bytes + (1 << 20));
  builder.SetMaxReceiveMessageSize(static_cast<int>(max_receive));
  builder.SetMaxSendMessageSize(static_cast<int>(std::max<std::size_t>(max_receive, impl->config.max_read_bytes + (1 << 20))));
  builder.RegisterService(impl->transport->service());
  for (grpc::Service* service : impl->services->services()) builder.RegisterService(service);
  impl->grpc_server = builder.BuildAndStart();
  if (impl->grpc_server == nullptr || bound_port == 0) {
    *error = "cannot listen on " + impl->config.listen_address + " (address in use or invalid?)";
    impl->node->stop();
    return nullptr;
  }
  const std::string host = impl->config.listen_address.substr(0, impl->config.listen_address.rfind(':'));
  impl->bound_address = host + ":" + std::to_string(bound_port);

  impl->transport->start();
  impl->node->start();
  spdlog::info("node {}: serving on {} (cluster '{}', {} members, flush mode {})", impl->config.node_id,
               impl->bound_address, impl->config.cluster_id, impl->config.members.size(),
               store::to_string(impl->config.store.flush_mode));
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
  impl_->services->shutdown();
  impl_->node->stop();
  impl_->transport->stop();
  impl_->sender.transport = nullptr;
  impl_->grpc_server->Shutdown(std::chrono::system_clock::now() +
                               std::chrono::milliseconds(impl_->config.shutdown_grace_ms));
  const auto took_ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started);
  spdlog::info("node {}: shut down in {} ms", impl_->config.node_id, took_ms.count());
}

bool Server::failed() const { return impl_->node->failed(); }

const std::string& Server::bound_address() const { return impl_->bound_address; }

}  // namespace raftlog::server
