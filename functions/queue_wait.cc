// queue_wait(tbl [, tbl ...] [, timeout]): consume the owned row (if any), then wait for
// and take ownership of the next row of the first listed table that has one.
// queue_wait_batch(tbl, max_rows [, timeout]): the same on one table, taking up to
// max_rows rows at once.
// queue_take_dead(tbl): the same, without waiting, for the table's dead rows (MAX_DELIVERIES).
#define MYSQL_SERVER 1
#include <my_global.h>
#include <sql_class.h>
#include <item_create.h>
#include <mysql/plugin_function.h>

#include <vector>

#include "engine/connection_state.h"
#include "engine/sql_errors.h"
#include "engine/sysvars.h"
#include "engine/transactions.h"
#include "functions/function_plugins.h"
#include "functions/queue_item.h"
#include "functions/statement_yield.h"
#include "functions/table_resolver.h"
#include "functions/wait_arguments.h"

namespace q4m_functions {

namespace {

// The storage names the dropped table by its file; the user named it db.table.
void raise_dropped(const char* function, const q4m::Status& st, const std::vector<q4m::Subscription>& subs,
                   const std::vector<std::string>& labels) {
  for (size_t i = 0; i < subs.size(); i++) {
    if (st.message().find(subs[i].table->path()) != std::string::npos) {
      my_printf_error(ER_NO_SUCH_TABLE, "%s(): argument %u: table '%s' was dropped while waiting (%s)", MYF(0),
                      function, static_cast<unsigned>(i + 1), labels[i].c_str(), st.message().c_str());
      return;
    }
  }
  my_printf_error(ER_NO_SUCH_TABLE, "%s(): %s", MYF(0), function, st.message().c_str());
}

// The consumer of this connection, ready for a wait: its lease set, a KILL meant for an
// earlier statement forgotten. Null (an SQL error raised) if this statement was killed.
q4m::Consumer* consumer_for_wait(THD* thd, q4m_engine::ConnectionState& cs) {
  q4m::Consumer& consumer = cs.consumer();
  consumer.set_lease(q4m_engine::session_lease(thd));
  consumer.set_sync_removals(q4m_engine::session_sync_removals(thd));
  // In a transaction the owned row's end (before the wait) takes effect at its commit.
  bool failed = false;
  consumer.set_transaction(consumer.owner_mode() ? q4m_engine::joined_transaction_for_owned(thd, &failed) : nullptr);
  if (failed) return nullptr;
  // Forget a KILL meant for an earlier statement, then check this one's: a KILL landing
  // after the check stays pending in the consumer and ends the wait at once.
  consumer.clear_interrupt();
  if (thd_killed(thd)) {
    my_error(ER_QUERY_INTERRUPTED, MYF(0));
    return nullptr;
  }
  return &consumer;
}

// Which of the tables a kDamaged status is about (its message names the data file).
size_t damaged_table(const q4m::Status& st, const std::vector<q4m::Subscription>& subs) {
  for (size_t i = 0; i < subs.size(); i++)
    if (subs[i].table && st.message().find("file " + subs[i].table->path() + ":") != std::string::npos) return i;
  return subs.size();
}

// A failed wait's SQL error.
void raise_wait_error(const char* function, q4m_engine::ConnectionState& cs, const q4m::Status& st,
                      const std::vector<q4m::Subscription>& subs, const std::vector<std::string>& labels) {
  if (st.code() == q4m::ErrorCode::kDropped)
    raise_dropped(function, st, subs, labels);
  else if (st.code() == q4m::ErrorCode::kLeaseExpired || st.code() == q4m::ErrorCode::kRowsMoved)  // the previously owned rows
    q4m_engine::raise_lease_expired(function, cs.owned_label(), st);
  else if (st.code() == q4m::ErrorCode::kDamaged && damaged_table(st, subs) < labels.size())  // rows its file cannot give back
    q4m_engine::raise_table_error(labels[damaged_table(st, subs)], st);
  else
    q4m_engine::raise_status_error(st);
}

class Item_func_queue_wait final : public Item_queue_action {
 public:
  Item_func_queue_wait(THD* thd, List<Item>& args) : Item_queue_action(thd, args) {}

  LEX_CSTRING func_name_cstring() const override {
    static LEX_CSTRING name = {STRING_WITH_LEN("queue_wait")};
    return name;
  }
  bool fix_length_and_dec(THD*) override {
    max_length = 11;
    return false;
  }
  Item* shallow_copy(THD* thd) const override {
    return get_item_copy<Item_func_queue_wait>(thd, this);
  }

