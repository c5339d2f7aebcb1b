#include "core/util/blocking.h"

namespace q4m {
namespace {

BlockingHooks& hooks() {
  static BlockingHooks h;
  return h;
}

}  // namespace

void set_blocking_hooks(const BlockingHooks& h) { hooks() = h; }

BlockingScope::BlockingScope(BlockingWait what) : announced_(hooks().begin && hooks().end) {
  if (announced_) token_ = hooks().begin(what);
}

BlockingScope::~BlockingScope() {
  if (announced_) hooks().end(token_);
}

}  // namespace q4m
