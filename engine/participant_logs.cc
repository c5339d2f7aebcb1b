#define MYSQL_SERVER 1
#include <my_global.h>
#include <sql_class.h>
#include <handler.h>

#include "engine/participant_logs.h"

namespace q4m_engine {

std::vector<handlerton*> other_participants(THD* thd, bool all, const handlerton* self) {
  std::vector<handlerton*> out;
  const THD_TRANS& trans = all ? thd->transaction->all : thd->transaction->stmt;
  for (Ha_trx_info* ha = trans.ha_list; ha; ha = ha->next())
    if (ha->ht() != self && ha->ht()->flush_logs) out.push_back(ha->ht());
  return out;
}

void sync_logs(const std::vector<handlerton*>& engines) {
  for (handlerton* ht : engines) ht->flush_logs(ht);
}

}  // namespace q4m_engine
