#include "source.h"

#include <mysqld_error.h>

#include <cstdio>

#include "db_error.h"
#include "log.h"
#include "shutdown.h"

namespace q4m::forward {

std::string Source::lock_name() const {
  // GET_LOCK names are at most 64 characters: long table names are hashed (FNV-1a).
  std::string full = opt_.src.db + "." + opt_.src.table;
  std::string name = "q4m-forward:" + full;
  if (name.size() <= 64) return name;
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : full) h = (h ^ c) * 1099511628211ULL;
  char hex[17];
  snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return "q4m-forward:#" + std::string(hex);
}

bool Source::acquire_relay_lock() {
  std::string name = conn_.quote(lock_name());
  bool told = false;
  while (!shutdown_requested()) {
    auto got = conn_.query("SELECT GET_LOCK(" + name + ", 1)");
    if (!got.empty() && got[0][0] && *got[0][0] == "1") return true;
    auto holder = conn_.query("SELECT IS_USED_LOCK(" + name + ")");
    if (holder.empty() || !holder[0][0]) continue;  // released meanwhile
    unsigned long id = std::stoul(*holder[0][0]);
    if (previous_session_ != 0 && id == previous_session_) {
      // Our own earlier session, cut off without the server noticing yet. It may still own
      // a row; ending it returns that row before we take any newer one.
      log_line("source: ending our previous session %lu, which still holds the relay lock", id);
      try {
        conn_.execute("KILL CONNECTION " + std::to_string(id));
      } catch (const DbError& e) {
        if (e.kind == ErrorKind::kTransient) throw;  // else it is already gone
      }
    } else if (!told) {
      log_line("source: waiting for the relay lock of %s, held by connection %lu "
               "(another q4m-forward relaying this table?)", opt_.src.describe().c_str(), id);
      told = true;
    }
  }
  return false;
}

// An original Q4M source has neither variable; it has no leases and syncs its removals.
void Source::set_if_supported(const std::string& assignment) {
  try {
    conn_.execute("SET SESSION " + assignment);
  } catch (const DbError& e) {
    if (e.code != ER_UNKNOWN_SYSTEM_VARIABLE) throw;
  }
}

bool Source::open(const std::vector<std::string>& columns) {
  close();
  conn_.open(opt_.src, opt_.io_timeout, opt_.wait_timeout + opt_.io_timeout);
  if (!acquire_relay_lock()) {
    close();
    return false;
  }
  previous_session_ = conn_.server_thread_id();
  // A global queue_lease_timeout must not apply to the relay: a row it holds is already on
  // its way to the destination (dedup makes a retry safe, but a retry is all it would gain).
  set_if_supported("queue_lease_timeout = 0");
  // The destination drops rows it already has (source row ids, always mode 'a'), so the
  // source's removal need not wait for a sync of its own: if a machine crash undoes it, the
  // rows are relayed again and dropped there. One sync per round trip instead of two.
  set_if_supported("queue_sync_removals = OFF");

  std::string list;
  for (const std::string& c : columns) list += quote_identifier(c) + ", ";
  char timeout[32];
  snprintf(timeout, sizeof timeout, "%.3f", opt_.wait_timeout);
  std::string table = quote_identifier(opt_.src.db) + "." + quote_identifier(opt_.src.table);
  std::string name = conn_.quote(opt_.src.db + "." + opt_.src.table);
  // --batch 1: queue_wait(), which the original Q4M has too; else a batch of at most ? rows.
  std::string wait = opt_.batch == 1 ? "queue_wait(" + name + ", " + timeout + ")"
                                     : "queue_wait_batch(" + name + ", ?, " + timeout + ")";
  std::string sql = "SELECT " + list + "queue_rowid() FROM " + table + " WHERE " + wait;
  stmt_ = mysql_stmt_init(conn_.handle());
  if (!stmt_) conn_.fail("mysql_stmt_init");
  my_bool update_max_length = 1;
  mysql_stmt_attr_set(stmt_, STMT_ATTR_UPDATE_MAX_LENGTH, &update_max_length);
  if (mysql_stmt_prepare(stmt_, sql.data(), sql.size())) conn_.fail(stmt_, "prepare " + sql);
  fetch_.configure(stmt_);
  if (fetch_.size() != columns.size() + 1) throw DbError(ErrorKind::kFatal, 0, "source: unexpected result shape of " + sql);
  return true;
}

