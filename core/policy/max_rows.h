// MAX_ROWS (the server's own table option): a bounded queue. An insert that would take the
// table past its limit fails whole (kFull, "table is full") and adds none of its rows;
// queued, owned, delayed and dead rows all count. Only the group-commit leader adds rows,
// and it counts every request of its batch, so concurrent producers never overshoot; the
// count it starts from can only fall meanwhile (a removal publishing). Rows past a lowered
// limit stay; inserts are refused until consumers take the table below it.
#pragma once
#include "core/policy/policy.h"

namespace q4m {

class MaxRows : public PolicyBase {
 public:
  void configure(const TableOptions& options, WriterContext& ctx) {
    max_ = options.max_rows;
    ctx.counters->max_rows.set(max_);
  }
  void begin_batch(WriterContext& ctx) { held_ = ctx.rows; }
  bool admit(WriteBatch& b, WriterContext& ctx);

 private:
  uint64_t max_ = 0;   // 0 = no limit
  uint64_t held_ = 0;  // rows in the table with those this batch admitted so far
};

}  // namespace q4m
