#include "core/table/subscription_log.h"

#include <atomic>

namespace q4m {

namespace {
std::atomic<SubscriptionLog*> g_log{nullptr};
}  // namespace

SubscriptionLog* SubscriptionLog::get() { return g_log.load(std::memory_order_acquire); }
void SubscriptionLog::set(SubscriptionLog* log) { g_log.store(log, std::memory_order_release); }

}  // namespace q4m
