#define MYSQL_SERVER 1
#include <my_global.h>
#include <sql_class.h>
#include <log.h>
#include <log_event.h>

#include "engine/binlog_statements.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <functional>

#include "engine/binlog_redo.h"
#include "engine/sql_errors.h"
#include "engine/sysvars.h"
#include <rpl_filter.h>

namespace q4m_engine {

namespace {

// A string literal for the statement: quotes and backslashes escaped, as any sql_mode reads it.
std::string quoted(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'' || c == '\\') out += c == '\'' ? '\'' : '\\';
    out += c;
  }
  return out + "'";
}

// Writes the statement `make(db, table)` names for `table` into thd's transaction cache
// (standalone: its statement cache, below).
template <typename Make>
q4m::Status log_statement(const q4m::QueueTable& table, const char* what, Make make, bool standalone = false) {
  THD* thd = current_thd;
  if (!thd || !binlog_records(thd)) return q4m::Status::Ok();
  std::string db, name;
  if (!split_table_path(table.path(), &db, &name))
    return q4m::Status(q4m::ErrorCode::kInvalid, "cannot name table file " + table.path() + " in the binary log");
  const std::string query = make(db, name);
  // As THD::binlog_query does for a statement: a pending rows event ends first.
  if (thd->binlog_flush_pending_rows_event(true, true))
    return q4m::Status(q4m::ErrorCode::kIo, "writing the binary log failed");
  Query_log_event event(thd, query.data(), query.size(), /*using_trans=*/true, /*direct=*/false,
                        /*suppress_use=*/false, /*errcode=*/0);
  event.db = db.c_str();  // the replica filters and applies it under the table's database
  event.db_len = static_cast<uint32>(db.size());
  // In the transaction's cache whatever the statement (the constructor would write a COMMIT's
  // event at once, before the transaction's rows). A standalone change: in the statement
  // cache, which the server writes at the statement's end as a group of its own, also when
  // the transaction rolls back (as a MyISAM change's). The row format for the write: with
  // MIXED's statement format the server would put it into a non-empty transaction cache.
  event.cache_type = standalone ? Log_event::EVENT_STMT_CACHE : Log_event::EVENT_TRANSACTIONAL_CACHE;
  const enum_binlog_format format = thd->get_current_stmt_binlog_format();
  if (standalone) thd->set_current_stmt_binlog_format_row();
  const bool failed = mysql_bin_log.write(&event);
  if (standalone) thd->set_current_stmt_binlog_format(format);
  thd->reset_binlog_for_next_statement();
  if (failed)
    return q4m::Status(q4m::ErrorCode::kIo, std::string("writing ") + what + " of " + db + "." + name + " to the binary log failed");
  return q4m::Status::Ok();
}

// An unsigned decimal number of at most `max` at *p (digits only: no sign, no space); *p
// moves past it. False if there is none there, or it is larger.
bool read_number(const char** p, uint64_t max, uint64_t* out) {
  if (!isdigit(static_cast<unsigned char>(**p))) return false;
  char* end = nullptr;
  *out = strtoull(*p, &end, 10);  // ULLONG_MAX if it overflows: larger than any max here
  *p = end;
  return *out <= max;
}

