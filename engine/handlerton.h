// The QUEUE handlerton, shared by the handler, the functions and the I_S plugins, and the
// engine plugin's entry points (plugin/plugin.cc lists them).
#pragma once

struct handlerton;
struct st_mysql_storage_engine;

namespace q4m_engine {

// Set by engine_init(); the functions use it to find per-connection state.
extern handlerton* queue_hton;

extern st_mysql_storage_engine engine_descriptor;
int engine_init(void* hton);
int engine_deinit(void*);

}  // namespace q4m_engine
