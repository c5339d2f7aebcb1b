// Sleeps that may last, announced to the embedding server so that it can run other work
// meanwhile (MariaDB's thread pool: thd_wait_begin/thd_wait_end for the current thread).
// The core only marks where it sleeps; what is done about it is the server's business.
#pragma once

namespace q4m {

enum class BlockingWait {
  kRow,     // a consumer waiting for a row (queue_wait)
  kCommit,  // a caller waiting for the group-commit leader's sync (durable modes)
  kSync,    // the leader's own fdatasync/fsync
};

// begin() returns a token that the matching end() gets back (the server keeps there what
// to restore after the sleep, e.g. the thread's state shown by SHOW PROCESSLIST); scopes
// nest, so each scope keeps its own token.
struct BlockingHooks {
  const void* (*begin)(BlockingWait) = nullptr;
  void (*end)(const void* token) = nullptr;
};

// Installed once, before any table is used (plugin init); empty hooks by default.
void set_blocking_hooks(const BlockingHooks& hooks);

// Announces a sleep for its lifetime.
class BlockingScope {
 public:
  explicit BlockingScope(BlockingWait what);
  ~BlockingScope();
  BlockingScope(const BlockingScope&) = delete;
  BlockingScope& operator=(const BlockingScope&) = delete;

 private:
  bool announced_;
  const void* token_ = nullptr;
};

}  // namespace q4m
