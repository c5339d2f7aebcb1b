#include "core/table/commit_gate.h"

#include <atomic>

namespace q4m {

namespace {
std::atomic<CommitGate*> g_gate{nullptr};
}  // namespace

CommitGate* CommitGate::get() { return g_gate.load(std::memory_order_acquire); }
void CommitGate::set(CommitGate* gate) { g_gate.store(gate, std::memory_order_release); }

}  // namespace q4m
