#include "server/peer_auth.h"

#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>

namespace raftlog::server {

namespace {

constexpr std::string_view kTokenVersion = "v1";
constexpr std::string_view kMacDomain = "raftlog-peer-auth-v1";
constexpr std::size_t kMacHexDigits = 64;  // SHA-256

void append_u64(std::string* out, std::uint64_t value) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>((value >> (8 * i)) & 0xFF));
}

std::string mac_hex(const std::string& secret, const std::string& cluster_id, std::uint64_t from,
                    std::uint64_t to) {
  std::string input(kMacDomain);
  append_u64(&input, cluster_id.size());
  input += cluster_id;
  append_u64(&input, from);
  append_u64(&input, to);
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int mac_size = 0;
  if (HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
           reinterpret_cast<const unsigned char*>(input.data()), input.size(), mac,
           &mac_size) == nullptr) {
    return "";  // never matches a received MAC (verify compares against kMacHexDigits digits)
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(2 * mac_size);
  for (unsigned int i = 0; i < mac_size; ++i) {
    hex.push_back(kHex[mac[i] >> 4]);
    hex.push_back(kHex[mac[i] & 0xF]);
  }
  return hex;
}

// A decimal u64 without sign, leading zeros or trailing characters.
bool parse_id(std::string_view text, std::uint64_t* value) {
  if (text.empty() || text.size() > 20 || (text.size() > 1 && text.front() == '0')) return false;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), *value);
  return error == std::errc() && end == text.data() + text.size();
}

// Splits "a b c d" into exactly four space-separated fields.
bool split_fields(std::string_view text, std::string_view (&fields)[4]) {
  for (int i = 0; i < 4; ++i) {
    const std::size_t space = text.find(' ');
    if (i < 3) {
      if (space == std::string_view::npos) return false;
      fields[i] = text.substr(0, space);
      text.remove_prefix(space + 1);
    } else {
      if (space != std::string_view::npos) return false;
      fields[i] = text;
    }
  }
  return true;
}

}  // namespace

std::string read_peer_secret_file(const std::string& path, std::string* secret) {
  secret->clear();
  const std::string flag = "--peer-secret-file: ";
  // O_NONBLOCK: opening a FIFO must not hang start-up (it is refused below as not a regular file).
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return flag + "cannot open " + path + ": " + std::strerror(errno);
  struct stat info {};
  std::string problem;
  if (::fstat(fd, &info) != 0) {
    problem = "cannot stat " + path + ": " + std::strerror(errno);
  } else if (!S_ISREG(info.st_mode)) {
    problem = path + " is not a regular file";
  } else if ((info.st_mode & S_IRWXO) != 0 || (info.st_mode & S_IWGRP) != 0) {
    // Other users of the machine must not learn or change the cluster's credential.
    char mode[8];
    std::snprintf(mode, sizeof(mode), "%04o", static_cast<unsigned>(info.st_mode & 07777));
    problem = path + " has mode " + mode +
              ": other users could read or change it; make it readable only by "
              "raftlogd's user (chmod 600, or 440 with a group)";
  } else if (static_cast<std::uint64_t>(info.st_size) > kMaxPeerSecretBytes) {
    problem = path + " is larger than " + std::to_string(kMaxPeerSecretBytes) + " bytes";
  } else {
    std::string bytes(kMaxPeerSecretBytes + 1, '\0');
    std::size_t filled = 0;
    // Bounded: at most kMaxPeerSecretBytes + 1 bytes in total (the file may grow after fstat).
    while (filled < bytes.size()) {
      const ssize_t got = ::read(fd, bytes.data() + filled, bytes.size() - filled);
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) {
        problem = "cannot read " + path + ": " + std::strerror(errno);
        break;
      }
      if (got == 0) break;
      filled += static_cast<std::size_t>(got);
    }
    bytes.resize(filled);
    if (problem.empty() && bytes.size() > kMaxPeerSecretBytes) {
      problem = path + " is larger than " + std::to_string(kMaxPeerSecretBytes) + " bytes";
    }
    while (!bytes.empty() && (bytes.back() == '\n' || bytes.back() == '\r')) bytes.pop_back();
    if (problem.empty() && bytes.size() < kMinPeerSecretBytes) {
      problem = path + " holds " + std::to_string(bytes.size()) +
                " bytes; a peer secret needs at least " + std::to_string(kMinPeerSecretBytes) +
                " (e.g. openssl rand -hex 32 > " + path + ")";
    }
    if (problem.empty()) *secret = std::move(bytes);
  }
  ::close(fd);
  return problem.empty() ? "" : flag + problem;
}

std::string peer_auth_token(const std::string& secret, const std::string& cluster_id,
                            std::uint64_t from, std::uint64_t to) {
  return std::string(kTokenVersion) + " " + std::to_string(from) + " " + std::to_string(to) + " " +
         mac_hex(secret, cluster_id, from, to);
}

std::string verify_peer_auth_token(std::string_view token, const std::string& secret,
                                   const std::string& cluster_id, std::uint64_t self,
                                   std::uint64_t* from) {
  *from = 0;
  if (token.size() > kMaxPeerAuthTokenBytes) return "the peer authenticator is too long";
  std::string_view fields[4];
  if (!split_fields(token, fields)) return "the peer authenticator is malformed";
  if (fields[0] != kTokenVersion) return "the peer authenticator has an unknown version";
  std::uint64_t sender = 0;
  std::uint64_t recipient = 0;
  if (!parse_id(fields[1], &sender) || !parse_id(fields[2], &recipient) || sender == 0 ||
      recipient == 0) {
    return "the peer authenticator is malformed";
  }
  if (recipient != self) {
    return "the peer authenticator is for node " + std::to_string(recipient) + ", not node " +
           std::to_string(self);
  }
  const std::string expected = mac_hex(secret, cluster_id, sender, recipient);
  if (fields[3].size() != kMacHexDigits || expected.size() != kMacHexDigits ||
      CRYPTO_memcmp(fields[3].data(), expected.data(), kMacHexDigits) != 0) {
    return "the peer authenticator does not match this cluster's peer secret (a different "
           "--peer-secret-file or "
           "--cluster-id?)";
  }
  *from = sender;
  return "";
}

}  // namespace raftlog::server
