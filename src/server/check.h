// RAFTLOG_CHECK now lives in src/util (shared with the PRNG); this header keeps the server's existing
// includes working.
#pragma once

#include "util/check.h"
