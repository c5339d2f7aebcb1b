// CommitPipeline: group commit without a writer thread. Callers queue requests; whoever
// finds no leader becomes one and hands every pending request to its BatchWriter, which
// writes them as one chunk (one write + one sync); the pipeline then wakes only the callers
// of that batch, plus the oldest queued caller (to lead the next batch). Each caller sleeps
// on its own futex word and never takes the queue lock again once woken: with many writers
// a shared notify_all, or wakers holding the lock the woken need, made context switches
// dominate. Before sleeping, a caller spins for a short budget (spin_wait.h): most waits
// end within it, and a thread that never slept needs no wake-up.
//
// The pipeline knows nothing of what a request holds: that is the WriteBatch's, and what
// is written the BatchWriter's (Table::write_batch).
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <vector>

#include "core/file/write_batch.h"
#include "core/util/guarded.h"

namespace q4m {

struct CommitRequest {
  WriteBatch batch;
  // How the caller learns what to do, without touching the queue lock once woken:
  // kQueued -> kTryLead (the turn is free: lead the next batch if still pending) or
  // kDone (a leader wrote this request; results are set). The caller sleeps on it (futex).
  enum Signal : uint32_t { kQueued, kTryLead, kDone };
  std::atomic<uint32_t> signal{kQueued};
  bool taken = false;  // guarded by the queue lock: in a leader's batch (no longer pending)
  uint64_t ticket = 0;  // Snapshots::ticket(), taken as it is queued (core/table/snapshots.h)
};

class BatchWriter {
 public:
  virtual ~BatchWriter() = default;
  // Writes (and syncs) `batch` (`leader`'s among them). A request answered early (answer())
  // leaves the batch as nullptr.
  virtual void write_batch(const CommitRequest* leader, std::vector<CommitRequest*>& batch) = 0;
};

class CommitPipeline {
 public:
  explicit CommitPipeline(BatchWriter& writer) : writer_(writer) {}
  // Returns once a leader wrote `req` (results in req->batch). True if this caller led a
  // batch itself. enqueue() then finish() is the same in two steps: requests are written in
  // the order they were queued, so a caller that must order its commits queues them in that
  // order (at once, never waiting) and finishes them later; `req` lives until finish returns.
  bool commit(CommitRequest* req);
  void enqueue(CommitRequest* req);
  bool finish(CommitRequest* req);
  // Inside write_batch(): req's caller may go on now (it must not be touched after).
  static void answer(CommitRequest* req);

  // Exclusive use of the writer for maintenance: waits for the current leader, then keeps
  // new commits queued until destroyed (a queued follower then leads).
  class Turn {
   public:
    explicit Turn(CommitPipeline& p);
    ~Turn();
    Turn(const Turn&) = delete;
    Turn& operator=(const Turn&) = delete;

   private:
    CommitPipeline& p_;
  };

 private:
  struct Queue {
    std::vector<CommitRequest*> pending;
    std::vector<CommitRequest*> spare;  // the previous batch's vector, reused (no allocation per commit)
    bool busy = false;     // a leader (or maintenance) owns the writer turn
    int turn_waiters = 0;  // maintenance waiting in Turn (on turn_cv_)
  };
  static void take_batch(Queue& q, std::vector<CommitRequest*>* batch);
  bool lead_or_wait(CommitRequest* req, std::vector<CommitRequest*>& batch);
  void lead(CommitRequest* req, std::vector<CommitRequest*>& batch);
  CommitRequest* pass_turn(Queue& q);  // queue lock held; returns whom to wake

  BatchWriter& writer_;
  Guarded<Queue> queue_;
  std::condition_variable turn_cv_;  // maintenance waiting for the writer turn only
};

}  // namespace q4m
