#include "server/snapshot_partial_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <utility>

#include "server/message_codec.h"
#include "util/check.h"
#include "util/crc32c.h"

namespace raftlog::server {

namespace {

constexpr std::string_view kMagic = "RLSP";
constexpr std::size_t kFixedHeaderBytes = 12;  // magic, version, body length
constexpr std::size_t kMaxClusterIdBytes = 256;

void put_u16(std::string& out, std::uint16_t value) {
  for (int i = 0; i < 2; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}
void put_u32(std::string& out, std::uint32_t value) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}
void put_u64(std::string& out, std::uint64_t value) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

// Reads little-endian fields from a byte string; every read fails (false) past its end.
class Reader {
 public:
  explicit Reader(std::string_view bytes) : bytes_(bytes) {}
  template <typename T>
  bool get(T* value) {
    if (bytes_.size() - at_ < sizeof(T)) return false;
    T result = 0;
    for (std::size_t i = 0; i < sizeof(T); ++i) {
      result |= static_cast<T>(static_cast<unsigned char>(bytes_[at_ + i])) << (8 * i);
    }
    at_ += sizeof(T);
    *value = result;
    return true;
  }
  bool take(std::size_t size, std::string_view* out) {
    if (bytes_.size() - at_ < size) return false;
    *out = bytes_.substr(at_, size);
    at_ += size;
    return true;
  }
  std::size_t left() const { return bytes_.size() - at_; }

