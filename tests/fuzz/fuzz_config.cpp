// libFuzzer target: the JSON config parser (what PARENCHYMA_CONFIG points at). Any input must
// give a Config or a parenchyma::error(errc::config) with a short message — never a crash, an
// abort, another exception type, deep recursion or a message quoting the whole input.
#include "internal.hpp"

#include <cstdint>
#include <cstdlib>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace parenchyma;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const Config c = detail::parse_config(text, "config fuzz.json", Config{});
    // A parsed config's names are names.
    for (const auto& n : c.deny)
      if (!detail::valid_name(n)) std::abort();
  } catch (const error& e) {
    if (e.code() != errc::config) std::abort();
    if (e.message().size() > 2048) std::abort(); // errors quote short prefixes only
  }
  return 0;
}