class BinlogReplicationLog final : public q4m::ReplicationLog {
 public:
  q4m::Status removed(const q4m::QueueTable& table, const std::vector<q4m::NamedRow>& rows) override {
    return log_statement(table, "the removal of rows",
                         [&](const std::string& db, const std::string& name) { return removal_statement(db, name, rows); });
  }
  q4m::Status deduplicated(const q4m::QueueTable& table, const std::vector<size_t>& positions) override {
    THD* thd = current_thd;
    // An XA PREPARE has written the transaction's events by now: the drop could not follow them.
    if (thd && binlog_records(thd) && thd->transaction->xid_state.is_explicit_XA())
      return q4m::Status(q4m::ErrorCode::kInvalid,
                         "QUEUE table '" + table_label_of_path(table.path()) +
                             "': an XA transaction inserted a duplicate of a recent row (DEDUP_COLUMN) with the binary "
                             "log on; a replica could not learn that it was dropped. Insert it outside the XA transaction");
    return log_statement(table, "the duplicates dropped",
                         [&](const std::string& db, const std::string& name) { return dedup_statement(db, name, positions); });
  }
  q4m::Status relayed(const q4m::QueueTable& table, uint32_t source_id, q4m::RowId last) override {
    return log_statement(table, "the relay source's last row id", [&](const std::string& db, const std::string& name) {
      return "SET @queue_relayed = queue_apply_srcid(" + quoted(db) + "," + quoted(name) + ",'" +
             std::to_string(source_id) + ":" + std::to_string(last) + "')";
    });
  }
  q4m::Status redriven(const q4m::QueueTable& table, const std::vector<q4m::NamedRow>& rows) override {
    return log_statement(table, "the redrive of dead rows",
                         [&](const std::string& db, const std::string& name) { return redrive_statement(db, name, rows); });
  }
  // The binary log redoes a part (engine/binlog_redo.h) if it will hold the part's redo in
  // this transaction and recovery can tell it from others': not an XA transaction (XA PREPARE
  // writes the log before the engines' commit; its prepare stays synced), not a database the
  // binlog-do/ignore-db filters leave out (the server would drop the statement silently), and
  // the binary log synced at every group commit.
  bool redoes(const q4m::QueueTable& table) override {
    THD* thd = current_thd;
    // sync_binlog=1: else the binary log is no durability point, and the prepare keeps its sync.
    if (!binlog_redo_enabled() || sync_binlog_period != 1 || !thd || !binlog_records(thd)) return false;
    if (thd->transaction->xid_state.is_explicit_XA()) return false;
    std::string db, name;
    if (!split_table_path(table.path(), &db, &name)) return false;
    return binlog_filter->db_ok(db.c_str()) && note_redo_in_use();
  }
  q4m::Status prepared(const q4m::QueueTable& table, const std::string& redo) override {
    return log_statement(table, "the redo of a prepared part", [&](const std::string& db, const std::string& name) {
      return redo_statement(db, name, redo);
    });
  }
};

}  // namespace

q4m::Status log_standalone_statement(const q4m::QueueTable& table, const char* what,
                                     const std::function<std::string(const std::string&, const std::string&)>& make) {
  return log_statement(table, what, make, true);
}

q4m::Status log_transactional_statement(const q4m::QueueTable& table, const char* what,
                                        const std::function<std::string(const std::string&, const std::string&)>& make) {
  return log_statement(table, what, make, false);
}

std::string quoted_literal(const std::string& s) { return quoted(s); }

bool binlog_records(THD* thd) { return mysql_bin_log.is_open() && (thd->variables.option_bits & OPTION_BIN_LOG); }

q4m::ReplicationLog& binlog_replication_log() {
  static BinlogReplicationLog log;
  return log;
}

namespace {

// '<id>:<length>:<checksum>,...' in id order, quoted.
std::string named_rows(const std::vector<q4m::NamedRow>& rows) {
  std::vector<q4m::NamedRow> sorted = rows;
  std::sort(sorted.begin(), sorted.end(), [](const q4m::NamedRow& a, const q4m::NamedRow& b) { return a.id < b.id; });
  std::string list;
  for (const q4m::NamedRow& r : sorted) {
    if (!list.empty()) list += ',';
    list += std::to_string(r.id) + ':' + std::to_string(r.length) + ':' + std::to_string(r.checksum);
    // How it ended and its delivery count, for a replica's history (HISTORY_RETENTION only:
    // other removals are logged as before).
    if (r.end_kind) list += ':' + std::to_string(r.end_kind) + ':' + std::to_string(r.deliveries);
  }
  return quoted(list);
}

}  // namespace

