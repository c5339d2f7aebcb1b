#include "functions/condition_cache.h"

#include "cond/condition.h"
#include "core/util/stats.h"

namespace q4m_functions {

ConditionCache& ConditionCache::instance() {
  static ConditionCache cache;
  return cache;
}

q4m::Status ConditionCache::get(const std::string& path, std::string_view table_version,
                                std::string_view expr,
                                const std::function<q4m::TableSchema()>& make_schema,
                                std::shared_ptr<const q4m::RowFilter>* out, std::vector<std::string>* columns) {
  std::string key = path;
  key += '\0';
  key.append(table_version);
  key += '\0';
  key.append(expr);
  {
    auto filters = filters_.lock();
    auto it = filters->find(key);
    if (it != filters->end()) {
      q4m::global_stats().cond_cache_hits.add();
      *out = it->second.filter;
      *columns = it->second.columns;
      return q4m::Status::Ok();
    }
  }
  // Compile outside the lock: other connections' lookups need not wait for it.
  Entry entry;
  q4m::Status st = q4m::cond::compile(expr, make_schema(), &entry.filter, &entry.columns);
  *columns = entry.columns;
  if (!st.ok()) return st;
  auto filters = filters_.lock();
  if (filters->size() >= kMaxEntries) filters->clear();
  auto inserted = filters->emplace(std::move(key), std::move(entry));
  *out = inserted.first->second.filter;  // a concurrent compile of the same key may have won
  *columns = inserted.first->second.columns;
  return q4m::Status::Ok();
}

}  // namespace q4m_functions
