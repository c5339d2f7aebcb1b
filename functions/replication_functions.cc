// queue_apply_removal(db, table, rows): what a replica runs for the removals the primary's
// binary log recorded (engine/binlog_removals.h writes the statement). It removes exactly
// the rows named, by id, checking each one's length; a row that is not there (or differs)
// fails the statement, which stops the replica's applier: a replica whose queue is not the
// primary's says so instead of removing other rows. In the applier's transaction (or the
// statement's, or at once) and logged again with the same text for this server's replicas.
#define MYSQL_SERVER 1
#include <my_global.h>
#include <sql_class.h>
#include <item_create.h>
#include <mysql/plugin_function.h>

#include <string>
#include <vector>

#include "engine/binlog_removals.h"
#include "engine/connection_state.h"
#include "engine/sql_errors.h"
#include "engine/transactions.h"
#include "functions/function_builders.h"
#include "functions/function_plugins.h"
#include "functions/queue_item.h"
#include "functions/table_resolver.h"
#include "functions/wait_arguments.h"

namespace q4m_functions {

namespace {

constexpr const char* kName = "queue_apply_removal";

class Item_func_queue_apply_removal final : public Item_queue_action {
 public:
  Item_func_queue_apply_removal(THD* thd, List<Item>& args) : Item_queue_action(thd, args) {}
  LEX_CSTRING func_name_cstring() const override {
    static LEX_CSTRING name = {STRING_WITH_LEN("queue_apply_removal")};
    return name;
  }
  bool fix_length_and_dec(THD*) override {
    max_length = 10;
    return false;
  }
  Item* shallow_copy(THD* thd) const override { return get_item_copy<Item_func_queue_apply_removal>(thd, this); }

 protected:
  longlong run(THD* thd) override {
    std::string db, name, list, error;
    if (!parse_string(args[0], kName, 1, "the database", &db) || !parse_string(args[1], kName, 2, "the table", &name) ||
        !parse_string(args[2], kName, 3, "the rows", &list))
      return 0;
    std::vector<q4m::NamedRow> rows;
    if (!q4m_engine::parse_named_rows(list, &rows, &error)) {
      my_printf_error(ER_WRONG_ARGUMENTS, "%s(): argument 3: %s", MYF(0), kName, error.c_str());
      return 0;
    }
    ResolvedTable t;
    TableArgument a{kName, 2, name, false, DELETE_ACL};
    if (!resolve_table_names(thd, a, db, name, &t)) return 0;
    if (!q4m_engine::lock_until_transaction_end(thd, t.db, t.table)) return 0;
    bool failed = false;
    q4m::Transaction* txn = q4m_engine::joined_transaction(thd, &failed);
    if (failed) return 0;
    if (!txn) txn = q4m_engine::binlogged_statement_transaction(thd);
    q4m::Status st;
    if (txn) {
      st = txn->remove_named(t.subscription.table, rows);
    } else {  // no transaction, no binary log: at once
      q4m::Transaction now(thd->thread_id);
      st = now.remove_named(t.subscription.table, rows);
      if (st.ok()) st = now.commit();
    }
    if (!st.ok()) {
      my_printf_error(q4m_engine::sql_errno_for(st.code()),
                      "%s(): table '%s': %s (this server's queue is not the one whose binary log named the "
                      "row: it was not a copy from the start, or diverged)",
                      MYF(0), kName, t.label.c_str(), st.message().c_str());
      return 0;
    }
    return static_cast<longlong>(rows.size());
  }
};

constexpr char kApplyRemovalArgs[] = "queue_apply_removal() takes 3 arguments (the database, the table, the rows)";
using Create_queue_apply_removal = Create_func_args<Item_func_queue_apply_removal, kApplyRemovalArgs, 3, 3>;

}  // namespace

Plugin_function queue_apply_removal_plugin(&Create_queue_apply_removal::s_singleton);

}  // namespace q4m_functions
