// libFuzzer target: the selection grammar of PARENCHYMA_BACKEND ("cuda:1,opencl,!native"). Any
// input must parse into valid items or give a parenchyma::error(errc::config) with a short
// message.
#include "internal.hpp"

#include <cstdint>
#include <cstdlib>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace parenchyma;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const auto items = detail::parse_selection(text, "PARENCHYMA_BACKEND");
    if (items.empty()) std::abort();
    for (const auto& i : items) {
      if (!detail::valid_name(i.name)) std::abort();
      if (i.deny && i.device) std::abort();
    }
  } catch (const error& e) {
    if (e.code() != errc::config) std::abort();
    if (e.message().size() > 1024) std::abort();
  }
  return 0;
}
