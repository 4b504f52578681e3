// Building and reading the little-endian records of the on-disk and wire formats (CURSOR, GROUPS,
// TOPICSTATE, snapshot data ...): append_* grows a byte string; ByteReader reads fixed-width fields
// and refuses any read past the end of its bytes, so that a short or damaged record is reported
// instead of read out of bounds. Every format still checks its own magic, version, CRC and bounds.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "store/endian.h"

namespace raftlog::store {

inline void append_u8(std::string* out, std::uint8_t v) { out->push_back(static_cast<char>(v)); }
inline void append_u16(std::string* out, std::uint16_t v) {
  char b[2];
  put_u16(b, v);
  out->append(b, 2);
}
inline void append_u32(std::string* out, std::uint32_t v) {
  char b[4];
  put_u32(b, v);
  out->append(b, 4);
}
inline void append_u64(std::string* out, std::uint64_t v) {
  char b[8];
  put_u64(b, v);
  out->append(b, 8);
}

// Not owning: the bytes must outlive the reader. Each read returns false, and leaves the position
// where it was, when fewer bytes than it needs remain.
class ByteReader {
 public:
  explicit ByteReader(std::string_view bytes) : bytes_(bytes) {}
  bool u8(std::uint8_t* v) { return take(1) && (*v = get_u8(at(1)), true); }
  bool u16(std::uint16_t* v) { return take(2) && (*v = get_u16(at(2)), true); }
  bool u32(std::uint32_t* v) { return take(4) && (*v = get_u32(at(4)), true); }
  bool u64(std::uint64_t* v) { return take(8) && (*v = get_u64(at(8)), true); }
  bool bytes(std::size_t n, std::string* v) {
    if (!take(n)) return false;
    v->assign(at(n), n);
    return true;
  }
  std::size_t remaining() const { return bytes_.size() - pos_; }
  bool done() const { return pos_ == bytes_.size(); }

 private:
  bool take(std::size_t n) {
    if (remaining() < n) return false;
    pos_ += n;
    return true;
  }
  const char* at(std::size_t n) const { return bytes_.data() + pos_ - n; }
  std::string_view bytes_;
  std::size_t pos_ = 0;
};

}  // namespace raftlog::store
