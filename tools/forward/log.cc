#include "log.h"

#include <cstdarg>
#include <cstdio>
#include <ctime>
#include <sys/time.h>
#include <unistd.h>

namespace q4m::forward {

void log_line(const char* fmt, ...) {
  timeval now;
  gettimeofday(&now, nullptr);
  tm utc;
  gmtime_r(&now.tv_sec, &utc);
  char stamp[40];
  strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &utc);

  // One fprintf per line so concurrent writers (none today) and the journal see whole lines.
  char message[2048];
  va_list args;
  va_start(args, fmt);
  vsnprintf(message, sizeof message, fmt, args);
  va_end(args);
  fprintf(stderr, "%s.%03ldZ q4m-forward[%d]: %s\n", stamp, static_cast<long>(now.tv_usec / 1000),
          static_cast<int>(getpid()), message);
  fflush(stderr);
}

}  // namespace q4m::forward
