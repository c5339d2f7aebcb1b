#define MYSQL_SERVER 1
#include <my_global.h>
#include <sql_class.h>

#include <atomic>

#include "engine/connection_state.h"

#include "core/table/registry.h"
#include "engine/handlerton.h"
#include "engine/sysvars.h"

namespace q4m_engine {

namespace {
std::atomic<uint64_t> last_mark{0};
}  // namespace

void ConnectionState::end_snapshot() {
  if (!snapshot_) return;
  snapshot_ = false;
  q4m::Snapshots::end(snapshot_point_);
  // The tables' journals keep removed rows (and files replaced since) for the oldest open
  // snapshot only: a table that commits nothing more drops them now.
  for (const auto& table : q4m::TableRegistry::instance().open_tables()) table->prune_snapshot_journal();
}

ConnectionState* peek_connection_state(THD* thd) {
  return static_cast<ConnectionState*>(thd_get_ha_data(thd, queue_hton));
}

ConnectionState* find_connection_state(THD* thd) {
  ConnectionState* s = peek_connection_state(thd);
  if (s && session_mark(thd) != s->mark()) {  // reset by a connection pool since
    destroy_connection_state(thd);
    return nullptr;
  }
  return s;
}

ConnectionState& connection_state(THD* thd) {
  ConnectionState* s = find_connection_state(thd);
  if (!s) {
    s = new ConnectionState(thd_get_thread_id(thd), ++last_mark);
    set_session_mark(thd, s->mark());
    // Setting ha_data also makes the server call kill_query/close_connection for this THD.
    thd_set_ha_data(thd, queue_hton, s);
  }
  return *s;
}

void destroy_connection_state(THD* thd) {
  ConnectionState* s = peek_connection_state(thd);
  if (!s) return;
  // thd_set_ha_data takes LOCK_thd_data, which a concurrent KILL holds while it calls
  // kill_query: once this returns no killer can still be using `s`.
  thd_set_ha_data(thd, queue_hton, nullptr);
  // A transaction still prepared when its connection goes is a detached XA transaction: its
  // parts stay prepared in their tables until XA COMMIT/ROLLBACK names its xid.
  if (s->transaction() && s->transaction()->prepared()) s->transaction()->detach();
  s->consumer().release();
  delete s;
}

}  // namespace q4m_engine
