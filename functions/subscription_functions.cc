// queue_subscribe(tbl, name [, condition] [, 'oldest'|'newest']) and
// queue_unsubscribe(tbl, name): a table's subscriptions (core/table/subscriptions.h).
// Consumers name one as 'tbl@name' in queue_wait() and the other queue functions.
#define MYSQL_SERVER 1
#include <my_global.h>
#include <sql_class.h>
#include <item_create.h>
#include <mysql/plugin_function.h>

#include <string>

#include "core/table/subscriptions.h"
#include "engine/sql_errors.h"
#include "functions/function_plugins.h"
#include "functions/queue_item.h"
#include "functions/table_resolver.h"
#include "functions/wait_arguments.h"

namespace q4m_functions {

namespace {

bool lower_equals(const std::string& a, const char* b) {
  std::string l;
  for (char c : a) l += static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  return l == b;
}

// The table (ALTER on it: a subscription changes what the table keeps), its subscriptions.
bool resolve_for_ddl(THD* thd, const char* function, const std::string& table, const std::string& condition,
                     ResolvedTable* out) {
  // With a condition: compiled here (its columns must exist and be readable), as queue_wait
  // compiles it, so that a subscription is never created with a condition that fails later.
  const std::string text = condition.empty() ? table : table + ":" + condition;
  TableArgument a{function, 1, text, !condition.empty(), ALTER_ACL | SELECT_ACL};
  a.text_charset = &my_charset_utf8mb4_bin;
  return resolve_table(thd, a, out);
}

class Item_func_queue_subscribe final : public Item_queue_action {
 public:
  Item_func_queue_subscribe(THD* thd, List<Item>& args) : Item_queue_action(thd, args) {}
  LEX_CSTRING func_name_cstring() const override {
    static LEX_CSTRING name = {STRING_WITH_LEN("queue_subscribe")};
    return name;
  }
  bool fix_length_and_dec(THD*) override {
    max_length = 1;
    return false;
  }
  Item* shallow_copy(THD* thd) const override { return get_item_copy<Item_func_queue_subscribe>(thd, this); }

 protected:
  longlong run(THD* thd) override {
    std::string table, name, condition, start = "newest";
    if (!parse_string(args[0], "queue_subscribe", 1, "table name", &table)) return 0;
    if (!parse_string(args[1], "queue_subscribe", 2, "subscription name", &name)) return 0;
    if (arg_count == 3) {
      std::string third;
      if (!args[2]->is_null() && !parse_string(args[2], "queue_subscribe", 3, "condition or start", &third)) return 0;
      if (lower_equals(third, "oldest") || lower_equals(third, "newest"))
        start = third;
      else
        condition = third;
    } else if (arg_count == 4) {
      if (!args[2]->is_null() && !parse_string(args[2], "queue_subscribe", 3, "condition", &condition)) return 0;
      if (!parse_string(args[3], "queue_subscribe", 4, "start ('oldest' or 'newest')", &start)) return 0;
    }
    const bool oldest = lower_equals(start, "oldest");
    if (!oldest && !lower_equals(start, "newest")) {
      my_printf_error(ER_WRONG_ARGUMENTS, "queue_subscribe(): argument 4: '%s' is not 'oldest' or 'newest'", MYF(0),
                      start.c_str());
      return 0;
    }
    if (table.find('@') != std::string::npos || table.find(':') != std::string::npos) {
      my_printf_error(ER_WRONG_ARGUMENTS,
                      "queue_subscribe(): argument 1: '%s': name the table alone (the subscription is argument 2, "
                      "its condition argument 3)",
                      MYF(0), table.c_str());
      return 0;
    }
    ResolvedTable t;
    if (!resolve_for_ddl(thd, "queue_subscribe", table, condition, &t)) return 0;
    q4m::Subscriptions* subs = t.subscription.table->subscriptions();
    if (!subs) {
      my_printf_error(ER_WRONG_ARGUMENTS, "queue_subscribe(): table '%s' cannot have subscriptions", MYF(0),
                      t.label.c_str());
      return 0;
    }
    q4m::Status st = subs->create(name, condition, oldest);
    if (!st.ok()) {
      my_printf_error(ER_WRONG_ARGUMENTS, "queue_subscribe(): table '%s': %s", MYF(0), t.label.c_str(),
                      st.message().c_str());
      return 0;
    }
    return 1;
  }
};

class Item_func_queue_unsubscribe final : public Item_queue_action {
 public:
  Item_func_queue_unsubscribe(THD* thd, List<Item>& args) : Item_queue_action(thd, args) {}
  LEX_CSTRING func_name_cstring() const override {
    static LEX_CSTRING name = {STRING_WITH_LEN("queue_unsubscribe")};
    return name;
  }
  bool fix_length_and_dec(THD*) override {
    max_length = 1;
    return false;
  }
  Item* shallow_copy(THD* thd) const override { return get_item_copy<Item_func_queue_unsubscribe>(thd, this); }

 protected:
  longlong run(THD* thd) override {
    std::string table, name;
    if (!parse_string(args[0], "queue_unsubscribe", 1, "table name", &table)) return 0;
    if (!parse_string(args[1], "queue_unsubscribe", 2, "subscription name", &name)) return 0;
    ResolvedTable t;
    if (!resolve_for_ddl(thd, "queue_unsubscribe", table, "", &t)) return 0;
    q4m::Subscriptions* subs = t.subscription.table->subscriptions();
    q4m::Status st = subs ? subs->drop(name) : q4m::Status(q4m::ErrorCode::kNotFound, "no subscription");
    if (st.code() == q4m::ErrorCode::kNotFound) {
      my_printf_error(ER_WRONG_ARGUMENTS, "queue_unsubscribe(): table '%s' has no subscription '%s'", MYF(0),
                      t.label.c_str(), name.c_str());
      return 0;
    }
    if (!st.ok()) {
      q4m_engine::raise_status_error(st);
      return 0;
    }
    return 1;
  }
};

class Create_queue_subscribe : public Create_native_func {
 public:
  Item* create_native(THD* thd, const LEX_CSTRING*, List<Item>* args) override {
    if (!args || args->elements < 2 || args->elements > 4) {
      raise_argument_count_error(
          "queue_subscribe() takes 2 to 4 arguments (the table, the subscription's name, [its condition], "
          "['oldest' or 'newest'])");
      return nullptr;
    }
    mark_statement_side_effects(thd);
    return new (thd->mem_root) Item_func_queue_subscribe(thd, *args);
  }
  static Create_queue_subscribe s_singleton;
};
Create_queue_subscribe Create_queue_subscribe::s_singleton;

class Create_queue_unsubscribe : public Create_native_func {
 public:
  Item* create_native(THD* thd, const LEX_CSTRING*, List<Item>* args) override {
    if (!args || args->elements != 2) {
      raise_argument_count_error("queue_unsubscribe() takes 2 arguments (the table, the subscription's name)");
      return nullptr;
    }
    mark_statement_side_effects(thd);
    return new (thd->mem_root) Item_func_queue_unsubscribe(thd, *args);
  }
  static Create_queue_unsubscribe s_singleton;
};
Create_queue_unsubscribe Create_queue_unsubscribe::s_singleton;

}  // namespace

Plugin_function queue_subscribe_plugin(&Create_queue_subscribe::s_singleton);
Plugin_function queue_unsubscribe_plugin(&Create_queue_unsubscribe::s_singleton);

}  // namespace q4m_functions
