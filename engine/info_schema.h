// INFORMATION_SCHEMA.QUEUE_TABLES: one row per QUEUE table in the data directory.
#pragma once

namespace q4m_engine {

extern struct st_mysql_information_schema queue_tables_descriptor;
int queue_tables_init(void* p);

}  // namespace q4m_engine
