// Conditional subscriptions: queue_wait('t:expr'). A small hand-written compiler
// turns `expr` into a RowFilter over TableSchema's columns (see storage/row_payload.h).
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/row/filter.h"
#include "core/row/payload.h"
#include "core/util/status.h"

namespace q4m::cond {

// Compiles `expr` (the text after "table:" in queue_wait) into a filter over rows
// of `schema`. The filter copies what it needs: it does not refer to `schema`
// afterwards, and is immutable and thread-safe. Language: docs/conditions.md.
// Counts global cond_compiles (every call); the filter counts cond_evals.
// On error returns kInvalid and leaves *out alone; the message names the
// condition, the table and the 1-based character position, e.g.
//   condition 'prio >' on table db.q: syntax error at position 7: expected a column, a literal or '(', found end of condition
//   condition 'prio > 1 and kind = 2' on table db.q: unknown column 'kind' at position 14
// With `columns`, also gives the columns the condition names (as declared, in table order),
// for privilege checks: filled whenever the condition parses, even if it then fails to
// compile, so that a column the caller may not read is refused before its type shows.
Status compile(std::string_view expr, const TableSchema& schema, std::shared_ptr<const RowFilter>* out,
               std::vector<std::string>* columns = nullptr);

}  // namespace q4m::cond
