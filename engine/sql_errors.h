// Turning storage Status values into SQL errors. Storage messages already name the
// file/table and what is wrong; we keep them verbatim and pick a fitting error number.
#pragma once
#include <string>

#include "core/util/status.h"

namespace q4m_engine {

// Raises the SQL error for a failed Status (my_printf_error) and returns the handler
// error code (HA_ERR_*) that goes with it.
int raise_status_error(const q4m::Status& st);

// kLeaseExpired from `function` ("queue_end"/"queue_wait") about the owned row of
// `table_label`: "queue_end(): lease expired: table 'db.q': <storage message>"; kRowsMoved
// (its rows moved with an ALTER TABLE) the same without "lease expired: ".
void raise_lease_expired(const char* function, const std::string& table_label, const q4m::Status& st);

// The SQL error number used for a Status code (ER_*).
unsigned sql_errno_for(q4m::ErrorCode code);

}  // namespace q4m_engine
