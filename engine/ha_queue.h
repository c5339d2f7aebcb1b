// ha_queue: the QUEUE storage engine's handler. A thin adapter from the server's
// handler API onto q4m::QueueTable (storage/queue_table.h); rows are encoded by
// row_codec, visibility follows the connection's Consumer (owner mode).
#pragma once
#include <my_global.h>
#include <handler.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/table/queue_table.h"
#include "engine/asked_ids.h"
#include "engine/connection_state.h"
#include "engine/copy_scan.h"

namespace q4m_engine {

class ha_queue final : public handler {
 public:
  ha_queue(handlerton* hton, TABLE_SHARE* share);
  ~ha_queue() override;

  ulonglong table_flags() const override;
  ulong index_flags(uint, uint, bool) const override { return 0; }
  // Keys are "supported" only so that create() can reject them with our own message.
  uint max_supported_keys() const override { return MAX_KEY; }
  uint max_supported_key_parts() const override { return MAX_REF_PARTS; }
  uint max_supported_key_length() const override { return 3072; }
  uint max_supported_record_length() const override { return HA_MAX_REC_LENGTH; }
  double scan_time() override { return static_cast<double>(stats.records) / 20.0 + 10; }

  int create(const char* name, TABLE* form, HA_CREATE_INFO* info) override;
  int open(const char* name, int mode, uint test_if_locked) override;
  int close() override;
  int delete_table(const char* name) override;
  int rename_table(const char* from, const char* to) override;
  int truncate() override;
  int delete_all_rows() override;
  // OPTIMIZE TABLE compacts the data file in place (queue_compact()): rows keep their ids.
  int optimize(THD* thd, HA_CHECK_OPT* check_opt) override;
  // ALTER TABLE that changes only MESSAGE_TTL (or COMMENT) keeps the data file: the rows keep
  // their insert times, ids and delivery counts. Anything else copies the rows.
  enum_alter_inplace_result check_if_supported_inplace_alter(TABLE* altered_table,
                                                             Alter_inplace_info* ha_alter_info) override;
  // The new MESSAGE_TTL applies from the ALTER on (rows past it are removed by it).
  bool commit_inplace_alter_table(TABLE* altered_table, Alter_inplace_info* ha_alter_info, bool commit) override;

  int write_row(const uchar* buf) override;
  int update_row(const uchar* old_data, const uchar* new_data) override;
  int delete_row(const uchar* buf) override;

  int rnd_init(bool scan) override;
  int rnd_end() override;
  bool backup_read(THD* thd) const;  // a dump's scan (rows in flight are seen)
  int rnd_next(uchar* buf) override;
  int rnd_pos(uchar* buf, uchar* pos) override;
  // SHOW CREATE TABLE of a table with a ROW_ID_COLUMN, or one given AUTO_INCREMENT=N:
  // AUTO_INCREMENT = the id the next row gets (at the point of a consistent snapshot: what a
  // dump restores).
  void update_create_info(HA_CREATE_INFO* info) override;
  void position(const uchar* record) override;

  int info(uint flag) override;
  ha_rows records() override;
  // HA_EXTRA_END_COPY on the new table of a copying ALTER: it takes over the old one.
  int extra(enum ha_extra_function operation) override;
  int external_lock(THD* thd, int lock_type) override;
  int start_stmt(THD* thd, thr_lock_type lock_type) override;
  int reset() override;
  const std::shared_ptr<q4m::QueueTable>& queue() const { return queue_; }
  // No THR_LOCK (as InnoDB): metadata locks cover LOCK TABLES and DDL, and the queue
  // core serializes what must be serialized (group commit, claims, ownership). A
  // table-level lock would only add a mutex shared by every statement on the table.
  uint lock_count() const override { return 0; }
  THR_LOCK_DATA** store_lock(THD*, THR_LOCK_DATA** to, enum thr_lock_type) override { return to; }
  void print_error(int error, myf errflag) override;

 protected:
  void start_bulk_insert(ha_rows rows, uint flags) override;
  int end_bulk_insert() override;

