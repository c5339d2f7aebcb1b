// Removals in the binary log. A replica must remove the rows the primary's consumers take
// out of a queue, and the server logs none of them: queue_wait() and queue_end() are
// SELECTs, and the rows they end are no DELETE's. A DELETE's row event would not do either: a
// replica applies it to the first row with the same bytes, not to the row the primary removed.
// So the engine writes one statement per removal (DELETE too: ha_queue::delete_row turns the
// row event off) into the transaction's binary log cache:
//
//   SET @queue_removed = queue_apply_removal('<db>', '<table>', '<id>:<length>:<checksum>[,...]')
//
// (not DO: DO drops its expressions' errors, and a replica must stop on one)
// The duplicates a DEDUP_COLUMN table drops at a transaction's prepare are logged there too,
// after the transaction's row events, which carry them (the server logged each row at its
// INSERT): SET @queue_deduplicated = queue_apply_dedup('<db>', '<table>', '<position>[,...]').
// A replica applies the primary's decision: its own dedup drops nothing (Transaction::set_decided).
// (a Query event whose default database is the table's, as a row event's would be). It
// commits with the transaction, two-phase, as the removal does; a replica applying it
// removes exactly the rows named (functions/replication_functions.cc), and logs it again for
// its own replicas (log_slave_updates).
#pragma once

#include <string>
#include <vector>

#include "core/table/queue_table.h"
#include "core/table/transaction.h"

class THD;

namespace q4m_engine {

// True if thd's changes go to the binary log (open, sql_log_bin on): then its removals
// must be logged, and so must take effect in a (statement) transaction.
bool binlog_records(THD* thd);

// The RemovalLog that writes to the binary log cache of the current connection.
q4m::RemovalLog& binlog_removal_log();

// The statement that removes `rows` of db.table on another server.
std::string removal_statement(const std::string& db, const std::string& table, const std::vector<q4m::NamedRow>& rows);
// Parses the third argument of that statement; false (with *error) if it is not one.
bool parse_named_rows(const std::string& text, std::vector<q4m::NamedRow>* rows, std::string* error);

// The statement that drops, as duplicates, the new rows at `positions` (among those staged)
// of the transaction's inserts into db.table on another server (Transaction::drop_staged).
std::string dedup_statement(const std::string& db, const std::string& table, const std::vector<size_t>& positions);
// Parses its third argument.
bool parse_positions(const std::string& text, std::vector<size_t>* positions, std::string* error);

}  // namespace q4m_engine
