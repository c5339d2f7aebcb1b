#define MYSQL_SERVER 1
#include <my_global.h>
#include <sql_class.h>
#include <table.h>

#include "engine/table_definition.h"

#include "core/table/registry.h"
#include "engine/table_options.h"

namespace q4m_engine {

namespace {

// Deleted with its share (TABLE_SHARE::destroy).
class DefinitionShare final : public Handler_share {
 public:
  explicit DefinitionShare(std::shared_ptr<const TableDefinition> d) : definition(std::move(d)) {}
  const std::shared_ptr<const TableDefinition> definition;
};

std::shared_ptr<const TableDefinition> make_definition(const TABLE_SHARE* share) {
  auto d = std::make_shared<TableDefinition>();
  d->path = std::string(share->normalized_path.str, share->normalized_path.length) + q4m::kDataFileExtension;
  d->version.assign(reinterpret_cast<const char*>(share->tabledef_version.str), share->tabledef_version.length);
  d->options = options_of(share);
  d->row_id_column = row_id_column_of(share);
  return d;
}

}  // namespace

std::shared_ptr<const TableDefinition> definition_of(TABLE_SHARE* share) {
  if (share->tmp_table != NO_TMP_TABLE) return make_definition(share);  // no LOCK_ha_data
  mysql_mutex_lock(&share->LOCK_ha_data);
  if (!share->ha_share) share->ha_share = new DefinitionShare(make_definition(share));
  std::shared_ptr<const TableDefinition> d = static_cast<DefinitionShare*>(share->ha_share)->definition;
  mysql_mutex_unlock(&share->LOCK_ha_data);
  return d;
}

}  // namespace q4m_engine
