// The figures of one table, listed once: TableStats (QueueTable::info()), queue_stats()'s
// JSON and INFORMATION_SCHEMA.QUEUE_TABLES are all made from this list, so a new figure is
// one line here plus the code that counts it.
//
//   GAUGE(field, json name, I_S column or nullptr, what it is)     a value as of now, which
//                                                                   info() reads under the state lock
//   LIVE(field, ...)      a value as of now, kept lock-free where it changes (TableCounters)
//   COUNTER(field, ...)   a count since the table was opened, lock-free (TableCounters)
//
// I_S columns come in list order after TABLE_SCHEMA and TABLE_NAME: add new ones at the end
// of the columns, so that a client reading QUEUE_TABLES by position keeps working.
#pragma once
#include <cstdint>

#include "core/util/stats.h"
#include "core/util/wait_histogram.h"

#define Q4M_TABLE_STATS(GAUGE, LIVE, COUNTER)                                                                   \
  GAUGE(rows, "rows", "ROWS", "live rows, owned ones included")                                           \
  GAUGE(owned_rows, "owned_rows", "OWNED_ROWS", "rows held by a connection (owned or claimed)")           \
  GAUGE(waiters, "waiters", "WAITERS", "consumers waiting in queue_wait()")                               \
  GAUGE(file_bytes, "file_bytes", "FILE_BYTES", "size of the data file")                                  \
  GAUGE(removed_bytes, "removed_bytes", "REMOVED_BYTES", "bytes compaction can reclaim")                   \
  GAUGE(oldest_age_ms, "oldest_age_ms", "OLDEST_AGE_MS", "age of the oldest row; 0 when empty")           \
  GAUGE(oldest_ready_age_ms, "oldest_ready_age_ms", nullptr, "age of the oldest row a take would get now")  \
  GAUGE(next_rowid, "next_rowid", "NEXT_ROWID", "the id the next row gets")                               \
  GAUGE(delayed_rows, "delayed_rows", "DELAYED_ROWS", "rows not handed out before a time")               \
  GAUGE(dead_rows, "dead_rows", "DEAD_ROWS", "rows back after MAX_DELIVERIES deliveries, or set aside as damaged") \
  GAUGE(message_groups, "message_groups", "MESSAGE_GROUPS", "groups with rows in the table")              \
  LIVE(max_rows, "max_rows", "MAX_ROWS", "the row limit; 0 = none")                                      \
  LIVE(dedup_keys, "dedup_keys", "DEDUP_KEYS", "keys in the dedup window")                               \
  GAUGE(groups_at_limit, "groups_at_limit", "GROUPS_AT_LIMIT",                                            \
        "groups with queued rows none of which may go now (GROUP_CONCURRENCY, GROUP_RATE)")              \
  GAUGE(rows_held_back, "rows_held_back", "ROWS_HELD_BACK",                                               \
        "free rows a take may not have now: behind their group's limits, or all while the table is at "   \
        "MAX_IN_FLIGHT or MAX_RATE")                                                                     \
  GAUGE(in_flight, "in_flight", "IN_FLIGHT", "rows out, as MAX_IN_FLIGHT counts them")                    \
  GAUGE(history_rows, "history_rows", "HISTORY_ROWS", "ended rows kept by HISTORY_RETENTION (not in rows)") \
  GAUGE(history_bytes, "history_bytes", "HISTORY_BYTES", "payload bytes of the history rows")          \
  GAUGE(torn_tail_bytes, "dropped_tail_bytes", nullptr, "torn tail cut off by recovery at open")          \
  COUNTER(rows_inserted, "rows_inserted", nullptr, "rows inserted (kept across reopen)")                  \
  COUNTER(rows_removed, "rows_removed", nullptr, "rows removed (kept across reopen)")                     \
  COUNTER(waits, "waits", nullptr, "queue_wait() calls on the table")                                     \
  COUNTER(ends, "ends", nullptr, "deliveries ended by queue_end()")                                       \
  COUNTER(aborts, "aborts", nullptr, "deliveries given back by queue_abort()")                            \
  COUNTER(handoffs, "handoffs", nullptr, "rows handed to a waiting consumer")                             \
  COUNTER(lease_expiries, "lease_expiries", nullptr, "leases that ran out")                               \
  COUNTER(rows_expired, "rows_expired", nullptr, "rows removed by MESSAGE_TTL")                           \
  COUNTER(rows_refused, "rows_refused", nullptr, "rows not inserted: past MAX_ROWS")                      \
  COUNTER(rows_deduplicated, "rows_deduplicated", nullptr, "rows not inserted: duplicates in the window") \
  COUNTER(damaged_reads, "damaged_reads", nullptr, "reads of a row whose bytes on disk failed their checksum") \
  COUNTER(compactions, "compactions", nullptr, "compactions of the data file")                            \
  COUNTER(rows_consumed, "rows_consumed", nullptr, "rows removed by their owner (queue_end, the next wait; in a transaction, at its commit)") \
  COUNTER(rows_aborted, "rows_aborted", nullptr, "rows given back by their owner (queue_abort, a disconnect)") \
  COUNTER(rows_dead_lettered, "rows_dead_lettered", nullptr, "rows that became dead (MAX_DELIVERIES)")   \
  COUNTER(rows_released, "rows_released", nullptr, "rows taken from their owner (queue_release_owned)")  \
  COUNTER(rows_redriven, "rows_redriven", nullptr, "dead rows queued again (queue_redrive_dead)")         \
  COUNTER(rows_purged, "rows_purged", nullptr, "dead rows removed (queue_purge_dead)")                  \
  GAUGE(memory_bytes, "memory_bytes", "MEMORY_BYTES",                                                     \
        "RAM the table's row index holds (core/row/index.h: 40 B per row of a hot block, ~0.35 B per "    \
        "plain row of a cold one; 12 B per row of a format before 5, core/file/row_check.h)")

