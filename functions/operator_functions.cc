// The operators' functions (the monitor's dashboard calls them with the operator's own
// account, so the server checks each one's privileges):
//   queue_release_owned(tbl, rowid)     give a row another connection owns back to the queue
//   queue_redrive_dead(tbl [, max_rows]) put dead rows (MAX_DELIVERIES) back in the queue
//   queue_purge_dead(tbl [, max_rows])   remove dead rows
//   queue_allowed(tbl, 'function')       1 if this account may call that function on tbl
#define MYSQL_SERVER 1
#include <my_global.h>
#include <sql_class.h>
#include <sql_parse.h>
#include <item_create.h>
#include <mysql/plugin_function.h>

#include <string>

#include "engine/sql_errors.h"
#include "engine/binlog_statements.h"
#include "engine/transactions.h"
#include "core/table/transaction.h"
#include "functions/function_builders.h"
#include "functions/function_plugins.h"
#include "functions/queue_item.h"
#include "functions/table_resolver.h"
#include "functions/wait_arguments.h"

namespace q4m_functions {

namespace {

// What each operator function needs on the table. Releasing a row takes work away from its
// consumer and redriving re-queues a message: as deleting a row and inserting it again.
struct Requirement {
  const char* function;
  privilege_t privileges;
};
const Requirement kRequirements[] = {
    {"queue_release_owned", DELETE_ACL},
    {"queue_redrive_dead", INSERT_ACL | DELETE_ACL},
    {"queue_purge_dead", DELETE_ACL},
};

privilege_t required(const char* function) {
  for (const Requirement& r : kRequirements)
    if (strcmp(r.function, function) == 0) return r.privileges;
  return NO_ACL;
}

constexpr uint64_t kAllRows = UINT64_MAX >> 1;

// An optional max_rows argument at `position`: how many dead rows at most (default: all).
bool max_rows_argument(Item** args, unsigned count, unsigned position, const char* function, uint64_t* out) {
  *out = kAllRows;
  return count < position || parse_whole_number(args[position - 1], {function, position, "max_rows", 0, kAllRows}, out);
}

longlong status_result(const q4m::Status& st, size_t rows) {
  if (!st.ok()) {
    q4m_engine::raise_status_error(st);
    return 0;
  }
  return static_cast<longlong>(rows);
}

// queue_release_owned(tbl, rowid): returns how many rows went back (0: not owned now).
class Item_func_queue_release_owned final : public Item_queue_action {
 public:
  Item_func_queue_release_owned(THD* thd, List<Item>& args) : Item_queue_action(thd, args) {}
  LEX_CSTRING func_name_cstring() const override {
    static LEX_CSTRING name = {STRING_WITH_LEN("queue_release_owned")};
    return name;
  }
  bool fix_length_and_dec(THD*) override {
    max_length = 10;
    return false;
  }
  Item* shallow_copy(THD* thd) const override { return get_item_copy<Item_func_queue_release_owned>(thd, this); }

 protected:
  longlong run(THD* thd) override {
    ResolvedTable t;
    if (!resolve_table_argument(thd, args[0], "queue_release_owned", required("queue_release_owned"), &t)) return 0;
    uint64_t id = 0;
    if (!parse_whole_number(args[1], {"queue_release_owned", 2, "row id", 1, UINT64_MAX >> 1}, &id)) return 0;
    size_t released = 0;
    q4m::Status st = t.subscription.table->release_owned(id, thd->thread_id, &released);
    return status_result(st, released);
  }
};

// queue_redrive_dead(tbl [, max_rows]) / queue_purge_dead(tbl [, max_rows]): how many rows.
enum class DeadAction { kRedrive, kPurge };

template <DeadAction kAction>
class Item_func_dead_rows final : public Item_queue_action {
 public:
  Item_func_dead_rows(THD* thd, List<Item>& args) : Item_queue_action(thd, args) {}
  LEX_CSTRING func_name_cstring() const override {
    static LEX_CSTRING redrive = {STRING_WITH_LEN("queue_redrive_dead")};
    static LEX_CSTRING purge = {STRING_WITH_LEN("queue_purge_dead")};
    return kAction == DeadAction::kRedrive ? redrive : purge;
  }
  bool fix_length_and_dec(THD*) override {
    max_length = 20;
    return false;
  }
  Item* shallow_copy(THD* thd) const override { return get_item_copy<Item_func_dead_rows>(thd, this); }

