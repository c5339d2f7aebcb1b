// What every scenario's workers do alike (scenarios.cc, fanout.cc): open their connections,
// take one message (timed, retried while empty), hand back what a session still holds.
#pragma once
#include <vector>

#include "../common/db_conn.h"
#include "options.h"
#include "queue_backend.h"
#include "run_control.h"

namespace q4m::bench {

// Worker connections must outlive a queue_wait() that times out, but not a hung server.
inline client::ConnParams worker_params(const Options& opt) {
  client::ConnParams p = opt.conn;
  p.read_timeout_s = static_cast<unsigned>(opt.wait_timeout_s) + 120;
  return p;
}

inline std::vector<client::DbConn> open_connections(const Options& opt, int n) {
  std::vector<client::DbConn> conns(n);
  for (auto& c : conns) c.connect(worker_params(opt));
  return conns;
}

// Obtains one message, retrying empty polls / timed-out waits until one comes,
// `give_up()` says the run is over, or the run is stopped. Times the whole
// attempt: polling or waiting for a message is part of its cost.
// transactional: each attempt is one consume_in_transaction().
template <typename GiveUp>
bool take_one(QueueSession& s, RunControl& ctl, WorkerStats& st, GiveUp give_up, Delivered* d,
              bool transactional = false) {
  if (ctl.should_stop()) return false;  // also enforces --run-timeout on a run that is merely slow
  Clock::time_point t0 = Clock::now();
  while (!(transactional ? s.consume_in_transaction(d) : s.consume(d))) {
    if (give_up() || ctl.should_stop()) {
      ++st.final_empty_polls;  // the poll that found the run over is no contention
      return false;
    }
  }
  Clock::time_point t1 = Clock::now();
  st.consume.add(t0, t1);
  st.last_progress = t1;
  return true;
}

inline void finish_session(QueueSession& s, WorkerStats& st) {
  if (s.finish()) st.last_progress = Clock::now();
}

}  // namespace q4m::bench
