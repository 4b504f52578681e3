// ConfState <-> kConfig entry payload, and the single-server change arithmetic. Versioned and
// checksummed: a configuration read back from a log or a message decides who votes, so a torn or
// foreign payload must be rejected, never half-parsed.

#include <algorithm>

#include "raft/assert.h"
#include "raft/types.h"
#include "util/crc32c.h"
#include "util/host_port.h"

namespace raftlog::raft {
namespace {

constexpr std::uint8_t kVotersOnlyFormatVersion = 1;
constexpr std::uint8_t kConfigFormatVersion = 2;
constexpr std::uint8_t kAddressFormatVersion = 3;
constexpr std::size_t kVersionBytes = 1;
constexpr std::size_t kCountBytes = 4;
constexpr std::size_t kNodeBytes = 8;
constexpr std::size_t kChecksumBytes = 4;
constexpr std::size_t kAddressLengthBytes = 2;

void put_le(std::string& out, std::uint64_t value, std::size_t width_bytes) {
  for (std::size_t i = 0; i < width_bytes; ++i) {
    out.push_back(static_cast<char>((value >> (8 * i)) & 0xFFu));
  }
}

std::uint64_t get_le(const std::string& in, std::size_t offset, std::size_t width_bytes) {
  std::uint64_t value = 0;
  for (std::size_t i = 0; i < width_bytes; ++i) {
    value |= static_cast<std::uint64_t>(static_cast<unsigned char>(in[offset + i])) << (8 * i);
  }
  return value;
}

bool sorted_unique_nonzero(const std::vector<NodeId>& ids) {
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] == kNoNode) return false;
    if (i > 0 && ids[i - 1] >= ids[i]) return false;
  }
  return true;
}

// Reads `count` ids (bounded by kMaxMembers by the caller) from `offset`; false when the payload is
// too short.
bool read_ids(const std::string& payload, std::size_t& offset, std::vector<NodeId>& out) {
  if (payload.size() < offset + kCountBytes) return false;
  const std::uint64_t count = get_le(payload, offset, kCountBytes);
  offset += kCountBytes;
  if (count > kMaxMembers || payload.size() < offset + kNodeBytes * count) return false;
  out.reserve(count);
  for (std::uint64_t i = 0; i < count; ++i) {
    out.push_back(get_le(payload, offset, kNodeBytes));
    offset += kNodeBytes;
  }
  return true;
}

// Reads the address list of a version 3 payload; false when it is short or malformed (the values
// are checked by is_valid_conf afterwards).
bool read_addresses(const std::string& payload, std::size_t& offset,
                    std::vector<MemberAddress>& out) {
  if (payload.size() < offset + kCountBytes) return false;
  const std::uint64_t count = get_le(payload, offset, kCountBytes);
  offset += kCountBytes;
  if (count == 0 || count > kMaxMembers) return false;  // version 3 is written only with addresses
  out.reserve(count);
  for (std::uint64_t i = 0; i < count; ++i) {
    if (payload.size() < offset + kNodeBytes + kAddressLengthBytes) return false;
    MemberAddress member;
    member.node = get_le(payload, offset, kNodeBytes);
    offset += kNodeBytes;
    const std::uint64_t length = get_le(payload, offset, kAddressLengthBytes);
    offset += kAddressLengthBytes;
    if (length > kMaxMemberAddressBytes || payload.size() < offset + length) return false;
    member.address = payload.substr(offset, length);
    offset += length;
    out.push_back(std::move(member));
  }
  return true;
}

std::size_t encoded_size(const ConfState& conf) {
  std::size_t bytes = kVersionBytes + 2 * kCountBytes +
                      kNodeBytes * (conf.voters.size() + conf.learners.size()) + kChecksumBytes;
  if (!conf.addresses.empty()) bytes += kCountBytes;
  for (const MemberAddress& member : conf.addresses) {
    bytes += kNodeBytes + kAddressLengthBytes + member.address.size();
  }
  return bytes;
}

