// queue_scan_rowid() and queue_scan_state(): about the queue row the statement is reading,
// in any scan (queue_rowid() answers for owned rows only). For browsing a queue from SQL:
//   SELECT queue_scan_rowid(), queue_scan_state(), q.* FROM q
//     WHERE queue_scan_state() = 'dead' AND queue_scan_rowid() > 1000 LIMIT 50;
// NULL where no queue row is being read (outside a scan, or after it ended: an ORDER BY
// evaluates them then), as queue_rowid() does for a batch.
#define MYSQL_SERVER 1
#include <my_global.h>
#include <sql_class.h>
#include <item_create.h>
#include <mysql/plugin_function.h>

#include "engine/connection_state.h"
#include "functions/function_plugins.h"
#include "functions/function_builders.h"
#include "functions/queue_item.h"

namespace q4m_functions {

namespace {

// The statement's current row: its table and id, or false.
bool scanned_row(THD* thd, q4m::QueueTable** table, q4m::RowId* id) {
  q4m_engine::ConnectionState* cs = q4m_engine::find_connection_state(thd);
  if (!cs) return false;
  *table = cs->table_read_in(thd->query_id);
  *id = cs->row_read_in(thd->query_id);
  return *table != nullptr && *id != 0;
}

// The history row the statement is reading (queue_scan_history()), or null.
const q4m::EndedRow* ended_row(THD* thd) {
  q4m_engine::ConnectionState* cs = q4m_engine::find_connection_state(thd);
  return cs ? cs->ended_row_read_in(thd->query_id) : nullptr;
}

// Per row: bound to no table, yet not constant (as queue_rowid(): RAND_TABLE_BIT), and the
// connection gets its state before the scan, so that the handler notes the rows it reads.
template <typename Base>
class ScanItem : public Base {
 public:
  using Base::Base;
  bool fix_fields(THD* thd, Item** ref) override {
    if (Base::fix_fields(thd, ref)) return true;
    q4m_engine::connection_state(thd);
    this->used_tables_cache |= RAND_TABLE_BIT;
    return false;
  }
  void update_used_tables() override {
    Base::update_used_tables();
    this->used_tables_cache |= RAND_TABLE_BIT;
  }
  bool const_item() const override { return false; }
  bool check_vcol_func_processor(void* arg) override {
    return mark_unsupported_function(this->func_name(), "()", arg, VCOL_IMPOSSIBLE);
  }
};

class Item_func_queue_scan_rowid final : public ScanItem<Item_int_func> {
 public:
  explicit Item_func_queue_scan_rowid(THD* thd) : ScanItem<Item_int_func>(thd) {}
  LEX_CSTRING func_name_cstring() const override {
    static LEX_CSTRING name = {STRING_WITH_LEN("queue_scan_rowid")};
    return name;
  }
  bool fix_length_and_dec(THD*) override {
    unsigned_flag = true;
    max_length = 20;
    set_maybe_null();
    return false;
  }
  const Type_handler* type_handler() const override { return &type_handler_ulonglong; }
  longlong val_int() override {
    q4m::QueueTable* table = nullptr;
    q4m::RowId id = 0;
    null_value = !scanned_row(current_thd, &table, &id);
    return null_value ? 0 : static_cast<longlong>(id);
  }
  Item* shallow_copy(THD* thd) const override { return get_item_copy<Item_func_queue_scan_rowid>(thd, this); }
};

// 'queued' (handed out next), 'delayed' (not before a time), 'dead' (MAX_DELIVERIES),
// 'owned' (by this connection); NULL if gone since it was read.
class Item_func_queue_scan_state final : public ScanItem<Item_str_func> {
 public:
  explicit Item_func_queue_scan_state(THD* thd) : ScanItem<Item_str_func>(thd) {}
  LEX_CSTRING func_name_cstring() const override {
    static LEX_CSTRING name = {STRING_WITH_LEN("queue_scan_state")};
    return name;
  }
  bool fix_length_and_dec(THD*) override {
    collation.set(&my_charset_utf8mb4_bin, DERIVATION_COERCIBLE, MY_REPERTOIRE_ASCII);
    fix_char_length(16);
    set_maybe_null();
    return false;
  }
  String* val_str(String* str) override {
    THD* thd = current_thd;
    q4m::QueueTable* table = nullptr;
    q4m::RowId id = 0;
    const char* state = nullptr;
    std::string ended;
    if (const q4m::EndedRow* r = ended_row(thd)) {
      ended = std::string("ended:") + q4m::end_kind_name(r->kind);
      state = ended.c_str();
    } else if (scanned_row(thd, &table, &id)) {
      switch (table->row_view(id, q4m_engine::viewer_of(thd))) {
        case q4m::QueueTable::RowView::kQueued: state = "queued"; break;
        case q4m::QueueTable::RowView::kDelayed: state = "delayed"; break;
        case q4m::QueueTable::RowView::kDead: state = "dead"; break;
        case q4m::QueueTable::RowView::kOwnedByViewer: state = "owned"; break;
        case q4m::QueueTable::RowView::kHeld: state = "held"; break;
        case q4m::QueueTable::RowView::kGone: break;
      }
    }
    null_value = state == nullptr || str->copy(state, strlen(state), &my_charset_utf8mb4_bin);
    return null_value ? nullptr : str;
  }
  Item* shallow_copy(THD* thd) const override { return get_item_copy<Item_func_queue_scan_state>(thd, this); }
};

// queue_scan_history(): in a statement's WHERE, its scan of a QUEUE table reads the table's
// history rows (HISTORY_RETENTION) instead of its queue. 1 for a history row, else 0 (a scan
// that started before the statement was prepared again reads the queue: it finds nothing).
class Item_func_queue_scan_history final : public ScanItem<Item_int_func> {
 public:
  explicit Item_func_queue_scan_history(THD* thd) : ScanItem<Item_int_func>(thd) {}
  LEX_CSTRING func_name_cstring() const override {
    static LEX_CSTRING name = {STRING_WITH_LEN("queue_scan_history")};
    return name;
  }
  bool fix_fields(THD* thd, Item** ref) override {
    if (ScanItem<Item_int_func>::fix_fields(thd, ref)) return true;
    q4m_engine::connection_state(thd).scan_history_in(thd->query_id);
    return false;
  }
  bool fix_length_and_dec(THD*) override {
    max_length = 1;
    return false;
  }
  const Type_handler* type_handler() const override { return &type_handler_slong; }
  longlong val_int() override {
    THD* thd = current_thd;
    q4m_engine::connection_state(thd).scan_history_in(thd->query_id);  // (a prepared statement's next run)
    null_value = false;
    return ended_row(thd) != nullptr;
  }
  Item* shallow_copy(THD* thd) const override { return get_item_copy<Item_func_queue_scan_history>(thd, this); }
};

// queue_scan_ended_at(): when the history row being read ended (ms since the epoch, UTC);
// queue_scan_deliveries(): how often it had been handed out. NULL for any other row.
class Item_func_queue_scan_ended_at final : public ScanItem<Item_int_func> {
 public:
  explicit Item_func_queue_scan_ended_at(THD* thd) : ScanItem<Item_int_func>(thd) {}
  LEX_CSTRING func_name_cstring() const override {
    static LEX_CSTRING name = {STRING_WITH_LEN("queue_scan_ended_at")};
    return name;
  }
  bool fix_length_and_dec(THD*) override {
    unsigned_flag = true;
    max_length = 20;
    set_maybe_null();
    return false;
  }
  const Type_handler* type_handler() const override { return &type_handler_ulonglong; }
  longlong val_int() override {
    const q4m::EndedRow* r = ended_row(current_thd);
    null_value = r == nullptr;
    return r ? static_cast<longlong>(r->end_ms) : 0;
  }
  Item* shallow_copy(THD* thd) const override { return get_item_copy<Item_func_queue_scan_ended_at>(thd, this); }
};

class Item_func_queue_scan_deliveries final : public ScanItem<Item_int_func> {
 public:
  explicit Item_func_queue_scan_deliveries(THD* thd) : ScanItem<Item_int_func>(thd) {}
  LEX_CSTRING func_name_cstring() const override {
    static LEX_CSTRING name = {STRING_WITH_LEN("queue_scan_deliveries")};
    return name;
  }
  bool fix_length_and_dec(THD*) override {
    max_length = 5;
    set_maybe_null();
    return false;
  }
  const Type_handler* type_handler() const override { return &type_handler_slong; }
  longlong val_int() override {
    const q4m::EndedRow* r = ended_row(current_thd);
    null_value = r == nullptr;
    return r ? r->deliveries : 0;
  }
  Item* shallow_copy(THD* thd) const override { return get_item_copy<Item_func_queue_scan_deliveries>(thd, this); }
};

constexpr char kScanHistoryArgs[] = "queue_scan_history() takes no arguments";
constexpr char kScanEndedAtArgs[] = "queue_scan_ended_at() takes no arguments";
constexpr char kScanDeliveriesArgs[] = "queue_scan_deliveries() takes no arguments";
constexpr char kScanRowidArgs[] = "queue_scan_rowid() takes no arguments";
constexpr char kScanStateArgs[] = "queue_scan_state() takes no arguments";

}  // namespace

Plugin_function queue_scan_rowid_plugin(&Create_func_no_args<Item_func_queue_scan_rowid, kScanRowidArgs>::s_singleton);
Plugin_function queue_scan_state_plugin(&Create_func_no_args<Item_func_queue_scan_state, kScanStateArgs>::s_singleton);

}  // namespace q4m_functions

namespace q4m_functions {
Plugin_function queue_scan_history_plugin(
    &Create_func_no_args<Item_func_queue_scan_history, kScanHistoryArgs>::s_singleton);
Plugin_function queue_scan_ended_at_plugin(
    &Create_func_no_args<Item_func_queue_scan_ended_at, kScanEndedAtArgs>::s_singleton);
Plugin_function queue_scan_deliveries_plugin(
    &Create_func_no_args<Item_func_queue_scan_deliveries, kScanDeliveriesArgs>::s_singleton);
}  // namespace q4m_functions
