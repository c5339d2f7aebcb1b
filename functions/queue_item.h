// Common ground of the queue functions' items.
//
// They read or change connection/queue state, so they are never constant: the
// optimizer must not fold or pre-evaluate them. They use no table either, so a WHERE
// made of them is a "constant condition" that the server evaluates once before the
// scan: `SELECT * FROM q WHERE queue_wait('q')` waits first, then scans (seeing only the
// owned row). Functions with side effects also guard themselves with the statement's
// query_id, so they act once per statement however often the server evaluates them.
#pragma once
#include <my_global.h>
#include <item_func.h>
#include <item_strfunc.h>
#include <sql_class.h>

namespace q4m_functions {

// True the first time it is asked in a statement. query_id changes per statement,
// per EXECUTE of a prepared statement and per statement inside a stored procedure.
class StatementOnce {
 public:
  bool first_in_statement(THD* thd) {
    if (query_id_ == thd->query_id) return false;
    query_id_ = thd->query_id;
    return true;
  }

 private:
  query_id_t query_id_ = -1;
};

// Marks the statement as having side effects: no query cache, not safe for
// statement-based binlogging. Called by every function builder.
inline void mark_statement_side_effects(THD* thd) {
  thd->lex->set_stmt_unsafe(LEX::BINLOG_STMT_UNSAFE_SYSTEM_FUNCTION);
  thd->lex->uncacheable(UNCACHEABLE_SIDEEFFECT);
}

// An INT function that is never constant.
class Item_queue_int_func : public Item_int_func {
 public:
  Item_queue_int_func(THD* thd) : Item_int_func(thd) {}
  Item_queue_int_func(THD* thd, Item* a) : Item_int_func(thd, a) {}
  Item_queue_int_func(THD* thd, List<Item>& args) : Item_int_func(thd, args) {}
  const Type_handler* type_handler() const override { return &type_handler_slong; }
  bool const_item() const override { return false; }
  bool check_vcol_func_processor(void* arg) override {
    return mark_unsupported_function(func_name(), "()", arg, VCOL_IMPOSSIBLE);
  }
};

// An INT function with side effects: run() is called once per statement and its
// result (and null_value) replayed for further evaluations in the same statement.
class Item_queue_action : public Item_queue_int_func {
 public:
  using Item_queue_int_func::Item_queue_int_func;
  longlong val_int() override {
    THD* thd = current_thd;
    if (once_.first_in_statement(thd)) {
      null_value = false;
      result_ = run(thd);
      result_null_ = null_value;
    }
    null_value = result_null_;
    return result_;
  }

 protected:
  // Performs the action; raises an SQL error (my_error) on failure.
  virtual longlong run(THD* thd) = 0;

 private:
  StatementOnce once_;
  longlong result_ = 0;
  bool result_null_ = false;
};

// Raises the standard wrong-argument-count error with the contract's wording, e.g.
// "queue_end() takes no arguments".
void raise_argument_count_error(const char* message);

}  // namespace q4m_functions
