// The QUEUE handlerton, shared by the handler, the functions and the I_S plugin.
#pragma once

struct handlerton;

namespace q4m_engine {

// Set by the engine plugin's init; the functions use it to find per-connection state.
extern handlerton* queue_hton;

}  // namespace q4m_engine
