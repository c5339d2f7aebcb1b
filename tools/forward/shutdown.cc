#include "shutdown.h"

#include <atomic>
#include <csignal>
#include <ctime>
#include <unistd.h>

namespace q4m::forward {
namespace {

std::atomic<int> g_signals{0};

extern "C" void on_signal(int) {
  if (g_signals.fetch_add(1) >= 1) {
    static const char msg[] = "q4m-forward: second signal, exiting at once\n";
    (void)!write(STDERR_FILENO, msg, sizeof msg - 1);
    _exit(2);
  }
}

}  // namespace

void install_shutdown_handlers() {
  struct sigaction action = {};
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;  // the relay polls the flag; blocking calls end by their timeouts
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);
  signal(SIGPIPE, SIG_IGN);  // a server that went away must surface as an error, not kill us
}

bool shutdown_requested() { return g_signals.load() > 0; }

bool sleep_unless_shutdown(double seconds) {
  const double slice = 0.05;
  for (double slept = 0; slept < seconds; slept += slice) {
    if (shutdown_requested()) return false;
    double step = seconds - slept < slice ? seconds - slept : slice;
    timespec ts{static_cast<time_t>(step), static_cast<long>((step - static_cast<time_t>(step)) * 1e9)};
    nanosleep(&ts, nullptr);
  }
  return !shutdown_requested();
}

}  // namespace q4m::forward