 private:
  int copy_row(q4m::RowId asked);    // encoded_, a copying ALTER's row
  q4m::Status commit_copied_rows();  // the buffered rows of copy_row()
  q4m::RowHistory copied_history();  // of the row a copying ALTER writes into its new table
  int take_over_copied_table();      // the end of a copying ALTER's copy
  void forget_unused_relay_ids();
  int reject_update();
  int read_into(uchar* buf, q4m::RowId id, const q4m::EndedRow* ended = nullptr);
  // The connection's own uncommitted rows (engine/transactions.h), after the table's.
  static constexpr q4m::RowId kStagedBit = q4m::RowId(1) << 63;
  static bool is_staged(q4m::RowId id) { return (id & kStagedBit) != 0; }
  static size_t staged_index(q4m::RowId id) { return static_cast<size_t>(id & ~kStagedBit); }
  int next_staged(uchar* buf);
  ha_rows staged_rows();
  ha_rows visible_rows();  // what COUNT(*) and the optimizer's statistics count
  int raise(const q4m::Status& st);
  std::string table_label() const;  // "db.table" for messages

  std::shared_ptr<q4m::QueueTable> queue_;

  // Scan state. payload_ holds the current row: BLOB fields of the record point into it.
  q4m::RowId scan_after_ = 0;
  bool copy_scan_ = false;  // copying ALTER: every row, owned ones included
  bool copy_history_ = false;  // ... and the rows' histories go with them (ALTER without ORDER BY)
  int64_t reorder_noted_in_ = -1;  // the statement told that ORDER BY loses the histories
  int64_t owning_nothing_noted_in_ = -1;  // the statement told it owns nothing (owner_mode_note.h)
  CopyScan copy_;
  q4m::RowId current_id_ = 0;
  size_t staged_next_ = 0;  // the scan reached the transaction's rows: the next one to read
  // A scan in a transaction started WITH CONSISTENT SNAPSHOT: the rows of its point.
  bool snapshot_scan_ = false;
  std::vector<q4m::SnapshotRow> snapshot_;
  size_t snapshot_next_ = 0;
  int next_in_snapshot(uchar* buf);
  bool reads_snapshot(THD* thd) const;
  // A scan with queue_scan_history() in its WHERE: the table's history rows, in id order
  // (HISTORY_RETENTION; read from the file they were in when the scan started).
  bool history_scan_ = false;
  std::vector<q4m::EndedRow> history_;
  std::shared_ptr<q4m::DataFile> history_file_;
  size_t history_next_ = 0;
  int next_in_history(uchar* buf);
  int read_history(uchar* buf, const q4m::EndedRow& row);
  // A scan in the statement that took rows under receipts (queue_receive) reads those.
  bool received_scan_ = false;
  bool next_received(q4m::RowId* id);
  int read_received(uchar* buf, q4m::RowId id);
  std::string payload_;

  bool bulk_insert_ = false;  // a multi-row insert is under way
  // The new table of a copying ALTER (opened as "#sql-..."): its rows are buffered, each
  // with its history and the id it asks for (empty until one asks).
  bool copy_target_ = false;
  std::vector<std::string> copied_rows_;
  std::vector<q4m::RowHistory> copied_histories_;
  std::vector<q4m::RowId> copied_asked_;
  size_t copied_bytes_ = 0;
  // ROW_ID_COLUMN: its position (-1: none).
  int row_id_column_ = -1;
  AskedIds asks_;
  int check_asked_id(q4m::RowId asked);
  std::string encoded_;
  // The ids declared by queue_set_srcid(), taken from the connection at the statement's
  // first row; the first relay_ids_used_ have their rows staged.
  std::optional<PendingRelay> relaying_;
  size_t relay_ids_used_ = 0;
  bool has_pending_relay() const;
  bool take_pending_relay();
  int stage_relayed_row(q4m::Transaction& txn);

  bool error_raised_ = false;  // an SQL error was already raised for the returned code
};

// The queue behind an open handler of a QUEUE table (its share's db_type() is ours).
inline std::shared_ptr<q4m::QueueTable> queue_of(handler* h) {
  return static_cast<ha_queue*>(h)->queue();
}

}  // namespace q4m_engine
