#define MYSQL_SERVER 1
#include <my_global.h>
#include <sql_class.h>
#include <sql_lex.h>
#include <log.h>

#include "engine/orphan_parts.h"
#include "engine/ha_queue.h"

#include "core/table/registry.h"
#include "engine/binlog_statements.h"
#include "engine/connection_state.h"
#include "engine/owner_mode_note.h"
#include "engine/relay_notes.h"
#include "engine/dedup_notes.h"
#include "engine/row_codec.h"
#include "engine/sql_errors.h"
#include "engine/sysvars.h"
#include "engine/table_definition.h"
#include "engine/transactions.h"
#include "engine/xa.h"
#include "engine/table_options.h"

namespace q4m_engine {

namespace {

// A row that was visible when read but is now gone or owned by another connection
// (it was consumed concurrently). print_error() stays silent for it, so a single-table
// DELETE skips the row without counting it.
constexpr int kErrRowVanished = HA_ERR_RECORD_DELETED;

// The rows a copying ALTER writes into its new table are committed together; past this many
// buffered bytes they are committed early so memory stays bounded.
constexpr size_t kCopyFlushBytes = 1u << 20;

std::string data_file_path(const char* table_path) {
  return std::string(table_path) + q4m::kDataFileExtension;
}

// Statements that rebuild the table by copying its rows through a scan.
bool copies_table(THD* thd) {
  int cmd = thd_sql_command(thd);
  return cmd == SQLCOM_ALTER_TABLE;
}

bool is_update(THD* thd) {
  int cmd = thd_sql_command(thd);
  return cmd == SQLCOM_UPDATE || cmd == SQLCOM_UPDATE_MULTI;
}

// A name the server gives its work tables and files ("#sql-..."), such as the new table a
// copying ALTER fills.
bool is_server_work_name(const char* name) { return strncmp(name, tmp_file_prefix, tmp_file_prefix_length) == 0; }

// The table name the user wrote, for CREATE/ALTER messages: ALTER builds the new
// table under a temporary "#sql-..." name.
std::string user_table_label(THD* thd, const TABLE_SHARE* s) {
  const TABLE_LIST* tl = thd->lex->query_tables;
  if (is_server_work_name(s->table_name.str) && tl)
    return std::string(tl->db.str, tl->db.length) + "." +
           std::string(tl->table_name.str, tl->table_name.length);
  return std::string(s->db.str, s->db.length) + "." +
         std::string(s->table_name.str, s->table_name.length);
}

// The server's options about where and how rows are stored, which mean nothing to a queue:
// false, with the error raised, for one a user must not believe honoured (DATA/INDEX
// DIRECTORY); a warning for the ones merely ignored.
bool check_placement_options(THD* thd, const std::string& label, const HA_CREATE_INFO* info) {
  auto ignored = [&](const std::string& option, const char* why) {  // warning 1618, as the server's own
    push_warning_printf(thd, Sql_condition::WARN_LEVEL_WARN, WARN_OPTION_IGNORED, "QUEUE table '%s': <%s> option ignored: %s",
                        label.c_str(), option.c_str(), why);
  };
  if (info->data_file_name || info->index_file_name) {
    if (thd_sql_command(thd) != SQLCOM_ALTER_TABLE) {
      // The file's place is fixed (DROP, RENAME, compaction and recovery find it there): a
      // queue the user meant for another disk must not land in the datadir unnoticed.
      my_printf_error(ER_ILLEGAL_HA_CREATE_OPTION,
                      "QUEUE table '%s' cannot have %s DIRECTORY: its data file always lives in the database's "
                      "directory of the datadir; remove the option",
                      MYF(0), label.c_str(), info->data_file_name ? "DATA" : "INDEX");
      return false;
    }
    // The server ignores these options in ALTER TABLE itself (warning 1618): here they come
    // from the table being converted (ALTER TABLE ... ENGINE=QUEUE), and the user could not
    // take them off. Say so the same way.
    const char* why = "its data file lives in the database's directory of the datadir";
    if (info->data_file_name) ignored("DATA DIRECTORY", why);
    if (info->index_file_name) ignored("INDEX DIRECTORY", why);
  }
  if ((info->used_fields & HA_CREATE_USED_ROW_FORMAT) && info->row_type != ROW_TYPE_DEFAULT &&
      info->row_type != ROW_TYPE_NOT_USED) {
    // The server accepts ROW_FORMAT for every engine; a queue has one format (docs/file-format.md).
    ignored(std::string("ROW_FORMAT=") + ha_row_type[info->row_type].str,
            "a queue stores each row as it was inserted, in its own record (uncompressed)");
  }
  return true;
}

// The new table a copying ALTER fills: the server opens it under the table's name, from a
// file named "#sql-...".
bool is_alter_copy(const char* table_path) {
  const char* slash = strrchr(table_path, '/');
  return is_server_work_name(slash ? slash + 1 : table_path);
}

}  // namespace

ha_queue::ha_queue(handlerton* hton, TABLE_SHARE* share) : handler(hton, share) {
  ref_length = sizeof(q4m::RowId);
}

ha_queue::~ha_queue() = default;

ulonglong ha_queue::table_flags() const {
  // HA_HAS_RECORDS (not HA_STATS_RECORDS_IS_EXACT): COUNT(*) is answered by records()
  // without a scan, while the optimizer never treats a 0/1-row queue as a constant
  // table, which would read or skip it before `WHERE queue_wait(...)` runs.
  // HA_NULL_IN_KEY and HA_CAN_INDEX_BLOBS only let index definitions reach create(),
  // which rejects every index with one clear message. No HA_CAN_BIT_FIELD: BIT values
  // then live wholly in the field's bytes, not partly in the null-flag area.
  // Row-based logging only (as sequences): a statement such as DELETE ... LIMIT 1 picks
  // different rows on a replica; MIXED then logs rows, STATEMENT refuses (error 1665).
  return HA_REC_NOT_IN_SEQ | HA_CAN_GEOMETRY | HA_FILE_BASED |
         HA_HAS_RECORDS | HA_BINLOG_ROW_CAPABLE |
         HA_NULL_IN_KEY | HA_CAN_INDEX_BLOBS;
}

std::string ha_queue::table_label() const {
  return std::string(table_share->db.str, table_share->db.length) + "." +
         std::string(table_share->table_name.str, table_share->table_name.length);
}

int ha_queue::optimize(THD*, HA_CHECK_OPT*) {
  q4m::Status st = queue_->compact();
  if (st.ok()) return HA_ADMIN_OK;
  raise(st);
  return HA_ADMIN_FAILED;
}

int ha_queue::raise(const q4m::Status& st) {
  error_raised_ = true;
  return raise_table_error(table_label(), st);
}

void ha_queue::print_error(int error, myf errflag) {
  if (error_raised_) {
    error_raised_ = false;
    if (ha_thd()->is_error()) return;  // our precise message is already the statement's error
  }
  if (error == kErrRowVanished) return;
  handler::print_error(error, errflag);
}

// ---- DDL ------------------------------------------------------------------

int ha_queue::create(const char* name, TABLE* form, HA_CREATE_INFO* info) {
  THD* thd = ha_thd();
  const TABLE_SHARE* s = form->s;
  if (!check_placement_options(thd, user_table_label(thd, s), info)) return HA_ERR_UNSUPPORTED;
  if (s->keys > 0 || s->found_next_number_field) {
    std::string what;
    if (s->keys > 0) {
      const KEY& k = form->key_info[0];
      what = s->primary_key == 0 ? "PRIMARY KEY" : (k.flags & HA_NOSAME) ? "UNIQUE KEY `" : "KEY `";
      if (s->primary_key != 0) what += std::string(k.name.str, k.name.length) + "`";
    } else {
      what = "AUTO_INCREMENT column `" +
             std::string(s->found_next_number_field[0]->field_name.str) + "` (it needs a key)";
    }
    my_printf_error(ER_ILLEGAL_HA_CREATE_OPTION,
                    "QUEUE table '%s' cannot have indexes: remove %s; a queue is read in insert "
                    "order only",
                    MYF(0), user_table_label(thd, s).c_str(), what.c_str());
    return HA_ERR_UNSUPPORTED;
  }
  if (info->tmp_table()) {
    // A queue is shared by producers and consumers and kept on disk; a session's temporary
    // table is neither (and its "#sql" file name is that of an ALTER's copy).
    my_printf_error(ER_ILLEGAL_HA_CREATE_OPTION,
                    "QUEUE table '%s' cannot be TEMPORARY: a queue is shared by its producers and "
                    "consumers and kept on disk; use CREATE TABLE (without TEMPORARY) ... ENGINE=QUEUE",
                    MYF(0), user_table_label(thd, s).c_str());
    return HA_ERR_UNSUPPORTED;
  }
  if (form->part_info) {
    // Each partition would be a separate queue that queue_wait() cannot name.
    my_printf_error(ER_ILLEGAL_HA_CREATE_OPTION,
                    "QUEUE table '%s' cannot be partitioned: queue_wait() hands out the rows of one queue; "
                    "use one QUEUE table per partition and name them all in queue_wait()",
                    MYF(0), user_table_label(thd, s).c_str());
    return HA_ERR_UNSUPPORTED;
  }
  if (s->versioned) {
    // queue_end() removes a row outright: a history of INSERTs without their consumption
    // would mislead, and a DELETE on such a table is an UPDATE, which a queue refuses.
    my_printf_error(ER_ILLEGAL_HA_CREATE_OPTION,
                    "QUEUE table '%s' cannot be WITH SYSTEM VERSIONING: consumed messages leave no "
                    "history; keep an audit trail in another table (an InnoDB table the consumer "
                    "writes to)",
                    MYF(0), user_table_label(thd, s).c_str());
    return HA_ERR_UNSUPPORTED;
  }
  std::string why;
  if (!check_options(form, &why)) {
    my_printf_error(ER_ILLEGAL_HA_CREATE_OPTION, "QUEUE table '%s': %s", MYF(0), user_table_label(thd, s).c_str(),
                    why.c_str());
    return HA_ERR_UNSUPPORTED;
  }
  q4m::Status st = q4m::TableRegistry::instance().create(data_file_path(name));
  if (st.ok() && info->auto_increment_value > 1) {  // AUTO_INCREMENT=N: new rows' ids start there
    std::shared_ptr<q4m::QueueTable> q;
    st = q4m::TableRegistry::instance().acquire(data_file_path(name), &q);
    if (st.ok()) st = q->raise_id_floor(info->auto_increment_value);
  }
  return st.ok() ? 0 : raise_status_error(st);
}

int ha_queue::open(const char* name, int, uint) {
  end_recovered_commits();  // a recovery the server left undecided in part (engine/xa.h)
  q4m::Status st = q4m::TableRegistry::instance().acquire(data_file_path(name), &queue_);
  if (!st.ok()) {
    // Once an error is set the server adds no "marked as crashed" guess of its own.
    return raise_status_error(
        q4m::Status(st.code(), "QUEUE table '" + table_label() + "': " + st.message()));
  }
  std::shared_ptr<const q4m::TableOptions> options = definition_of(table_share)->options;
  // A copying ALTER fills its new table before it takes the table's name: every row moves,
  // as many as there are (rows past a lowered MAX_ROWS stay, as with an in-place ALTER).
  // The next statement that opens the table under its name sets the limit.
  copy_target_ = is_alter_copy(name);
  if (copy_target_ && options->max_rows != 0) {
    auto unlimited = std::make_shared<q4m::TableOptions>(*options);
    unlimited->max_rows = 0;
    options = std::move(unlimited);
  }
  queue_->configure(std::move(options));
  row_id_column_ = definition_of(table_share)->row_id_column;
  return 0;
}

enum_alter_inplace_result ha_queue::check_if_supported_inplace_alter(TABLE* altered_table,
                                                                     Alter_inplace_info* ha_alter_info) {
  const HA_CREATE_INFO* to = ha_alter_info->create_info;
  std::string why;
  if (!check_options(altered_table, &why)) {  // a copying ALTER would be refused by create()
    my_printf_error(ER_ILLEGAL_HA_CREATE_OPTION, "QUEUE table '%s': %s", MYF(0), table_label().c_str(), why.c_str());
    return HA_ALTER_ERROR;
  }
  const bool options_only = (ha_alter_info->handler_flags & ~ALTER_CHANGE_CREATE_OPTION) == 0 &&
                            !(to->used_fields & (HA_CREATE_USED_CHARSET | HA_CREATE_USED_DEFAULT_CHARSET |
                                                 HA_CREATE_USED_PACK_KEYS | HA_CREATE_USED_CHECKSUM)) &&
                            table_share->row_type == to->row_type;
  if (!options_only || !options_change_in_place(table_share->option_struct, to->option_struct))
    return HA_ALTER_INPLACE_NOT_SUPPORTED;
  return HA_ALTER_INPLACE_NO_LOCK;
}

bool ha_queue::commit_inplace_alter_table(TABLE* altered_table, Alter_inplace_info* ha_alter_info, bool commit) {
  if (!commit || !queue_) return false;
  const HA_CREATE_INFO* to = ha_alter_info->create_info;
  if ((to->used_fields & HA_CREATE_USED_AUTO) && to->auto_increment_value > 1) {  // never lowers it
    q4m::Status st = queue_->raise_id_floor(to->auto_increment_value);
    if (!st.ok()) {
      raise(st);
      return true;
    }
  }
  // Statements that open the table later hand the queue the same options (configure()).
  queue_->configure(options_of(altered_table->s));
  return false;
}

void ha_queue::update_create_info(HA_CREATE_INFO* info) {
  // ALTER TABLE calls this with its merged options before it reads them.
  if (table && ha_thd() && thd_sql_command(ha_thd()) == SQLCOM_ALTER_TABLE)
    drop_bursts_of_removed_rates(table->s, info);
  if (!queue_ || (info->used_fields & HA_CREATE_USED_AUTO)) return;
  // A plain table shows it once AUTO_INCREMENT=N set a start (a dump keeps it); one that
  // never had it shows none, as before.
  if (row_id_column_ < 0 && queue_->ids().floor <= 1) return;
  THD* thd = ha_thd();
  info->auto_increment_value = reads_snapshot(thd)
                                   ? queue_->snapshot_upcoming_id(connection_state(thd).snapshot_point())
                                   : queue_->ids().upcoming();
}

int ha_queue::close() {
  queue_.reset();
  return 0;
}

int ha_queue::delete_table(const char* name) {
  // Under ALTER TABLE the rows live on in the table it built (which took them over, or which
  // belongs to another engine): owners must not take them for removed.
  THD* thd = ha_thd();
  const bool rows_moved = thd && thd_sql_command(thd) == SQLCOM_ALTER_TABLE;
  if (!rows_moved) discard_orphaned_parts_for_drop(data_file_path(name));
  q4m::Status st = q4m::TableRegistry::instance().drop(data_file_path(name), rows_moved);
  if (st.ok() || st.code() == q4m::ErrorCode::kNotFound) return 0;  // nothing left to remove
  return raise_status_error(st);
}

int ha_queue::rename_table(const char* from, const char* to) {
  q4m::Status st =
      q4m::TableRegistry::instance().rename(data_file_path(from), data_file_path(to));
  return st.ok() ? 0 : raise_status_error(st);
}

int ha_queue::truncate() {
  q4m::Status st = queue_->truncate();
  return st.ok() ? 0 : raise(st);
}

// DELETE without WHERE must not remove rows owned by other connections: the server
// then deletes row by row through the visibility rules.
int ha_queue::delete_all_rows() { return HA_ERR_WRONG_COMMAND; }

// ---- writes ---------------------------------------------------------------

void ha_queue::start_bulk_insert(ha_rows, uint) { bulk_insert_ = true; }

int ha_queue::end_bulk_insert() {
  bulk_insert_ = false;
  forget_unused_relay_ids();
  q4m::Status st = commit_copied_rows();
  return st.ok() ? 0 : raise(st);
}

q4m::Status ha_queue::commit_copied_rows() {
  if (copied_rows_.empty()) return q4m::Status::Ok();
  std::vector<std::string_view> views(copied_rows_.begin(), copied_rows_.end());
  const q4m::RowId* asked = copied_asked_.empty() ? nullptr : copied_asked_.data();
  q4m::Status st = queue_->insert_with_history(views, copied_histories_, asked);
  copied_rows_.clear();
  copied_histories_.clear();
  copied_asked_.clear();
  copied_bytes_ = 0;
  return st;
}

// Whether the row being written may ask for id `asked` (> 0) in the ROW_ID_COLUMN: an error
// if it is below the next one, or the row is relayed.
int ha_queue::check_asked_id(q4m::RowId asked) {
  std::string why;
  if (relaying_ || has_pending_relay()) {
    why = "asks for row id " + std::to_string(asked) + " in a relayed INSERT (queue_set_srcid), whose rows get "
          "ids of their own; give NULL or 0";
  } else if (asks_.admit(ha_thd()->query_id, queue_->ids(), asked, &why)) {
    return 0;
  }
  my_printf_error(ER_WRONG_VALUE_FOR_VAR, "QUEUE table '%s': ROW_ID_COLUMN `%s` %s", MYF(0), table_label().c_str(),
                  table->field[row_id_column_]->field_name.str, why.c_str());
  error_raised_ = true;
  return HA_ERR_UNSUPPORTED;
}

// Every row goes into the statement's transaction (engine/transactions.h): the connection's,
// or the statement's own, committed when the server commits the statement. That commit (or
// its prepare, with the binary log) is where the row becomes durable, whatever the
// configuration. Only a copying ALTER's rows take another way (copy_row()).
int ha_queue::write_row(const uchar* buf) {
  encode_row(table, buf, row_id_column_, &encoded_);
  const q4m::RowId asked = asked_id(table, buf, row_id_column_);
  if (copy_target_) return copy_row(asked);
  if (asked) {
    if (int error = check_asked_id(asked)) return error;
  }
  q4m::Transaction* txn = statement_transaction(ha_thd());
  if (!txn) {
    error_raised_ = true;
    return HA_ERR_UNSUPPORTED;
  }
  if (relaying_ || take_pending_relay()) return stage_relayed_row(*txn);
  txn->insert(queue_, std::move(encoded_), asked);
  encoded_ = std::string();
  return 0;
}

// A copying ALTER's row keeps its history (its id, age, delivery count...) in the new table,
// which no connection sees before the ALTER ends: rows are written in chunks of
// kCopyFlushBytes (at once outside a multi-row insert), the ALTER being DDL, not a
// transaction. A copy from a QUEUE table keeps the ids the histories carry (or gives new
// ones under ORDER BY) whatever the column says; from another engine, the column's values
// are asked for (ids that do not increase become new ones).
int ha_queue::copy_row(q4m::RowId asked) {
  if (asked && copied_asked_.size() < copied_rows_.size()) copied_asked_.resize(copied_rows_.size());
  copied_histories_.push_back(copied_history());
  if (asked || !copied_asked_.empty()) copied_asked_.push_back(asked);
  copied_bytes_ += encoded_.size();
  copied_rows_.push_back(std::move(encoded_));
  encoded_ = std::string();
  if (bulk_insert_ && copied_bytes_ < kCopyFlushBytes) return 0;
  q4m::Status st = commit_copied_rows();
  return st.ok() ? 0 : raise(st);
}

// The old table's scan left the row's history with the connection when that table is a
// QUEUE table (its id, age, delivery count, retry delay, whether it is owned): the row keeps
// it, so a dead row stays dead and MESSAGE_TTL counts from its INSERT. From any other engine
// a row is new. ORDER BY loses the histories; its rows get ids the old table never used.
q4m::RowHistory ha_queue::copied_history() {
  THD* thd = ha_thd();
  ConnectionState* cs = find_connection_state(thd);
  if (!cs) return q4m::RowHistory{};
  q4m::RowHistory h = cs->take_copied_history(thd->query_id).value_or(q4m::RowHistory{});
  ConnectionState::CopySource* src = cs->copy_source(thd->query_id);
  if (src && !src->ids_kept) {
    if (src->next_new_id == 0) src->next_new_id = src->table->info().next_rowid;
    h.id = src->next_new_id++;
  }
  return h;
}

// The copy is through (HA_EXTRA_END_COPY): this new table takes over the old one's rows and
// their owners (QueueTable::take_over). A failure fails the ALTER, and the old table stays.
int ha_queue::take_over_copied_table() {
  THD* thd = ha_thd();
  ConnectionState* cs = find_connection_state(thd);
  ConnectionState::CopySource* src = cs ? cs->copy_source(thd->query_id) : nullptr;
  if (!src) return 0;  // the rows came from another engine
  const bool ids_kept = src->ids_kept;
  q4m::Status st = queue_->take_over(src->table, ids_kept);
  cs->forget_copy_source();
  if (st.ok()) return 0;
  const std::string label = user_table_label(thd, table_share);
  if (st.code() != q4m::ErrorCode::kInvalid || ids_kept)
    return raise(q4m::Status(st.code(), "QUEUE table '" + label + "': " + st.message()));
  my_printf_error(ER_ILLEGAL_HA,
                  "QUEUE table '%s': ALTER TABLE ... ORDER BY gives the rows new ids, so it cannot keep rows that "
                  "connections own or consume meanwhile: %s. End or abort them and retry, or ALTER without ORDER BY, "
                  "which keeps them owned",
                  MYF(0), label.c_str(), st.message().c_str());
  error_raised_ = true;
  return HA_ERR_WRONG_COMMAND;
}

int ha_queue::extra(enum ha_extra_function operation) {
  if (!copy_target_) return 0;
  if (operation == HA_EXTRA_END_COPY) return take_over_copied_table();
  if (operation == HA_EXTRA_ABORT_COPY) {
    if (ConnectionState* cs = find_connection_state(ha_thd())) cs->forget_copy_source();
  }
  return 0;
}

bool ha_queue::has_pending_relay() const {
  ConnectionState* cs = find_connection_state(ha_thd());
  return cs && cs->has_pending_relay();
}

// The connection's queue_set_srcid() declaration applies to this statement's rows from now on.
bool ha_queue::take_pending_relay() {
  ConnectionState* cs = find_connection_state(ha_thd());
  if (!cs || !cs->has_pending_relay()) return false;
  relaying_ = cs->take_pending_relay();
  relay_ids_used_ = 0;
  return true;
}

// A relayed row is staged like any other, with its source's row id: the admission at the
// transaction's end drops it if it was received before, and records the source's last id
// with the rows.
int ha_queue::stage_relayed_row(q4m::Transaction& txn) {
  const PendingRelay& r = *relaying_;
  const q4m::RelayTag tag{r.source_id, r.source_rowids[relay_ids_used_], r.reset && relay_ids_used_ == 0};
  if (++relay_ids_used_ == r.source_rowids.size()) relaying_.reset();
  txn.insert_relayed(queue_, std::move(encoded_), tag);
  encoded_ = std::string();
  return 0;
}

// The INSERT ended before every declared id had a row: the rest apply to no row (they are
// not recorded, so those source rows are accepted when they do arrive).
void ha_queue::forget_unused_relay_ids() {
  if (!relaying_) return;
  const size_t declared = relaying_->source_rowids.size();
  if (relay_ids_used_ < declared && !ha_thd()->is_error())
    push_warning_printf(ha_thd(), Sql_condition::WARN_LEVEL_NOTE, ER_UNKNOWN_ERROR,
                        "queue_set_srcid: %zu of %zu declared source row ids had no row in this INSERT into "
                        "'%s'; they were not recorded",
                        declared - relay_ids_used_, declared, table_label().c_str());
  relaying_.reset();
}

int ha_queue::reject_update() {
  my_printf_error(ER_ILLEGAL_HA,
                  "QUEUE table '%s' does not support UPDATE: rows are immutable messages; "
                  "consume with queue_wait()/queue_end() or DELETE, and INSERT a new row",
                  MYF(0), table_label().c_str());
  error_raised_ = true;
  return HA_ERR_WRONG_COMMAND;
}

int ha_queue::update_row(const uchar*, const uchar*) { return reject_update(); }

// As write_row(): the row is claimed for the statement's transaction and removed at its commit.
int ha_queue::delete_row(const uchar*) {
  THD* thd = ha_thd();
  ConnectionState& cs = connection_state(thd);
  q4m::Transaction* txn = statement_transaction(thd);
  if (!txn) {
    error_raised_ = true;
    return HA_ERR_UNSUPPORTED;
  }
  if (is_staged(current_id_)) {  // its INSERT was logged as a row: so is this DELETE
    row_logging = row_logging_init;
    txn->unstage(queue_.get(), staged_index(current_id_));
    return 0;
  }
  if (txn->remove_visible(queue_, &cs.consumer(), current_id_)) {
    // The transaction logged it by id (engine/binlog_statements.h): no row event, which a
    // replica would apply to the first row with the same bytes.
    if (binlog_records(thd)) row_logging = false;
    return 0;
  }
  // Consumed by another connection since we read it. A single-table DELETE skips it (not
  // counted, LIMIT not used up); other statements treat it as already deleted.
  return thd_sql_command(thd) == SQLCOM_DELETE ? kErrRowVanished : 0;
}

// ---- reads ----------------------------------------------------------------

int ha_queue::rnd_init(bool) {
  scan_after_ = 0;
  current_id_ = 0;
  staged_next_ = 0;
  THD* thd = ha_thd();
  copy_scan_ = copies_table(thd);
  copy_history_ = copy_scan_ && !(thd->lex->alter_info.flags & ALTER_ORDER);
  if (copy_scan_) {
    copy_.start(queue_.get());
    connection_state(thd).set_copy_source(thd->query_id, queue_, copy_history_);  // for the new table's take_over
  }
  // queue_scan_history(): the history rows instead of the queue's.
  ConnectionState* scan_cs = find_connection_state(thd);
  history_scan_ = !copy_scan_ && scan_cs && scan_cs->scans_history_in(thd->query_id);
  history_.clear();
  history_file_.reset();
  history_next_ = 0;
  if (history_scan_) {
    q4m::Status st = queue_->history_rows(&history_, &history_file_);
    if (!st.ok()) return raise(st);
  }
  // The statement's queue_receive() (a constant condition: evaluated before the scan) took
  // rows under receipts: the scan reads those.
  q4m::RowId first_received = 0;
  received_scan_ = !copy_scan_ && !history_scan_ && next_received(&first_received);
  // A consistent snapshot's scan reads the rows of its point (core/table/snapshots.h).
  snapshot_scan_ = !copy_scan_ && !history_scan_ && !received_scan_ && reads_snapshot(thd);
  snapshot_next_ = 0;
  snapshot_.clear();
  if (snapshot_scan_) {
    q4m::Status st = queue_->snapshot_rows(connection_state(thd).snapshot_point(), &snapshot_);
    if (!st.ok()) return raise(st);
  }
  // A backup's scan sees the rows in flight too (core/table/consumer.h, set_sees_held; rnd_end
  // clears it). Other scans need no connection state.
  if (!copy_scan_ && backup_read(thd)) connection_state(thd).consumer().set_sees_held(true);
  if (!copy_scan_) note_if_owning_nothing(thd, table_label(), &owning_nothing_noted_in_);
  const HA_CREATE_INFO& to = thd->lex->create_info;
  const bool stays_queue = !(to.used_fields & HA_CREATE_USED_ENGINE) || to.db_type == ht;
  if (copy_scan_ && !copy_history_ && stays_queue && reorder_noted_in_ != thd->query_id) {
    reorder_noted_in_ = thd->query_id;  // the sort scans, then the copy reads: one note
    // The server sorts every row before it writes the first: which row is written when is
    // unknown here, so the rows start over in the new table. A note: strict mode turns a
    // warning during ALTER's copy into an error.
    push_warning_printf(thd, Sql_condition::WARN_LEVEL_NOTE, ER_UNKNOWN_ERROR,
                        "QUEUE table '%s': ALTER TABLE ... ORDER BY re-inserts the rows as new ones: their age, "
                        "delivery counts and retry delays start over (dead rows are queued again)",
                        table_label().c_str());
  }
  return 0;
}

int ha_queue::rnd_end() {
  snapshot_.clear();
  history_.clear();
  history_file_.reset();
  ConnectionState* cs = find_connection_state(ha_thd());
  if (cs && cs->read_rows_in(ha_thd()->query_id)) cs->note_row_read(ha_thd()->query_id, 0);
  if (cs) cs->consumer().set_sees_held(false);
  return 0;
}

// mariadb-dump reads a table under LOCK TABLES ... READ (its default), under FLUSH TABLES
// WITH READ LOCK (--lock-all-tables) or in a transaction started WITH CONSISTENT SNAPSHOT
// (--single-transaction).
bool ha_queue::backup_read(THD* thd) const {
  if (thd->locked_tables_mode == LTM_LOCK_TABLES && table->reginfo.lock_type <= TL_READ_NO_INSERT) return true;
  if (thd->global_read_lock.is_acquired()) return true;
  return in_consistent_snapshot(thd);
}

int ha_queue::rnd_next(uchar* buf) {
  q4m::RowId id = 0;
  bool found = false;
  q4m::RowHistory history;
  if (history_scan_) return next_in_history(buf);
  if (staged_next_ > 0) return next_staged(buf);
  if (received_scan_) return next_received(&id) && id ? read_received(buf, id) : HA_ERR_END_OF_FILE;
  if (snapshot_scan_) return next_in_snapshot(buf);
  q4m::Status st =
      copy_scan_ ? copy_.next(queue_.get(), &id, &payload_, &found, copy_history_ ? &history : nullptr)
                 : queue_->next_visible(viewer_of(ha_thd()), scan_after_, &id, &payload_, &found);
  if (!st.ok()) return raise(st);
  if (!found) return copy_scan_ ? HA_ERR_END_OF_FILE : next_staged(buf);
  if (copy_history_) connection_state(ha_thd()).keep_copied_history(ha_thd()->query_id, history);
  scan_after_ = id;
  return read_into(buf, id);
}

// The statement took rows under receipts (queue_receive): its scan reads those, which no
// connection owns, and nothing else.
bool ha_queue::next_received(q4m::RowId* id) {
  const ConnectionState* cs = find_connection_state(ha_thd());
  return cs && cs->next_received(ha_thd()->query_id, queue_.get(), scan_after_, id);
}

int ha_queue::read_received(uchar* buf, q4m::RowId id) {
  bool found = false;
  q4m::Status st = queue_->read_row(id, &payload_, &found);
  if (!st.ok()) return raise(st);
  scan_after_ = id;
  if (!found) return rnd_next(buf);  // gone since (TRUNCATE): the next one
  return read_into(buf, id);
}

int ha_queue::next_in_history(uchar* buf) {
  if (history_next_ == history_.size()) return HA_ERR_END_OF_FILE;
  return read_history(buf, history_[history_next_++]);
}

int ha_queue::read_history(uchar* buf, const q4m::EndedRow& row) {
  q4m::Status st = queue_->read_history_row(history_file_, row, &payload_);
  if (!st.ok()) return raise(st);
  return read_into(buf, row.id, &row);
}

int ha_queue::next_in_snapshot(uchar* buf) {
  if (snapshot_next_ == snapshot_.size()) return next_staged(buf);
  const q4m::SnapshotRow& row = snapshot_[snapshot_next_++];
  q4m::Status st = queue_->read_snapshot_row(row, &payload_);
  if (!st.ok()) return raise(st);
  return read_into(buf, row.location.id);
}

// The rows the connection's open transaction inserted come after the table's own, with ids
// of their own (kStagedBit | index) that no table row has: only that connection sees them.
int ha_queue::next_staged(uchar* buf) {
  const q4m::Transaction* txn = open_transaction(ha_thd());
  const q4m::Consumer* viewer = viewer_of(ha_thd());
  if (!txn || (viewer && viewer->owner_mode())) return HA_ERR_END_OF_FILE;  // owner mode sees its row only
  for (size_t n = txn->staged(queue_.get()); staged_next_ < n;) {
    const std::string* row = txn->staged_row(queue_.get(), staged_next_++);
    if (!row) continue;  // deleted again
    payload_ = *row;
    return read_into(buf, kStagedBit | (staged_next_ - 1));
  }
  return HA_ERR_END_OF_FILE;
}

int ha_queue::rnd_pos(uchar* buf, uchar* pos) {
  q4m::RowId id = uint8korr(pos);
  if (is_staged(id)) {
    const q4m::Transaction* txn = open_transaction(ha_thd());
    const std::string* row = txn ? txn->staged_row(queue_.get(), staged_index(id)) : nullptr;
    if (!row) return HA_ERR_KEY_NOT_FOUND;
    payload_ = *row;
    return read_into(buf, id);
  }
  if (history_scan_) {  // a history row (filesort)
    auto it = std::lower_bound(history_.begin(), history_.end(), id,
                               [](const q4m::EndedRow& r, q4m::RowId want) { return r.id < want; });
    if (it == history_.end() || it->id != id) return HA_ERR_KEY_NOT_FOUND;
    return read_history(buf, *it);
  }
  if (snapshot_scan_) {  // a row of the snapshot's point (filesort, a join's buffer)
    auto it = std::lower_bound(snapshot_.begin(), snapshot_.end(), id,
                               [](const q4m::SnapshotRow& r, q4m::RowId want) { return r.location.id < want; });
    if (it == snapshot_.end() || it->location.id != id) return HA_ERR_KEY_NOT_FOUND;
    q4m::Status st = queue_->read_snapshot_row(*it, &payload_);
    return st.ok() ? read_into(buf, id) : raise(st);
  }
  bool found = false;
  q4m::Status st = queue_->read_row(id, &payload_, &found, viewer_of(ha_thd()));
  if (!st.ok()) return raise(st);
  if (!found) return HA_ERR_KEY_NOT_FOUND;  // removed since it was positioned
  return read_into(buf, id);
}

int ha_queue::read_into(uchar* buf, q4m::RowId id, const q4m::EndedRow* ended) {
  current_id_ = id;
  ConnectionState* cs = find_connection_state(ha_thd());
  // (A connection that never used a queue function has no state, and nothing asks.)
  if (cs) cs->note_row_read(ha_thd()->query_id, id, queue_.get(), ended);
  if (decode_row(table, payload_, row_id_column_, is_staged(id) ? 0 : id, buf)) return 0;
  std::string msg = "QUEUE table '" + table_label() + "': row " + std::to_string(id) + " (" +
                    std::to_string(payload_.size()) + " bytes) in " + queue_->path() +
                    " does not match the table definition";
  return raise(q4m::Status(q4m::ErrorCode::kCorrupt, msg));
}

void ha_queue::position(const uchar*) { int8store(ref, current_id_); }

int ha_queue::info(uint flag) {
  if (flag & HA_STATUS_VARIABLE) {
    stats.records = visible_rows();
    stats.deleted = 0;
  }
  if (flag & HA_STATUS_VARIABLE_EXTRA) {  // SHOW TABLE STATUS, I_S.TABLES: not per statement
    q4m::TableStats ti = queue_->info();
    stats.data_file_length = ti.file_bytes;
    stats.delete_length = ti.removed_bytes;
    uint64_t live = ti.file_bytes > ti.removed_bytes ? ti.file_bytes - ti.removed_bytes : 0;
    stats.mean_rec_length = ti.rows ? static_cast<ulong>(live / ti.rows) : 0;
  }
  return 0;
}

// COUNT(*) (HA_HAS_RECORDS).
ha_rows ha_queue::records() {
  note_if_owning_nothing(ha_thd(), table_label(), &owning_nothing_noted_in_);
  return visible_rows();
}

ha_rows ha_queue::visible_rows() {
  THD* thd = ha_thd();
  if (reads_snapshot(thd)) {  // COUNT(*) as the scan reads
    uint64_t rows = 0;
    q4m::Status st = queue_->snapshot_count(connection_state(thd).snapshot_point(), &rows);
    if (!st.ok()) {
      raise(st);
      return HA_POS_ERROR;
    }
    return rows + staged_rows();
  }
  return queue_->visible_count(viewer_of(thd)) + staged_rows();
}

// In a transaction started WITH CONSISTENT SNAPSHOT, reads see its point; a consumer in owner
// mode still reads its own row(s) (Q4M's owner mode).
bool ha_queue::reads_snapshot(THD* thd) const {
  const q4m::Consumer* viewer = viewer_of(thd);
  return in_consistent_snapshot(thd) && !(viewer && viewer->owner_mode());
}

// The rows the connection's open transaction inserted into this table (still there).
ha_rows ha_queue::staged_rows() {
  const q4m::Transaction* txn = open_transaction(ha_thd());
  const q4m::Consumer* viewer = viewer_of(ha_thd());
  if (!txn || (viewer && viewer->owner_mode())) return 0;
  ha_rows n = 0;
  for (size_t i = 0, end = txn->staged(queue_.get()); i < end; i++) n += txn->staged_row(queue_.get(), i) != nullptr;
  return n;
}

// ---- locking and statement boundaries ---------------------------------------

int ha_queue::external_lock(THD* thd, int lock_type) {
  if (lock_type == F_UNLCK) return reset();
  if (lock_type == F_WRLCK && is_update(thd)) return reject_update();
  return 0;
}

int ha_queue::start_stmt(THD* thd, thr_lock_type lock_type) {
  // Under LOCK TABLES each statement starts here instead of in external_lock().
  if (lock_type >= TL_WRITE_ALLOW_WRITE && is_update(thd)) return reject_update();
  return 0;
}

// End of statement (also under LOCK TABLES): a copy's rows not committed yet (a path that
// skipped end_bulk_insert()). The statement's result may already be set, so a failure is
// logged, not raised. Other changes are the transaction's: the server ends it.
int ha_queue::reset() {
  if (!queue_) return 0;
  bulk_insert_ = false;
  forget_unused_relay_ids();
  q4m::Status st = commit_copied_rows();
  if (!st.ok()) sql_print_error("QUEUE: end of statement on %s: %s", table_label().c_str(), st.message().c_str());
  return 0;
}

}  // namespace q4m_engine
