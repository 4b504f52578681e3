#include "server/message_codec.h"

#include <gtest/gtest.h>

#include <limits>
#include <set>
#include <string>

#include "raftlog/peer/v1/peer.pb.h"

namespace raftlog::server {
namespace {

namespace pb = raftlog::peer::v1;

constexpr raft::MessageType kAllTypes[] = {
    raft::MessageType::kPreVote,   raft::MessageType::kPreVoteResponse, raft::MessageType::kVote,
    raft::MessageType::kVoteResponse, raft::MessageType::kAppend,      raft::MessageType::kAppendResponse,
    raft::MessageType::kHeartbeat, raft::MessageType::kHeartbeatResponse, raft::MessageType::kTimeoutNow,
};

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
  if (type == raft::MessageType::kAppend) {
    const raft::EntryType entry_types[] = {raft::EntryType::kNormal, raft::EntryType::kNoop, raft::EntryType::kConfig};
    for (int i = 0; i < 3; ++i) {
      raft::Entry entry;
      entry.index = 101 + static_cast<raft::Index>(i);
      entry.term = 7 + static_cast<raft::Term>(i);
      entry.type = entry_types[i];
      entry.client_id = 1000 + static_cast<std::uint64_t>(i);
      entry.sequence = 2000 + static_cast<std::uint64_t>(i);
      entry.payload = std::string("payload\0with\xffzero", 17) + std::to_string(i);
      message.entries.push_back(entry);
    }
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

TEST(MessageCodec, EmptyAppendProbeAndDefaultsRoundTrip) {
  raft::Message probe;
  probe.type = raft::MessageType::kAppend;
  probe.from = 1;
  probe.to = 2;
  raft::Message decoded = full_message(raft::MessageType::kAppend);  // must be overwritten entirely
  EXPECT_EQ(through_the_wire(probe, &decoded), "");
  EXPECT_EQ(decoded, probe);
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

}  // namespace
}  // namespace raftlog::server
