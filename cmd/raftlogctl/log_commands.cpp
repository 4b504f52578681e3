#include "log_commands.h"

#include <cstdint>
#include <ostream>
#include <string>

#include "cli/flags.h"
#include "store/commit_log.h"
#include "text_format.h"

namespace raftlog::ctl {
namespace {

constexpr std::uint64_t kMaxDumpCount = 1'000'000;    // bound on one dump's output
constexpr std::uint64_t kMaxPreviewBytes = 64 << 10;  // bound on one entry's printed payload

std::string type_name(store::EntryType type) {
  switch (type) {
    case store::EntryType::kNormal:
      return "normal";
    case store::EntryType::kNoop:
      return "noop";
    case store::EntryType::kConfig:
      return "config";
  }
  return "unknown(" + std::to_string(static_cast<unsigned>(type)) + ")";
}

// Why a failure may be harmless: a crashed process leaves an unflushed tail that recovery truncates.
std::string tail_hint(const store::VerifyReport& report) {
  if (report.ok) return "";
  if (report.last_index >= report.checkpoint_flushed_index) {
    return "the problem lies after the checkpointed flushed index " +
           std::to_string(report.checkpoint_flushed_index) +
           (report.abort_marker_present ? " and the log was not closed cleanly" : "") +
           ": if it is an unflushed tail, opening the log will truncate it";
  }
  return "the problem lies before the checkpointed flushed index " +
         std::to_string(report.checkpoint_flushed_index) +
         ": durable data is damaged; opening the log will fail";
}

void print_verify_text(std::ostream& out, const std::string& dir,
                       const store::VerifyReport& report) {
  out << "dir:                      " << dir << '\n'
      << "segments:                 " << report.segments << '\n'
      << "entries:                  " << report.entries << '\n'
      << "entry bytes:              " << report.bytes << " (" << cli::format_bytes(report.bytes)
      << ")\n";
  if (report.entries == 0) {
    out << "first index:              - (no entries)\nlast index:               -\n";
  } else {
    out << "first index:              " << report.first_index << '\n'
        << "last index:               " << report.last_index << '\n';
  }
  out << "checkpoint flushed index: " << report.checkpoint_flushed_index << '\n'
      << "abort marker:             "
      << (report.abort_marker_present ? "present (not closed cleanly, or open in a running process)"
                                      : "absent")
      << '\n';
  if (report.segments == 0) {
    out << "NO LOG: no segment files in this directory\n";
  } else if (report.ok) {
    out << "OK\n";
  } else {
    out << "CORRUPT: " << report.bad_file << " offset " << report.bad_offset << ": "
        << report.problem << '\n'
        << "note: " << tail_hint(report) << '\n';
  }
}

void print_verify_json(std::ostream& out, const std::string& dir,
                       const store::VerifyReport& report) {
  out << "{\"dir\":" << json_string(dir)
      << ",\"ok\":" << (report.ok && report.segments > 0 ? "true" : "false")
      << ",\"segments\":" << report.segments << ",\"entries\":" << report.entries
      << ",\"bytes\":" << report.bytes << ",\"first_index\":" << report.first_index
      << ",\"last_index\":" << report.last_index
      << ",\"checkpoint_flushed_index\":" << report.checkpoint_flushed_index
      << ",\"abort_marker_present\":" << (report.abort_marker_present ? "true" : "false");
  if (report.segments == 0) out << ",\"problem\":\"no segment files in this directory\"";
  if (!report.ok) {
    out << ",\"bad_file\":" << json_string(report.bad_file)
        << ",\"bad_offset\":" << report.bad_offset << ",\"problem\":" << json_string(report.problem)
        << ",\"note\":" << json_string(tail_hint(report));
  }
  out << "}\n";
}

int run_verify(std::string_view command_path, std::span<const std::string> args,
               const cli::Io& io) {
  std::string dir;
  bool json = false;
  cli::FlagSet flags(
      std::string(command_path),
      "Checks every entry of an OFFLINE log directory (segment headers, CRC32C, index continuity,\n"
      "terms) without modifying it, and prints the first/last index and OK, or the first bad\n"
      "file and offset. Exit 0 when intact; 1 on corruption, an unreadable directory or one "
      "without\n"
      "segment files.");
  flags.string_flag("dir", &dir, "DIR", "the log's data directory");
  flags.bool_flag("json", &json, "print one JSON object instead of text");
  flags.require("dir");
  if (const int exit_code = cli::parse_or_exit(flags, command_path, args, io); exit_code >= 0)
    return exit_code;

  auto verified = store::verify_log_directory(dir);
  if (!verified.ok()) {
    io.err << command_path << ": " << verified.status().to_string() << '\n';
    return cli::kExitFailure;
  }
  if (json) {
    print_verify_json(io.out, dir, *verified);
  } else {
    print_verify_text(io.out, dir, *verified);
  }
  // An empty or wrong directory is not "OK": an operator who mistyped the path must notice.
  return verified->ok && verified->segments > 0 ? cli::kExitOk : cli::kExitFailure;
}

int run_dump(std::string_view command_path, std::span<const std::string> args, const cli::Io& io) {
  std::string dir;
  std::uint64_t from_index = 0;
  std::uint64_t count = 100;
  std::uint64_t preview_bytes = 48;
  bool json = false;
  cli::FlagSet flags(
      std::string(command_path),
      "Prints entries of an OFFLINE log directory without modifying it: index, term, type, size,\n"
      "client id/sequence, location and an escaped payload preview. Every entry before the\n"
      "printed ones is checked too. Exit 1 if a bad entry is met before COUNT entries were "
      "printed.");
  flags.string_flag("dir", &dir, "DIR", "the log's data directory");
  flags.uint_flag("from", &from_index, "INDEX",
                  "first index to print (0: from the log's first entry)");
  flags.uint_flag("count", &count, "N", "most entries to print (at most 1000000)");
  flags.uint_flag("preview-bytes", &preview_bytes, "N",
                  "payload bytes shown per entry (at most 65536)");
  flags.bool_flag("json", &json, "print one JSON object per line (JSON Lines)");
  flags.require("dir");
  if (const int exit_code = cli::parse_or_exit(flags, command_path, args, io); exit_code >= 0)
    return exit_code;
  if (count == 0 || count > kMaxDumpCount || preview_bytes > kMaxPreviewBytes) {
    io.err << command_path
           << ": --count must be in [1, 1000000] and --preview-bytes at most 65536\n\n"
           << flags.usage();
    return cli::kExitUsage;
  }

  std::uint64_t printed = 0;
  const auto print_entry = [&](const store::EntryView& entry,
                               const store::EntryLocation& location) {
    if (entry.meta.index < from_index) return true;
    const std::string_view preview = entry.payload.substr(0, preview_bytes);
    const bool truncated = preview.size() < entry.payload.size();
    if (json) {
      io.out << "{\"index\":" << entry.meta.index << ",\"term\":" << entry.meta.term
             << ",\"type\":\"" << type_name(entry.meta.type) << "\",\"flags\":" << entry.meta.flags
             << ",\"size\":" << entry.payload.size() << ",\"client_id\":" << entry.meta.client_id
             << ",\"sequence\":" << entry.meta.sequence
             << ",\"segment\":" << json_string(location.segment_file)
             << ",\"offset\":" << location.offset << ",\"payload_preview\":" << json_string(preview)
             << ",\"payload_truncated\":" << (truncated ? "true" : "false") << "}\n";
    } else {
      io.out << "index=" << entry.meta.index << " term=" << entry.meta.term
             << " type=" << type_name(entry.meta.type) << " size=" << entry.payload.size();
      if (entry.meta.client_id != 0 || entry.meta.sequence != 0) {
        io.out << " client=" << entry.meta.client_id << " seq=" << entry.meta.sequence;
      }
      if (entry.meta.flags != 0) io.out << " flags=" << entry.meta.flags;
      io.out << " at=" << location.segment_file << ':' << location.offset << " payload=\""
             << escape_text(preview) << '"' << (truncated ? "..." : "") << '\n';
    }
    return ++printed < count;
  };
  auto verified = store::verify_log_directory(dir, nullptr, print_entry);
  if (!verified.ok()) {
    io.err << command_path << ": " << verified.status().to_string() << '\n';
    return cli::kExitFailure;
  }
  if (!verified->ok) {
    io.err << command_path << ": stopped at a bad entry: " << verified->bad_file << " offset "
           << verified->bad_offset << ": " << verified->problem << '\n';
    return cli::kExitFailure;
  }
  if (printed == 0) {
    io.err << command_path << ": no entries at or after index " << from_index << " (log holds "
           << (verified->entries == 0 ? std::string("no entries")
                                      : std::to_string(verified->first_index) + ".." +
                                            std::to_string(verified->last_index))
           << ")\n";
  }
  return cli::kExitOk;
}

constexpr cli::Command kCommands[] = {
    {"verify", "check every entry of an offline log directory; OK or the first bad file/offset",
     run_verify, nullptr},
    {"dump", "print entries of an offline log directory", run_dump, nullptr},
};

}  // namespace

const cli::CommandTable kLogCommands{kCommands};

}  // namespace raftlog::ctl
