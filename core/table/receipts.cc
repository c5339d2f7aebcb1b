// Receipts: takes on behalf of no connection, and the calls by receipt (receipts.h).
#include "core/table/receipts.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <random>

#include "core/policy/leases.h"

namespace q4m {

namespace {

uint64_t new_epoch() {
  std::random_device rd;
  uint64_t e = (static_cast<uint64_t>(rd()) << 32) ^ rd() ^
               static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  return e ? e : 1;
}

std::string hex16(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

// '<row id>:<16 hex digits>.<take>' into its parts; false if it is not one.
bool parse_receipt(const std::string& r, RowId* id, uint64_t* epoch, uint64_t* take) {
  const size_t colon = r.find(':');
  if (colon == 0 || colon == std::string::npos || colon > 19) return false;
  if (r.size() < colon + 1 + 16 + 2 || r[colon + 17] != '.') return false;
  const size_t take_at = colon + 18;
  if (r.size() - take_at > 19) return false;
  auto digits = [&](size_t from, size_t to) {
    for (size_t i = from; i < to; i++)
      if (r[i] < '0' || r[i] > '9') return false;
    return to > from;
  };
  if (!digits(0, colon) || !digits(take_at, r.size())) return false;
  for (size_t i = colon + 1; i < colon + 17; i++)
    if (!std::isxdigit(static_cast<unsigned char>(r[i])) || std::isupper(static_cast<unsigned char>(r[i]))) return false;
  *id = std::stoull(r.substr(0, colon));
  *epoch = std::stoull(r.substr(colon + 1, 16), nullptr, 16);
  *take = std::stoull(r.substr(take_at));
  return *id > 0;
}

// The table a queue's rows are in now: a copying ALTER TABLE's new table, if one took over.
std::shared_ptr<QueueTable> latest(std::shared_ptr<QueueTable> t) {
  while (t)
    if (std::shared_ptr<QueueTable> next = t->moved_to_table())
      t = std::move(next);
    else
      break;
  return t;
}

}  // namespace

// Every queue's receipts: few tables, looked up once per call. The tables are kept here, so
// that a lookup takes no book's lock (a book's call may be writing a RETURN record).
struct ReceiptsRegistry {
  struct Queue {
    std::weak_ptr<QueueTable> table;  // the latest table of the queue it was found for
    std::shared_ptr<Receipts> book;
  };
  Guarded<std::vector<Queue>> queues;
  static ReceiptsRegistry& instance() {
    static ReceiptsRegistry* r = new ReceiptsRegistry();  // never destroyed: forget_all() empties it
    return *r;
  }
};

std::shared_ptr<Receipts> Receipts::of(const std::shared_ptr<QueueTable>& table) {
  auto queues = ReceiptsRegistry::instance().queues.lock();
  for (ReceiptsRegistry::Queue& q : *queues) {
    std::shared_ptr<QueueTable> t = q.table.lock();
    if (!t || !same_queue(t.get(), table.get())) continue;
    if (!table->moved_to()) q.table = table;  // the queue's current table (a copying ALTER's)
    return q.book;
  }
  // A new queue (or one opened again): the books of dropped tables are forgotten meanwhile.
  for (auto it = queues->begin(); it != queues->end();) {
    bool empty;
    {
      auto st = it->book->state_.lock();
      it->book->sweep(st->book);
      empty = st->book.empty();
    }
    if (empty && it->table.expired())
      it = queues->erase(it);
    else
      ++it;
  }
  queues->push_back(ReceiptsRegistry::Queue{table, std::make_shared<Receipts>()});
  return queues->back().book;
}

void Receipts::forget_all() {
  std::vector<ReceiptsRegistry::Queue> queues;
  queues.swap(*ReceiptsRegistry::instance().queues.lock());
  for (auto& q : queues) q.book->state_.lock()->book.clear();  // each holder gives its row back
}

Receipts::Receipts() : epoch_(new_epoch()) {}

Receipts::~Receipts() = default;

std::string Receipts::receipt_of(RowId id, uint64_t take) const {
  return std::to_string(id) + ":" + hex16(epoch_) + "." + std::to_string(take);
}

bool Receipts::holds(const Entry& e, RowId id) {
  std::shared_ptr<QueueTable> t = latest(e.table);
  return t && t->row_view(id, e.holder.get()) == QueueTable::RowView::kOwnedByViewer;
}

void Receipts::sweep(Book& book) {
  for (auto it = book.begin(); it != book.end();)
    if (!holds(it->second, it->first))
      it = book.erase(it);  // its holder lets go of what its lease left it (Consumer::release)
    else
      ++it;
}

Status Receipts::receive(const Subscription& sub, size_t max_rows, std::chrono::milliseconds lease,
                         std::chrono::milliseconds timeout, const WaitYield* yield, std::vector<Received>* out) {
  out->clear();
  if (!sub.table) return Status(ErrorCode::kInvalid, "null table");
  if (lease.count() <= 0) return Status(ErrorCode::kInvalid, "the lease must be > 0");
  if (max_rows == 0) return Status(ErrorCode::kInvalid, "max_rows must be at least 1");
  // One holder per row: each has a lease of its own, ended, given back or renewed alone.
  std::vector<std::unique_ptr<Consumer>> taken;
  auto take = [&](std::chrono::milliseconds wait_for, const WaitYield* y) {
    auto c = std::make_unique<Consumer>(0);
    c->set_lease(lease);
    int index = 0;
    Status s = c->wait({sub}, wait_for, &index, y);
    if (s.ok() && index > 0) taken.push_back(std::move(c));
    return s;
  };
  if (Status s = take(timeout, yield); !s.ok()) return s;
  // The others only if free now (as queue_wait_batch).
  while (!taken.empty() && taken.size() < max_rows) {
    const size_t before = taken.size();
    if (!take(std::chrono::milliseconds(0), nullptr).ok() || taken.size() == before) break;
  }
  auto st = state_.lock();
  if (st->book.size() + taken.size() >= st->sweep_at) {
    sweep(st->book);
    st->sweep_at = 2 * st->book.size() + 1024;
  }
  for (std::unique_ptr<Consumer>& c : taken) {
    const RowId id = c->owned_rowid();
    Entry& e = st->book[id];  // a receipt of an earlier delivery of the row is stale from here on
    e.take = ++st->takes;
    e.lease_ms = lease.count();
    e.table = sub.table;
    out->push_back(Received{id, c->owned_delivery_count(), receipt_of(id, e.take)});
    e.holder = std::move(c);  // (the earlier one's holder lets go of what its lease left it)
  }
  std::sort(out->begin(), out->end(), [](const Received& a, const Received& b) { return a.id < b.id; });
  return Status::Ok();
}

Status Receipts::check(Book& book, const std::vector<std::string>& receipts, std::vector<Book::iterator>* found) {
  found->clear();
  for (const std::string& r : receipts) {
    RowId id = 0;
    uint64_t epoch = 0, take = 0;
    if (!parse_receipt(r, &id, &epoch, &take))
      return Status(ErrorCode::kInvalid,
                    "'" + r + "' is not a receipt (expected '<row id>:<token>' as queue_receipt() gives it)");
    const std::string head = "receipt '" + r + "' ";
    if (epoch != epoch_)
      return Status(ErrorCode::kLeaseExpired,
                    head + "was not given since the table was last opened (a server restart gives every row "
                           "held by a receipt back to the queue): row " + std::to_string(id) + " is not held by it");
    auto it = book.find(id);
    if (it == book.end() || take > it->second.take)
      return Status(ErrorCode::kLeaseExpired, head + "holds no row now: row " + std::to_string(id) +
                                                  " was ended or given back, or its lease ran out");
    if (take < it->second.take)
      return Status(ErrorCode::kLeaseExpired, head + "is of an earlier delivery of row " + std::to_string(id) +
                                                  ", which was handed out again since: it no longer holds the row");
    if (!holds(it->second, id))
      return Status(ErrorCode::kLeaseExpired, head + "no longer holds row " + std::to_string(id) + ": its lease (" +
                                                  seconds_text(it->second.lease_ms) +
                                                  ") ran out, or an operator released it, and the row went "
                                                  "back to the queue");
    if (std::find(found->begin(), found->end(), it) != found->end())
      return Status(ErrorCode::kInvalid, head + "is given twice");
    found->push_back(it);
  }
  return Status::Ok();
}

namespace {

// What a call on a receipt that passed check() answers when its lease ran out meanwhile.
Status during(const std::string& receipt, const Status& s) {
  return Status(s.code(), "receipt '" + receipt + "': " + s.message());
}

}  // namespace

Status Receipts::end(const std::vector<std::string>& receipts, Transaction& txn, size_t* ended) {
  *ended = 0;
  auto st = state_.lock();
  std::vector<Book::iterator> found;
  if (Status s = check(st->book, receipts, &found); !s.ok()) return s;
  for (size_t i = 0; i < found.size(); i++) {
    Consumer& c = *found[i]->second.holder;
    c.set_transaction(&txn);  // the transaction claims the row now, removes it at its commit
    Status s = c.end();
    c.set_transaction(nullptr);
    if (!s.ok()) return during(receipts[i], s);  // the caller rolls back the claims made so far
  }
  for (Book::iterator it : found) st->book.erase(it);
  *ended = found.size();
  return Status::Ok();
}

Status Receipts::abort(const std::vector<std::string>& receipts, std::chrono::milliseconds delay, size_t* returned) {
  *returned = 0;
  auto st = state_.lock();
  std::vector<Book::iterator> found;
  if (Status s = check(st->book, receipts, &found); !s.ok()) return s;
  for (Book::iterator it : found) {
    it->second.holder->abort(delay);  // a row whose lease ran out meanwhile is back already
    st->book.erase(it);
  }
  *returned = found.size();
  return Status::Ok();
}

Status Receipts::renew(const std::vector<std::string>& receipts, std::chrono::milliseconds lease, size_t* renewed) {
  *renewed = 0;
  if (lease.count() <= 0) return Status(ErrorCode::kInvalid, "the lease must be > 0");
  auto st = state_.lock();
  std::vector<Book::iterator> found;
  if (Status s = check(st->book, receipts, &found); !s.ok()) return s;
  for (size_t i = 0; i < found.size(); i++) {
    Status s = found[i]->second.holder->renew_lease(lease);
    if (!s.ok()) return during(receipts[i], s);
    found[i]->second.lease_ms = lease.count();
  }
  *renewed = found.size();
  return Status::Ok();
}

Status Receipts::split(std::string_view list, size_t max, std::vector<std::string>* out) {
  out->clear();
  size_t at = 0;
  for (;;) {
    const size_t comma = list.find(',', at);
    std::string_view r = list.substr(at, comma == std::string_view::npos ? std::string_view::npos : comma - at);
    while (!r.empty() && (r.front() == ' ' || r.front() == '\t' || r.front() == '\n')) r.remove_prefix(1);
    while (!r.empty() && (r.back() == ' ' || r.back() == '\t' || r.back() == '\n')) r.remove_suffix(1);
    if (r.empty())
      return Status(ErrorCode::kInvalid, out->empty() && comma == std::string_view::npos
                                             ? "no receipt given"
                                             : "receipt " + std::to_string(out->size() + 1) + " of the list is empty");
    out->emplace_back(r);
    if (out->size() > max)
      return Status(ErrorCode::kInvalid, "more than " + std::to_string(max) + " receipts in one call");
    if (comma == std::string_view::npos) return Status::Ok();
    at = comma + 1;
  }
}

size_t Receipts::held() {
  auto st = state_.lock();
  size_t n = 0;
  for (const auto& [id, e] : st->book) n += holds(e, id);
  return n;
}

}  // namespace q4m
