// TableOptions: what a table's definition asks of its queue, one value per definition. The
// engine parses a table's options once (engine/table_definition.h) and hands the result to
// QueueTable::configure(); each policy reads its own fields from it.
#pragma once
#include <chrono>
#include <cstdint>
#include <memory>

#include "core/row/key_column.h"
#include "core/row/visible_at.h"

namespace q4m {

struct TableOptions {
  // policy/delays.h: VISIBLE_AT_COLUMN; null if not set.
  std::shared_ptr<const VisibleAtColumn> visible_at;
  // policy/expiry.h: MESSAGE_TTL; 0 = rows never expire.
  std::chrono::milliseconds message_ttl{0};
  // policy/dead_letters.h: MAX_DELIVERIES; 0 = no limit.
  uint32_t max_deliveries = 0;
  // policy/message_groups.h: MESSAGE_GROUP_COLUMN (null if not set), and the limits per
  // group: GROUP_CONCURRENCY rows out at once (0 = no limit), GROUP_RATE hand-outs per
  // second (0 = no limit) with a bucket of GROUP_BURST.
  std::shared_ptr<const KeyColumn> message_group;
  uint32_t group_concurrency = 1;
  double group_rate = 0;
  uint32_t group_burst = 1;
  // policy/table_limits.h: MAX_IN_FLIGHT rows out at once (0 = no limit), MAX_RATE
  // hand-outs per second (0 = no limit) with a bucket of MAX_BURST.
  uint64_t max_in_flight = 0;
  double max_rate = 0;
  uint32_t max_burst = 1;
  // policy/dedup.h: DEDUP_COLUMN (null if not set) and DEDUP_WINDOW.
  std::shared_ptr<const KeyColumn> dedup;
  std::chrono::milliseconds dedup_window{0};
  // core/table/history.cc: HISTORY_RETENTION, how long ended rows are kept; 0 = not kept.
  std::chrono::milliseconds history_retention{0};
  // policy/max_rows.h: the server's own MAX_ROWS table option; 0 = no limit.
  uint64_t max_rows = 0;
};

}  // namespace q4m
