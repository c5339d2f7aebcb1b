// Receipts (core/table/receipts.h): consumers not bound to one connection.
//   queue_receive(tbl, lease [, max_rows [, timeout]])  take rows under receipts: how many
//   queue_receipt()                                      the receipt of the row being read
//   queue_end_receipt(tbl, receipts)                     remove them (in the transaction)
//   queue_abort_receipt(tbl, receipts [, delay])         give them back, as queue_abort(delay)
//   queue_renew_receipt(tbl, receipts, lease)            extend their leases
// `receipts` is one receipt or a comma-separated list; a call changes all of them or none.
#define MYSQL_SERVER 1
#include <my_global.h>
#include <sql_class.h>
#include <item_create.h>
#include <mysql/plugin_function.h>

#include <string>
#include <vector>

#include "core/table/receipts.h"
#include "engine/connection_state.h"
#include "engine/sql_errors.h"
#include "engine/sysvars.h"
#include "engine/transactions.h"
#include "functions/function_builders.h"
#include "functions/function_plugins.h"
#include "functions/queue_item.h"
#include "functions/read_only_guard.h"
#include "functions/statement_yield.h"
#include "functions/table_resolver.h"
#include "functions/wait_arguments.h"

namespace q4m_functions {

namespace {

constexpr double kMaxTimeoutSeconds = 2147483647.0;

// A failure of a call on `label` ("db.q"): the core's message with the function and table.
longlong raise_receipt_error(const char* function, const std::string& label, const q4m::Status& st) {
  if (st.code() == q4m::ErrorCode::kDropped || st.code() == q4m::ErrorCode::kInterrupted) {
    q4m_engine::raise_status_error(st);
    return 0;
  }
  my_printf_error(q4m_engine::sql_errno_for(st.code()), "%s(): table '%s': %s%s", MYF(0), function, label.c_str(),
                  st.message().c_str(),
                  st.code() == q4m::ErrorCode::kLeaseExpired || st.code() == q4m::ErrorCode::kInvalid
                      ? ": nothing was changed"
                      : "");
  return 0;
}

// The table argument (a condition allowed only for queue_receive) of `function`.
bool receipts_table(THD* thd, Item* arg, const char* function, bool condition, privilege_t privileges,
                    ResolvedTable* out) {
  if (!condition) return resolve_table_argument(thd, arg, function, privileges, out);
  StringBuffer<256> buf;
  String* s = arg->val_str(&buf);
  if (!s || arg->null_value) {
    my_printf_error(ER_WRONG_ARGUMENTS, "%s(): argument 1: table name is NULL", MYF(0), function);
    return false;
  }
  const std::string text(s->ptr(), s->length());
  TableArgument a{function, 1, text, true, privileges, false, s->charset()};
  return resolve_table(thd, a, out);
}

// queue_receive(tbl, lease [, max_rows [, timeout]]): how many rows were taken (0 on timeout).
class Item_func_queue_receive final : public Item_queue_action {
 public:
  Item_func_queue_receive(THD* thd, List<Item>& args) : Item_queue_action(thd, args) {}
  LEX_CSTRING func_name_cstring() const override {
    static LEX_CSTRING name = {STRING_WITH_LEN("queue_receive")};
    return name;
  }
  bool fix_length_and_dec(THD*) override {
    max_length = 11;
    return false;
  }
  Item* shallow_copy(THD* thd) const override { return get_item_copy<Item_func_queue_receive>(thd, this); }