 private:
  std::string_view bytes_;
  std::size_t at_ = 0;
};

// Seeded with the file's header CRC: a record is checked as one of this file's, not of an earlier
// file whose blocks a power cut left behind a new header.
std::uint32_t record_crc(std::uint32_t header_crc, std::uint64_t offset, std::uint32_t length,
                         std::string_view bytes) {
  std::string fields;
  put_u32(fields, header_crc);
  put_u64(fields, offset);
  put_u32(fields, length);
  return util::crc32c::extend(util::crc32c::value(fields), bytes.data(), bytes.size());
}

// The body's fields into `out`; "" or what is wrong with them.
std::string decode_header_body(std::string_view body, std::uint32_t version,
                               const SnapshotPartialExpectations& expect,
                               SnapshotPartialHeader* out) {
  Reader reader(body);
  std::uint16_t cluster_bytes = 0;
  std::string_view cluster;
  std::uint64_t from = 0, term = 0, commit = 0, index = 0, snapshot_term = 0, total = 0;
  std::uint32_t crc = 0, conf_bytes = 0;
  std::string_view conf;
  if (!reader.get(&cluster_bytes) || cluster_bytes == 0 || cluster_bytes > kMaxClusterIdBytes ||
      !reader.take(cluster_bytes, &cluster) || !reader.get(&out->node_id) || !reader.get(&from) ||
      !reader.get(&term) || !reader.get(&commit) || !reader.get(&index) ||
      !reader.get(&snapshot_term) || !reader.get(&total) || !reader.get(&crc) ||
      !reader.get(&conf_bytes) || conf_bytes == 0 || conf_bytes > raft::kMaxConfigBytes ||
      !reader.take(conf_bytes, &conf)) {
    return "its header's fields do not decode";
  }
  // Version 2: whether the chunks named the data's digest, and the digest (version 1 files, from
  // before digests: none).
  std::uint8_t has_digest = 0;
  std::uint32_t digest = 0;
  if (version >= 2 && (!reader.get(&has_digest) || has_digest > 1 || !reader.get(&digest))) {
    return "its header's fields do not decode";
  }
  if (reader.left() != 0) return "its header's fields do not decode";
  out->cluster_id = std::string(cluster);
  if (out->cluster_id != expect.cluster_id) {
    return "it belongs to cluster \"" + out->cluster_id + "\", not \"" + expect.cluster_id + "\"";
  }
  if (out->node_id != expect.node_id) {
    return "it belongs to node " + std::to_string(out->node_id) + ", not " +
           std::to_string(expect.node_id);
  }
  if (from == raft::kNoNode || from == expect.node_id) {
    return "it names node " + std::to_string(from) + " as the sender";
  }
  if (term == 0 || term > raft::kMaxTerm) return "it names term " + std::to_string(term);
  if (index == 0 || index > kMaxSnapshotIndex) return "it names index " + std::to_string(index);
  if (snapshot_term == 0 || snapshot_term > term) {
    return "it names snapshot term " + std::to_string(snapshot_term) + " outside 1.." +
           std::to_string(term);
  }
  if (total == 0 || total > expect.max_total_bytes) {
    return "it names a total of " + std::to_string(total) + " bytes, outside 1.." +
           std::to_string(expect.max_total_bytes);
  }
  std::optional<raft::ConfState> decoded = raft::decode_config(std::string(conf));
  if (!decoded) return "its configuration does not decode";
  raft::Message& message = out->message;
  message = raft::Message{};
  message.type = raft::MessageType::kSnapshot;
  message.from = from;
  message.to = out->node_id;
  message.term = term;
  message.commit = commit;
  raft::Snapshot& snapshot = message.snapshot.emplace();
  snapshot.index = index;
  snapshot.term = snapshot_term;
  snapshot.conf = std::move(*decoded);
  out->place = SnapshotChunkPlace{
      0, total, crc, has_digest != 0 ? std::optional<std::uint32_t>(digest) : std::nullopt};
  return {};
}

// The records after the header, appended to out->data while they are valid.
void decode_records(std::string_view records, std::uint32_t header_crc,
                    DecodedSnapshotPartial* out) {
  const std::uint64_t total = out->header.place.total_bytes;
  Reader reader(records);
  while (reader.left() > 0) {
    const std::string at = "the record at data offset " + std::to_string(out->data.size());
    std::uint32_t crc = 0, length = 0;
    std::uint64_t offset = 0;
    std::string_view bytes;
    if (!reader.get(&crc) || !reader.get(&offset) || !reader.get(&length)) {
      out->tail_problem = at + " is torn (short header)";
      return;
    }
    if (length == 0 || length > kSnapshotChunkBytes) {
      out->tail_problem = at + " has a length of " + std::to_string(length);
      return;
    }
    if (!reader.take(length, &bytes)) {
      out->tail_problem = at + " is torn (short data)";
      return;
    }
    if (record_crc(header_crc, offset, length, bytes) != crc) {
      out->tail_problem = at + " fails its CRC-32C";
      return;
    }
    if (offset != out->data.size()) {
      out->tail_problem = at + " starts at offset " + std::to_string(offset) + " (out of order)";
      return;
    }
    if (length > total - offset) {
      out->tail_problem = at + " runs past the total of " + std::to_string(total) + " bytes";
      return;
    }
    out->data.append(bytes);
    out->valid_bytes += kSnapshotPartialRecordHeaderBytes + length;
  }
}

std::string errno_text() { return std::strerror(errno); }

// Reads `size` bytes from the descriptor's position into *out; false with errno set (or 0: short).
bool read_all(int fd, std::size_t size, std::string* out) {
  out->resize(size);
  std::size_t got = 0;
  while (got < size) {
    const ssize_t n = ::read(fd, out->data() + got, size - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (n == 0) errno = 0;
      return false;
    }
    got += static_cast<std::size_t>(n);
  }
  return true;
}

// Writes all of `bytes` at the descriptor's position; false with errno set.
bool write_all(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t written = ::write(fd, bytes.data(), bytes.size());
    if (written < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    bytes.remove_prefix(static_cast<std::size_t>(written));
  }
  return true;
}

}  // namespace

std::uint64_t max_snapshot_partial_file_bytes(std::uint64_t max_total_bytes) {
  const std::uint64_t max_records = 2 * (max_total_bytes / kSnapshotPartialMinWriteBytes) + 2;
  return kFixedHeaderBytes + kSnapshotPartialMaxHeaderBodyBytes + 4 + max_total_bytes +
         max_records * kSnapshotPartialRecordHeaderBytes;
}

std::string encode_snapshot_partial_header(const SnapshotPartialHeader& header) {
  RAFTLOG_CHECK(header.message.type == raft::MessageType::kSnapshot && header.message.snapshot,
                "a partial snapshot's header is a kSnapshot");
  const raft::Snapshot& snapshot = *header.message.snapshot;
  std::string body;
  put_u16(body, static_cast<std::uint16_t>(header.cluster_id.size()));
  body += header.cluster_id;
  put_u64(body, header.node_id);
  put_u64(body, header.message.from);
  put_u64(body, header.message.term);
  put_u64(body, header.message.commit);
  put_u64(body, snapshot.index);
  put_u64(body, snapshot.term);
  put_u64(body, header.place.total_bytes);
  put_u32(body, header.place.data_crc32c);
  const std::string conf = raft::encode_config(snapshot.conf);
  put_u32(body, static_cast<std::uint32_t>(conf.size()));
  body += conf;
  body.push_back(header.place.data_digest ? 1 : 0);
  put_u32(body, header.place.data_digest.value_or(0));
  RAFTLOG_CHECK(body.size() <= kSnapshotPartialMaxHeaderBodyBytes,
                "a partial snapshot's header body within its bound");
  std::string out(kMagic);
  put_u32(out, kSnapshotPartialFormatVersion);
  put_u32(out, static_cast<std::uint32_t>(body.size()));
  out += body;
  put_u32(out, util::crc32c::value(out));
  return out;
}

std::uint32_t snapshot_partial_header_crc(std::string_view encoded_header) {
  RAFTLOG_CHECK(encoded_header.size() >= kFixedHeaderBytes + 4, "an encoded header");
  Reader reader(encoded_header.substr(encoded_header.size() - 4));
  std::uint32_t crc = 0;
  reader.get(&crc);
  return crc;
}

std::string encode_snapshot_partial_record(std::uint32_t header_crc, std::uint64_t offset,
                                           std::string_view bytes) {
  RAFTLOG_CHECK(!bytes.empty() && bytes.size() <= kSnapshotChunkBytes,
                "a partial snapshot record holds 1..kSnapshotChunkBytes bytes");
  const auto length = static_cast<std::uint32_t>(bytes.size());
  std::string out;
  out.reserve(kSnapshotPartialRecordHeaderBytes + bytes.size());
  put_u32(out, record_crc(header_crc, offset, length, bytes));
  put_u64(out, offset);
  put_u32(out, length);
  out += bytes;
  return out;
}

std::optional<DecodedSnapshotPartial> decode_snapshot_partial(
    std::string_view file, const SnapshotPartialExpectations& expect, std::string* problem) {
  problem->clear();
  Reader reader(file);
  std::string_view magic;
  std::uint32_t version = 0, body_bytes = 0;
  if (!reader.take(kMagic.size(), &magic) || !reader.get(&version) || !reader.get(&body_bytes)) {
    *problem = "it is shorter than its header (" + std::to_string(file.size()) + " bytes)";
    return std::nullopt;
  }
  if (magic != kMagic) {
    *problem = "it does not start with the magic " + std::string(kMagic);
    return std::nullopt;
  }
  if (version != kSnapshotPartialFormatVersion && version != 1) {
    *problem =
        "unknown format version " + std::to_string(version) + " (written by a newer raftlogd?)";
    return std::nullopt;
  }
  std::string_view body;
  std::uint32_t crc = 0;
  if (body_bytes > kSnapshotPartialMaxHeaderBodyBytes || !reader.take(body_bytes, &body) ||
      !reader.get(&crc)) {
    *problem = "its header is torn or longer than its bound";
    return std::nullopt;
  }
  const std::size_t header_bytes = kFixedHeaderBytes + body_bytes;
  if (util::crc32c::value(file.substr(0, header_bytes)) != crc) {
    *problem = "its header fails its CRC-32C";
    return std::nullopt;
  }
  DecodedSnapshotPartial decoded;
  if (std::string wrong = decode_header_body(body, version, expect, &decoded.header);
      !wrong.empty()) {
    *problem = std::move(wrong);
    return std::nullopt;
  }
  decoded.valid_bytes = header_bytes + 4;
  decoded.header_crc = crc;
  decode_records(file.substr(header_bytes + 4), crc, &decoded);
  if (decoded.data.size() >= decoded.header.place.total_bytes) {
    *problem = "its records hold the whole data (a completed partial is never kept)";
    return std::nullopt;
  }
  return decoded;
}

SnapshotPartialFile::SnapshotPartialFile(std::string path, SnapshotPartialExpectations expect,
                                         SnapshotPartialDiskProbe disk)
    : path_(std::move(path)), expect_(std::move(expect)), disk_(std::move(disk)) {
  if (!disk_ && !path_.empty()) {
    disk_ = [directory = std::filesystem::path(path_).parent_path().string()]()
        -> std::optional<SnapshotPartialDisk> {
      struct statvfs fs {};
      if (::statvfs(directory.empty() ? "." : directory.c_str(), &fs) != 0 || fs.f_blocks == 0) {
        return std::nullopt;
      }
      return SnapshotPartialDisk{
          static_cast<std::uint64_t>(fs.f_bavail) * fs.f_frsize,
          static_cast<std::uint64_t>(fs.f_blocks) * fs.f_frsize,
          1.0 - static_cast<double>(fs.f_bavail) / static_cast<double>(fs.f_blocks)};
    };
  }
}

SnapshotPartialFile::~SnapshotPartialFile() {
  // The file stays: the next start resumes from it.
  if (fd_ >= 0) ::close(fd_);
}

std::string SnapshotPartialFile::room_for(std::uint64_t more_bytes) const {
  const std::optional<SnapshotPartialDisk> disk = disk_ ? disk_() : std::nullopt;
  if (!disk) return {};  // unknown: the write itself tells
  if (disk->free_bytes < more_bytes + kSnapshotPartialDiskReserveBytes) {
    return "its file system has " + std::to_string(disk->free_bytes) +
           " bytes free, less than the " + std::to_string(more_bytes) +
           " it may still take plus a reserve of " +
           std::to_string(kSnapshotPartialDiskReserveBytes);
  }
  const double used_after =
      disk->used_ratio + static_cast<double>(more_bytes) / static_cast<double>(disk->total_bytes);
  if (expect_.max_disk_used_ratio < 1.0 && used_after >= expect_.max_disk_used_ratio) {
    return "its file system would be " + std::to_string(static_cast<int>(used_after * 100)) +
           " % used, at or past the high watermark of " +
           std::to_string(static_cast<int>(expect_.max_disk_used_ratio * 100)) + " %";
  }
  return {};
}

std::string SnapshotPartialFile::load(SnapshotReassembler& reassembler, raft::Index stale_through,
                                      SnapshotReassembler::Clock::time_point now) {
  if (path_.empty()) return {};
  // Not followed if a link, not blocked on if a FIFO: only a regular file is read.
  const int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0 && errno == ENOENT) return {};
  const std::uint64_t max_file_bytes = max_snapshot_partial_file_bytes(expect_.max_total_bytes);
  struct stat info {};
  std::string file;
  std::string problem;
  if (fd < 0) {
    problem = "cannot open it: " + errno_text();
  } else if (::fstat(fd, &info) != 0) {
    problem = "cannot stat it: " + errno_text();
  } else if (!S_ISREG(info.st_mode)) {
    problem = "it is not a regular file";
  } else if (static_cast<std::uint64_t>(info.st_size) > max_file_bytes) {
    problem = "it has " + std::to_string(info.st_size) + " bytes, more than the " +
              std::to_string(max_file_bytes) + " a partial of this node's bound takes";
  } else if (!read_all(fd, static_cast<std::size_t>(info.st_size), &file)) {
    problem = "cannot read it: " + errno_text();
  }
  if (fd >= 0) ::close(fd);
  std::optional<DecodedSnapshotPartial> decoded;
  if (problem.empty()) decoded = decode_snapshot_partial(file, expect_, &problem);
  file = std::string();  // the decoded copy is kept, not both
  if (decoded && expect_.max_disk_used_ratio < 1.0) {
    // Past the watermark the room is the store's: the partial's bytes are given back.
    const std::optional<SnapshotPartialDisk> disk = disk_ ? disk_() : std::nullopt;
    if (disk && disk->used_ratio >= expect_.max_disk_used_ratio) {
      problem = "its file system is past the high watermark";
      decoded.reset();
    }
  }
  if (!decoded) {
    ++files_dropped_;
    remove_file();
    if (std::string occupied = occupied_by_directory(); !occupied.empty()) {
      return "cannot drop " + path_ + ": " + occupied;
    }
    return "dropped " + path_ + ": " + problem + "; a snapshot transfer starts from offset 0";
  }
  const raft::Snapshot& snapshot = *decoded->header.message.snapshot;
  const std::string names = "snapshot " + std::to_string(snapshot.index) + "/t" +
                            std::to_string(snapshot.term) + " from node " +
                            std::to_string(decoded->header.message.from);
  if (snapshot.index <= stale_through) {
    remove_file();
    return "removed " + path_ + ": its " + names + " is at or below the log's start or commit " +
           std::to_string(stale_through) + " (installed or replicated already)";
  }
  if (decoded->data.empty()) {
    remove_file();
    return "removed " + path_ + " (" + names + "): it held no whole record" +
           (decoded->tail_problem.empty() ? "" : ": " + decoded->tail_problem);
  }
  const std::uint64_t restored = decoded->data.size();
  const std::uint64_t total = decoded->header.place.total_bytes;
  const raft::NodeId from = decoded->header.message.from;
  const std::uint32_t header_crc = decoded->header_crc;
  if (std::string refused = reassembler.restore(
          std::move(decoded->header.message), decoded->header.place, std::move(decoded->data), now);
      !refused.empty()) {
    ++files_dropped_;
    remove_file();
    return "dropped " + path_ + " (" + names + "): " + refused;
  }
  // Appends continue after the last good record: a torn tail is cut off first.
  fd_ = ::open(path_.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC | O_NOFOLLOW);
  generation_ = reassembler.partial_from(from)->generation;
  header_crc_ = header_crc;
  bytes_held_ = restored;
  if (fd_ < 0 || ::ftruncate(fd_, static_cast<off_t>(decoded->valid_bytes)) != 0) {
    return fail("cannot reopen it: " + errno_text());
  }
  return "restored " + names + ": " + std::to_string(restored) + " of " + std::to_string(total) +
         " bytes" +
         (decoded->tail_problem.empty() ? "" : " (" + decoded->tail_problem + ": cut off)");
}

