// DLManagedTensorVersioned (DLPack >= 1.0) in and out of SharedTensor, on every build (the structs
// come from parenchyma/dlpack_abi.h, not from a system dlpack.h). Checks: the version and
// READ_ONLY flag on export, zero copy both ways on the host, the flag honoured on import, ownership (the deleter runs once, after the last user; on a
// refusal the caller keeps the tensor), a foreign major version refused and released as DLPack
// asks, and an op on the imported bytes against a double-precision loop.
#include <parenchyma/blas.hpp>
#include <parenchyma/dlpack.hpp>
#include <parenchyma/parenchyma.hpp>

#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

namespace {
int failures = 0;
void check(bool ok, const std::string& what) {
  std::printf("%s  %s\n", ok ? "ok  " : "FAIL", what.c_str());
  failures += ok ? 0 : 1;
}

struct Producer {
  std::vector<double> data;
  std::vector<int64_t> shape{3, 7};
  DLManagedTensorVersioned m{};
  int deleted = 0;
  explicit Producer(uint32_t major = DLPACK_MAJOR_VERSION, uint64_t flags = 0) {
    std::mt19937_64 g(std::random_device{}());
    std::uniform_real_distribution<double> u(-1, 1);
    data.resize(21);
    for (double& v : data)
      v = u(g);
    m.version = {major, DLPACK_MINOR_VERSION};
    m.manager_ctx = this;
    m.deleter = [](DLManagedTensorVersioned* self) {
      ++static_cast<Producer*>(self->manager_ctx)->deleted;
    };
    m.flags = flags;
    m.dl_tensor.data = data.data();
    m.dl_tensor.device = {kDLCPU, 0};
    m.dl_tensor.ndim = 2;
    m.dl_tensor.dtype = {kDLFloat, 64, 1};
    m.dl_tensor.shape = shape.data();
  }
};
} // namespace

int main() {
  using namespace parenchyma;
  std::unique_ptr<Backend> native;
  try {
    native = std::make_unique<Backend>("native");
  } catch (const error& e) {
    std::printf("SKIPPED: no native backend: %s\n", e.what());
    return 77;
  }
  {
    Producer p;
    const std::vector<double> before = p.data;
    {
      TensorStorage t = from_dlpack(&p.m, native.get());
      check(p.deleted == 0, "import takes the tensor without releasing it");
      blas::scal(*native, t.size(), 0.5, t, 1);
      native->synchronize();
      bool same = true;
      for (size_t i = 0; i < before.size(); ++i)
        same = same && std::fabs(p.data[i] - 0.5 * before[i]) <= 1e-15 * std::fabs(before[i]);
      check(same, "scal ran in place on the imported bytes (against a double loop)");
      DLManagedTensorVersioned* out = to_dlpack_versioned(t, *native);
      check(out->version.major == DLPACK_MAJOR_VERSION &&
                out->version.minor == DLPACK_MINOR_VERSION,
            "export carries the library's DLPack version");
      check(out->dl_tensor.data == p.data.data(), "export is zero copy (the same pointer)");
      check((out->flags & DLPACK_FLAG_BITMASK_READ_ONLY) == 0,
            "a writable tensor exports writable");
      out->deleter(out);
      check(p.deleted == 0, "the producer's bytes outlive the consumer's release");
    }
    check(p.deleted == 1, "the deleter ran once, after the last user");
  }
  {
    Producer p(DLPACK_MAJOR_VERSION, DLPACK_FLAG_BITMASK_READ_ONLY);
    TensorStorage t = from_dlpack(&p.m, native.get());
    bool refused = false;
    try {
      blas::scal(*native, t.size(), 2.0, t, 1);
    } catch (const error& e) {
      refused = std::string(e.what()).find("read-only") != std::string::npos;
    }
    check(refused, "READ_ONLY on import refuses writes, naming why");
    DLManagedTensorVersioned* out = to_dlpack_versioned_host(t);
    check((out->flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0,
          "a read-only tensor exports READ_ONLY");
    out->deleter(out);
  }
  {
    Producer p(DLPACK_MAJOR_VERSION + 1);
    bool refused = false;
    try {
      (void)from_dlpack(&p.m, native.get());
    } catch (const error& e) {
      refused = e.code() == errc::unsupported;
    }
    check(refused && p.deleted == 1,
          "a foreign major version is refused and released (deleter called once)");
  }
  {
    bool refused = false;
    try {
      (void)from_dlpack(static_cast<DLManagedTensorVersioned*>(nullptr), native.get());
    } catch (const error&) {
      refused = true;
    }
    check(refused, "a null DLManagedTensorVersioned is refused");
  }
  {
    Producer p;
    std::vector<int64_t> bad{3, -7};
    p.m.dl_tensor.shape = bad.data();
    bool refused = false;
    try {
      (void)from_dlpack(&p.m, native.get());
    } catch (const error&) {
      refused = true;
    }
    check(refused && p.deleted == 0, "a malformed tensor is refused; the caller keeps it");
    p.m.deleter(&p.m);
  }
  std::printf("%d failure(s)\n", failures);
  return failures == 0 ? 0 : 1;
}