 protected:
  longlong run(THD* thd) override {
    const char* fn = "queue_receive";
    ResolvedTable t;
    if (!receipts_table(thd, args[0], fn, true, SELECT_ACL | DELETE_ACL, &t)) return 0;
    std::chrono::milliseconds lease(0), timeout(60000);
    uint64_t max_rows = 1;
    if (!parse_seconds(args[1], SecondsRule{fn, 2, "lease", false, q4m_engine::kMaxLeaseSeconds}, &lease)) return 0;
    if (arg_count >= 3 && !parse_whole_number(args[2], {fn, 3, "max_rows", 1, kMaxBatchRows}, &max_rows)) return 0;
    if (arg_count >= 4 && !parse_seconds(args[3], SecondsRule{fn, 4, "timeout", true, kMaxTimeoutSeconds}, &timeout))
      return 0;
    q4m_engine::ConnectionState& cs = q4m_engine::connection_state(thd);
    if (cs.consumer().owner_mode()) {
      my_printf_error(ER_WRONG_ARGUMENTS,
                      "%s(): table '%s': this connection is in owner mode (queue_wait()): end it with "
                      "queue_end() or queue_abort() before taking rows under receipts",
                      MYF(0), fn, t.label.c_str());
      return 0;
    }
    if (refused_on_read_only(thd, fn, t.label)) return 0;
    // The statement reads the rows it took (none if it took none).
    cs.set_received({thd->query_id, t.subscription.table, {}});
    if (thd_killed(thd)) {
      my_error(ER_QUERY_INTERRUPTED, MYF(0));
      return 0;
    }
    // KILL QUERY reaches the connection's own consumer, not the receipts' holders: the wait
    // looks for it as it looks for DDL waiting on the statement's tables.
    q4m::WaitYield yield = statement_yield(thd);
    yield.every = std::chrono::milliseconds(100);
    yield.should_yield = [thd, ddl = yield.should_yield] { return thd_killed(thd) || (ddl && ddl()); };
    std::vector<q4m::Receipts::Received> rows;
    q4m::Status st =
        q4m::Receipts::of(t.subscription.table)->receive(t.subscription, max_rows, lease, timeout, &yield, &rows);
    if (!st.ok()) return raise_receipt_error(fn, t.label, st);
    q4m_engine::ConnectionState::ReceivedRows received{thd->query_id, t.subscription.table, {}};
    for (auto& r : rows) received.rows.emplace_back(r.id, std::move(r.receipt));
    cs.set_received(std::move(received));
    if (rows.empty() && thd_killed(thd)) {
      my_error(ER_QUERY_INTERRUPTED, MYF(0));
      return 0;
    }
    return static_cast<longlong>(rows.size());
  }
};

// queue_receipt(): the receipt of the row the statement's scan reads, if queue_receive() took
// it in this statement; else NULL.
class Item_func_queue_receipt final : public Item_str_func {
 public:
  explicit Item_func_queue_receipt(THD* thd) : Item_str_func(thd) {}
  LEX_CSTRING func_name_cstring() const override {
    static LEX_CSTRING name = {STRING_WITH_LEN("queue_receipt")};
    return name;
  }
  bool fix_length_and_dec(THD*) override {
    collation.set(&my_charset_utf8mb4_bin, DERIVATION_COERCIBLE, MY_REPERTOIRE_ASCII);
    fix_char_length(60);
    set_maybe_null();
    return false;
  }
  // Per row (as queue_rowid(): RAND_TABLE_BIT), and the connection gets its state before
  // the scan, so that the handler notes the rows it reads.
  bool fix_fields(THD* thd, Item** ref) override {
    if (Item_str_func::fix_fields(thd, ref)) return true;
    q4m_engine::connection_state(thd);
    used_tables_cache |= RAND_TABLE_BIT;
    return false;
  }
  void update_used_tables() override {
    Item_str_func::update_used_tables();
    used_tables_cache |= RAND_TABLE_BIT;
  }
  bool const_item() const override { return false; }
  bool check_vcol_func_processor(void* arg) override {
    return mark_unsupported_function(func_name(), "()", arg, VCOL_IMPOSSIBLE);
  }
  String* val_str(String* str) override {
    THD* thd = current_thd;
    const std::string* receipt = nullptr;
    if (q4m_engine::ConnectionState* cs = q4m_engine::find_connection_state(thd)) {
      const auto* received = cs->received_in(thd->query_id);
      const q4m::RowId id = cs->row_read_in(thd->query_id);
      q4m::QueueTable* table = cs->table_read_in(thd->query_id);
      if (received && id && q4m::same_queue(table, received->table.get()))
        for (const auto& row : received->rows)
          if (row.first == id) receipt = &row.second;
    }
    null_value = !receipt || str->copy(receipt->data(), receipt->size(), &my_charset_utf8mb4_bin);
    return null_value ? nullptr : str;
  }
  Item* shallow_copy(THD* thd) const override { return get_item_copy<Item_func_queue_receipt>(thd, this); }
};

enum class ByReceipt { kEnd, kAbort, kRenew };

// queue_end_receipt / queue_abort_receipt / queue_renew_receipt: how many receipts it acted on.
template <ByReceipt kAction>
class Item_func_by_receipt final : public Item_queue_action {
 public:
  Item_func_by_receipt(THD* thd, List<Item>& args) : Item_queue_action(thd, args) {}
  LEX_CSTRING func_name_cstring() const override {
    static LEX_CSTRING end = {STRING_WITH_LEN("queue_end_receipt")};
    static LEX_CSTRING abort = {STRING_WITH_LEN("queue_abort_receipt")};
    static LEX_CSTRING renew = {STRING_WITH_LEN("queue_renew_receipt")};
    return kAction == ByReceipt::kEnd ? end : kAction == ByReceipt::kAbort ? abort : renew;
  }
  bool fix_length_and_dec(THD*) override {
    max_length = 11;
    return false;
  }
  Item* shallow_copy(THD* thd) const override { return get_item_copy<Item_func_by_receipt>(thd, this); }

