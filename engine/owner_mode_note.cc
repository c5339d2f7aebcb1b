#define MYSQL_SERVER 1
#include <my_global.h>
#include <sql_class.h>
#include <sql_error.h>

#include "engine/owner_mode_note.h"

#include "core/table/consumer.h"
#include "engine/connection_state.h"

namespace q4m_engine {

void note_if_owning_nothing(THD* thd, const std::string& table_label, int64_t* noted_in) {
  const q4m::Consumer* viewer = viewer_of(thd);
  if (!viewer || !viewer->owner_mode() || viewer->owned_table()) return;
  const int64_t query = static_cast<int64_t>(thd->query_id);
  if (*noted_in == query) return;
  *noted_in = query;
  push_warning_printf(thd, Sql_condition::WARN_LEVEL_NOTE, ER_UNKNOWN_ERROR,
                      "QUEUE table '%s': this session is in owner mode owning no row (its last queue_wait() timed "
                      "out, as in Q4M), so every queue table looks empty to it and DELETE removes nothing. "
                      "SELECT queue_end() or queue_abort() leaves owner mode",
                      table_label.c_str());
}

}  // namespace q4m_engine
