#pragma once
#include <algorithm>

#include "core/row/row_id.h"

namespace q4m {

// How rows get their ids, in commit order: the group-commit leader gives them and recovery
// gives the same ones again from the file (a TXN_END names only where its part's ids start).
// A row may ask for an id (ROW_ID_COLUMN; a restored dump's rows ask for their old ones): it
// gets it if no id at or above it was given yet. A row that asks for none, or for one given
// out already, gets the next id, at least the floor (CREATE TABLE ... AUTO_INCREMENT=N), so a
// dump restores its rows under their ids below the floor and new rows start at the floor.
struct IdSequence {
  RowId next = 1;   // one past the last id given
  RowId floor = 0;  // the least id a row that asks for none gets

  RowId give(RowId asked) {
    const RowId id = asked != 0 && asked >= next ? asked : upcoming();
    next = id + 1;
    return id;
  }
  // The id the next row that asks for none gets (what SHOW CREATE TABLE calls AUTO_INCREMENT).
  RowId upcoming() const { return std::max(next, floor); }
};

}  // namespace q4m
