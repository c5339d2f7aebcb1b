// queue_end(), queue_abort(), queue_rowid(), queue_delivery_count(), queue_renew_lease(): the
// owner-mode functions without a table.
#define MYSQL_SERVER 1
#include <my_global.h>
#include <sql_class.h>
#include <item_create.h>
#include <mysql/plugin_function.h>

#include "engine/connection_state.h"
#include "engine/sql_errors.h"
#include "engine/sysvars.h"
#include "engine/transactions.h"
#include "functions/function_plugins.h"
#include "functions/function_builders.h"
#include "functions/queue_item.h"
#include "functions/read_only_guard.h"
#include "functions/wait_arguments.h"

namespace q4m_functions {

void raise_argument_count_error(const char* message) {
  my_printf_error(ER_WRONG_PARAMCOUNT_TO_NATIVE_FCT, "%s", MYF(0), message);
}

namespace {

// What an owner-mode action of `function` answers: 1, or 0 with the SQL error for st raised
// (not owning a row, an expired lease, anything else).
longlong owner_action_result(const char* function, const q4m_engine::ConnectionState* cs, const q4m::Status& st) {
  if (st.code() == q4m::ErrorCode::kNotOwner) {
    my_printf_error(ER_WRONG_ARGUMENTS, "%s(): this connection does not own a row", MYF(0), function);
    return 0;
  }
  if (st.code() == q4m::ErrorCode::kLeaseExpired || st.code() == q4m::ErrorCode::kRowsMoved) {
    q4m_engine::raise_lease_expired(function, cs->owned_label(), st);
    return 0;
  }
  if (!st.ok()) {
    q4m_engine::raise_status_error(st);
    return 0;
  }
  return 1;
}

// queue_end(): remove the owned row, leave owner mode.
class Item_func_queue_end final : public Item_queue_action {
 public:
  explicit Item_func_queue_end(THD* thd) : Item_queue_action(thd) {}

  LEX_CSTRING func_name_cstring() const override {
    static LEX_CSTRING name = {STRING_WITH_LEN("queue_end")};
    return name;
  }
  bool fix_length_and_dec(THD*) override {
    max_length = 1;
    return false;
  }
  Item* shallow_copy(THD* thd) const override {
    return get_item_copy<Item_func_queue_end>(thd, this);
  }

 protected:
  longlong run(THD* thd) override {
    q4m_engine::ConnectionState* cs = q4m_engine::find_connection_state(thd);
    if (cs && cs->consumer().owner_mode()) {
      if (refused_on_read_only(thd, func_name(), cs->owned_label())) return 0;
      cs->consumer().set_sync_removals(q4m_engine::session_sync_removals(thd));
      // In a transaction the removal takes effect at its commit.
      bool failed = false;
      cs->consumer().set_transaction(q4m_engine::joined_transaction_for_owned(thd, &failed));
      if (failed) return 0;
    }
    q4m::Status st = cs ? cs->consumer().end() : q4m::Status(q4m::ErrorCode::kNotOwner, "");
    return owner_action_result(func_name(), cs, st);
  }
};

// queue_abort([delay]): return the owned row(s) to the queue, leave owner mode; with a delay
// in seconds, the rows are handed out again only once it has passed (a retry backoff).
class Item_func_queue_abort final : public Item_queue_action {
 public:
  Item_func_queue_abort(THD* thd, List<Item>& args) : Item_queue_action(thd, args) {}

  LEX_CSTRING func_name_cstring() const override {
    static LEX_CSTRING name = {STRING_WITH_LEN("queue_abort")};
    return name;
  }
  bool fix_length_and_dec(THD*) override {
    max_length = 1;
    return false;
  }
  Item* shallow_copy(THD* thd) const override {
    return get_item_copy<Item_func_queue_abort>(thd, this);
  }

 protected:
  longlong run(THD* thd) override {
    std::chrono::milliseconds delay(0);
    if (arg_count == 1 &&
        !parse_seconds(args[0], SecondsRule{"queue_abort", 1, "delay", true, q4m_engine::kMaxLeaseSeconds}, &delay))
      return 0;
    q4m_engine::ConnectionState* cs = q4m_engine::find_connection_state(thd);
    q4m::Status st = cs ? cs->consumer().abort(delay) : q4m::Status(q4m::ErrorCode::kNotOwner, "");
    return owner_action_result(func_name(), cs, st);
  }
};

// A number about the owned row, NULL outside owner mode; no side effects.
// queue_rowid(): its id. queue_delivery_count(): how often it has been handed out.
// With a batch owned: the row the statement is reading from the table; NULL after its scan
// ended (an ORDER BY evaluates them then); the lowest row in a statement that reads none.
enum class OwnedRowValue { kRowid, kDeliveryCount };

template <OwnedRowValue kValue>
class Item_func_owned_row_value final : public Item_queue_int_func {
 public:
  explicit Item_func_owned_row_value(THD* thd) : Item_queue_int_func(thd) {}

