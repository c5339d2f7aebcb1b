// Compiled conditions of queue_wait('t:expr'), shared by all connections and keyed by
// (data file path, table definition version, expression): an ALTER TABLE changes the
// version, so a stale filter is never reused for a new row layout.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/util/guarded.h"
#include "core/row/filter.h"
#include "core/row/payload.h"
#include "core/util/status.h"

namespace q4m_functions {

class ConditionCache {
 public:
  static ConditionCache& instance();

  // The filter for `expr`, and the columns it names (cond::compile); compiles it (with the
  // schema from make_schema) on a miss. A failed compile is not kept, but still gives the
  // columns it names: the caller checks the user may read them before showing the error.
  q4m::Status get(const std::string& path, std::string_view table_version, std::string_view expr,
                  const std::function<q4m::TableSchema()>& make_schema,
                  std::shared_ptr<const q4m::RowFilter>* out, std::vector<std::string>* columns);

 private:
  // Bound on entries; the cache is simply emptied when it is reached (conditions are
  // normally a handful of fixed strings, so this only stops unbounded growth).
  static constexpr size_t kMaxEntries = 4096;
  struct Entry {
    std::shared_ptr<const q4m::RowFilter> filter;
    std::vector<std::string> columns;
  };
  using Map = std::unordered_map<std::string, Entry>;
  q4m::Guarded<Map> filters_;
};

}  // namespace q4m_functions
