// Escaping for raftlogctl output: payloads are arbitrary bytes, but what we print must stay one
// readable line (text) or valid JSON.
#pragma once

#include <string>
#include <string_view>

namespace raftlog::ctl {

// Printable ASCII as is; \" \\ \n \r \t; every other byte as \xNN. Safe inside double quotes.
std::string escape_text(std::string_view bytes);

// A JSON string literal including the quotes. Bytes >= 0x80 and control bytes become \u00NN, so the
// result is valid (ASCII) JSON for any input; it shows bytes, not decoded UTF-8.
std::string json_string(std::string_view bytes);

// Why an endpoint did not answer, in a few words, from its gRPC status code name and message:
// "connection refused", "no answer in time", "TLS handshake failed", ... Unrecognised messages keep
// the code and the message's last clause (gRPC puts the cause at the end), at most 120 bytes.
std::string describe_unreachable(std::string_view code_name, std::string_view message);

}  // namespace raftlog::ctl
