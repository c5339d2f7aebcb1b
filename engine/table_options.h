// The QUEUE engine's own table options (CREATE TABLE ... ENGINE=QUEUE OPTION=value):
//   VISIBLE_AT_COLUMN='col'  a TIMESTAMP column: its row is not handed out before that time.
//   MESSAGE_TTL=seconds      a queued row older than this is removed (0, the default: never).
//   MAX_DELIVERIES=n         a row back from its n-th delivery is dead (0, the default: never).
//   MESSAGE_GROUP_COLUMN='col'  rows with the same value in it go out one at a time, in order.
//   DEDUP_COLUMN='col'       a row whose value in it was inserted less than DEDUP_WINDOW
//   DEDUP_WINDOW=seconds     seconds ago (default 300) is dropped as a duplicate.
//   GROUP_CONCURRENCY=n      rows of one message group out at once (default 1; 0 = no limit).
//   GROUP_RATE='r[/unit]'    hand-outs per second (or minute, hour) per message group,
//   GROUP_BURST=n            from a token bucket of n (default 1).
//   MAX_IN_FLIGHT=n          rows of the table out at once (default 0: no limit).
//   MAX_RATE='r[/unit]'      hand-outs per second (or minute, hour) of the whole table,
//   MAX_BURST=n              from a token bucket of n (default 1).
//   HISTORY_RETENTION=seconds  ended rows stay readable this long (0, the default: not kept).
//   ROW_ID_COLUMN='col'      a BIGINT UNSIGNED column that reads as the row's id; an INSERT
//                            may ask for an id in it (a restored dump keeps its rows' ids).
// and one of the server's own: MAX_ROWS=n, the most rows the table holds (an INSERT past it
// fails with "table is full", as a MEMORY table's does).
#pragma once
#include <my_global.h>
#include <handler.h>

#include <chrono>
#include <memory>
#include <string>

#include "core/policy/options.h"

// The server parses the options into this struct (share->option_struct); the name is fixed.
struct ha_table_option_struct {
  const char* visible_at_column;
  ulonglong message_ttl;  // seconds
  ulonglong max_deliveries;
  const char* message_group_column;
  const char* dedup_column;
  ulonglong dedup_window;  // seconds
  ulonglong group_concurrency;
  const char* group_rate;  // "20", "100/min": token_bucket.h's parse_rate()
  ulonglong group_burst;
  ulonglong max_in_flight;
  const char* max_rate;
  ulonglong max_burst;
  const char* row_id_column;
  ulonglong history_retention;  // seconds
};

namespace q4m_engine {

extern ha_create_table_option queue_table_options[];

// Checks every QUEUE option of a table being created or altered (`table`: the new
// definition, opened): false, with *error saying which option and what is wrong, if one
// names a column that cannot serve, or would be misread (the server itself takes
// MESSAGE_TTL='abc' for 0).
bool check_options(const TABLE* table, std::string* error);

// ALTER TABLE ... GROUP_RATE=DEFAULT (MAX_RATE=DEFAULT) on `share`, a table whose definition
// has that rate: the ALTER's new options (`info`, the server's merged list) lose the rate's
// GROUP_BURST (MAX_BURST) too, unless the ALTER sets the burst itself (then check_options()
// refuses a burst without its rate). A burst only sizes its rate's bucket.
void drop_bursts_of_removed_rates(const TABLE_SHARE* share, HA_CREATE_INFO* info);

// The position of the ROW_ID_COLUMN of `share`, or -1 (none, or one create() would refuse).
int row_id_column_of(const TABLE_SHARE* share);

// What a table's options ask of its queue, as `share` says (a column an option names that
// create() would refuse is left unset). engine/table_definition.h keeps one per share.
std::shared_ptr<const q4m::TableOptions> options_of(const TABLE_SHARE* share);

// Whether an ALTER TABLE from `from` to `to` can keep the data file as it is: true if only
// options that the queue reads at open changed (MESSAGE_TTL, MAX_DELIVERIES, DEDUP_WINDOW,
// the limits: GROUP_CONCURRENCY, GROUP_RATE, GROUP_BURST, MAX_IN_FLIGHT, MAX_RATE, MAX_BURST).
// VISIBLE_AT_COLUMN decides which queued rows start delayed, MESSAGE_GROUP_COLUMN which rows
// wait for which, DEDUP_COLUMN which keys the window holds and ROW_ID_COLUMN which bytes a
// row stores, so changing one of them copies the rows. (MAX_ROWS, a server option, also changes in place.)
bool options_change_in_place(const ha_table_option_struct* from, const ha_table_option_struct* to);

}  // namespace q4m_engine
