#include "core/policy/max_rows.h"

#include <string>

namespace q4m {

bool MaxRows::admit(WriteBatch& b, WriterContext& ctx) {
  if (!b.inserts()) return true;
  const uint64_t n = b.admitted.size();
  // Rows the same batch removes make room (a redrive replaces dead rows by their copies).
  const uint64_t held = held_ > b.removal_count ? held_ - b.removal_count : 0;
  if (max_ == 0 || (held <= max_ && n <= max_ - held)) {
    held_ = held + n;
    return true;
  }
  ctx.counters->rows_refused.add(n);
  b.status = Status(ErrorCode::kFull, "it holds " + std::to_string(held) + " rows and its limit is " +
                                          std::to_string(max_) + " (MAX_ROWS): " + std::to_string(n) +
                                          (n == 1 ? " row does" : " rows do") + " not fit");
  return false;
}

}  // namespace q4m
