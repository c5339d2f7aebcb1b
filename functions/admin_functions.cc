// queue_compact(tbl) and queue_stats(tbl): per-table maintenance and counters.
#define MYSQL_SERVER 1
#include <my_global.h>
#include <sql_class.h>
#include <item_create.h>
#include <mysql/plugin_function.h>

#include <string>

#include "engine/sql_errors.h"
#include "functions/function_plugins.h"
#include "functions/queue_item.h"
#include "functions/stats_json.h"
#include "functions/table_resolver.h"

namespace q4m_functions {

namespace {

class Item_func_queue_compact final : public Item_queue_action {
 public:
  Item_func_queue_compact(THD* thd, Item* table) : Item_queue_action(thd, table) {}
  LEX_CSTRING func_name_cstring() const override {
    static LEX_CSTRING name = {STRING_WITH_LEN("queue_compact")};
    return name;
  }
  bool fix_length_and_dec(THD*) override {
    max_length = 1;
    return false;
  }
  Item* shallow_copy(THD* thd) const override {
    return get_item_copy<Item_func_queue_compact>(thd, this);
  }

 protected:
  longlong run(THD* thd) override {
    ResolvedTable t;
    // Like OPTIMIZE TABLE: rewriting the file needs SELECT and INSERT, and DROP or ALTER
    // wait until it is done (the metadata lock is held until `t` goes away).
    if (!resolve_table_argument(thd, args[0], "queue_compact", SELECT_ACL | INSERT_ACL, &t, true)) return 0;
    q4m::Status st = t.subscription.table->compact();
    if (st.code() == q4m::ErrorCode::kDropped) {  // not expected with the lock held: still say what happened
      my_printf_error(ER_NO_SUCH_TABLE, "queue_compact(): argument 1: table '%s' was dropped during compaction (%s)",
                      MYF(0), t.label.c_str(), st.message().c_str());
      return 0;
    }
    if (!st.ok()) {
      q4m_engine::raise_status_error(st);
      return 0;
    }
    return 1;
  }
};

class Item_func_queue_stats final : public Item_str_func {
 public:
  Item_func_queue_stats(THD* thd, Item* table) : Item_str_func(thd, table) {}
  LEX_CSTRING func_name_cstring() const override {
    static LEX_CSTRING name = {STRING_WITH_LEN("queue_stats")};
    return name;
  }
  bool const_item() const override { return false; }
  bool check_vcol_func_processor(void* arg) override {
    return mark_unsupported_function(func_name(), "()", arg, VCOL_IMPOSSIBLE);
  }
  bool fix_length_and_dec(THD*) override {
    collation.set(&my_charset_utf8mb4_bin, DERIVATION_COERCIBLE, MY_REPERTOIRE_ASCII);
    fix_char_length(4096);
    set_maybe_null();
    return false;
  }
  String* val_str(String* str) override {
    THD* thd = current_thd;
    ResolvedTable t;
    if (!resolve_table_argument(thd, args[0], "queue_stats", SELECT_ACL, &t)) {
      null_value = true;
      return nullptr;
    }
    std::string json = stats_json(t.label, *t.subscription.table);
    null_value = str->copy(json.data(), json.size(), &my_charset_utf8mb4_bin);
    return null_value ? nullptr : str;
  }
  Item* shallow_copy(THD* thd) const override {
    return get_item_copy<Item_func_queue_stats>(thd, this);
  }
};

template <typename ItemT, const char* Message>
class Create_func_one_table : public Create_native_func {
 public:
  Item* create_native(THD* thd, const LEX_CSTRING*, List<Item>* args) override {
    if (!args || args->elements != 1) {
      raise_argument_count_error(Message);
      return nullptr;
    }
    mark_statement_side_effects(thd);
    return new (thd->mem_root) ItemT(thd, args->head());
  }
  static Create_func_one_table s_singleton;
};

template <typename ItemT, const char* Message>
Create_func_one_table<ItemT, Message> Create_func_one_table<ItemT, Message>::s_singleton;

constexpr char kCompactArgs[] = "queue_compact() takes 1 argument (the table)";
constexpr char kStatsArgs[] = "queue_stats() takes 1 argument (the table)";

using Create_queue_compact = Create_func_one_table<Item_func_queue_compact, kCompactArgs>;
using Create_queue_stats = Create_func_one_table<Item_func_queue_stats, kStatsArgs>;

}  // namespace

Plugin_function queue_compact_plugin(&Create_queue_compact::s_singleton);
Plugin_function queue_stats_plugin(&Create_queue_stats::s_singleton);

}  // namespace q4m_functions
