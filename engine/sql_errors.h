// Turning storage Status values into SQL errors. Storage messages already name the
// file/table and what is wrong; we keep them verbatim and pick a fitting error number.
#pragma once
#include <string>

#include "core/util/status.h"

namespace q4m_engine {

// Raises the SQL error for a failed Status (my_printf_error) and returns the handler
// error code (HA_ERR_*) that goes with it.
int raise_status_error(const q4m::Status& st);

// A failed write into table `table_label` ("db.t"): raise_status_error(), with what the
// storage layer cannot say itself (it knows the file, not the table).
int raise_table_error(const std::string& table_label, const q4m::Status& st);

// The database and table names of a table's data file path (./db/table.Q4M); false if it is not one.
bool split_table_path(const std::string& data_path, std::string* db, std::string* table);
// "db.t" of a data file path as the engine names them ("./db/t.Q4M").
std::string table_label_of_path(const std::string& data_path);

// kLeaseExpired from `function` ("queue_end"/"queue_wait") about the owned row of
// `table_label`: "queue_end(): lease expired: table 'db.q': <storage message>"; kRowsMoved
// (its rows moved with an ALTER TABLE) the same without "lease expired: ".
void raise_lease_expired(const char* function, const std::string& table_label, const q4m::Status& st);

// The SQL error number used for a Status code (ER_*).
unsigned sql_errno_for(q4m::ErrorCode code);

}  // namespace q4m_engine
