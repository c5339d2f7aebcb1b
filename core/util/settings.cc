#include "core/util/settings.h"

namespace q4m {

StorageSettings& settings() {
  static StorageSettings s;
  return s;
}

}  // namespace q4m
