// Power loss (machine crash), not just a killed server: producers, consumers, a relay,
// DELETEs, compaction and a TRUNCATE run against one table while a simulated disk (power_loss_disk.h) keeps, at
// random moments, what a power cut could leave on disk — only what was synced is sure;
// later writes may have landed sector by sector, in any order, and un-synced renames may
// or may not have happened. Each such outcome is then opened with the normal recovery.
// Promised for fdatasync and fsync (README "Sync modes", docs/recovery.md):
//   recovery succeeds (no "corrupt" for what is only a power cut);
//   every row whose insert returned is there, unless its removal (or a TRUNCATE) started;
//   no row whose removal (or a later TRUNCATE) returned is there; no row appears twice or from nowhere;
//   row ids never go back; relay dedup state covers every relayed row that returned.
// With sync mode none a power cut may lose recent rows and acknowledgements (README),
// but the table must still open and never show a row twice or one that was never inserted.
// With queue_sync_removals=OFF for some consumers and the DELETEs, their removals may come
// undone (the rows come back), and everything else above still holds.
// Linked with -Wl,--wrap for the file system calls (Makefile).
#include <atomic>
#include <cstdlib>
#include <set>
#include <thread>
#include <unordered_map>

#include "check.h"
#include "power_loss_disk.h"
#include "storage_test_util.h"

using namespace q4m;
using namespace q4m_test;
using q4m_test::power::CrashImage;
using q4m_test::power::DiskModel;

namespace {

constexpr uint32_t kSource = 7;

// kEnding is published before a removal starts (queue_end, a queue_wait that ends the
// owned row, DELETE), kEnded after it returned: between the two the row may or may not be
// gone. kTruncating / kTruncated likewise bracket a TRUNCATE (run with nothing else going on).
struct Ack {
  enum Kind { kCreated, kInserted, kRelayed, kEnding, kEnded, kTruncating, kTruncated } kind;
  std::string payload;
  RowId id = 0;       // kInserted
  RowId source_seq = 0;  // kRelayed
  bool unsynced = false;  // kEnded: the removal did not wait for a sync (it may come undone)
};

// What the workload was told, in the order it was told (published through DiskModel::acks).
class AckLog {
 public:
  void add(Ack a) {
    std::lock_guard<std::mutex> g(mu_);
    log_.push_back(std::move(a));
    DiskModel::instance().acks.store(log_.size());
  }
  void attempted(const std::string& payload) {
    std::lock_guard<std::mutex> g(mu_);
    attempted_.insert(payload);
  }
  std::vector<Ack> first(uint64_t n) {
    std::lock_guard<std::mutex> g(mu_);
    return std::vector<Ack>(log_.begin(), log_.begin() + static_cast<long>(std::min<uint64_t>(n, log_.size())));
  }
  bool was_attempted(const std::string& p) {
    std::lock_guard<std::mutex> g(mu_);
    return attempted_.count(p) > 0;
  }
  void refused(const std::string& payload) {  // its insert failed "full" (MAX_ROWS)
    std::lock_guard<std::mutex> g(mu_);
    refused_.insert(payload);
  }
  bool was_refused(const std::string& p) {
    std::lock_guard<std::mutex> g(mu_);
    return refused_.count(p) > 0;
  }
  size_t refused_count() {
    std::lock_guard<std::mutex> g(mu_);
    return refused_.size();
  }

