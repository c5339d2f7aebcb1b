// After a queue_wait() that timed out a session is in owner mode owning no row, as in Q4M:
// every queue table looks empty to it until queue_end(), queue_abort() or its next wait. That
// is kept, but made visible: a statement of that session that reads or deletes from a queue
// table gets a note (SHOW WARNINGS) naming the table, so that an operator's COUNT(*) = 0 or
// "0 rows affected" is not taken for an empty queue.
#pragma once
#include <cstdint>
#include <string>

class THD;

namespace q4m_engine {

// Pushes the note for `table_label` ("db.table") if thd's session owns nothing in owner mode,
// once per statement: *noted_in keeps the query id it was given for.
void note_if_owning_nothing(THD* thd, const std::string& table_label, int64_t* noted_in);

}  // namespace q4m_engine