std::string SnapshotPartialFile::follow(const SnapshotReassembler& reassembler,
                                        std::optional<raft::NodeId> sender) {
  if (path_.empty()) return {};
  std::optional<SnapshotReassembler::PartialView> newest;
  if (sender) newest = reassembler.partial_from(*sender);
  if (fd_ >= 0) {
    const std::optional<SnapshotReassembler::PartialView> kept =
        reassembler.partial_of_generation(generation_);
    // Another sender's partial replaces the file's only at a higher term (a new leader's): two
    // senders at one term cannot make it rewrite their data back and forth.
    const bool superseded = kept && newest && newest->generation != generation_ &&
                            newest->header->term > kept->header->term;
    if (kept && !superseded) {
      if (kept->data.size() < bytes_held_) return fail("the partial shrank");  // never: it grows
      // Small chunks (a sender with a small message bound) are written together: few records.
      if (kept->data.size() - bytes_held_ < kSnapshotPartialMinWriteBytes) return {};
      return append(kept->data.substr(bytes_held_), kept->place.total_bytes);
    }
    // Completed, dropped or expired; or a new leader's partial is the newest.
    remove_file();
  }
  if (!newest || newest->generation == failed_generation_) return {};
  return start(*newest);
}

std::string SnapshotPartialFile::start(const SnapshotReassembler::PartialView& partial) {
  generation_ = partial.generation;
  bytes_held_ = 0;
  if (std::string no_room = room_for(partial.place.total_bytes); !no_room.empty()) {
    return fail(no_room);
  }
  // A new file, never one truncated in place: no block of an earlier file lies behind the header,
  // and a link planted meanwhile is not followed.
  remove_file();
  if (std::string occupied = occupied_by_directory(); !occupied.empty()) return fail(occupied);
  fd_ =
      ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd_ < 0) return fail("cannot create it: " + errno_text());
  SnapshotPartialHeader header{
      expect_.cluster_id, expect_.node_id, *partial.header,
      SnapshotChunkPlace{0, partial.place.total_bytes, partial.place.data_crc32c,
                         partial.place.data_digest}};
  header.message.snapshot->data = raft::Payload();
  const std::string encoded = encode_snapshot_partial_header(header);
  header_crc_ = snapshot_partial_header_crc(encoded);
  if (!write_all(fd_, encoded)) return fail("cannot write its header: " + errno_text());
  return append(partial.data, partial.place.total_bytes);
}

