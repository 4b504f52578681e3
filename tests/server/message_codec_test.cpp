#include "server/message_codec.h"

#include <gtest/gtest.h>

#include <limits>
#include <set>
#include <string>

#include "raft/memory_log.h"
#include "raft/raft.h"
#include "raftlog/peer/v1/peer.pb.h"
#include "server/snapshot_formats.h"
#include "util/prng.h"

namespace raftlog::server {
namespace {

namespace pb = raftlog::peer::v1;

constexpr raft::MessageType kAllTypes[] = {
    raft::MessageType::kPreVote,    raft::MessageType::kPreVoteResponse,
    raft::MessageType::kVote,       raft::MessageType::kVoteResponse,
    raft::MessageType::kAppend,     raft::MessageType::kAppendResponse,
    raft::MessageType::kHeartbeat,  raft::MessageType::kHeartbeatResponse,
    raft::MessageType::kTimeoutNow, raft::MessageType::kSnapshot,
};

// The types peer field 22 (a leadership nonce) means something on: a leader's messages, and the
// refusal of a second leader (the nonce its sender knows).
bool carries_leader_nonce(raft::MessageType type) {
  return type == raft::MessageType::kAppend || type == raft::MessageType::kHeartbeat ||
         type == raft::MessageType::kSnapshot || type == raft::MessageType::kTimeoutNow ||
         type == raft::MessageType::kAppendResponse;
}

// A message with every field set to a distinct non-default value.
raft::Message full_message(raft::MessageType type) {
  raft::Message message;
  message.type = type;
  message.from = 3;
  message.to = 5;
  message.term = 9;
  message.index = 100;
  message.log_term = 7;
  message.commit = 98;
  message.reject = true;
  message.reject_hint = 55;
  message.hint_term = 6;
  message.context = 0xfeedfacecafebeefULL;
  if (type == raft::MessageType::kAppend || type == raft::MessageType::kHeartbeat) {
    message.retention_hold = 77;  // a leader's messages only
  }
  if (type == raft::MessageType::kHeartbeat) message.sending_snapshot = true;  // heartbeats only
  if (type == raft::MessageType::kAppendResponse) message.term_leader = 4;  // append answers only
  if (carries_leader_nonce(type)) message.leader_nonce = 0x5EED0000ABCDULL;
  if (type == raft::MessageType::kAppend) {
    const raft::EntryType entry_types[] = {raft::EntryType::kNormal, raft::EntryType::kNoop,
                                           raft::EntryType::kConfig};
    for (int i = 0; i < 3; ++i) {
      raft::Entry entry;
      entry.index = 101 + static_cast<raft::Index>(i);
      entry.term = 7 + static_cast<raft::Term>(i);
      entry.type = entry_types[i];
      entry.client_id = 1000 + static_cast<std::uint64_t>(i);
      entry.sequence = 2000 + static_cast<std::uint64_t>(i);
      entry.proposal_continues = i == 0;
      entry.is_group_commit = i == 1;  // the flag travels with the entry
      entry.payload = std::string("payload\0with\xffzero", 17) + std::to_string(i);
      message.entries.push_back(entry);
    }
  }
  if (type == raft::MessageType::kSnapshot) {
    raft::Snapshot snapshot;
    snapshot.index = 90;
    snapshot.term = 7;
    snapshot.conf.voters = {3, 5, 7};
    snapshot.conf.learners = {9};
    snapshot.conf.addresses = {{3, "127.0.0.1:7003"}, {9, "127.0.0.1:7009"}};
    snapshot.data = std::string("dedup\0state\xff", 12);
    message.snapshot = snapshot;
  }
  return message;
}

// Encodes, serializes, parses and decodes: the full path a message takes between two nodes.
std::string through_the_wire(const raft::Message& message, raft::Message* decoded,
                             const MessageLimits& limits = MessageLimits()) {
  pb::RaftMessage wire;
  encode_message(message, "cluster-a", &wire);
  EXPECT_EQ(wire.cluster_id(), "cluster-a");
  pb::RaftMessage parsed;
  EXPECT_TRUE(parsed.ParseFromString(wire.SerializeAsString()));
  return decode_message(parsed, limits, decoded);
}

TEST(MessageCodec, EveryMessageTypeRoundTrips) {
  for (const raft::MessageType type : kAllTypes) {
    SCOPED_TRACE(std::string(message_type_name(type)));
    const raft::Message original = full_message(type);
    raft::Message decoded;
    EXPECT_EQ(through_the_wire(original, &decoded), "");
    EXPECT_EQ(decoded, original);
  }
}

// The receiving transport decodes the element it just read with the moving overload: the result is
// the same, and the payloads are taken from the wire message rather than copied (a multi-MiB
// append costs one copy less on the receiver).
TEST(MessageCodec, DecodingAnRvalueGivesTheSameMessageAndTakesThePayloads) {
  const raft::Message original = full_message(raft::MessageType::kAppend);
  pb::RaftMessage wire;
  encode_message(original, "cluster-a", &wire);
  const std::string large(1 << 20, 'x');
  wire.mutable_entries(1)->set_payload(large);
  const char* const large_bytes = wire.entries(1).payload().data();
  raft::Message expected = original;
  expected.entries[1].payload = large;
  raft::Message decoded;
  ASSERT_EQ(decode_message(std::move(wire), MessageLimits(), &decoded), "");
  EXPECT_EQ(decoded, expected);
  EXPECT_EQ(decoded.entries[1].payload.data(), large_bytes) << "the payload was copied, not moved";
}

TEST(MessageCodec, EmptyAppendProbeAndDefaultsRoundTrip) {
  raft::Message probe;
  probe.type = raft::MessageType::kAppend;
  probe.from = 1;
  probe.to = 2;
  raft::Message decoded = full_message(raft::MessageType::kAppend);  // must be overwritten entirely
  EXPECT_EQ(through_the_wire(probe, &decoded), "");
  EXPECT_EQ(decoded, probe);
}

// The retention hold (peer field 18) travels on a leader's appends and heartbeats only: set by a
// peer on any other type, it reaches no core; absent (an older node), it reads as 0, no hold.
TEST(MessageCodec, TheRetentionHoldTravelsOnAppendsAndHeartbeatsOnly) {
  for (const raft::MessageType type : kAllTypes) {
    SCOPED_TRACE(std::string(message_type_name(type)));
    raft::Message original = full_message(type);
    pb::RaftMessage wire;
    encode_message(original, "cluster-a", &wire);
    const bool carries =
        type == raft::MessageType::kAppend || type == raft::MessageType::kHeartbeat;
    EXPECT_EQ(wire.retention_hold(), carries ? 77U : 0U);
    wire.set_retention_hold(1234);
    raft::Message decoded;
    ASSERT_EQ(decode_message(wire, MessageLimits(), &decoded), "");
    EXPECT_EQ(decoded.retention_hold, carries ? 1234U : 0U);
    wire.clear_retention_hold();
    ASSERT_EQ(decode_message(wire, MessageLimits(), &decoded), "");
    EXPECT_EQ(decoded.retention_hold, 0U);
  }
}

// "Sending you a snapshot" (peer field 20) travels on a leader's heartbeats only: set by a peer on
// any other type, it reaches no core; absent (an older node), it reads as false.
TEST(MessageCodec, SendingASnapshotTravelsOnHeartbeatsOnly) {
  for (const raft::MessageType type : kAllTypes) {
    SCOPED_TRACE(std::string(message_type_name(type)));
    pb::RaftMessage wire;
    encode_message(full_message(type), "cluster-a", &wire);
    const bool carries = type == raft::MessageType::kHeartbeat;
    EXPECT_EQ(wire.sending_snapshot(), carries);
    wire.set_sending_snapshot(true);
    raft::Message decoded;
    ASSERT_EQ(decode_message(wire, MessageLimits(), &decoded), "");
    EXPECT_EQ(decoded.sending_snapshot, carries);
    wire.clear_sending_snapshot();
    ASSERT_EQ(decode_message(wire, MessageLimits(), &decoded), "");
    EXPECT_FALSE(decoded.sending_snapshot);
  }
}

// The fields of a second leader's refusal (docs/raft.md "A second leader of a term"): the leader a
// refusing node knows (peer field 21) travels on append responses only; a leadership's nonce (peer
// field 22) on a leader's messages and on append responses (a refusal names the nonce it knows).
// Set by a peer on any other type, neither reaches a core; absent (an older node), each reads as
// not said (no node, nonce 0).
TEST(MessageCodec, TheTermsLeaderAndTheLeadershipNonceTravelOnlyWhereTheyMeanSomething) {
  for (const raft::MessageType type : kAllTypes) {
    SCOPED_TRACE(std::string(message_type_name(type)));
    pb::RaftMessage wire;
    encode_message(full_message(type), "cluster-a", &wire);
    const bool leader_carried = type == raft::MessageType::kAppendResponse;
    const bool nonce_carried = carries_leader_nonce(type);
    EXPECT_EQ(wire.term_leader(), leader_carried ? 4U : 0U);
    EXPECT_EQ(wire.leader_nonce(), nonce_carried ? 0x5EED0000ABCDULL : 0U);
    wire.set_term_leader(6);
    wire.set_leader_nonce(0xFFFFFFFFFFFFFFFFULL);
    raft::Message decoded;
    ASSERT_EQ(decode_message(wire, MessageLimits(), &decoded), "");
    EXPECT_EQ(decoded.term_leader, leader_carried ? 6U : raft::kNoNode);
    EXPECT_EQ(decoded.leader_nonce, nonce_carried ? 0xFFFFFFFFFFFFFFFFULL : 0U);
    wire.clear_term_leader();
    wire.clear_leader_nonce();
    ASSERT_EQ(decode_message(wire, MessageLimits(), &decoded), "");
    EXPECT_EQ(decoded.term_leader, raft::kNoNode);
    EXPECT_EQ(decoded.leader_nonce, 0U);
  }
}

TEST(MessageCodec, EveryMessageSaysWhichSnapshotFormatsThisNodeDecodes) {
  for (const raft::MessageType type : kAllTypes) {
    SCOPED_TRACE(std::string(message_type_name(type)));
    pb::RaftMessage wire;
    encode_message(full_message(type), "cluster-a", &wire);
    // Framed version 4 and, from stamp5 on, version 6 (the running max stamp in the head).
    EXPECT_EQ(wire.snapshot_formats(), kSnapshotFormatFramed | kSnapshotFormatFramedWithStamp);
  }
  pb::RaftMessage chunk;
  raft::Message snapshot = full_message(raft::MessageType::kSnapshot);
  const std::size_t size = snapshot.snapshot->data.size();
  encode_snapshot_chunk(snapshot, SnapshotChunkPlace{0, size, 1}, size, "cluster-a", &chunk);
  EXPECT_EQ(chunk.snapshot_formats(), kOwnSnapshotFormats);
  // What the receiver keeps per peer: its latest message's, 0 (versions 1..3) for an older node's
  // (the field unset) and before any message.
  SnapshotReceipts peers;
  EXPECT_EQ(peers.formats_of(2), 0U);
  peers.record_formats(2, chunk.snapshot_formats());
  EXPECT_EQ(peers.formats_of(2), kOwnSnapshotFormats);
  peers.record_formats(2, kSnapshotFormatFramed);
  EXPECT_EQ(peers.formats_of(2), kSnapshotFormatFramed) << "a node from before stamp5";
  chunk.clear_snapshot_formats();
  peers.record_formats(2, chunk.snapshot_formats());
  EXPECT_EQ(peers.formats_of(2), 0U) << "a node downgraded to a build from before the field";
  for (raft::NodeId peer = 3; peer <= SnapshotReceipts::kMaxPeersTracked + 10; ++peer) {
    peers.record_formats(peer, kSnapshotFormatFramed);
  }
  // Peers 2..kMaxPeersTracked + 1 fill the bound; the next ones are not kept.
  EXPECT_EQ(peers.formats_of(SnapshotReceipts::kMaxPeersTracked + 1), kSnapshotFormatFramed);
  EXPECT_EQ(peers.formats_of(SnapshotReceipts::kMaxPeersTracked + 2), 0U) << "beyond the bound";
}

// Review of stamp5, M2: the one decision the transport gives the replica. A node from before
// stamp5 (bit 0 only) gets version 4, never version 6 (it would refuse it, again after every retry
// timeout, and never catch up until upgraded); one from before framed data gets versions 1..3.
TEST(MessageCodec, ThePeersFormatsDecideTheSnapshotDataFormatItIsSent) {
  using replica::SnapshotDataFormat;
  EXPECT_EQ(snapshot_format_for(0), SnapshotDataFormat::kPlain);
  EXPECT_EQ(snapshot_format_for(kSnapshotFormatFramed), SnapshotDataFormat::kFramed);
  EXPECT_EQ(snapshot_format_for(kSnapshotFormatFramed | kSnapshotFormatFramedWithStamp),
            SnapshotDataFormat::kFramedWithStamp);
  EXPECT_EQ(snapshot_format_for(kOwnSnapshotFormats), SnapshotDataFormat::kFramedWithStamp);
  EXPECT_EQ(snapshot_format_for(kSnapshotFormatFramedWithStamp), SnapshotDataFormat::kPlain)
      << "bit 1 without bit 0: no node sends it; the format every node decodes";
  EXPECT_EQ(snapshot_format_for(kSnapshotFormatFramed | 0x80), SnapshotDataFormat::kFramed)
      << "unknown bits are ignored";
}

TEST(MessageCodec, TypeNamesAreDistinct) {
  std::set<std::string_view> names;
  for (const raft::MessageType type : kAllTypes) names.insert(message_type_name(type));
  EXPECT_EQ(names.size(), std::size(kAllTypes));
}

class MalformedMessage : public ::testing::Test {
 protected:
  void SetUp() override { encode_message(full_message(raft::MessageType::kAppend), "c", &wire_); }
  // Decodes wire_ and expects an error mentioning `fragment`.
  void expect_rejected(const std::string& fragment, const MessageLimits& limits = MessageLimits()) {
    raft::Message decoded;
    const std::string problem = decode_message(wire_, limits, &decoded);
    EXPECT_NE(problem, "");
    EXPECT_NE(problem.find(fragment), std::string::npos) << "problem: " << problem;
  }
  pb::RaftMessage wire_;
};

TEST_F(MalformedMessage, ValidBaselineIsAccepted) {
  raft::Message decoded;
  EXPECT_EQ(decode_message(wire_, MessageLimits(), &decoded), "");
}

TEST_F(MalformedMessage, UnspecifiedTypeRejected) {
  wire_.set_type(pb::MESSAGE_TYPE_UNSPECIFIED);
  expect_rejected("unknown message type 0");
}

TEST_F(MalformedMessage, UnknownTypeNumberRejected) {
  // A future or corrupt enum value arrives as a raw number through the open proto3 enum.
  pb::RaftMessage parsed;
  wire_.set_type(static_cast<pb::MessageType>(42));
  ASSERT_TRUE(parsed.ParseFromString(wire_.SerializeAsString()));
  wire_ = parsed;
  expect_rejected("unknown message type 42");
}

TEST_F(MalformedMessage, ZeroSenderRejected) {
  wire_.set_from(0);
  expect_rejected("no sender");
}

TEST_F(MalformedMessage, ZeroRecipientRejected) {
  wire_.set_to(0);
  expect_rejected("no recipient");
}

TEST_F(MalformedMessage, MessageToItselfRejected) {
  wire_.set_to(wire_.from());
  expect_rejected("to itself");
}

TEST_F(MalformedMessage, OversizeRejected) {
  MessageLimits limits;
  limits.max_message_bytes = 64;
  expect_rejected("exceeds the limit of 64 bytes", limits);
}

TEST_F(MalformedMessage, TooManyEntriesRejected) {
  MessageLimits limits;
  limits.max_entries_per_message = 2;
  expect_rejected("3 entries, more than the limit of 2", limits);
}

TEST_F(MalformedMessage, EntriesOnNonAppendRejected) {
  wire_.set_type(pb::HEARTBEAT);
  expect_rejected("heartbeat message must not carry entries");
}

TEST_F(MalformedMessage, NonContiguousIndexRejected) {
  wire_.mutable_entries(1)->set_index(103);
  expect_rejected("index 103, expected 102");
}

TEST_F(MalformedMessage, UnknownEntryTypeRejected) {
  wire_.mutable_entries(2)->set_type(static_cast<pb::EntryType>(17));
  expect_rejected("unknown entry type");
}

TEST_F(MalformedMessage, EntryTermAboveMessageTermRejected) {
  wire_.mutable_entries(2)->set_term(wire_.term() + 1);
  expect_rejected("term above the message's term");
}

TEST_F(MalformedMessage, EntryTermGoingBackwardsRejected) {
  wire_.mutable_entries(0)->set_term(wire_.log_term() - 1);
  expect_rejected("term goes backwards");
}

TEST_F(MalformedMessage, IndexOverflowRejected) {
  const raft::Index near_max = std::numeric_limits<raft::Index>::max() - 1;
  wire_.set_index(near_max);
  for (int i = 0; i < wire_.entries_size(); ++i) wire_.mutable_entries(i)->set_index(near_max + 1);
  expect_rejected("overflow");
}

TEST_F(MalformedMessage, TermsAboveTheLimitRejected) {
  // 2^64-1 was adopted and persisted by every node, and no election could follow (term + 1 overflows).
  for (int field = 0; field < 3; ++field) {
    SetUp();
    for (int i = 0; i < wire_.entries_size(); ++i) wire_.mutable_entries(i)->set_term(wire_.term());
    const std::uint64_t huge = raft::kMaxTerm + 1;
    if (field == 0) wire_.set_term(huge);
    if (field == 1) wire_.set_log_term(huge);
    if (field == 2) wire_.set_hint_term(huge);
    expect_rejected("names a term above the limit");
  }
}

// Seeded mutation of encoded messages: random bytes flipped, truncated or appended. Whatever parses and
// passes the codec goes on into a Raft core (as a follower, a candidate and a leader), which must
// never abort on it: the codec and the core together are the only guard between the network and the
// core's invariants.
// A snapshot message is SNAPSHOT with a snapshot, and only there; its index, term and configuration
// are checked before anything reaches the core.
class MalformedSnapshot : public ::testing::Test {
 protected:
  void SetUp() override { encode_message(full_message(raft::MessageType::kSnapshot), "c", &wire_); }
  void expect_rejected(const std::string& fragment) {
    raft::Message decoded;
    const std::string problem = decode_message(wire_, MessageLimits(), &decoded);
    EXPECT_NE(problem.find(fragment), std::string::npos) << "problem: " << problem;
  }
  pb::RaftMessage wire_;
};

TEST_F(MalformedSnapshot, ValidBaselineIsAcceptedAndMovesTheData) {
  raft::Message decoded;
  EXPECT_EQ(decode_message(std::move(wire_), MessageLimits(), &decoded), "");
  ASSERT_TRUE(decoded.snapshot);
  EXPECT_EQ(decoded.snapshot->data, std::string("dedup\0state\xff", 12));
  EXPECT_EQ(decoded.snapshot->conf.addresses.size(), 2u);
}

TEST_F(MalformedSnapshot, MissingSnapshotRejected) {
  wire_.clear_snapshot();
  expect_rejected("carries no snapshot");
}

TEST_F(MalformedSnapshot, SnapshotOnAnotherTypeRejected) {
  for (const pb::MessageType type : {pb::APPEND, pb::HEARTBEAT, pb::APPEND_RESPONSE}) {
    wire_.set_type(type);
    wire_.clear_entries();
    expect_rejected("must not carry a snapshot");
  }
}

TEST_F(MalformedSnapshot, IndexZeroRejected) {
  wire_.mutable_snapshot()->set_index(0);
  expect_rejected("index 0");
}

// Review finding 7: an index near 2^64 would wrap the follower's new first index (index + 1) and
// strand it behind a commit index no real leader reaches; the bound is the snapshot data's.
TEST_F(MalformedSnapshot, IndexAboveTheBoundRejected) {
  wire_.mutable_snapshot()->set_index(kMaxSnapshotIndex + 1);
  expect_rejected("above the limit");
  wire_.mutable_snapshot()->set_index(std::numeric_limits<std::uint64_t>::max());
  expect_rejected("above the limit");
  wire_.mutable_snapshot()->set_index(kMaxSnapshotIndex);
  raft::Message decoded;
  EXPECT_EQ(decode_message(wire_, MessageLimits(), &decoded), "");
  EXPECT_EQ(decoded.snapshot->index, kMaxSnapshotIndex);
}

TEST_F(MalformedSnapshot, TermZeroOrAboveTheMessageTermRejected) {
  wire_.mutable_snapshot()->set_term(0);
  expect_rejected("outside 1..9");
  wire_.mutable_snapshot()->set_term(10);
  expect_rejected("outside 1..9");
  wire_.mutable_snapshot()->set_term(std::numeric_limits<std::uint64_t>::max());
  expect_rejected("outside 1..9");
}

TEST_F(MalformedSnapshot, ConfigurationThatDoesNotDecodeRejected) {
  std::string conf = wire_.snapshot().conf();
  conf[conf.size() / 2] ^= 0x10;  // the configuration's own CRC catches it
  wire_.mutable_snapshot()->set_conf(conf);
  expect_rejected("configuration that does not decode");
  wire_.mutable_snapshot()->set_conf("");
  expect_rejected("configuration that does not decode");
}

TEST_F(MalformedSnapshot, DataBeyondTheMessageBoundRejected) {
  wire_.mutable_snapshot()->set_data(std::string(9u << 20, 'd'));
  expect_rejected("exceeds the limit");
}

TEST(MessageCodecFuzz, MutatedMessagesNeverAbortTheCore) {
  raft::MemoryLog log;
  std::vector<raft::Entry> entries;
  for (raft::Index i = 1; i <= 5; ++i) {
    raft::Entry e;
    e.index = i;
    e.term = i <= 2 ? 1 : 2;
    e.payload = "e" + std::to_string(i);
    entries.push_back(e);
  }
  log.append(entries);
  raft::Config config;
  config.id = 5;
  config.initial_conf.voters = {3, 5, 7};
  config.pre_vote = false;
  config.snapshots = true;  // forged snapshots go on into the core too
  raft::Raft core(config, log, raft::HardState{2, 0, 3});
  util::SplitMix64Prng prng(20261201);
  std::size_t accepted = 0;
  for (int round = 0; round < 20000; ++round) {
    raft::Message base = full_message(kAllTypes[prng.below(std::size(kAllTypes))]);
    base.to = 5;
    base.from = prng.below(2) == 0 ? 3 : 7;
    base.term = prng.below(6);
    base.index = prng.below(8);
    base.commit = prng.below(12);
    base.reject_hint = prng.below(8);
    base.hint_term = prng.below(4);
    if (base.type == raft::MessageType::kAppend) {
      base.log_term = std::min<raft::Term>(prng.below(3), base.term);
      for (std::size_t i = 0; i < base.entries.size(); ++i) {
        base.entries[i].index = base.index + 1 + i;
        base.entries[i].term =
            std::max(base.log_term, std::min<raft::Term>(base.term, 1 + prng.below(5)));
        if (i > 0) base.entries[i].term = std::max(base.entries[i].term, base.entries[i - 1].term);
        base.entries[i].type = raft::EntryType::kNormal;
      }
    }
    if (base.type == raft::MessageType::kSnapshot) {
      base.snapshot->index = prng.below(14);
      base.snapshot->term = prng.below(base.term + 2);
    }
    pb::RaftMessage wire;
    encode_message(base, "c", &wire);
    std::string bytes = wire.SerializeAsString();
    const std::uint64_t flips = 1 + prng.below(4);
    for (std::uint64_t f = 0; f < flips && !bytes.empty(); ++f) {
      switch (prng.below(3)) {
        case 0:
          bytes[prng.below(bytes.size())] ^= static_cast<char>(1 + prng.below(255));
          break;
        case 1:
          bytes.resize(prng.below(bytes.size()));
          break;
        default:
          bytes.push_back(static_cast<char>(prng.below(256)));
          break;
      }
    }
    pb::RaftMessage parsed;
    if (!parsed.ParseFromString(bytes)) continue;
    raft::Message decoded;
    if (!decode_message(parsed, MessageLimits(), &decoded).empty()) continue;
    ++accepted;
    core.step(decoded);  // must not abort
    if (prng.below(8) == 0) core.tick();
    raft::Ready ready = core.ready();
    if (ready.snapshot || !ready.entries.empty() || ready.truncate_from) {
      log.apply(ready);
      core.on_persisted(log.last_index(), *log.term_at(log.last_index()));
    }
    ASSERT_LE(core.commit_index(), core.last_index());
    ASSERT_LE(core.term(), raft::kMaxTerm);
  }
  EXPECT_GT(accepted, 1000u) << "the mutations must leave enough messages that reach the core";
}

}  // namespace
}  // namespace raftlog::server
