#include "core/table/commit_pipeline.h"

#include <optional>

#include "core/table/snapshots.h"
#include "core/util/blocking.h"
#include "core/util/futex.h"
#include "core/util/settings.h"
#include "core/util/spin_wait.h"

namespace q4m {

// Takes the writer turn and every pending request (ours among them) as the batch.
void CommitPipeline::take_batch(Queue& q, std::vector<CommitRequest*>* batch) {
  q.busy = true;
  batch->swap(q.pending);
  q.pending.swap(q.spare);
  for (CommitRequest* r : *batch) r->taken = true;
}

bool CommitPipeline::commit(CommitRequest* req) {
  std::vector<CommitRequest*> batch;
  {
    auto q = queue_.lock();  // one critical section on the hot path: queue, and lead if free
    req->ticket = Snapshots::ticket();  // in queue order: the order ids are given in
    q->pending.push_back(req);
    if (!q->busy) take_batch(*q, &batch);
  }
  return lead_or_wait(req, batch);
}

void CommitPipeline::enqueue(CommitRequest* req) {
  auto q = queue_.lock();
  req->ticket = Snapshots::ticket();
  q->pending.push_back(req);
}

bool CommitPipeline::finish(CommitRequest* req) {
  std::vector<CommitRequest*> batch;
  {
    auto q = queue_.lock();
    if (req->signal.load(std::memory_order_acquire) == CommitRequest::kDone) return false;  // written meanwhile
    // Still pending with the turn free: lead. (Taken by a running leader, or told to try to
    // lead: lead_or_wait() sorts it out as for any queued caller.)
    if (!req->taken && !q->busy && req->signal.load(std::memory_order_relaxed) == CommitRequest::kQueued)
      take_batch(*q, &batch);
  }
  return lead_or_wait(req, batch);
}

// `req` is queued; `batch` is non-empty if its caller took the turn. Waits for a leader to
// write req, or for the turn, then leads.
bool CommitPipeline::lead_or_wait(CommitRequest* req, std::vector<CommitRequest*>& batch) {
  std::optional<BlockingScope> sleeping;  // announced for syncs only: a write takes microseconds
  while (batch.empty()) {  // queued behind a leader
    uint32_t s;
    while ((s = req->signal.load(std::memory_order_acquire)) == CommitRequest::kQueued) {
      if (!sleeping && req->batch.sync && settings().sync() != SyncMode::kNone) sleeping.emplace(BlockingWait::kCommit);
      const uint32_t spin_us = settings().commit_spin_us.load(std::memory_order_relaxed);
      if (SpinWait::spin_until_changed(req->signal, CommitRequest::kQueued, spin_us)) continue;
      futex_wait(&req->signal, CommitRequest::kQueued);
    }
    if (s == CommitRequest::kDone) return false;
    // kTryLead: the turn was free when we were told. A running thread may have taken it,
    // and our request with it, since: then that leader finishes it and we wait again.
    auto q = queue_.lock();
    if (req->taken) {
      uint32_t try_lead = CommitRequest::kTryLead;  // the leader may store kDone right now
      if (!req->signal.compare_exchange_strong(try_lead, CommitRequest::kQueued, std::memory_order_acq_rel))
        return false;  // kDone
      continue;
    }
    req->signal.store(CommitRequest::kQueued, std::memory_order_relaxed);  // pending: only we write it
    if (!q->busy) take_batch(*q, &batch);
  }
  sleeping.reset();
  lead(req, batch);
  return true;
}

void CommitPipeline::answer(CommitRequest* req) {
  // Once kDone is visible the caller may return and free req: it is not touched after.
  req->signal.store(CommitRequest::kDone, std::memory_order_release);
  futex_wake_one(&req->signal);
}

void CommitPipeline::lead(CommitRequest* req, std::vector<CommitRequest*>& batch) {
  writer_.write_batch(req, batch);
  CommitRequest* next = nullptr;
  {
    auto q = queue_.lock();
    next = pass_turn(*q);
  }
  if (next) futex_wake_one(&next->signal);  // the next leader first: its sync starts sooner
  for (CommitRequest* r : batch)
    if (r != req && r) answer(r);  // null: answered before the sync
  batch.clear();
  auto q = queue_.lock();
  if (q->spare.capacity() < batch.capacity()) q->spare.swap(batch);  // reuse the allocation
}

// Frees the writer turn and tells the oldest queued caller (if any) that it may lead the
// next batch; returns it, to be woken after the lock is released. A running thread may
// take the turn first (a handed-over turn would wait for the woken thread to be
// scheduled); it then writes the queued requests in its own batch.
CommitRequest* CommitPipeline::pass_turn(Queue& q) {
  q.busy = false;
  if (q.turn_waiters > 0) turn_cv_.notify_all();  // maintenance competes like any caller
  if (q.pending.empty()) return nullptr;
  CommitRequest* next = q.pending.front();  // alive: a pending request is in no batch yet
  next->signal.store(CommitRequest::kTryLead, std::memory_order_release);
  return next;
}

CommitPipeline::Turn::Turn(CommitPipeline& p) : p_(p) {
  auto q = p_.queue_.lock();
  q->turn_waiters++;
  while (q->busy) p_.turn_cv_.wait(q.unique_lock());
  q->turn_waiters--;
  q->busy = true;
}

CommitPipeline::Turn::~Turn() {
  CommitRequest* next;
  {
    auto q = p_.queue_.lock();
    next = p_.pass_turn(*q);
  }
  if (next) futex_wake_one(&next->signal);
}

}  // namespace q4m