bool valid_addresses(const ConfState& conf) {
  for (std::size_t i = 0; i < conf.addresses.size(); ++i) {
    const MemberAddress& member = conf.addresses[i];
    if (i > 0 && conf.addresses[i - 1].node >= member.node) return false;
    if (!is_member(conf, member.node) || !check_member_address(member.address).empty()) {
      return false;
    }
    for (std::size_t j = 0; j < i; ++j) {
      if (conf.addresses[j].address == member.address) return false;
    }
  }
  return true;
}

// The addresses the configuration after `change` records: the change's (or, when it names none, the
// old configuration's), restricted to the members of `next`.
std::vector<MemberAddress> addresses_after(const ConfState& conf, const ConfChange& change,
                                           const ConfState& next) {
  const std::vector<MemberAddress>& source =
      change.addresses.empty() ? conf.addresses : change.addresses;
  std::vector<MemberAddress> kept;
  for (const MemberAddress& member : source) {
    if (is_member(next, member.node)) kept.push_back(member);
  }
  return kept;
}

void insert_sorted(std::vector<NodeId>& ids, NodeId node) {
  ids.insert(std::upper_bound(ids.begin(), ids.end(), node), node);
}

void erase_sorted(std::vector<NodeId>& ids, NodeId node) {
  const auto it = std::lower_bound(ids.begin(), ids.end(), node);
  if (it != ids.end() && *it == node) ids.erase(it);
}

}  // namespace

bool is_valid_conf(const ConfState& conf) {
  if (conf.voters.empty() || conf.voters.size() + conf.learners.size() > kMaxMembers) return false;
  if (!sorted_unique_nonzero(conf.voters) || !sorted_unique_nonzero(conf.learners)) return false;
  for (NodeId learner : conf.learners) {
    if (is_voter(conf, learner)) return false;
  }
  return valid_addresses(conf) && encoded_size(conf) <= kMaxConfigBytes;
}

bool same_members(const ConfState& a, const ConfState& b) {
  return a.voters == b.voters && a.learners == b.learners;
}

const std::string* address_of(const ConfState& conf, NodeId node) {
  const auto it = std::lower_bound(
      conf.addresses.begin(), conf.addresses.end(), node,
      [](const MemberAddress& member, NodeId id) { return member.node < id; });
  return it != conf.addresses.end() && it->node == node ? &it->address : nullptr;
}

std::string check_member_address(const std::string& address) {
  if (address.size() > kMaxMemberAddressBytes) {
    return "is longer than " + std::to_string(kMaxMemberAddressBytes) + " bytes";
  }
  for (char c : address) {
    if (c <= ' ' || c > '~') return "holds a byte that is not printable ASCII";
  }
  return util::parse_host_port(address, util::PortZero::kRefused, nullptr);
}

bool is_voter(const ConfState& conf, NodeId node) {
  return std::binary_search(conf.voters.begin(), conf.voters.end(), node);
}

bool is_learner(const ConfState& conf, NodeId node) {
  return std::binary_search(conf.learners.begin(), conf.learners.end(), node);
}

std::string to_string(const ConfState& conf) {
  auto list = [](const std::vector<NodeId>& ids) {
    std::string text = "{";
    for (std::size_t i = 0; i < ids.size(); ++i) {
      if (i > 0) text += ",";
      text += std::to_string(ids[i]);
    }
    return text + "}";
  };
  std::string text = "voters " + list(conf.voters);
  if (!conf.learners.empty()) text += " learners " + list(conf.learners);
  return text;
}

