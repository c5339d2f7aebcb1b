// queue_expire(db, table): removes the rows of db.table that MESSAGE_TTL's expiry claimed (at
// most kMaxExpiredRowsPerStatement, oldest first: one statement stays a few hundred KB in the
// binary log), in the statement's transaction, and returns how many. With the binary log on
// the engine's own connection runs it (engine/expiry_session.h), so that an expiry commits
// like a consumption, two-phase, logged as the removal of those rows by id
// (queue_apply_removal): a replica removes the same rows in the same place of the log instead
// of expiring by its own clock. Without the binary log each table removes its expired rows
// itself, and this finds none to remove.
#define MYSQL_SERVER 1
#include <my_global.h>
#include <sql_class.h>
#include <item_create.h>
#include <mysql/plugin_function.h>

#include <string>

#include "core/table/transaction.h"
#include "engine/expiry_session.h"
#include "engine/sql_errors.h"
#include "engine/transactions.h"
#include "functions/function_builders.h"
#include "functions/queue_item.h"
#include "functions/table_resolver.h"
#include "functions/wait_arguments.h"

namespace q4m_functions {

namespace {

constexpr const char* kExpire = "queue_expire";

class Item_func_queue_expire final : public Item_queue_action {
 public:
  Item_func_queue_expire(THD* thd, List<Item>& args) : Item_queue_action(thd, args) {}
  LEX_CSTRING func_name_cstring() const override { return {kExpire, strlen(kExpire)}; }
  Item* shallow_copy(THD* thd) const override { return get_item_copy<Item_func_queue_expire>(thd, this); }
  bool fix_length_and_dec(THD*) override {
    max_length = 10;
    return false;
  }

 protected:
  longlong run(THD* thd) override {
    std::string db, name;
    if (!parse_string(args[0], kExpire, 1, "the database", &db) ||
        !parse_string(args[1], kExpire, 2, "the table", &name))
      return 0;
    ResolvedTable t;
    TableArgument a{kExpire, 2, name, false, DELETE_ACL};
    if (!resolve_table_names(thd, a, db, name, &t)) return 0;
    if (!q4m_engine::lock_until_transaction_end(thd, t.db, t.table)) return 0;
    size_t count = 0;
    q4m::Status st;
    if (!q4m_engine::change_in_transaction(
            thd,
            [&](q4m::Transaction& txn) {
              return txn.remove_expired(t.subscription.table, q4m_engine::kMaxExpiredRowsPerStatement, &count);
            },
            &st))
      return 0;
    if (!st.ok()) {
      q4m_engine::raise_table_error(t.label, st);
      return 0;
    }
    return static_cast<longlong>(count);
  }
};

constexpr char kExpireArgs[] = "queue_expire() takes 2 arguments (the database, the table)";
using Create_queue_expire = Create_func_args<Item_func_queue_expire, kExpireArgs, 2, 2>;

}  // namespace

Plugin_function queue_expire_plugin(&Create_queue_expire::s_singleton);

}  // namespace q4m_functions
