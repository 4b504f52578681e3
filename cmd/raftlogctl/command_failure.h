// How every raftlogctl command reports a failed call: "WHAT: CODE: message (REASON)" on stderr and
// exit 1. The reason word (docs/errors.md) is what a script matches on; every command prints it the
// same way (before 2026-12-07 only `members` did, so `transfer-leader` and `read` refusals carried
// none: outside test drills7 L2).
#pragma once

#include <string_view>

#include "cli/flags.h"
#include "client/client.h"

namespace raftlog::ctl {

inline int fail(const cli::Io& io, std::string_view what, const client::Status& status) {
  io.err << what << ": " << client::to_string(status.code()) << ": " << status.message();
  if (status.details() && !status.details()->reason.empty())
    io.err << " (" << status.details()->reason << ")";
  io.err << "\n";
  return cli::kExitFailure;
}

}  // namespace raftlog::ctl