 protected:
  longlong run(THD* thd) override {
    WaitArguments wa;
    if (!parse_wait_arguments(args, arg_count, &wa)) return 0;
    std::vector<q4m::Subscription> subs;
    std::vector<std::string> labels;
    std::vector<std::pair<std::string, std::string>> names;  // db, table
    for (unsigned i = 0; i < wa.tables.size(); i++) {
      ResolvedTable t;
      TableArgument a{"queue_wait", i + 1, wa.tables[i], true, SELECT_ACL | DELETE_ACL, false, wa.charsets[i]};
      if (!resolve_table(thd, a, &t)) return 0;
      subs.push_back(std::move(t.subscription));
      labels.push_back(std::move(t.label));
      names.emplace_back(std::move(t.db), std::move(t.table));
    }
    // Creating the state before waiting also makes KILL QUERY reach kill_query().
    q4m_engine::ConnectionState& cs = q4m_engine::connection_state(thd);
    q4m::Consumer* consumer = consumer_for_wait(thd, cs);
    if (!consumer) return 0;
    int index = 0;
    const q4m::WaitYield yield = statement_yield(thd);
    q4m::Status st = consumer->wait(subs, wa.timeout, &index, yield_or_null(yield));
    if (!st.ok()) {
      raise_wait_error("queue_wait", cs, st, subs, labels);
      return 0;
    }
    if (index > 0) {
      auto& [db, table] = names[static_cast<size_t>(index - 1)];
      cs.set_owned_label(std::move(labels[static_cast<size_t>(index - 1)]), std::move(db), std::move(table));
    }
    return index;
  }
};

class Create_func_queue_wait : public Create_native_func {
 public:
  Item* create_native(THD* thd, const LEX_CSTRING*, List<Item>* args) override {
    mark_statement_side_effects(thd);
    List<Item> empty;
    return new (thd->mem_root) Item_func_queue_wait(thd, args ? *args : empty);
  }
  static Create_func_queue_wait s_singleton;
};

Create_func_queue_wait Create_func_queue_wait::s_singleton;

// Returns how many rows the connection now owns (0 on timeout).
class Item_func_queue_wait_batch final : public Item_queue_action {
 public:
  Item_func_queue_wait_batch(THD* thd, List<Item>& args) : Item_queue_action(thd, args) {}

  LEX_CSTRING func_name_cstring() const override {
    static LEX_CSTRING name = {STRING_WITH_LEN("queue_wait_batch")};
    return name;
  }
  bool fix_length_and_dec(THD*) override {
    max_length = 11;
    return false;
  }
  Item* shallow_copy(THD* thd) const override {
    return get_item_copy<Item_func_queue_wait_batch>(thd, this);
  }

 protected:
  longlong run(THD* thd) override {
    BatchWaitArguments wa;
    if (!parse_batch_wait_arguments(args, arg_count, &wa)) return 0;
    ResolvedTable t;
    TableArgument a{"queue_wait_batch", 1, wa.table, true, SELECT_ACL | DELETE_ACL, false, wa.charset};
    if (!resolve_table(thd, a, &t)) return 0;
    q4m_engine::ConnectionState& cs = q4m_engine::connection_state(thd);
    q4m::Consumer* consumer = consumer_for_wait(thd, cs);
    if (!consumer) return 0;
    size_t taken = 0;
    const q4m::WaitYield yield = statement_yield(thd);
    q4m::Status st = consumer->wait_batch(t.subscription, wa.max_rows, wa.timeout, &taken, yield_or_null(yield));
    if (!st.ok()) {
      raise_wait_error("queue_wait_batch", cs, st, {t.subscription}, {t.label});
      return 0;
    }
    if (taken > 0) cs.set_owned_label(std::move(t.label), std::move(t.db), std::move(t.table));
    return static_cast<longlong>(taken);
  }
};

class Create_func_queue_wait_batch : public Create_native_func {
 public:
  Item* create_native(THD* thd, const LEX_CSTRING*, List<Item>* args) override {
    if (!args || args->elements < 2 || args->elements > 3) {
      raise_argument_count_error("queue_wait_batch() takes 2 or 3 arguments (table, max_rows [, timeout])");
      return nullptr;
    }
    mark_statement_side_effects(thd);
    return new (thd->mem_root) Item_func_queue_wait_batch(thd, *args);
  }
  static Create_func_queue_wait_batch s_singleton;
};

Create_func_queue_wait_batch Create_func_queue_wait_batch::s_singleton;

// Returns 1 if the connection now owns a dead row of the table, 0 if it has none.
class Item_func_queue_take_dead final : public Item_queue_action {
 public:
  Item_func_queue_take_dead(THD* thd, List<Item>& args) : Item_queue_action(thd, args) {}

  LEX_CSTRING func_name_cstring() const override {
    static LEX_CSTRING name = {STRING_WITH_LEN("queue_take_dead")};
    return name;
  }
  bool fix_length_and_dec(THD*) override {
    max_length = 1;
    return false;
  }
  Item* shallow_copy(THD* thd) const override {
    return get_item_copy<Item_func_queue_take_dead>(thd, this);
  }

 protected:
  longlong run(THD* thd) override {
    ResolvedTable t;
    if (!resolve_table_argument(thd, args[0], "queue_take_dead", SELECT_ACL | DELETE_ACL, &t)) return 0;
    q4m_engine::ConnectionState& cs = q4m_engine::connection_state(thd);
    q4m::Consumer* consumer = consumer_for_wait(thd, cs);
    if (!consumer) return 0;
    bool taken = false;
    q4m::Status st = consumer->take_dead(t.subscription.table, &taken);
    if (!st.ok()) {
      raise_wait_error("queue_take_dead", cs, st, {t.subscription}, {t.label});
      return 0;
    }
    if (taken) cs.set_owned_label(std::move(t.label), std::move(t.db), std::move(t.table));
    return taken ? 1 : 0;
  }
};

class Create_func_queue_take_dead : public Create_native_func {
 public:
  Item* create_native(THD* thd, const LEX_CSTRING*, List<Item>* args) override {
    if (!args || args->elements != 1) {
      raise_argument_count_error("queue_take_dead() takes 1 argument (table)");
      return nullptr;
    }
    mark_statement_side_effects(thd);
    return new (thd->mem_root) Item_func_queue_take_dead(thd, *args);
  }
  static Create_func_queue_take_dead s_singleton;
};

Create_func_queue_take_dead Create_func_queue_take_dead::s_singleton;

}  // namespace

Plugin_function queue_wait_plugin(&Create_func_queue_wait::s_singleton);
Plugin_function queue_take_dead_plugin(&Create_func_queue_take_dead::s_singleton);
Plugin_function queue_wait_batch_plugin(&Create_func_queue_wait_batch::s_singleton);

}  // namespace q4m_functions
