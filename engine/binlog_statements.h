// What the binary log needs from QUEUE beyond the server's row events, as statements the
// engine writes into the transaction's binary log cache (Query events whose default database
// is the table's, as a row event's would be; SET, not DO: DO drops its expressions' errors,
// and a replica must stop on one). Each commits with its transaction, two-phase; a replica
// applies it (functions/replication_functions.cc) and logs it again for its own replicas
// (log_slave_updates).
//
//  - Removals. The server logs none of the rows consumers take out of a queue: queue_wait()
//    and queue_end() are SELECTs. A DELETE's row event would not do either: a replica applies
//    it to the first row with the same bytes, not to the row the primary removed (so
//    ha_queue::delete_row turns it off). One statement per removal:
//      SET @queue_removed = queue_apply_removal('<db>', '<table>', '<id>:<length>:<checksum>[,...]')
//  - New rows dropped: duplicates a DEDUP_COLUMN table drops at the prepare, replays of relayed
//    rows, after the row events that carry them (the server logs each row at its INSERT). A
//    replica applies the primary's decision; its own dedup drops nothing (Transaction::set_decided).
//      SET @queue_deduplicated = queue_apply_dedup('<db>', '<table>', '<position>[,...]')
//  - Relay sources, below.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/table/queue_table.h"
#include "core/table/transaction.h"

class THD;

namespace q4m_engine {

// True if thd's changes go to the binary log (open, sql_log_bin on): then its removals
// must be logged, and so must take effect in a (statement) transaction.
bool binlog_records(THD* thd);

// Writes the statement make(db, table) into the current connection's binary log as a change
// of its own, outside its transaction (the statement cache: written at the statement's end,
// also if the transaction rolls back). For changes that commit at once (subscriptions).
q4m::Status log_standalone_statement(const q4m::QueueTable& table, const char* what,
                                     const std::function<std::string(const std::string&, const std::string&)>& make);
// The same into its transaction's cache: committed (and rolled back) with the transaction.
q4m::Status log_transactional_statement(const q4m::QueueTable& table, const char* what,
                                        const std::function<std::string(const std::string&, const std::string&)>& make);
// `s` as a string literal for such a statement.
std::string quoted_literal(const std::string& s);

// The ReplicationLog that writes to the binary log cache of the current connection.
q4m::ReplicationLog& binlog_replication_log();

// The statement that removes `rows` of db.table on another server.
std::string removal_statement(const std::string& db, const std::string& table, const std::vector<q4m::NamedRow>& rows);
// The statement that redrives `rows` of db.table on another server (queue_apply_redrive).
std::string redrive_statement(const std::string& db, const std::string& table, const std::vector<q4m::NamedRow>& rows);
// The statement the engine's own connection runs to remove db.table's expired rows, logged
// as their removal (engine/expiry_session.h); @queue_expired holds how many then. (A SET: an
// error inside a SELECT comes after its result's columns, which a local connection reads as
// a result, not as the error.)
std::string expiry_statement(const std::string& db, const std::string& table);
// Parses the third argument of these statements; false (with *error) if it is not one.
bool parse_named_rows(const std::string& text, std::vector<q4m::NamedRow>* rows, std::string* error);

// The statement that drops, as duplicates, the new rows at `positions` (among those staged)
// of the transaction's inserts into db.table on another server (Transaction::drop_staged).
std::string dedup_statement(const std::string& db, const std::string& table, const std::vector<size_t>& positions);
// Parses its third argument.
bool parse_positions(const std::string& text, std::vector<size_t>* positions, std::string* error);

// Relayed rows (queue_set_srcid) are staged as any INSERT's, and the binary log gets their
// rows; at the prepare, the positions of the replays dropped among the transaction's rows
// (queue_apply_dedup, above) and the source's new last id:
//   SET @queue_relayed = queue_apply_srcid('<db>', '<table>', '<source id>:<last row id>')
// so that a replica taking over drops the replays the primary would have. A redrive of dead
// rows (queue_redrive_dead) names them, in id order, where the transaction staged their copies:
//   SET @queue_redriven = queue_apply_redrive('<db>', '<table>', '<id>:<length>:<checksum>,...')
// Parses the third argument of the queue_apply_srcid statement.
bool parse_relay_source(const std::string& text, uint32_t* source_id, q4m::RowId* last, std::string* error);

}  // namespace q4m_engine
