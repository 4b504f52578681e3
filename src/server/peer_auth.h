// Authentication of peer streams by a secret every member shares (--peer-secret-file), for clusters
// whose peers talk plaintext. docs/security.md states the threat model; in short: whoever can reach
// a node's port but does not hold the secret cannot open a peer stream, and a member can speak only
// as the node id its authenticator names. Free of gRPC headers (OpenSSL computes the HMAC).
//
// The authenticator a sender puts in the initial metadata of every peer stream (key
// kPeerAuthMetadataKey) is "v1 <from> <to> <mac>", where <mac> is the lowercase hex of
// HMAC-SHA256(secret, "raftlog-peer-auth-v1" | u64le(cluster id length) | cluster id | u64le(from) |
// u64le(to)). It binds the stream to its sender, its recipient and the cluster, never reveals the
// secret, and does not depend on any clock (raftlogd must work with wall clocks off by days). It is
// the same for every stream of one ordered pair of nodes, so someone who can read the traffic
// between two nodes could replay it: plaintext with a secret is for networks nobody else can read
// (that reader would see every entry anyway); elsewhere use mutual TLS.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace raftlog::server {

// Bounds on the secret, after a trailing newline is removed. 16 bytes is the least that makes
// guessing hopeless (`openssl rand -hex 32` gives 64).
inline constexpr std::size_t kMinPeerSecretBytes = 16;
inline constexpr std::size_t kMaxPeerSecretBytes = 4096;
// Initial metadata key of the authenticator.
inline constexpr std::string_view kPeerAuthMetadataKey = "raftlog-peer-auth";
// A received authenticator longer than this is refused unread ("v1", two u64 ids, 64 hex digits).
inline constexpr std::size_t kMaxPeerAuthTokenBytes = 128;

// Reads the shared secret from `path`: a regular file (symbolic links are followed) that no other
// user may read or write and its group may not write, of at most kMaxPeerSecretBytes bytes, holding
// at least kMinPeerSecretBytes once trailing "\n"/"\r" are removed (so `openssl rand -hex 32 > FILE`
// works). Returns "" and sets *secret, or a sentence naming the file and the problem (never the
// secret's bytes).
std::string read_peer_secret_file(const std::string& path, std::string* secret);

// The authenticator for a stream from `from` to `to` in cluster `cluster_id`.
std::string peer_auth_token(const std::string& secret, const std::string& cluster_id,
                            std::uint64_t from, std::uint64_t to);

// Checks a received authenticator for a stream to `self`. Returns "" and sets *from to the sender it
// names when it is well-formed, addressed to `self` and its MAC matches (compared in constant time);
// otherwise why not. The caller still checks that *from is a member.
std::string verify_peer_auth_token(std::string_view token, const std::string& secret,
                                   const std::string& cluster_id, std::uint64_t self,
                                   std::uint64_t* from);

}  // namespace raftlog::server