  LEX_CSTRING func_name_cstring() const override {
    static LEX_CSTRING rowid = {STRING_WITH_LEN("queue_rowid")};
    static LEX_CSTRING deliveries = {STRING_WITH_LEN("queue_delivery_count")};
    return kValue == OwnedRowValue::kRowid ? rowid : deliveries;
  }
  bool fix_length_and_dec(THD*) override {
    unsigned_flag = true;
    max_length = 20;
    set_maybe_null();
    return false;
  }
  // Like RAND(): bound to no table, yet not constant, so a WHERE using them is evaluated for
  // each row read, not once before the scan (a batch's rows differ).
  bool fix_fields(THD* thd, Item** ref) override {
    if (Item_queue_int_func::fix_fields(thd, ref)) return true;
    used_tables_cache |= RAND_TABLE_BIT;
    return false;
  }
  void update_used_tables() override {
    Item_queue_int_func::update_used_tables();
    used_tables_cache |= RAND_TABLE_BIT;
  }
  const Type_handler* type_handler() const override { return &type_handler_ulonglong; }
  longlong val_int() override {
    THD* thd = current_thd;
    q4m_engine::ConnectionState* cs = q4m_engine::find_connection_state(thd);
    uint64_t v = 0;  // 0 = not in owner mode for both
    if (cs) {
      const q4m::Consumer& c = cs->consumer();
      q4m::RowId id = c.owned_rowid();
      if (c.owned_count() > 1 && cs->read_rows_in(thd->query_id)) id = cs->row_read_in(thd->query_id);
      const uint32_t deliveries = c.delivery_count_of(id);  // 0: not a row it owns
      v = kValue == OwnedRowValue::kRowid ? (deliveries ? id : 0) : deliveries;
    }
    null_value = v == 0;
    return static_cast<longlong>(v);
  }
  Item* shallow_copy(THD* thd) const override {
    return get_item_copy<Item_func_owned_row_value>(thd, this);
  }
};

// queue_renew_lease([seconds]): the owned row's lease now runs out `seconds` from now
// (default: the session's queue_lease_timeout), whether or not it had one.
class Item_func_queue_renew_lease final : public Item_queue_action {
 public:
  Item_func_queue_renew_lease(THD* thd, List<Item>& args) : Item_queue_action(thd, args) {}

  LEX_CSTRING func_name_cstring() const override {
    static LEX_CSTRING name = {STRING_WITH_LEN("queue_renew_lease")};
    return name;
  }
  bool fix_length_and_dec(THD*) override {
    max_length = 1;
    return false;
  }
  Item* shallow_copy(THD* thd) const override {
    return get_item_copy<Item_func_queue_renew_lease>(thd, this);
  }

 protected:
  longlong run(THD* thd) override {
    std::chrono::milliseconds lease = q4m_engine::session_lease(thd);
    if (arg_count == 1) {
      if (!parse_seconds(args[0], SecondsRule{"queue_renew_lease", 1, "lease", false, q4m_engine::kMaxLeaseSeconds},
                         &lease))
        return 0;
    } else if (lease.count() <= 0) {
      my_printf_error(ER_WRONG_ARGUMENTS,
                      "queue_renew_lease(): no lease given, and queue_lease_timeout is 0: pass the "
                      "lease in seconds",
                      MYF(0));
      return 0;
    }
    q4m_engine::ConnectionState* cs = q4m_engine::find_connection_state(thd);
    q4m::Status st = cs ? cs->consumer().renew_lease(lease) : q4m::Status(q4m::ErrorCode::kNotOwner, "");
    return owner_action_result(func_name(), cs, st);
  }
};

// Builder for the functions with one optional argument; `Message` is the wrong-count error.
template <typename ItemT, const char* Message>
class Create_func_optional_arg : public Create_native_func {
 public:
  Item* create_native(THD* thd, const LEX_CSTRING*, List<Item>* args) override {
    if (args && args->elements > 1) {
      raise_argument_count_error(Message);
      return nullptr;
    }
    mark_statement_side_effects(thd);
    List<Item> none;
    return new (thd->mem_root) ItemT(thd, args ? *args : none);
  }
  static Create_func_optional_arg s_singleton;
};

template <typename ItemT, const char* Message>
Create_func_optional_arg<ItemT, Message> Create_func_optional_arg<ItemT, Message>::s_singleton;

constexpr char kRenewLeaseArgs[] = "queue_renew_lease() takes 0 or 1 argument (the lease in seconds)";
constexpr char kAbortArgs[] =
    "queue_abort() takes 0 or 1 argument (a delay in seconds before the row is handed out again)";
using Create_queue_renew_lease = Create_func_optional_arg<Item_func_queue_renew_lease, kRenewLeaseArgs>;
using Create_queue_abort = Create_func_optional_arg<Item_func_queue_abort, kAbortArgs>;

constexpr char kEndArgs[] = "queue_end() takes no arguments";
constexpr char kRowidArgs[] = "queue_rowid() takes no arguments";
constexpr char kDeliveryCountArgs[] = "queue_delivery_count() takes no arguments";

using Create_queue_end = Create_func_no_args<Item_func_queue_end, kEndArgs>;
using Create_queue_rowid = Create_func_no_args<Item_func_owned_row_value<OwnedRowValue::kRowid>, kRowidArgs>;
using Create_queue_delivery_count =
    Create_func_no_args<Item_func_owned_row_value<OwnedRowValue::kDeliveryCount>, kDeliveryCountArgs>;

}  // namespace

Plugin_function queue_end_plugin(&Create_queue_end::s_singleton);
Plugin_function queue_abort_plugin(&Create_queue_abort::s_singleton);
Plugin_function queue_rowid_plugin(&Create_queue_rowid::s_singleton);
Plugin_function queue_renew_lease_plugin(&Create_queue_renew_lease::s_singleton);
Plugin_function queue_delivery_count_plugin(&Create_queue_delivery_count::s_singleton);

}  // namespace q4m_functions
