// The QUEUE engine's own table options (CREATE TABLE ... ENGINE=QUEUE OPTION=value):
//   VISIBLE_AT_COLUMN='col'  a TIMESTAMP column: its row is not handed out before that time.
#pragma once
#include <my_global.h>
#include <handler.h>

#include <memory>
#include <string>

#include "../storage/visible_at.h"

// The server parses the options into this struct (share->option_struct); the name is fixed.
struct ha_table_option_struct {
  const char* visible_at_column;
};

namespace q4m_engine {

extern ha_create_table_option queue_table_options[];

// The VISIBLE_AT_COLUMN of `share`: *out = null if the option is not set. False, with
// *error saying what is wrong, if it names no column or not a TIMESTAMP column.
bool visible_at_column_of(const TABLE_SHARE* share, std::shared_ptr<const q4m::VisibleAtColumn>* out,
                          std::string* error);
// The same for a table that exists (create() refused a wrong column): null if not set.
std::shared_ptr<const q4m::VisibleAtColumn> visible_at_column_of(const TABLE_SHARE* share);

}  // namespace q4m_engine