namespace q4m {

// Every figure as of one moment (QueueTable::info()).
struct TableStats {
#define Q4M_STATS_FIELD(field, json, column, what) uint64_t field = 0;
  Q4M_TABLE_STATS(Q4M_STATS_FIELD, Q4M_STATS_FIELD, Q4M_STATS_FIELD)
#undef Q4M_STATS_FIELD
};

// Each figure by name, in list order: what queue_stats() and QUEUE_TABLES show.
struct Figure {
  const char* json;    // queue_stats() key
  const char* column;  // INFORMATION_SCHEMA.QUEUE_TABLES column, or nullptr
  uint64_t TableStats::*field;
};
inline constexpr Figure kTableFigures[] = {
#define Q4M_STATS_FIGURE(field, json, column, what) {json, column, &TableStats::field},
    Q4M_TABLE_STATS(Q4M_STATS_FIGURE, Q4M_STATS_FIGURE, Q4M_STATS_FIGURE)
#undef Q4M_STATS_FIGURE
};

// The LIVE gauges and the counters, lock-free: kept where things happen, read by info().
struct TableCounters {
#define Q4M_STATS_NONE(field, json, column, what)
#define Q4M_STATS_COUNTER(field, json, column, what) Counter field;
  Q4M_TABLE_STATS(Q4M_STATS_NONE, Q4M_STATS_COUNTER, Q4M_STATS_COUNTER)
#undef Q4M_STATS_COUNTER
#undef Q4M_STATS_NONE
  // From a row's INSERT to its first hand-out (later deliveries are not waits in the queue).
  WaitHistogram handout_wait;
  void copy_to(TableStats* s) const {
#define Q4M_STATS_NONE(field, json, column, what)
#define Q4M_STATS_COPY(field, json, column, what) s->field = field.get();
    Q4M_TABLE_STATS(Q4M_STATS_NONE, Q4M_STATS_COPY, Q4M_STATS_COPY)
#undef Q4M_STATS_COPY
#undef Q4M_STATS_NONE
  }
};

}  // namespace q4m