std::string encode_config(const ConfState& conf) {
  RAFT_ASSERT(is_valid_conf(conf), "encode_config needs a valid configuration");
  std::string out;
  out.reserve(encoded_size(conf));
  // Version 2 while no address is recorded: what nodes built before addresses read.
  put_le(out, conf.addresses.empty() ? kConfigFormatVersion : kAddressFormatVersion, kVersionBytes);
  put_le(out, conf.voters.size(), kCountBytes);
  for (NodeId voter : conf.voters) put_le(out, voter, kNodeBytes);
  put_le(out, conf.learners.size(), kCountBytes);
  for (NodeId learner : conf.learners) put_le(out, learner, kNodeBytes);
  if (!conf.addresses.empty()) {
    put_le(out, conf.addresses.size(), kCountBytes);
    for (const MemberAddress& member : conf.addresses) {
      put_le(out, member.node, kNodeBytes);
      put_le(out, member.address.size(), kAddressLengthBytes);
      out += member.address;
    }
  }
  put_le(out, util::crc32c::value(out.data(), out.size()), kChecksumBytes);
  return out;
}

std::optional<ConfState> decode_config(const std::string& payload) {
  if (payload.size() < kVersionBytes + kCountBytes + kChecksumBytes ||
      payload.size() > kMaxConfigBytes) {
    return std::nullopt;
  }
  const std::uint64_t version = get_le(payload, 0, kVersionBytes);
  if (version != kVotersOnlyFormatVersion && version != kConfigFormatVersion &&
      version != kAddressFormatVersion) {
    return std::nullopt;
  }
  ConfState conf;
  std::size_t offset = kVersionBytes;
  if (!read_ids(payload, offset, conf.voters)) return std::nullopt;
  if (version >= kConfigFormatVersion && !read_ids(payload, offset, conf.learners))
    return std::nullopt;
  if (version == kAddressFormatVersion && !read_addresses(payload, offset, conf.addresses))
    return std::nullopt;
  if (payload.size() != offset + kChecksumBytes) return std::nullopt;  // strict length
  if (get_le(payload, offset, kChecksumBytes) != util::crc32c::value(payload.data(), offset)) {
    return std::nullopt;
  }
  if (!is_valid_conf(conf)) return std::nullopt;
  return conf;
}

const char* to_string(ConfChangeType type) {
  switch (type) {
    case ConfChangeType::kAddVoter:
      return "AddVoter";
    case ConfChangeType::kAddLearner:
      return "AddLearner";
    case ConfChangeType::kPromoteLearner:
      return "PromoteLearner";
    case ConfChangeType::kRemoveNode:
      return "RemoveNode";
  }
  return "UnknownConfChangeType";
}

const char* to_string(ConfChangeProblem problem) {
  switch (problem) {
    case ConfChangeProblem::kNone:
      return "None";
    case ConfChangeProblem::kInvalidNode:
      return "InvalidNode";
    case ConfChangeProblem::kAlreadyMember:
      return "AlreadyMember";
    case ConfChangeProblem::kNotMember:
      return "NotMember";
    case ConfChangeProblem::kNotLearner:
      return "NotLearner";
    case ConfChangeProblem::kNoVotersLeft:
      return "NoVotersLeft";
    case ConfChangeProblem::kTooManyMembers:
      return "TooManyMembers";
    case ConfChangeProblem::kBadAddress:
      return "BadAddress";
    case ConfChangeProblem::kAddressInUse:
      return "AddressInUse";
    case ConfChangeProblem::kTooLarge:
      return "TooLarge";
  }
  return "UnknownConfChangeProblem";
}

