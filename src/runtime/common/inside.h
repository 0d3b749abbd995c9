// The scoped "inside the runtime" flag both runtimes use around their own work: while it is up,
// the heap hooks send the thread's allocations to the private heap and its accesses are not
// recorded. Restores the flag's previous value and errno on the way out.
#pragma once
#include <errno.h>

namespace whymiss::rt {

class InsideScope {
 public:
  explicit InsideScope(bool& flag) : flag_(flag), was_(flag), errno_(errno) { flag = true; }
  ~InsideScope() {
    flag_ = was_;
    errno = errno_;
  }
  InsideScope(const InsideScope&) = delete;
  InsideScope& operator=(const InsideScope&) = delete;

 private:
  bool& flag_;
  bool was_;
  int errno_;
};

}  // namespace whymiss::rt
