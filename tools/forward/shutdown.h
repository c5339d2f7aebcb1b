// SIGTERM/SIGINT handling: the first signal asks the relay to finish its current row and
// exit; a second one exits at once (safe too: the server returns an owned row to the queue
// when the connection closes, and destination dedup drops a replayed row).
#pragma once

namespace q4m::forward {

void install_shutdown_handlers();
bool shutdown_requested();

// Sleeps up to `seconds`, returning early (false) once a shutdown is requested.
bool sleep_unless_shutdown(double seconds);

}  // namespace q4m::forward
