// The binary log's side of a prepared part's redo (core/table/redo.h; queue_binlog_redo).
//
// At the prepare, the part's redo goes into the transaction's binary log cache as
//   SET @queue_redo = queue_apply_redo('<db>', '<table>', '<server_id>:<base64 of the redo>')
// (a Query event under the table's database, as the other statements of binlog_statements.h).
// A replica runs it as queue_apply_redo(), which only checks its arguments: the replica
// applies the transaction's row events and removal statements as before, and its own
// prepare writes its own redo (with log_slave_updates). It logs the primary's statement again
// too (a chained replica gets both); the server id tells recovery which statements are this
// server's own.
//
// At a crash recovery (QUEUE's recover(), which 10.11 calls before it reads the binary log
// itself), redo_from_binary_log() reads the binary log files the server's recovery reads (from
// the file the last Binlog_checkpoint names to the newest), takes the redo statements of this
// server's transactions that have their Xid event, and appends to each table's file the parts
// it lacks, as prepared parts; the server's recovery then commits them, in the binary log's
// order (engine/xa.cc).
#pragma once

#include <cstdint>
#include <string>

#include "core/table/redo.h"

namespace q4m_engine {

std::string redo_statement(const std::string& db, const std::string& table, const std::string& redo);

// Parses the third argument of queue_apply_redo(); false (with *error) if it is not one.
bool parse_redo_argument(const std::string& text, uint32_t* server_id, q4m::RedoPart* part, std::string* error);

// Whether parts may be redone: the marker `q4m_binlog_redo` in the datadir, made (synced) before
// the first prepare written without its sync and removed at a start with queue_binlog_redo OFF
// once nothing is left to redo. False if it cannot be made: the prepare then keeps its sync.
// Without it a start reads no binary log for QUEUE (a torn last event of a crash would only
// add the server's read errors to the error log).
bool note_redo_in_use();

// At the server's crash recovery only (once, before the server has started): see above.
// Errors are logged (a part that cannot be redone is reported, and the rest goes on).
void redo_from_binary_log();

}  // namespace q4m_engine