 protected:
  longlong run(THD* thd) override {
    const char* fn = func_name();
    ResolvedTable t;
    // Acting on a receipt ends, gives back or keeps a row another session took: as a DELETE
    // of it would (queue_release_owned's rule).
    if (!receipts_table(thd, args[0], fn, false, DELETE_ACL, &t)) return 0;
    std::string list;
    if (!parse_string(args[1], fn, 2, "receipts", &list)) return 0;
    std::vector<std::string> receipts;
    if (q4m::Status s = q4m::Receipts::split(list, kMaxBatchRows, &receipts); !s.ok()) {
      my_printf_error(ER_WRONG_ARGUMENTS, "%s(): argument 2: %s", MYF(0), fn, s.message().c_str());
      return 0;
    }
    std::chrono::milliseconds seconds(0);
    if (kAction == ByReceipt::kAbort && arg_count >= 3 &&
        !parse_seconds(args[2], SecondsRule{fn, 3, "delay", true, q4m_engine::kMaxLeaseSeconds}, &seconds))
      return 0;
    if (kAction == ByReceipt::kRenew &&
        !parse_seconds(args[2], SecondsRule{fn, 3, "lease", false, q4m_engine::kMaxLeaseSeconds}, &seconds))
      return 0;
    std::shared_ptr<q4m::Receipts> book = q4m::Receipts::of(t.subscription.table);
    size_t done = 0;
    q4m::Status st;
    if (kAction == ByReceipt::kAbort) {
      st = book->abort(receipts, seconds, &done);
    } else if (kAction == ByReceipt::kRenew) {
      st = book->renew(receipts, seconds, &done);
    } else {
      if (refused_on_read_only(thd, fn, t.label)) return 0;
      // In a transaction (or a statement the binary log records) the rows go at its commit,
      // logged by id like every removal; DDL on the table waits for it meanwhile.
      if (!q4m_engine::lock_until_transaction_end(thd, t.db, t.table) ||
          !q4m_engine::change_in_transaction(
              thd, [&](q4m::Transaction& txn) { return book->end(receipts, txn, &done); }, &st))
        return 0;
    }
    if (!st.ok()) return raise_receipt_error(fn, t.label, st);
    return static_cast<longlong>(done);
  }
};

constexpr char kReceiveArgs[] = "queue_receive() takes 2 to 4 arguments (table, lease [, max_rows [, timeout]])";
constexpr char kReceiptArgs[] = "queue_receipt() takes no arguments";
constexpr char kEndArgs[] = "queue_end_receipt() takes 2 arguments (table, receipts)";
constexpr char kAbortArgs[] = "queue_abort_receipt() takes 2 or 3 arguments (table, receipts [, delay])";
constexpr char kRenewArgs[] = "queue_renew_receipt() takes 3 arguments (table, receipts, lease)";

}  // namespace

Plugin_function queue_receive_plugin(&Create_func_args<Item_func_queue_receive, kReceiveArgs, 2, 4>::s_singleton);
Plugin_function queue_receipt_plugin(&Create_func_no_args<Item_func_queue_receipt, kReceiptArgs>::s_singleton);
Plugin_function queue_end_receipt_plugin(
    &Create_func_args<Item_func_by_receipt<ByReceipt::kEnd>, kEndArgs, 2, 2>::s_singleton);
Plugin_function queue_abort_receipt_plugin(
    &Create_func_args<Item_func_by_receipt<ByReceipt::kAbort>, kAbortArgs, 2, 3>::s_singleton);
Plugin_function queue_renew_receipt_plugin(
    &Create_func_args<Item_func_by_receipt<ByReceipt::kRenew>, kRenewArgs, 3, 3>::s_singleton);

}  // namespace q4m_functions