std::string removal_statement(const std::string& db, const std::string& table, const std::vector<q4m::NamedRow>& rows) {
  return "SET @queue_removed = queue_apply_removal(" + quoted(db) + "," + quoted(table) + "," + named_rows(rows) + ")";
}

std::string redrive_statement(const std::string& db, const std::string& table, const std::vector<q4m::NamedRow>& rows) {
  return "SET @queue_redriven = queue_apply_redrive(" + quoted(db) + "," + quoted(table) + "," + named_rows(rows) + ")";
}

std::string expiry_statement(const std::string& db, const std::string& table) {
  return "SET @queue_expired = queue_expire(" + quoted(db) + "," + quoted(table) + ")";
}

std::string dedup_statement(const std::string& db, const std::string& table, const std::vector<size_t>& positions) {
  std::string list;
  for (size_t p : positions) list += (list.empty() ? "" : ",") + std::to_string(p);
  return "SET @queue_deduplicated = queue_apply_dedup(" + quoted(db) + "," + quoted(table) + "," + quoted(list) + ")";
}

bool parse_positions(const std::string& text, std::vector<size_t>* positions, std::string* error) {
  positions->clear();
  const char* p = text.c_str();
  uint64_t n = 0;
  while (read_number(&p, 1ULL << 32, &n) && (positions->empty() || n > positions->back())) {
    positions->push_back(static_cast<size_t>(n));
    if (!*p) return true;
    if (*p != ',' || !p[1]) break;
    p++;
  }
  *error = "expected increasing row positions '<n>[,<n>...]', got '" + text.substr(0, 64) + "'";
  return false;
}

bool parse_relay_source(const std::string& text, uint32_t* source_id, q4m::RowId* last, std::string* error) {
  const char* p = text.c_str();
  uint64_t source = 0, id = 0;
  if (read_number(&p, UINT32_MAX, &source) && *p++ == ':' && read_number(&p, UINT64_MAX >> 1, &id) && !*p) {
    *source_id = static_cast<uint32_t>(source);
    *last = id;
    return true;
  }
  *error = "expected '<source id>:<last row id>', got '" + text.substr(0, 64) + "'";
  return false;
}

bool parse_named_rows(const std::string& text, std::vector<q4m::NamedRow>* rows, std::string* error) {
  rows->clear();
  const char* p = text.c_str();
  // One unsigned number ending at a `sep` (or, for the last one, at ',' or the end).
  auto number = [&p](uint64_t max, char sep, uint64_t* out) {
    if (!read_number(&p, max, out) || (sep ? *p != sep : (*p && *p != ','))) return false;
    if (sep) p++;
    return true;
  };
  while (*p) {
    uint64_t id = 0, length = 0, checksum = 0, kind = 0, deliveries = 0;
    if (!number(UINT64_MAX >> 1, ':', &id) || id == 0 || !number(UINT32_MAX, ':', &length) ||
        !read_number(&p, UINT32_MAX, &checksum))
      break;
    if (*p == ':') {  // ':<end kind>:<deliveries>' (HISTORY_RETENTION)
      p++;
      if (!number(255, ':', &kind) || kind == 0 || !number(UINT16_MAX, 0, &deliveries)) break;
    } else if (*p && *p != ',') {
      break;
    }
    if (!rows->empty() && id <= rows->back().id) {
      *error = "row ids must increase (" + std::to_string(id) + " after " + std::to_string(rows->back().id) + ")";
      return false;
    }
    rows->push_back(q4m::NamedRow{id, static_cast<uint32_t>(length), static_cast<uint32_t>(checksum),
                                  static_cast<uint8_t>(kind), static_cast<uint16_t>(deliveries)});
    if (!*p) return true;
    if (!*++p) break;  // a trailing ','
  }
  *error = "expected a list '<row id>:<length>:<checksum>[:<end kind>:<deliveries>][,...]', got '" +
           text.substr(0, 64) + "'";
  return false;
}

}  // namespace q4m_engine