 private:
  std::mutex mu_;
  std::vector<Ack> log_;
  std::set<std::string> attempted_, refused_;
};

std::string payload_for(const std::string& tag, std::mt19937_64& rng) {
  // 20..1500 bytes: chunks end at every sector offset and often span sectors.
  size_t len = 20 + rng() % 1480;
  std::string p = tag + "|";
  while (p.size() < len) p += static_cast<char>('a' + rng() % 26);
  return p;
}

std::string tag_of(const std::string& payload) { return payload.substr(0, payload.find('|')); }

struct Workload {
  std::shared_ptr<QueueTable> table;
  AckLog acks;
  uint64_t seed;
  bool unsynced_removals = false;  // consumers of even threads and the DELETEs waive the sync
  uint64_t max_rows = 0;           // the table's MAX_ROWS (TableOptions::max_rows); 0 = none
};

void produce(Workload& w, int thread, int rounds) {
  std::mt19937_64 rng(w.seed * 31 + thread);
  for (int i = 0; i < rounds; i++) {
    const int n = (rng() % 4 == 0) ? 1 + static_cast<int>(rng() % 4) : 1;  // some multi-row inserts
    std::vector<std::string> rows;
    for (int k = 0; k < n; k++) rows.push_back(payload_for("p" + std::to_string(thread) + "-" + std::to_string(i) + "-" + std::to_string(k), rng));
    for (auto& r : rows) w.acks.attempted(tag_of(r));
    std::vector<std::string_view> views(rows.begin(), rows.end());
    std::vector<RowId> ids;
    Status s = w.table->insert(views, &ids);
    if (s.code() == ErrorCode::kFull)
      for (auto& r : rows) w.acks.refused(tag_of(r));
    if (!s.ok()) continue;
    for (size_t k = 0; k < rows.size(); k++) w.acks.add({Ack::kInserted, tag_of(rows[k]), ids[k], 0});
  }
}

void relay(Workload& w, int rounds, RowId* next_seq) {
  std::mt19937_64 rng(w.seed * 17);
  for (int i = 0; i < rounds; i++) {
    RowId seq = (*next_seq)++;
    std::string row = payload_for("r" + std::to_string(seq), rng);
    w.acks.attempted(tag_of(row));
    bool accepted = false;
    if (relay1(*w.table, row, kSource, seq, false, &accepted).ok() && accepted)
      w.acks.add({Ack::kRelayed, tag_of(row), 0, seq});
  }
}

// Takes rows and acknowledges them three ways: queue_end(), the implicit end of the next
// queue_wait(), and not at all (queue_abort() gives the row back).
void consume(Workload& w, int thread, int rounds) {
  std::mt19937_64 rng(w.seed * 7 + thread);
  Consumer c;
  c.set_sync_removals(!(w.unsynced_removals && thread % 2 == 0));
  const bool unsynced = !c.sync_removals();
  std::string owned;  // tag of the owned row
  for (int i = 0; i < rounds; i++) {
    int index = 0;
    if (!owned.empty()) w.acks.add({Ack::kEnding, owned, 0, 0});
    Status s = c.wait({{w.table, nullptr}}, std::chrono::milliseconds(0), &index);
    if (!s.ok()) continue;
    if (!owned.empty()) w.acks.add({Ack::kEnded, owned, 0, 0, unsynced});  // wait() removed it first
    owned.clear();
    if (index == 0) {
      std::this_thread::yield();
      continue;
    }
    auto rows = scan(*w.table, &c);
    if (rows.size() != 1) continue;
    const std::string tag = tag_of(rows[0].second);
    switch (rng() % 4) {
      case 0:
        w.acks.add({Ack::kEnding, tag, 0, 0});
        if (c.end().ok()) w.acks.add({Ack::kEnded, tag, 0, 0, unsynced});
        break;
      case 1:
        c.abort();
        break;
      default:
        owned = tag;  // ended by the next wait()
    }
  }
  c.release();  // an owned row goes back: no acknowledgement
}

// DELETE: claims up to three visible rows, then removes them in one commit.
void delete_some(Workload& w, int rounds) {
  std::mt19937_64 rng(w.seed * 13);
  Consumer viewer;  // a connection that is not in owner mode
  viewer.set_sync_removals(!w.unsynced_removals);
  for (int i = 0; i < rounds; i++) {
    std::vector<std::string> claimed;
    RowId after = 0, id = 0;
    std::string payload;
    bool found = true;
    while (claimed.size() < 3 && w.table->next_visible(&viewer, after, &id, &payload, &found).ok() && found) {
      after = id;
      if (rng() % 3 == 0 && w.table->claim_for_delete(&viewer, id)) claimed.push_back(tag_of(payload));
    }
    for (auto& tag : claimed) w.acks.add({Ack::kEnding, tag, 0, 0});
    if (w.table->remove_claimed(&viewer).ok())
      for (auto& tag : claimed) w.acks.add({Ack::kEnded, tag, 0, 0, !viewer.sync_removals()});
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

void compact_now_and_then(Workload& w, std::atomic<bool>& stop) {
  while (!stop.load()) {
    w.table->compact();
    std::this_thread::sleep_for(std::chrono::milliseconds(15));
  }
}

struct Findings {
  size_t images = 0, before_create = 0, opened = 0, acked_present = 0, acked_absent = 0;
};

// Opens one crash image with the normal recovery and checks it against the acks.
void verify_image(const CrashImage& img, size_t n, Workload& w, SyncMode mode, Findings* f) {
  TempDir dir;
  for (const auto& [name, file] : img.files) write_file_bytes(dir.path() + "/" + name, file.bytes());
  const std::string path = dir.file("t");
  f->images++;
  std::string where = "image " + std::to_string(n) + " (seed " + std::to_string(w.seed) + ")";
  if (!file_exists_for_test(path)) {
    // The table's creation is synced before create() returns: after that it is always there.
    if (img.acks > 0) fail(__FILE__, __LINE__, where + ": data file missing");
    else f->before_create++;
    return;
  }
  std::shared_ptr<QueueTable> t;
  Status s = TableRegistry::instance().acquire(path, &t);
  if (!s.ok()) {
    fail(__FILE__, __LINE__, where + ": recovery failed: " + s.message());
    return;
  }
  f->opened++;
  std::unordered_map<std::string, int> seen;
  RowId after = 0, id = 0, max_id = 0;
  std::string payload;
  bool found = true;
  while (t->next_row(after, &id, &payload, &found, nullptr).ok() && found) {
    after = id;
    max_id = std::max(max_id, id);
    const std::string tag = tag_of(payload);
    if (++seen[tag] == 2) fail(__FILE__, __LINE__, where + ": row " + tag + " twice");
    if (!w.acks.was_attempted(tag)) fail(__FILE__, __LINE__, where + ": row " + tag + " was never inserted");
    if (w.acks.was_refused(tag)) fail(__FILE__, __LINE__, where + ": row " + tag + " is there, but its insert was refused");
  }
  // Recovery keeps a prefix of the file, cut at a chunk boundary, and the limit held at each.
  if (w.max_rows && t->info().rows > w.max_rows)
    fail(__FILE__, __LINE__, where + ": " + std::to_string(t->info().rows) + " rows, more than MAX_ROWS " +
                                 std::to_string(w.max_rows));
  if (mode != SyncMode::kNone) {
    // What the acknowledgements published before the cut promise, row by row.
    enum class Expect { kPresent, kMaybe, kAbsent };
    std::unordered_map<std::string, Expect> expect;
    std::vector<std::string> inserted_before_truncate;
    RowId max_acked_id = 0, max_seq = 0;
    for (const Ack& a : w.acks.first(img.acks)) {
      switch (a.kind) {
        case Ack::kInserted:
        case Ack::kRelayed:
          if (!expect.count(a.payload)) expect[a.payload] = Expect::kPresent;  // (an end may come first)
          max_acked_id = std::max(max_acked_id, a.id);
          if (a.kind == Ack::kRelayed) max_seq = std::max(max_seq, a.source_seq);
          break;
        case Ack::kEnding:
          if (expect[a.payload] != Expect::kAbsent) expect[a.payload] = Expect::kMaybe;
          break;
        case Ack::kEnded:
          expect[a.payload] = a.unsynced ? Expect::kMaybe : Expect::kAbsent;
          break;
        case Ack::kTruncating:
          inserted_before_truncate.clear();
          for (auto& [p, e] : expect) {
            inserted_before_truncate.push_back(p);
            if (e == Expect::kPresent) e = Expect::kMaybe;
          }
          break;
        case Ack::kTruncated:
          for (auto& p : inserted_before_truncate) expect[p] = Expect::kAbsent;
          break;
        case Ack::kCreated:
          break;
      }
    }
    for (const auto& [p, e] : expect) {
      if (e == Expect::kPresent) {
        if (!seen.count(p)) fail(__FILE__, __LINE__, where + ": acknowledged row " + p + " is lost");
        f->acked_present++;
      } else if (e == Expect::kAbsent) {
        if (seen.count(p)) fail(__FILE__, __LINE__, where + ": removed row " + p + " is back");
        f->acked_absent++;
      }
    }
    if (t->info().next_rowid <= max_acked_id)
      fail(__FILE__, __LINE__, where + ": next row id " + std::to_string(t->info().next_rowid) +
                                   " would reuse acknowledged id " + std::to_string(max_acked_id));
    if (t->last_relayed_rowid(kSource) < max_seq)
      fail(__FILE__, __LINE__, where + ": relay state " + std::to_string(t->last_relayed_rowid(kSource)) +
                                   " is behind acknowledged " + std::to_string(max_seq));
  }
  if (t->info().next_rowid <= max_id) fail(__FILE__, __LINE__, where + ": next row id goes back");
  // The recovered table takes new rows.
  if (!insert1(*t, "after-recovery|x").ok()) fail(__FILE__, __LINE__, where + ": insert after recovery failed");
  t.reset();
  TableRegistry::instance().close_all();
}

uint64_t seed_from_env(uint64_t fallback) {
  const char* e = std::getenv("Q4M_POWER_SEED");
  return e ? std::strtoull(e, nullptr, 10) : fallback;
}

void run(SyncMode mode, uint64_t default_seed, bool unsynced_removals = false, uint64_t max_rows = 0) {
  SyncModeScope sync(mode);
  Workload w;
  w.seed = seed_from_env(default_seed);
  w.unsynced_removals = unsynced_removals;
  w.max_rows = max_rows;
  std::fprintf(stderr, "  sync mode %d%s, seed %llu (Q4M_POWER_SEED reproduces the simulated disk's choices)\n",
               static_cast<int>(mode), unsynced_removals ? " with unsynced removals" : "",
               static_cast<unsigned long long>(w.seed));
  TempDir dir;
  const std::string path = dir.file("t");
  DiskModel::instance().acks.store(0);
  // Under MAX_ROWS most INSERTs are refused before any I/O: a run makes a few hundred file
  // operations, not thousands, so it captures more often to still take enough images.
  const unsigned capture_every = mode == SyncMode::kNone ? 8 : max_rows ? 2 : 6;
  DiskModel::instance().track(dir.path(), w.seed, capture_every, 160);
  w.table = create_and_open(path);
  REQUIRE(w.table);
  set_option(*w.table, &TableOptions::max_rows, max_rows);
  w.acks.add({Ack::kCreated, "", 0, 0});
  RowId next_seq = 1;
  for (int phase = 0; phase < 4; phase++) {
    std::atomic<bool> stop{false};
    std::vector<std::thread> th;
    th.emplace_back(produce, std::ref(w), 2 * phase, 60);
    th.emplace_back(produce, std::ref(w), 2 * phase + 1, 60);
    th.emplace_back(consume, std::ref(w), 2 * phase, 70);
    th.emplace_back(consume, std::ref(w), 2 * phase + 1, 70);
    th.emplace_back(relay, std::ref(w), 20, &next_seq);
    th.emplace_back(delete_some, std::ref(w), 15);
    std::thread compactor(compact_now_and_then, std::ref(w), std::ref(stop));
    for (auto& t : th) t.join();
    stop = true;
    compactor.join();
    if (phase == 1) {  // TRUNCATE, with nothing else running
      w.acks.add({Ack::kTruncating, "", 0, 0});
      REQUIRE(w.table->truncate().ok());
      w.acks.add({Ack::kTruncated, "", 0, 0});
    }
    // A clean close (index snapshot) and a reopen, as a server restart does.
    w.table.reset();
    w.table = reopen(path);
    REQUIRE(w.table);
    set_option(*w.table, &TableOptions::max_rows, max_rows);  // the engine does so at every open
  }
  w.table.reset();
  TableRegistry::instance().close_all();
  DiskModel::Seen seen = DiskModel::instance().seen();
  std::vector<CrashImage> images = DiskModel::instance().stop();
  // The simulation saw the I/O it is about (else this test checks nothing).
  CHECK(seen.writes > 100);
  CHECK(seen.renames > 0);
  CHECK(seen.dir_syncs > 0);
  if (mode != SyncMode::kNone) CHECK(seen.syncs > 100);
  CHECK(images.size() >= 50);

  Findings f;
  for (size_t i = 0; i < images.size(); i++) verify_image(images[i], i, w, mode, &f);
  std::fprintf(stderr, "  %zu crash images opened of %zu; %zu acknowledged rows checked present, %zu removals "
                       "checked absent; %llu writes, %llu syncs, %llu renames simulated\n",
               f.opened, f.images, f.acked_present, f.acked_absent, static_cast<unsigned long long>(seen.writes),
               static_cast<unsigned long long>(seen.syncs), static_cast<unsigned long long>(seen.renames));
  CHECK_EQ(f.opened + f.before_create, images.size());
  // MAX_ROWS keeps few rows present. With unsynced removals too, a removal is covered only by
  // a later synced INSERT, and most INSERTs are refused: the removals checked ranged from 4
  // to 4,234 over 5 runs, so a floor there only made the test flaky (its point is the
  // refused rows and the limit, checked in every image).
  const size_t absent_floor = max_rows && unsynced_removals ? 0 : 100;
  if (mode != SyncMode::kNone) CHECK(f.acked_present > (max_rows ? 50 : 1000) && f.acked_absent >= absent_floor);
  if (max_rows) CHECK(w.acks.refused_count() > 0);  // else the limit was never tested
}

}  // namespace

TEST(power_loss_fdatasync_keeps_every_acknowledgement) { run(SyncMode::kFdatasync, 20261124); }
TEST(power_loss_fsync_keeps_every_acknowledgement) { run(SyncMode::kFsync, 4242); }
TEST(power_loss_sync_none_still_opens_without_duplicates) { run(SyncMode::kNone, 77); }
TEST(power_loss_with_max_rows_never_shows_a_refused_row_nor_more_rows_than_the_limit) {
  run(SyncMode::kFdatasync, 5150, false, 8);
  run(SyncMode::kFdatasync, 6160, true, 8);  // a cut may undo unsynced removals: still a prefix
}
TEST(power_loss_unsynced_removals_keep_every_insert_and_every_synced_removal) {
  run(SyncMode::kFdatasync, 8128, true);
}
