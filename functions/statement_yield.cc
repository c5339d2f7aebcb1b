// Server-side check; see statement_yield.h.
#define MYSQL_SERVER 1
#include <my_global.h>
#include <sql_class.h>
#include <mdl.h>
#include <table.h>
#include <table_cache.h>

#include "functions/statement_yield.h"

namespace q4m_functions {

namespace {

bool others_wait_for_tables_of(THD* thd) {
  for (TABLE* t = thd->open_tables; t; t = t->next) {
    if (t->mdl_ticket && t->mdl_ticket->has_pending_conflicting_lock()) return true;
    if (!t->s->tmp_table && t->s->tdc && t->s->tdc->flushed) return true;  // FLUSH TABLES
  }
  return false;
}

}  // namespace

q4m::WaitYield statement_yield(THD* thd) {
  q4m::WaitYield yield;
  yield.every = std::chrono::milliseconds(250);
  if (thd->open_tables) yield.should_yield = [thd] { return others_wait_for_tables_of(thd); };
  return yield;
}

}  // namespace q4m_functions
