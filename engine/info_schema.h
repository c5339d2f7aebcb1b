// INFORMATION_SCHEMA.QUEUE_TABLES: one row per QUEUE table in the data directory.
// INFORMATION_SCHEMA.QUEUE_OWNED_ROWS: one row per row a connection owns (queue_wait).
// INFORMATION_SCHEMA.QUEUE_HELD_GROUPS: one row per message group holding rows back (its
// order, GROUP_CONCURRENCY, GROUP_RATE), up to 1,000 per table, the most held back first.
#pragma once

namespace q4m_engine {

extern struct st_mysql_information_schema queue_tables_descriptor;
int queue_tables_init(void* p);
extern struct st_mysql_information_schema queue_owned_rows_descriptor;
int queue_owned_rows_init(void* p);
extern struct st_mysql_information_schema queue_held_groups_descriptor;
int queue_held_groups_init(void* p);
// INFORMATION_SCHEMA.QUEUE_SUBSCRIPTIONS: one row per subscription (core/table/subscriptions.h).
extern struct st_mysql_information_schema queue_subscriptions_descriptor;
int queue_subscriptions_init(void* p);

}  // namespace q4m_engine