namespace {

// The role rules of a change (who may be added, promoted, removed).
ConfChangeProblem check_roles(const ConfState& conf, const ConfChange& change) {
  if (change.node == kNoNode) return ConfChangeProblem::kInvalidNode;
  const bool member = is_member(conf, change.node);
  switch (change.type) {
    case ConfChangeType::kAddVoter:
    case ConfChangeType::kAddLearner:
      if (member) return ConfChangeProblem::kAlreadyMember;
      if (conf.voters.size() + conf.learners.size() >= kMaxMembers)
        return ConfChangeProblem::kTooManyMembers;
      return ConfChangeProblem::kNone;
    case ConfChangeType::kPromoteLearner:
      if (!member) return ConfChangeProblem::kNotMember;
      if (!is_learner(conf, change.node)) return ConfChangeProblem::kNotLearner;
      return ConfChangeProblem::kNone;
    case ConfChangeType::kRemoveNode:
      if (!member) return ConfChangeProblem::kNotMember;
      if (conf.voters.size() == 1 && is_voter(conf, change.node))
        return ConfChangeProblem::kNoVotersLeft;
      return ConfChangeProblem::kNone;
  }
  return ConfChangeProblem::kInvalidNode;
}

ConfState apply_roles(const ConfState& conf, const ConfChange& change) {
  ConfState next = conf;
  switch (change.type) {
    case ConfChangeType::kAddVoter:
      insert_sorted(next.voters, change.node);
      break;
    case ConfChangeType::kAddLearner:
      insert_sorted(next.learners, change.node);
      break;
    case ConfChangeType::kPromoteLearner:
      erase_sorted(next.learners, change.node);
      insert_sorted(next.voters, change.node);
      break;
    case ConfChangeType::kRemoveNode:
      erase_sorted(next.voters, change.node);
      erase_sorted(next.learners, change.node);
      break;
  }
  next.addresses = addresses_after(conf, change, next);
  return next;
}

}  // namespace

ConfChangeProblem check_conf_change(const ConfState& conf, const ConfChange& change) {
  if (const ConfChangeProblem roles = check_roles(conf, change); roles != ConfChangeProblem::kNone)
    return roles;
  for (std::size_t i = 0; i < change.addresses.size(); ++i) {
    const MemberAddress& member = change.addresses[i];
    if (member.node == kNoNode || (i > 0 && change.addresses[i - 1].node >= member.node) ||
        !check_member_address(member.address).empty()) {
      return ConfChangeProblem::kBadAddress;
    }
  }
  const ConfState next = apply_roles(conf, change);
  for (std::size_t i = 0; i < next.addresses.size(); ++i) {
    for (std::size_t j = 0; j < i; ++j) {
      if (next.addresses[j].address == next.addresses[i].address)
        return ConfChangeProblem::kAddressInUse;
    }
  }
  if (encoded_size(next) > kMaxConfigBytes) return ConfChangeProblem::kTooLarge;
  return ConfChangeProblem::kNone;
}

ConfState apply_conf_change(const ConfState& conf, const ConfChange& change) {
  RAFT_ASSERT(check_conf_change(conf, change) == ConfChangeProblem::kNone,
              "apply_conf_change needs an applicable change");
  return apply_roles(conf, change);
}

std::optional<ConfChange> single_change_between(const ConfState& from, const ConfState& to) {
  // Every member whose role differs; more than one means more than one change.
  std::optional<NodeId> changed;
  auto note = [&](NodeId node) {
    if (changed && *changed != node) return false;
    changed = node;
    return true;
  };
  for (const std::vector<NodeId>* ids : {&from.voters, &from.learners, &to.voters, &to.learners}) {
    for (NodeId node : *ids) {
      const bool same = is_voter(from, node) == is_voter(to, node) &&
                        is_learner(from, node) == is_learner(to, node);
      if (!same && !note(node)) return std::nullopt;
    }
  }
  if (!changed) return std::nullopt;
  const NodeId node = *changed;
  ConfChange change{ConfChangeType::kRemoveNode, node, to.addresses};
  if (is_voter(to, node)) {
    change.type =
        is_learner(from, node) ? ConfChangeType::kPromoteLearner : ConfChangeType::kAddVoter;
  } else if (is_learner(to, node)) {
    change.type = ConfChangeType::kAddLearner;
  }
  // A voter demoted to learner is not a change this core makes (it would need two: remove, add).
  if (check_conf_change(from, change) != ConfChangeProblem::kNone) return std::nullopt;
  if (apply_conf_change(from, change) != to) return std::nullopt;
  return change;
}

}  // namespace raftlog::raft