std::string SnapshotPartialFile::append(std::string_view data, std::uint64_t total_bytes) {
  if (std::string no_room = room_for(total_bytes - bytes_held_); !no_room.empty()) {
    return fail(no_room);
  }
  std::string records;
  for (std::size_t at = 0; at < data.size(); at += kSnapshotChunkBytes) {
    records += encode_snapshot_partial_record(header_crc_, bytes_held_ + at,
                                              data.substr(at, kSnapshotChunkBytes));
  }
  if (!write_all(fd_, records)) return fail("cannot append to it: " + errno_text());
  bytes_held_ += data.size();
  return {};
}

void SnapshotPartialFile::remove_file() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (path_.empty()) return;
  // ENOENT: nothing to remove. A directory in its place (not ours: this class writes files only)
  // is removed only when empty; one with contents is the operator's to look at
  // (occupied_by_directory says so).
  if (::unlink(path_.c_str()) != 0 && (errno == EISDIR || errno == EPERM)) ::rmdir(path_.c_str());
}

std::string SnapshotPartialFile::occupied_by_directory() const {
  struct stat info {};
  if (path_.empty() || ::lstat(path_.c_str(), &info) != 0 || !S_ISDIR(info.st_mode)) return {};
  return "a directory that is not empty is in its place (not written by raftlogd; remove it by "
         "hand, e.g. rm -r " +
         path_ + ")";
}

std::string SnapshotPartialFile::fail(const std::string& what) {
  ++write_failures_;
  failed_generation_ = generation_;
  remove_file();
  return "cannot keep the partial snapshot in " + path_ + ": " + what +
         "; it is kept in memory only";
}

}  // namespace raftlog::server
