// Timestamped diagnostics on stderr (the supervisor's journal collects them).
#pragma once

namespace q4m::forward {

// printf-style; prints "2024-05-01T12:00:00.123Z q4m-forward[pid]: <message>\n".
void log_line(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

}  // namespace q4m::forward
