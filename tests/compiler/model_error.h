#pragma once
// Test helper: the message of the ModelError a call throws.
#include <functional>
#include <string>

#include "compiler/import/import.h"

namespace npusim::compiler {

inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const ModelError& e) {
    return e.what();
  }
  return "<no ModelError>";
}

}  // namespace npusim::compiler
