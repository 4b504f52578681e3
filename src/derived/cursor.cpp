#include "derived/cursor.h"

#include "store/byte_io.h"
#include "store/endian.h"
#include "util/crc32c.h"

namespace raftlog::derived {
namespace {

using store::append_u16;
using store::append_u32;
using store::append_u64;
using Reader = store::ByteReader;

}  // namespace

std::string encode_cursor(const Cursor& cursor) {
  std::string out;
  append_u32(&out, kCursorMagic);
  append_u32(&out, 0);  // crc, below
  append_u32(&out, kCursorVersion);
  append_u32(&out, 0);
  append_u64(&out, cursor.node_id);
  append_u32(&out, static_cast<std::uint32_t>(cursor.cluster_id.size()));
  out += cursor.cluster_id;
  append_u64(&out, cursor.boundary);
  append_u64(&out, cursor.boundary_term);
  append_u64(&out, cursor.last_timestamp_ms);
  append_u32(&out, static_cast<std::uint32_t>(cursor.logs.size()));
  for (const CursorLog& log : cursor.logs) {
    out.push_back(static_cast<char>(log.kind));
    append_u16(&out, static_cast<std::uint16_t>(log.name.size()));
    out += log.name;
    append_u64(&out, log.first_number);
    append_u64(&out, log.end_number);
  }
  store::put_u32(out.data() + 4, util::crc32c::value(out.data() + 8, out.size() - 8));
  return out;
}

std::optional<Cursor> decode_cursor(const std::string& bytes, std::string* problem) {
  Reader in(bytes);
  std::uint32_t magic = 0, crc = 0, version = 0, zero = 0, cluster_size = 0, logs = 0;
  if (!in.u32(&magic) || magic != kCursorMagic) {
    *problem = "not a cursor (bad magic)";
    return std::nullopt;
  }
  if (!in.u32(&crc) || crc != util::crc32c::value(bytes.data() + 8, bytes.size() - 8)) {
    *problem = "cursor fails its checksum";
    return std::nullopt;
  }
  if (!in.u32(&version) || (version != kCursorVersion && version != kCursorVersionAlsoRead)) {
    *problem = version == 1 ? "cursor of version 1, whose time records lack those of stamped "
                              "entries after plain ones: the indexes are rebuilt once"
                            : "cursor of unknown version " + std::to_string(version);
    return std::nullopt;
  }
  Cursor cursor;
  bool ok = in.u32(&zero) && zero == 0 && in.u64(&cursor.node_id) && in.u32(&cluster_size) &&
            cluster_size <= 4096 && in.bytes(cluster_size, &cursor.cluster_id) &&
            in.u64(&cursor.boundary) && cursor.boundary >= 1 && in.u64(&cursor.boundary_term) &&
            in.u64(&cursor.last_timestamp_ms) && in.u32(&logs);
  for (std::uint32_t i = 0; ok && i < logs; ++i) {
    CursorLog log;
    std::uint8_t kind = 0;
    std::uint16_t name_size = 0;
    ok = in.u8(&kind) && kind >= 1 && kind <= 3 && in.u16(&name_size) &&
         in.bytes(name_size, &log.name) && in.u64(&log.first_number) &&
         in.u64(&log.end_number) && log.first_number <= log.end_number;
    log.kind = static_cast<RecordKind>(kind);
    cursor.logs.push_back(std::move(log));
  }
  if (!ok || !in.done()) {
    *problem = "cursor is malformed";
    return std::nullopt;
  }
  return cursor;
}

store::Status write_cursor(store::Env* env, const std::string& dir, const Cursor& cursor) {
  const std::string path = store::join_path(dir, "CURSOR");
  const std::string temp = path + ".tmp";
  if (store::Status wrote = env->write_file(temp, encode_cursor(cursor)); !wrote.ok()) return wrote;
  if (store::Status renamed = env->rename(temp, path); !renamed.ok()) return renamed;
  return env->sync_dir(dir);
}

std::optional<Cursor> read_cursor(store::Env* env, const std::string& dir, std::string* problem) {
  const std::string path = store::join_path(dir, "CURSOR");
  if (!env->exists(path)) {
    *problem = "missing";
    return std::nullopt;
  }
  auto bytes = env->read_file(path, kMaxCursorBytes);
  if (!bytes.ok()) {
    *problem = bytes.status().to_string();
    return std::nullopt;
  }
  return decode_cursor(*bytes, problem);
}

}  // namespace raftlog::derived