 protected:
  longlong run(THD* thd) override {
    const char* fn = func_name();
    ResolvedTable t;
    if (!resolve_table_argument(thd, args[0], fn, required(fn), &t)) return 0;
    uint64_t max = 0;
    if (!max_rows_argument(args, arg_count, 2, fn, &max)) return 0;
    size_t rows = 0;
    // A subscription's dead rows: its own state (a purge is its end, committed and logged as
    // its queue_end() is), not the table's rows.
    if (q4m_engine::binlog_records(thd) && !t.names_subscription) {
      // At the commit of the statement's (or the open) transaction, in the binary log: a redrive's
      // copies get their ids there, in the log's order, as a replica gives them.
      bool failed = false;
      q4m::Transaction* txn = q4m_engine::consumer_transaction(thd, &failed);
      if (!txn || !q4m_engine::lock_until_transaction_end(thd, t.db, t.table)) return 0;
      const q4m::Status st = kAction == DeadAction::kRedrive ? txn->redrive_dead(t.subscription.table, max, &rows)
                                                             : txn->remove_dead(t.subscription.table, max, &rows);
      return status_result(st, rows);
    }
    q4m::Status st = kAction == DeadAction::kRedrive ? t.subscription.table->redrive_dead(max, &rows)
                                                     : t.subscription.table->purge_dead(max, &rows);
    return status_result(st, rows);
  }
};

// queue_allowed(tbl, 'queue_purge_dead'): 1 if this account holds what that function needs
// on the table (as the function itself would check it), else 0. Needs SELECT on the table.
class Item_func_queue_allowed final : public Item_queue_int_func {
 public:
  Item_func_queue_allowed(THD* thd, List<Item>& args) : Item_queue_int_func(thd, args) {}
  LEX_CSTRING func_name_cstring() const override {
    static LEX_CSTRING name = {STRING_WITH_LEN("queue_allowed")};
    return name;
  }
  bool fix_length_and_dec(THD*) override {
    max_length = 1;
    set_maybe_null();
    return false;
  }
  Item* shallow_copy(THD* thd) const override { return get_item_copy<Item_func_queue_allowed>(thd, this); }
  longlong val_int() override {
    THD* thd = current_thd;
    null_value = true;
    StringBuffer<64> buf;
    String* s = args[1]->val_str(&buf);
    const std::string function = s && !args[1]->null_value ? std::string(s->ptr(), s->length()) : "NULL";
    const privilege_t need = required(function.c_str());
    if (need == NO_ACL) {
      my_printf_error(ER_WRONG_ARGUMENTS,
                      "queue_allowed(): argument 2: '%s' is not a function queue_allowed() knows (expected "
                      "queue_release_owned, queue_redrive_dead or queue_purge_dead)",
                      MYF(0), function.c_str());
      return 0;
    }
    ResolvedTable t;
    // SELECT, as any function that looks at the table: without it, whether the table exists
    // is not this account's to learn (the server answers 1142 there too).
    if (!resolve_table_argument(thd, args[0], "queue_allowed", SELECT_ACL, &t)) return 0;
    LEX_CSTRING db = {t.db.c_str(), t.db.size()}, table = {t.table.c_str(), t.table.size()};
    TABLE_LIST tl;
    tl.init_one_table(&db, &table, nullptr, TL_READ);
    null_value = false;
    return check_table_access(thd, need, &tl, false, 1, true) ? 0 : 1;
  }
};

constexpr char kReleaseArgs[] = "queue_release_owned() takes 2 arguments (the table, the row id)";
constexpr char kRedriveArgs[] = "queue_redrive_dead() takes 1 or 2 arguments (the table [, max_rows])";
constexpr char kPurgeArgs[] = "queue_purge_dead() takes 1 or 2 arguments (the table [, max_rows])";
constexpr char kAllowedArgs[] = "queue_allowed() takes 2 arguments (the table, a function name)";

using Create_queue_release_owned = Create_func_args<Item_func_queue_release_owned, kReleaseArgs, 2, 2>;
using Create_queue_redrive_dead = Create_func_args<Item_func_dead_rows<DeadAction::kRedrive>, kRedriveArgs, 1, 2>;
using Create_queue_purge_dead = Create_func_args<Item_func_dead_rows<DeadAction::kPurge>, kPurgeArgs, 1, 2>;
using Create_queue_allowed = Create_func_args<Item_func_queue_allowed, kAllowedArgs, 2, 2>;

}  // namespace

Plugin_function queue_release_owned_plugin(&Create_queue_release_owned::s_singleton);
Plugin_function queue_redrive_dead_plugin(&Create_queue_redrive_dead::s_singleton);
Plugin_function queue_purge_dead_plugin(&Create_queue_purge_dead::s_singleton);
Plugin_function queue_allowed_plugin(&Create_queue_allowed::s_singleton);

}  // namespace q4m_functions
