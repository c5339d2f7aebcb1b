// queue_apply_subscribe, queue_apply_unsubscribe and queue_apply_sub_end: what a replica
// runs for a subscription change its primary's binary log recorded (engine/subscription_binlog.h
// writes the statements). Each commits at once, outside the applier's transaction, except
// queue_apply_sub_end inside one (its primary's end was in a transaction, whose event group it
// stands in): that commits with the applier's transaction. Each is logged again for this
// server's replicas. Each is a no-op if
// applied already (an applier that crashed before its position was saved applies the event
// again): the rows named are ended and removed if they are still there. A replica never
// decides a subscription's row itself; these name what the primary decided.
#define MYSQL_SERVER 1
#include <my_global.h>
#include <sql_class.h>
#include <item_create.h>
#include <mysql/plugin_function.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "core/table/subscriptions.h"
#include "engine/sql_errors.h"
#include "engine/transactions.h"
#include "engine/subscription_binlog.h"
#include "functions/function_builders.h"
#include "functions/function_plugins.h"
#include "functions/queue_item.h"
#include "functions/table_resolver.h"
#include "functions/wait_arguments.h"

namespace q4m_functions {

namespace {

// The part all three share: database, table, subscription name; the table's subscriptions.
class Item_queue_apply_subscription : public Item_queue_action {
 public:
  Item_queue_apply_subscription(THD* thd, List<Item>& args, const char* name, privilege_t privileges)
      : Item_queue_action(thd, args), name_(name), privileges_(privileges) {}
  LEX_CSTRING func_name_cstring() const override { return {name_, strlen(name_)}; }
  bool fix_length_and_dec(THD*) override {
    max_length = 10;
    return false;
  }

 protected:
  // Reads the arguments from 4 on; false if an error was raised.
  virtual bool parse_more(const std::string& label) = 0;
  virtual q4m::Status apply(q4m::Subscriptions& subs, const std::string& subscription) = 0;

  bool parse_ids(unsigned position, const char* what, const std::string& label, std::vector<q4m::RowId>* ids) {
    std::string text, error;
    if (!parse_string(args[position - 1], name_, position, what, &text)) return false;
    if (!q4m_engine::parse_row_ids(text, ids, &error)) {
      my_printf_error(ER_WRONG_ARGUMENTS, "%s(): table '%s', argument %u: %s", MYF(0), name_, label.c_str(), position,
                      error.c_str());
      return false;
    }
    return true;
  }

  longlong run(THD* thd) override {
    std::string db, table, subscription;
    if (!parse_string(args[0], name_, 1, "the database", &db) || !parse_string(args[1], name_, 2, "the table", &table))
      return 0;
    // The subscription's name ('' in queue_apply_sub_end: rows removed after a drop).
    if (args[2]->is_null()) {
      my_printf_error(ER_WRONG_ARGUMENTS, "%s(): argument 3 (the subscription) is NULL", MYF(0), name_);
      return 0;
    }
    if (!parse_string(args[2], name_, 3, "the subscription", &subscription)) return 0;
    if (!parse_more(db + "." + table)) return 0;
    ResolvedTable t;
    TableArgument a{name_, 2, table, false, privileges_};
    if (!resolve_table_names(thd, a, db, table, &t)) return 0;
    q4m::Subscriptions* subs = t.subscription.table->subscriptions();
    if (!subs) {
      my_printf_error(ER_WRONG_ARGUMENTS, "%s(): table '%s' cannot have subscriptions", MYF(0), name_, t.label.c_str());
      return 0;
    }
    locked_db_ = t.db;
    locked_table_ = t.table;
    q4m::Status st = apply(*subs, subscription);
    if (!st.ok()) {
      if (thd->is_error()) return 0;  // raised already (joining the transaction)
      my_printf_error(q4m_engine::sql_errno_for(st.code()),
                      "%s(): table '%s': %s (this server's subscriptions are not the ones whose binary log named "
                      "it: it was not a copy from the start, or diverged)",
                      MYF(0), name_, t.label.c_str(), st.message().c_str());
      return 0;
    }
    return 1;
  }

  const char* name_;
  std::string locked_db_, locked_table_;  // the table, for a transaction's metadata lock

 private:
  const privilege_t privileges_;
};

constexpr const char* kSubscribe = "queue_apply_subscribe";

class Item_func_queue_apply_subscribe final : public Item_queue_apply_subscription {
 public:
  Item_func_queue_apply_subscribe(THD* thd, List<Item>& args)
      : Item_queue_apply_subscription(thd, args, kSubscribe, ALTER_ACL | SELECT_ACL) {}
  Item* shallow_copy(THD* thd) const override { return get_item_copy<Item_func_queue_apply_subscribe>(thd, this); }

