// A sleeping wait on a 32-bit atomic (Linux futex): the thread sleeps while the word
// still holds `expected`; a waker stores a new value, then calls futex_wake. Spurious
// returns happen: callers loop on the value. A wake may target a word whose owner has
// already seen the new value and gone; that only causes such a spurious return elsewhere.
#pragma once
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>

namespace q4m {

static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t), "futex word");

inline void futex_wait(std::atomic<uint32_t>* word, uint32_t expected) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT_PRIVATE, expected, nullptr, nullptr, 0);
}

inline void futex_wake_one(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
}

}  // namespace q4m
