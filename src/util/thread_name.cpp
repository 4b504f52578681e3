#include "util/thread_name.h"

#include <pthread.h>

#include <cstring>

namespace raftlog::util {

void name_this_thread(const char* name) {
  char truncated[16];  // the kernel's limit, with the terminating zero
  std::strncpy(truncated, name, sizeof truncated - 1);
  truncated[sizeof truncated - 1] = '\0';
  (void)::pthread_setname_np(::pthread_self(), truncated);
}

}  // namespace raftlog::util