 protected:
  bool parse_more(const std::string& label) override {
    std::string start;
    if (!args[3]->is_null() && !parse_string(args[3], name_, 4, "the condition", &condition_)) return false;
    if (!parse_string(args[4], name_, 5, "the start row id", &start)) return false;
    char* end = nullptr;
    start_ = strtoull(start.c_str(), &end, 10);
    if (start.empty() || *end || start_ == 0) {
      my_printf_error(ER_WRONG_ARGUMENTS, "%s(): table '%s', argument 5: '%s' is not a row id", MYF(0), name_,
                      label.c_str(), start.c_str());
      return false;
    }
    return true;
  }
  q4m::Status apply(q4m::Subscriptions& subs, const std::string& subscription) override {
    return subs.apply_subscribe(subscription, condition_, start_);
  }

 private:
  std::string condition_;
  q4m::RowId start_ = 0;
};

constexpr const char* kUnsubscribe = "queue_apply_unsubscribe";

class Item_func_queue_apply_unsubscribe final : public Item_queue_apply_subscription {
 public:
  Item_func_queue_apply_unsubscribe(THD* thd, List<Item>& args)
      : Item_queue_apply_subscription(thd, args, kUnsubscribe, ALTER_ACL) {}
  Item* shallow_copy(THD* thd) const override { return get_item_copy<Item_func_queue_apply_unsubscribe>(thd, this); }

 protected:
  bool parse_more(const std::string&) override { return true; }
  q4m::Status apply(q4m::Subscriptions& subs, const std::string& subscription) override {
    return subs.apply_unsubscribe(subscription);
  }
};

constexpr const char* kSubEnd = "queue_apply_sub_end";

class Item_func_queue_apply_sub_end final : public Item_queue_apply_subscription {
 public:
  Item_func_queue_apply_sub_end(THD* thd, List<Item>& args)
      : Item_queue_apply_subscription(thd, args, kSubEnd, DELETE_ACL) {}
  Item* shallow_copy(THD* thd) const override { return get_item_copy<Item_func_queue_apply_sub_end>(thd, this); }

 protected:
  bool parse_more(const std::string& label) override {
    return parse_ids(4, "the rows ended", label, &ended_) && parse_ids(5, "the rows removed", label, &removed_);
  }
  // Inside the applier's transaction (its primary ended the rows in one: the statement stands
  // in that transaction's event group) the ends take effect at its commit; else at once.
  q4m::Status apply(q4m::Subscriptions& subs, const std::string& subscription) override {
    THD* thd = current_thd;
    bool failed = false;
    q4m::Transaction* txn = q4m_engine::joined_transaction(thd, &failed);
    if (failed) return q4m::Status(q4m::ErrorCode::kInvalid, "the QUEUE engine cannot join this transaction");
    if (!txn) return subs.apply_ends(subscription, ended_, removed_);
    if (!q4m_engine::lock_until_transaction_end(thd, locked_db_, locked_table_))
      return q4m::Status(q4m::ErrorCode::kInvalid, "the table's metadata lock");
    return subs.apply_ends_in(*txn, subscription, ended_, removed_);
  }

 private:
  std::vector<q4m::RowId> ended_, removed_;
};

constexpr char kSubscribeArgs[] =
    "queue_apply_subscribe() takes 5 arguments (the database, the table, the subscription, its condition, its start "
    "row id)";
using Create_queue_apply_subscribe = Create_func_args<Item_func_queue_apply_subscribe, kSubscribeArgs, 5, 5>;
constexpr char kUnsubscribeArgs[] =
    "queue_apply_unsubscribe() takes 3 arguments (the database, the table, the subscription)";
using Create_queue_apply_unsubscribe = Create_func_args<Item_func_queue_apply_unsubscribe, kUnsubscribeArgs, 3, 3>;
constexpr char kSubEndArgs[] =
    "queue_apply_sub_end() takes 5 arguments (the database, the table, the subscription, the rows it ended, the rows "
    "removed)";
using Create_queue_apply_sub_end = Create_func_args<Item_func_queue_apply_sub_end, kSubEndArgs, 5, 5>;

}  // namespace

Plugin_function queue_apply_subscribe_plugin(&Create_queue_apply_subscribe::s_singleton);
Plugin_function queue_apply_unsubscribe_plugin(&Create_queue_apply_unsubscribe::s_singleton);
Plugin_function queue_apply_sub_end_plugin(&Create_queue_apply_sub_end::s_singleton);

}  // namespace q4m_functions
