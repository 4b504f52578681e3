// The replica's small marker files (DATA_DIR/UNVOUCHED, DATA_DIR/NOT_FOUNDER: docs/storage-format.md)
// share one layout and one reading: a store::DurableRecordFile (two CRC32C-checked slots) whose
// payload has a fixed size and starts with a u32 format version. What a marker means when its file
// exists but holds no usable record is the marker's own decision; this says only why (`damage`).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "store/env.h"
#include "store/status.h"

namespace raftlog::replica {

struct MarkerRecord {
  bool present = false;  // the file exists
  // Why a present file holds no usable record ("" when it holds one, or when there is none): said
  // in the node's log.
  std::string damage;
  std::string payload;  // the record (payload_bytes long, the version checked) when damage is ""
};

// Reads DATA_DIR/file_name (env: not owned; nullptr is the process-wide PosixEnv). A record whose
// size is not payload_bytes or whose first u32 is not format_version is damage, not an error.
store::Result<MarkerRecord> read_marker_record(store::Env* env, const std::string& data_dir,
                                               const char* file_name, std::size_t payload_bytes,
                                               std::uint32_t format_version);

// Creates or rewrites DATA_DIR/file_name durably: DurableRecordFile::open creates the file and
// syncs the directory, write() syncs the record before it returns.
store::Status write_marker_record(store::Env* env, const std::string& data_dir,
                                  const char* file_name, const std::string& payload);

// Removes DATA_DIR/file_name (unlink, then a directory sync, so the removal is durable before the
// caller acts on it; a file already gone is no error).
store::Status remove_marker_record(store::Env* env, const std::string& data_dir,
                                   const char* file_name);

}  // namespace raftlog::replica
