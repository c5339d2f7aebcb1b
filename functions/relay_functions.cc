// queue_set_srcid(source_id, mode, rowid [, rowid ...]): relay dedup for q4m-forward.
// Declares that this connection's next inserted row is row `rowid` of source `source_id`;
// with several row ids (increasing), that its next INSERT's first rows are those rows.
#define MYSQL_SERVER 1
#include <my_global.h>
#include <sql_class.h>
#include <item_create.h>
#include <mysql/plugin_function.h>

#include <string>

#include "engine/connection_state.h"
#include "functions/function_plugins.h"
#include "functions/queue_item.h"
#include "functions/wait_arguments.h"  // kMaxBatchRows: a relayed batch is at most one queue_wait_batch()

namespace q4m_functions {

namespace {

void raise(unsigned position, const std::string& what) {
  my_printf_error(ER_WRONG_ARGUMENTS, "queue_set_srcid(): argument %u: %s", MYF(0), position,
                  what.c_str());
}

class Item_func_queue_set_srcid final : public Item_queue_action {
 public:
  Item_func_queue_set_srcid(THD* thd, List<Item>& args) : Item_queue_action(thd, args) {}

  LEX_CSTRING func_name_cstring() const override {
    static LEX_CSTRING name = {STRING_WITH_LEN("queue_set_srcid")};
    return name;
  }
  bool fix_length_and_dec(THD*) override {
    max_length = 1;
    return false;
  }
  Item* shallow_copy(THD* thd) const override {
    return get_item_copy<Item_func_queue_set_srcid>(thd, this);
  }

 protected:
  longlong run(THD* thd) override {
    q4m_engine::PendingRelay relay;
    longlong source = args[0]->val_int();
    if (args[0]->null_value || source < 0 || source > 0xffffffffLL) {
      raise(1, "source_id must be an integer from 0 to 4294967295");
      return 0;
    }
    relay.source_id = static_cast<uint32_t>(source);

    StringBuffer<16> buf;
    String* mode = args[1]->val_str(&buf);
    if (!mode || args[1]->null_value || mode->length() != 1 ||
        (mode->ptr()[0] != 'a' && mode->ptr()[0] != 'w')) {
      raise(2, "mode must be 'a' (normal) or 'w' (reset the source's last row id)");
      return 0;
    }
    relay.reset = mode->ptr()[0] == 'w';

    relay.source_rowids.reserve(arg_count - 2);
    for (unsigned i = 2; i < arg_count; i++) {
      longlong rowid = args[i]->val_int();
      if (args[i]->null_value || (args[i]->unsigned_flag ? rowid == 0 : rowid <= 0)) {
        raise(i + 1, "rowid must be a row id (a positive integer)");
        return 0;
      }
      const uint64_t id = static_cast<uint64_t>(rowid);
      if (!relay.source_rowids.empty() && id <= relay.source_rowids.back()) {
        raise(i + 1, "row ids must increase (" + std::to_string(id) + " after " +
                         std::to_string(relay.source_rowids.back()) + ")");
        return 0;
      }
      relay.source_rowids.push_back(id);
    }
    q4m_engine::connection_state(thd).set_pending_relay(std::move(relay));
    return 1;
  }
};

class Create_func_queue_set_srcid : public Create_native_func {
 public:
  Item* create_native(THD* thd, const LEX_CSTRING*, List<Item>* args) override {
    if (!args || args->elements < 3 || args->elements > 2 + kMaxBatchRows) {
      raise_argument_count_error("queue_set_srcid() takes 3 to 10002 arguments (source_id, mode, rowid [, rowid ...])");
      return nullptr;
    }
    mark_statement_side_effects(thd);
    return new (thd->mem_root) Item_func_queue_set_srcid(thd, *args);
  }
  static Create_func_queue_set_srcid s_singleton;
};

Create_func_queue_set_srcid Create_func_queue_set_srcid::s_singleton;

}  // namespace

Plugin_function queue_set_srcid_plugin(&Create_func_queue_set_srcid::s_singleton);

}  // namespace q4m_functions
