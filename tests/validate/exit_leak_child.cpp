// The child of the validate test's exit-leak case (issue 21.8): a program that exports a tensor
// through DLPack with validation on and never deletes the export. The export keeps the
// registry's state alive after the Registry object is gone, so its leak check at close never
// runs; the layer must report the leaked memory when the process exits. With --release the
// export is deleted first: then nothing is reported.
#include "loader/testing.hpp"

#include <parenchyma/dlpack.hpp>
#include <parenchyma/parenchyma.hpp>

#include <cstdio>
#include <cstring>

using namespace parenchyma;

// The leak is this program's point: LeakSanitizer, where the test runs under it, is told not to
// report it (the validation layer's own report at exit is what the parent checks).
extern "C" __attribute__((visibility("default"))) int __lsan_is_turned_off() { return 1; }

int main(int argc, char** argv) {
  const bool release = argc > 1 && std::strcmp(argv[1], "--release") == 0;
  RegistryOptions o = pcy_test::isolated({PCY_TEST_PLUGIN_DIR});
  o.validate = true;
  DLManagedTensor* exported = nullptr;
  try {
    Registry r(o);
    Backend b(r, "native");
    TensorStorage t(PCY_DTYPE_F32, {64});
    auto* p = static_cast<float*>(t.host(access::write));
    for (int i = 0; i < 64; ++i)
      p[i] = static_cast<float>(i);
    t.device(b, access::read);
    exported = to_dlpack(t, b);
  } catch (const std::exception& e) {
    std::printf("child: %s\n", e.what());
    return 2;
  }
  // The Registry object is gone; what it loaded is not: the export holds it.
  if (release && exported != nullptr && exported->deleter != nullptr) exported->deleter(exported);
  std::printf("child: exiting with the export %s\n", release ? "deleted" : "leaked");
  return 0;
}
