// A shared library that uses the SDK's blob cache the way a plugin does (tests/sdk): the test
// loads it, has it write entries on the cache's writer thread, and unloads it. What the cache
// keeps for the process must go with the library: under LeakSanitizer, state still allocated
// once its pointer's library is unmapped is reported as a leak at exit.
#include <parenchyma/sdk/blob_cache.hpp>

#include <optional>

extern "C" __attribute__((visibility("default"))) int
pcy_test_blob_cache_module_run(const char* root) {
  parenchyma::sdk::logger log; // silent
  parenchyma::sdk::blob_cache cache(root, "sdk-module", log);
  const auto key = parenchyma::sdk::sha256().field(root).finish();
  cache.store_later(key, [] {
    return std::optional<parenchyma::sdk::blob_cache::blob>({1, 2, 3});
  });
  const auto back = cache.load(key); // waits for the writer thread
  return back && back->size() == 3 ? 0 : 1;
}
