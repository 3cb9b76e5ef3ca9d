// What a call throws, for tests that check an error's words: the message of the
// parenchyma::error fn throws, or "" when it throws none.
#pragma once

#include <parenchyma/error.hpp>

#include <string>

namespace pcy_test_support {

template <class F> std::string message_of(F&& fn) {
  try {
    fn();
  } catch (const parenchyma::error& e) {
    return e.what();
  }
  return {};
}

} // namespace pcy_test_support
