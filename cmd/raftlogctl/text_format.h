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

}  // namespace raftlog::ctl
