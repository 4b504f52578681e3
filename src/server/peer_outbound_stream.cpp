// PeerOutbound, the life of one lane's stream (peer_outbound.h; transport.h describes the
// behaviour): opening it (open_stream), the peer's handshake answer, its cancel (a removed peer,
// stop()), its end (OnDone) and the reconnect after it with backoff, and the log lines of a peer's
// outages. The links themselves, send() and the writes are in peer_outbound.cpp.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <random>
#include <string>

#include "server/check.h"
#include "server/peer_outbound.h"
#include "server/peer_outbound_stream.h"
#include "server/peer_protocol.h"

namespace raftlog::server {

using Clock = std::chrono::steady_clock;

namespace {

std::string describe(const grpc::Status& status) {
  if (status.ok()) return "stream ended by the peer";
  if (status.error_code() == grpc::StatusCode::UNIMPLEMENTED) {
    // The one peer-protocol change so far: nodes built before batched peer streams lack the method.
    // A plain HTTP server at a mistyped address answers the same way (gRPC maps its 404 to
    // UNIMPLEMENTED), and that is the likelier cause, so both are named, the address first.
    return "the peer does not implement Peer/StreamBatches: a wrong address (something that is not "
           "raftlogd answers there: check the member's address with `raftlogctl members list`), "
           "or a raftlogd older than this one (docs/operations.md, \"Upgrading\") (gRPC status "
           "12: " +
           status.error_message() + ")";
  }
  return "gRPC status " + std::to_string(static_cast<int>(status.error_code())) + ": " +
         status.error_message();
}

}  // namespace

void PeerOutbound::cancel(PeerLink& link) {
  OutboundStream* to_cancel = nullptr;
  {
    std::lock_guard link_lock(link.mu);
    OutboundStream* stream = link.stream;
    if (stream != nullptr && !stream->hold_released) {
      stream->closing = true;
      if (!stream->started) {
        // Its open_stream has not returned from StartCall yet: cancelling the call now would leave
        // it never ending (see OutboundStream); open_stream cancels it once started.
        stream->cancel_after_start = true;
      } else if (!stream->cancel_in_progress) {
        stream->cancel_in_progress = true;
        to_cancel = stream;
      }
    }
    link.stats.connected = false;
  }
  if (to_cancel == nullptr) return;
  to_cancel->context.TryCancel();
  bool release = false;
  {
    std::lock_guard link_lock(link.mu);
    to_cancel->cancel_in_progress = false;
    release = release_due_locked(to_cancel);
  }
  if (release) to_cancel->RemoveHold();
}

void PeerOutbound::open_stream(PeerLink& link) {
  OutboundStream* stream = nullptr;
  {
    std::lock_guard lock(link.mu);
    if (link.stopping() || link.stream != nullptr) return;
    link.queue.expire(Clock::now());
    stream = new OutboundStream(this, &link);
    link.stream = stream;
    ++link.stats.connects;
  }
  {
    std::lock_guard lock(streams_mu_);
    ++live_streams_;
  }
  stream->context.AddMetadata(std::string(kPeerLaneKey), lane_name(link.lane));
  if (!options_.advertise_address.empty()) {
    stream->context.AddMetadata(std::string(kPeerAddressKey), options_.advertise_address);
  }
  // Fail fast (the default): on a channel that cannot connect the call fails at once, or when the
  // connection attempt does (connect_timeout_ms), and the reconnect timer tries again.
  auth_.add_stream_metadata(stream->context, link.id);
  link.stub->async()->StreamBatches(&stream->context, &stream->summary, stream);
  if (before_start_call_for_testing_) before_start_call_for_testing_(link.id);
  stream->AddHold();
  stream->StartCall();
  bool cancel_now = false;
  bool release = false;
  {
    std::lock_guard lock(link.mu);
    stream->started = true;
    // A cancel() that came before StartCall left the TryCancel to us (see OutboundStream).
    cancel_now = stream->cancel_after_start;
    if (cancel_now) stream->cancel_in_progress = true;
    // A reaction may already have closed the stream (StartCall can fail at once); it could not
    // release the hold before `started`.
    release = release_due_locked(stream);
  }
  if (cancel_now) {
    stream->context.TryCancel();
    std::lock_guard lock(link.mu);
    stream->cancel_in_progress = false;
    release = release_due_locked(stream);
  }
  if (release) {
    stream->RemoveHold();
    return;
  }
  pump(link);
}

void PeerOutbound::on_initial_metadata(PeerLink& link, OutboundStream* stream, bool ok) {
  bool accepted = false;
  if (ok) {
    // Handshake: the peer answers our first message with initial metadata once it has checked the
    // cluster id and node ids, or ends the call. Without this a refused stream would look healthy
    // until the next write, and the refused messages would count as sent.
    const auto& metadata = stream->context.GetServerInitialMetadata();
    accepted = metadata.find(grpc::string_ref(kPeerAcceptedKey.data(), kPeerAcceptedKey.size())) !=
               metadata.end();
  }
  bool write_next = false;
  bool release = false;
  {
    std::lock_guard lock(link.mu);
    stream->reached_peer = ok;
    if (accepted) {
      stream->accepted = true;
      link.stats.connected = !stream->closing;
      link.queue.unconfirmed_sent(Clock::now());
      link.backoff_ms = options_.reconnect_backoff_min_ms;
      link.consecutive_failures = 0;
      if (!link.up) {
        spdlog::info("node {}: peer {} ({}) up ({} lane)", options_.self_id, link.id, link.address,
                     lane_name(link.lane));
        link.up = true;
        link.ever_up = true;
      }
      write_next = !stream->closing;
    } else {
      stream->closing = true;
      link.stats.connected = false;
      link.queue.unconfirmed_failed();
    }
    release = release_due_locked(stream);
  }
  if (release) {
    stream->RemoveHold();
    return;
  }
  if (write_next) pump(link);
}

void PeerOutbound::on_stream_done(PeerLink& link, OutboundStream* stream,
                                  const grpc::Status& status) {
  std::optional<Clock::time_point> reconnect_at;
  {
    std::lock_guard lock(link.mu);
    RAFTLOG_CHECK(link.stream == stream, "OnDone for a stream that is not the link's");
    RAFTLOG_CHECK(!stream->write_claimed, "OnDone with a write claimed");
    link.stream = nullptr;
    link.stats.connected = false;
    // Every write and the handshake answer completed before OnDone, so nothing is left in flight;
    // requeue defensively all the same.
    link.queue.unconfirmed_failed();
    if (!link.stopping()) {
      record_failure_locked(link, describe(status));
      link.queue.expire(Clock::now());
      reconnect_at =
          Clock::now() + std::chrono::milliseconds(reconnect_delay_locked(link, *stream));
    } else {
      // A closed lane (a removed peer's, or stop()) opens no stream again: what it held goes now,
      // so a retired link keeps no messages (nothing is in flight once OnDone runs).
      link.queue.clear();
    }
  }
  LanesRef keep = stream->keep_alive;  // a retired link may be freed once we are done with it
  delete stream;
  if (reconnect_at.has_value()) schedule_reconnect(link, *reconnect_at);
  keep.reset();
  stream_ended();  // last: stop() may destroy the transport once the count reaches zero
}

std::uint32_t PeerOutbound::reconnect_delay_locked(PeerLink& link, const OutboundStream& ended) {
  std::uint32_t delay_ms = options_.reconnect_backoff_min_ms;
  if (ended.reached_peer) {
    // The connection may be fine while the peer refuses our streams (wrong cluster id, a peer that is
    // shutting down): back off so a refusing peer is not hammered. An accepted stream reset the
    // backoff to the minimum.
    delay_ms = link.backoff_ms;
    link.backoff_ms = std::min(link.backoff_ms * 2, options_.reconnect_backoff_max_ms);
  }
  // Otherwise the call never reached the peer: the channel could not connect. The channel spaces its
  // connection attempts by its own backoff (the same bounds), and a fail-fast call on a channel that
  // is waiting to retry fails locally, so trying again after the minimum costs no traffic and opens
  // the stream as soon as the channel is up (an extra doubling here would add up to
  // reconnect_backoff_max_ms to every recovery).
  std::uniform_int_distribution<std::uint32_t> jitter_ms(0, delay_ms / 4);
  return delay_ms + jitter_ms(link.jitter);
}

void PeerOutbound::schedule_reconnect(PeerLink& link, Clock::time_point when) {
  PeerLink* link_ptr = &link;
  if (reconnect_timer_.schedule(when, [this, link_ptr, keep = link.owner->shared_from_this()] {
        open_stream(*link_ptr);
      }))
    return;
  // Refused once stop() has begun (which opens no more streams anyway), or if the one-per-peer bound
  // were broken: then the peer would never reconnect, so say so loudly.
  std::lock_guard lock(link.mu);
  if (!link.stopping()) {
    spdlog::error(
        "node {}: peer {} {} lane: reconnect timer refused a reconnect; the lane stays down",
        options_.self_id, link.id, lane_name(link.lane));
  }
}

bool PeerOutbound::release_due_locked(OutboundStream* stream) {
  if (!stream->started || !stream->closing || stream->write_claimed || stream->hold_released ||
      stream->cancel_in_progress) {
    return false;
  }
  stream->hold_released = true;
  return true;
}

void PeerOutbound::record_failure_locked(PeerLink& link, const std::string& error) {
  ++link.stats.connect_failures;
  link.stats.last_error = error;
  link.stats.last_error_at = Clock::now();
  // One log line per outage, not one per attempt; a lane that flaps logs at most one per
  // kPeerDownLogInterval.
  const bool new_outage = link.up || link.consecutive_failures == 0;
  link.up = false;
  ++link.consecutive_failures;
  const Clock::time_point now = Clock::now();
  if (!link.ever_up) {
    // Not reached since start: normal while the cluster's nodes come up (kPeerStartupGrace), so the
    // first failure is an info line (the cause stays visible: a refused TLS handshake, a wrong
    // address) and only a peer still unreachable after the grace is a warning.
    if (link.consecutive_failures == 1) {
      spdlog::info("node {}: peer {} ({}) not reachable yet: {} lane: {}", options_.self_id,
                   link.id, link.address, lane_name(link.lane), error);
    }
    // A peer added after this node's start (a new member, an admitted node) gets its own grace,
    // counted from its addition, not from the start.
    const bool added_later = link.created_at > started_at_;
    const Clock::time_point since = added_later ? link.created_at : started_at_;
    if (!link.startup_reported && now - since >= kPeerStartupGrace) {
      link.startup_reported = true;
      spdlog::warn("node {}: peer {} ({}) unreachable since {} ({} s): {} lane: {}",
                   options_.self_id, link.id, link.address, added_later ? "added" : "start",
                   std::chrono::duration_cast<std::chrono::seconds>(now - since).count(),
                   lane_name(link.lane), error);
    }
    return;
  }
  if (!new_outage) return;
  if (const std::optional<std::uint64_t> held_back = link.down_log.admit(now)) {
    if (*held_back == 0) {
      spdlog::warn("node {}: peer {} ({}) down: {} lane: {}", options_.self_id, link.id,
                   link.address, lane_name(link.lane), error);
    } else {
      spdlog::warn(
          "node {}: peer {} ({}) down: {} lane: {} ({} more outage(s) in the last {} s not logged)",
          options_.self_id, link.id, link.address, lane_name(link.lane), error, *held_back,
          kPeerDownLogInterval.count());
    }
  }
}

void PeerOutbound::stream_ended() {
  std::lock_guard lock(streams_mu_);
  RAFTLOG_CHECK(live_streams_ > 0, "more outbound streams ended than started");
  --live_streams_;
  if (live_streams_ == 0) streams_cv_.notify_all();
}

}  // namespace raftlog::server
