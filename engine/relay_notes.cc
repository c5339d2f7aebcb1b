#define MYSQL_SERVER 1
#include <my_global.h>
#include <sql_class.h>
#include <sql_error.h>

#include "engine/relay_notes.h"

#include <algorithm>
#include <cstdint>
#include <string>

#include "core/table/transaction.h"
#include "engine/sql_errors.h"

namespace q4m_engine {

namespace {

// `dropped` of `relayed` rows of relay source `source` (ids first to last) were dropped by
// `table_label`, whose record of that source was `recorded`.
void note_replays(THD* thd, const std::string& table_label, uint32_t source, size_t dropped, size_t relayed,
                  uint64_t first, uint64_t last, uint64_t recorded) {
  if (dropped == 0) return;
  recorded = std::max(recorded, last);  // a drop means the record had reached it
  if (dropped == 1 && relayed == 1)
    push_warning_printf(thd, Sql_condition::WARN_LEVEL_NOTE, ER_UNKNOWN_ERROR,
                        "queue_set_srcid: row %llu of source %u was already received by '%s'; dropped "
                        "(last received: row %llu)",
                        static_cast<unsigned long long>(first), source, table_label.c_str(),
                        static_cast<unsigned long long>(recorded));
  else
    push_warning_printf(thd, Sql_condition::WARN_LEVEL_NOTE, ER_UNKNOWN_ERROR,
                        "queue_set_srcid: %zu of %zu rows of source %u were already received by '%s' "
                        "(row ids %llu to %llu); dropped (last received: row %llu)",
                        dropped, relayed, source, table_label.c_str(), static_cast<unsigned long long>(first),
                        static_cast<unsigned long long>(last), static_cast<unsigned long long>(recorded));
}

}  // namespace

void note_replays(THD* thd, const q4m::Transaction& txn) {
  for (const q4m::Transaction::Replays& r : txn.replays())
    note_replays(thd, table_label_of_path(r.table->path()), r.source, r.dropped, r.relayed, r.first, r.last, r.recorded);
}

}  // namespace q4m_engine
