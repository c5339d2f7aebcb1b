// The ids the rows of an INSERT ask for in a ROW_ID_COLUMN (core/row/id_sequence.h). Each is
// checked as its row comes, against the ids the table gave and the statement's rows before
// it would get: an id given out already is refused (an error, not a silent new id). A row
// that passes gets its id at the commit unless a concurrent commit took it first.
#pragma once
#include <cstdint>
#include <string>

#include "core/row/id_sequence.h"

namespace q4m_engine {

class AskedIds {
 public:
  // False, with *why, if row `asked` (0: none) of statement `query_id` asks for an id below
  // the next one; `table`: where the table's ids stand now.
  bool admit(uint64_t query_id, const q4m::IdSequence& table, q4m::RowId asked, std::string* why) {
    if (query_id != query_id_) {
      query_id_ = query_id;
      rows_ = table;
    }
    rows_.next = std::max(rows_.next, table.next);
    rows_.floor = std::max(rows_.floor, table.floor);
    if (asked != 0 && asked < rows_.next) {
      *why = "asks for row id " + std::to_string(asked) + ", but the table's next row id is " +
             std::to_string(rows_.next) + " (ids only increase; NULL or 0 gives the next one)";
      return false;
    }
    rows_.give(asked);
    return true;
  }

 private:
  uint64_t query_id_ = ~uint64_t{0};
  q4m::IdSequence rows_;  // as the statement's rows so far would leave it
};

}  // namespace q4m_engine