void Source::close() {
  if (stmt_) mysql_stmt_close(stmt_);
  stmt_ = nullptr;
  conn_.close();
}

size_t Source::take_next(size_t max_rows) {
  rowids_.clear();
  if (opt_.batch > 1) {
    long long wanted = static_cast<long long>(max_rows);
    MYSQL_BIND param{};
    param.buffer_type = MYSQL_TYPE_LONGLONG;
    param.buffer = &wanted;
    if (mysql_stmt_bind_param(stmt_, &param)) conn_.fail(stmt_, "binding the batch size");
  }
  const char* what = opt_.batch > 1 ? "queue_wait_batch" : "queue_wait";
  if (mysql_stmt_execute(stmt_)) conn_.fail(stmt_, what);
  if (mysql_stmt_store_result(stmt_)) conn_.fail(stmt_, std::string(what) + " (reading the rows)");
  const my_ulonglong count = mysql_stmt_num_rows(stmt_);
  if (count > max_rows) {
    mysql_stmt_free_result(stmt_);
    throw DbError(ErrorKind::kFatal, 0, "source: " + std::string(what) + "() statement returned " +
                                            std::to_string(count) + " rows for at most " + std::to_string(max_rows) +
                                            "; owner mode must show exactly the owned rows");
  }
  if (count > 0 && !fetch_.bind_result(stmt_)) conn_.fail(stmt_, "binding the rows");
  if (rows_.size() < count) rows_.resize(count);
  for (size_t i = 0; i < count; ++i) fetch_row(i);
  mysql_stmt_free_result(stmt_);
  return count;
}

void Source::fetch_row(size_t i) {
  int rc = mysql_stmt_fetch(stmt_);
  if (rc == MYSQL_DATA_TRUNCATED && !fetch_.refetch_truncated(stmt_)) conn_.fail(stmt_, "fetching a long column");
  if (rc == 1) conn_.fail(stmt_, "fetching a row");
  if (rc == MYSQL_NO_DATA) throw DbError(ErrorKind::kFatal, 0, "source: fewer rows than the result announced");
  const ColumnValue& id = fetch_.column(fetch_.size() - 1);
  if (id.is_null) throw DbError(ErrorKind::kFatal, 0, "source: queue_rowid() is NULL for an owned row");
  const uint64_t rowid = *reinterpret_cast<const unsigned long long*>(id.data.data());
  // The destination's dedup needs increasing ids; a scan of the owned rows gives them so.
  if (!rowids_.empty() && rowid <= rowids_.back())
    throw DbError(ErrorKind::kFatal, 0, "source: row " + std::to_string(rowid) + " came after row " +
                                            std::to_string(rowids_.back()) + "; expected increasing row ids");
  rows_[i].assign_values(fetch_);
  rowids_.push_back(rowid);
}

void Source::finish_owned() { conn_.execute("SELECT queue_end()"); }

uint64_t Source::next_rowid() {
  std::vector<SqlRow> rows;
  try {
    rows = conn_.query("SELECT NEXT_ROWID FROM information_schema.QUEUE_TABLES WHERE TABLE_SCHEMA = " +
                       conn_.quote(opt_.src.db) + " AND TABLE_NAME = " + conn_.quote(opt_.src.table));
  } catch (const DbError& e) {
    if (e.code != ER_UNKNOWN_TABLE) throw;
    return 0;
  }
  if (rows.size() != 1 || rows[0].empty() || !rows[0][0]) return 0;
  return std::stoull(*rows[0][0]);
}

}  // namespace q4m::forward
