#include "text_format.h"

namespace raftlog::ctl {
namespace {

constexpr char kHexDigits[] = "0123456789abcdef";

// Printable ASCII as is, the usual backslash escapes, and every other byte as `hex_prefix` + two hex
// digits. Text and JSON differ only in that prefix (\x vs \u00).
void append_escaped(std::string& out, std::string_view bytes, const char* hex_prefix) {
  for (const char c : bytes) {
    const auto byte = static_cast<unsigned char>(c);
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (byte >= 0x20 && byte < 0x7F) {
          out += c;
        } else {
          out += hex_prefix;
          out += kHexDigits[byte >> 4];
          out += kHexDigits[byte & 0xF];
        }
    }
  }
}

}  // namespace

std::string escape_text(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  append_escaped(out, bytes, "\\x");
  return out;
}

std::string json_string(std::string_view bytes) {
  std::string out = "\"";
  out.reserve(bytes.size() + 2);
  append_escaped(out, bytes, "\\u00");
  out += '"';
  return out;
}

std::string describe_unreachable(std::string_view code_name, std::string_view message) {
  struct Known {
    std::string_view fragment;  // in gRPC's (or the kernel's) words
    std::string_view words;
  };
  static constexpr Known kKnown[] = {
      {"Connection refused", "connection refused: no node listening"},
      {"Connection reset", "connection reset"},
      {"No route to host", "no route to host"},
      {"Network is unreachable", "network unreachable"},
      {"Handshake failed", "TLS handshake failed"},
      {"handshake", "TLS handshake failed"},
      {"Deadline Exceeded", "no answer in time"},
      {"DNS resolution failed", "host name not resolved"},
      // A node that speaks TLS closes a plaintext connection at once; "DOWN" alone sent an
      // operator looking for a dead node that was up (outside test drills5 L8).
      {"Socket closed",
       "the connection was closed at once: the node may require TLS (--tls-ca), or this is not a "
       "raftlogd"},
  };
  for (const Known& known : kKnown) {
    if (message.find(known.fragment) != std::string_view::npos) return std::string(known.words);
  }
  if (code_name == "DEADLINE_EXCEEDED") return "no answer in time";
  constexpr std::size_t kMaxClause = 120;
  std::string_view clause = message;
  if (const std::size_t colon = clause.rfind(": "); colon != std::string_view::npos)
    clause = clause.substr(colon + 2);
  std::string out(code_name);
  if (!clause.empty()) out += ": " + escape_text(clause.substr(0, kMaxClause));
  return out;
}

}  // namespace raftlog::ctl
