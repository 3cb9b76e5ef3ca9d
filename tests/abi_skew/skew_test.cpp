// ABI version skew, both ways:
//  1. plugins built against the frozen 1.0 headers (skew_fw_1_0.c, skew_bundle_1_0.c, compiled
//     against tests/abi_skew/abi-1.0 only) load in this 1.1 host with reduced capability, are
//     routed to through the 1.1 schema path, and never crash;
//  2. plugins built against the 1.1 SDK (the stub framework and bundle, and the native BLAS
//     bundle) work when a 1.0 host drives them: every struct they get is 1.0-sized, and the
//     host services have no setting callback.
#include "loader/testing.hpp"
#include "support/catch.hpp"

#include <parenchyma/abi/ext/pcy_blas.h>
#include <parenchyma/parenchyma.hpp>
#include <parenchyma/sdk/host.hpp>

#include <cmath>
#include <cstring>
#include <dlfcn.h>

using namespace parenchyma;
using namespace pcy_test;

namespace {

#define SKEW_NEGATE_ARGS(X) X(n, INT, 0, OP, ANY) X(x, TENSOR, INOUT, OP, ANY)
PCY_DECLARE_OP_SCHEMA(skew, negate, "stubext", SKEW_NEGATE_ARGS)
const OpKey negate_by_schema{skew_negate_schema, PCY_DTYPE_F32};
const OpKey negate_by_signature{"stubext", "negate", PCY_DTYPE_F32, "i t="};

// The 1.0 layout of the structs that grew in 1.1, as a 1.0 sender fills them.
constexpr size_t op_call_1_0 = 48;       // sizeof(pcy_op_call) in 1.0 (44 bytes + padding)
constexpr size_t host_services_1_0 = 56; // sizeof(pcy_host_services) in 1.0
static_assert(PCY_OP_CALL_SIZE_1_0 <= op_call_1_0 && op_call_1_0 < PCY_OP_CALL_SIZE_1_1);
static_assert(PCY_HOST_SERVICES_SIZE_1_0 == host_services_1_0);

void* open_plugin(const fs::path& file) {
  void* h = ::dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
  INFO(file << ": " << (h ? "" : ::dlerror()));
  REQUIRE(h != nullptr);
  return h;
}

} // namespace

TEST_CASE("a 1.0 framework and bundle load in the 1.1 host and work") {
  Registry r(isolated({fs::path(PCY_SKEW_DIR)}));
  INFO("load report:\n" << describe(r));
  const Framework* fw = r.find_framework("skew10");
  REQUIRE(fw != nullptr);
  CHECK(fw->abi_minor() == 0);
  CHECK(fw->api().event_record == nullptr); // absent in its table: unsupported, never called
  REQUIRE(r.bundles().size() == 1);
  const BundleInfo& b = *r.bundles()[0];
  CHECK(b.name() == "skewext_skew10");
  CHECK(b.api().op_available == nullptr); // a 1.1 slot beyond its table: zeroed by the host
  for (const OpKey* key : {&negate_by_schema, &negate_by_signature}) {
    Backend be(r, "skew10");
    const OpRoute route = be.route(*key);
    CHECK(route.bundle == "skewext_skew10");
    const int64_t n = 777;
    SharedTensor<float> x({n + 3});
    const auto v = random_values<float>(static_cast<size_t>(n + 3));
    std::copy(v.begin(), v.end(), x.write_only().begin());
    const OpArg args[] = {OpArg::integer(n), OpArg::inout(x)};
    be.invoke(*key, args);
    const auto got = x.read();
    for (int64_t i = 0; i < n; ++i)
      REQUIRE(got[i] == -v[i]);
    CHECK(got[n] == v[n]);
  }
}

TEST_CASE("1.1 plugins driven the way a 1.0 host drives them") {
  // A 1.0 host: services without the setting callback, 1.0-sized argument structs.
  pcy_host_services host{};
  host.struct_size = host_services_1_0;
  host.host_abi_major = 1;
  host.host_abi_minor = 0;
  host.log_level = PCY_LOG_OFF;
  host.setting = reinterpret_cast<const char* (*)(void*, const char*)>(0x1); // must not be read

  SECTION("the stub framework and its stubext bundle") {
    void* fw_lib = open_plugin(stub_dir("good") / "parenchyma-stub.so");
    void* b_lib = open_plugin(stub_dir("bundle_good") / "parenchyma-stubext_stub.so");
    auto fw_entry =
        reinterpret_cast<pcy_framework_entry_fn>(::dlsym(fw_lib, PCY_FRAMEWORK_ENTRY_SYMBOL));
    auto b_entry = reinterpret_cast<pcy_bundle_entry_fn>(::dlsym(b_lib, PCY_BUNDLE_ENTRY_SYMBOL));
    REQUIRE(fw_entry != nullptr);
    REQUIRE(b_entry != nullptr);
    const pcy_framework_api& fw = *fw_entry();
    const pcy_bundle_api& bundle = *b_entry();
    {
      sdk::host::framework f(&fw, &host);
      pcy_context ctx = nullptr;
      const uint32_t dev = 0;
      throw_if(fw.context_create(f.plugin(), &dev, 1, &ctx));
      pcy_queue q = nullptr;
      throw_if(fw.queue_create(ctx, 0, &q));
      pcy_memory_alloc_args m{};
      m.struct_size = PCY_MEMORY_ALLOC_ARGS_SIZE_1_0;
      m.context = ctx;
      m.bytes = 64 * sizeof(float);
      throw_if(fw.memory_alloc(&m));
      std::vector<float> v = random_values<float>(64), back(64);
      pcy_memory_transfer_args w{};
      w.struct_size = PCY_MEMORY_TRANSFER_ARGS_SIZE_1_0;
      w.queue = q;
      w.memory = m.memory;
      w.host_pointer = v.data();
      w.bytes = m.bytes;
      w.blocking = true;
      throw_if(fw.memory_write(&w));

      pcy_bundle_init_args bi{};
      bi.struct_size = PCY_BUNDLE_INIT_ARGS_SIZE_1_0;
      bi.host = &host;
      throw_if(bundle.initialize(&bi));
      const pcy_op_desc* ops = nullptr;
      size_t count = 0;
      throw_if(bundle.ops(bi.plugin, &ops, &count));
      REQUIRE(count >= 1);
      CHECK(std::string(ops[0].signature) == "i t="); // what a 1.0 host reads
      pcy_bundle_context_args ca{};
      ca.struct_size = PCY_BUNDLE_CONTEXT_ARGS_SIZE_1_0;
      ca.plugin = bi.plugin;
      ca.framework = &fw;
      ca.framework_plugin = f.plugin();
      ca.context = ctx;
      ca.queue = q;
      throw_if(bundle.context_init(&ca));

      pcy_tensor t{};
      t.struct_size = PCY_TENSOR_SIZE_1_0;
      t.memory = m.memory;
      t.dtype = PCY_DTYPE_F32;
      const int64_t shape[] = {64};
      t.ndim = 1;
      t.shape = shape;
      pcy_op_arg args[2] = {{PCY_OP_ARG_INT, PCY_INTENT_IN, nullptr, 60, 0},
                            {PCY_OP_ARG_TENSOR, PCY_INTENT_INOUT, &t, 0, 0}};
      // A 1.0 call: arg_ext and the workspace lie beyond its struct_size (poisoned here).
      unsigned char raw[sizeof(pcy_op_call)];
      std::memset(raw, 0xab, sizeof raw);
      auto* call = reinterpret_cast<pcy_op_call*>(raw);
      call->struct_size = op_call_1_0;
      call->ext = nullptr;
      call->context = ca.bundle;
      call->queue = q;
      call->args = args;
      call->arg_count = 2;
      throw_if(ops[0].fn(call));
      w.host_pointer = back.data();
      throw_if(fw.memory_read(&w));
      for (int i = 0; i < 60; ++i)
        REQUIRE(back[i] == -v[i]);
      CHECK(back[63] == v[63]);

      bundle.context_teardown(ca.bundle);
      bundle.shutdown(bi.plugin);
      fw.memory_free(m.memory);
      fw.queue_destroy(q);
      fw.context_destroy(ctx);
    }
    ::dlclose(b_lib);
    ::dlclose(fw_lib);
  }

  SECTION("the native framework and the native BLAS bundle: axpy") {
    if (native_plugin().empty() || !fs::exists(PCY_SKEW_BLAS_NATIVE)) {
      WARN("skipped: the native plugin or its BLAS bundle is not part of this build");
      return;
    }
    void* fw_lib = open_plugin(native_plugin());
    void* b_lib = open_plugin(PCY_SKEW_BLAS_NATIVE);
    const pcy_framework_api& fw =
        *reinterpret_cast<pcy_framework_entry_fn>(::dlsym(fw_lib, PCY_FRAMEWORK_ENTRY_SYMBOL))();
    const pcy_bundle_api& bundle =
        *reinterpret_cast<pcy_bundle_entry_fn>(::dlsym(b_lib, PCY_BUNDLE_ENTRY_SYMBOL))();
    {
      sdk::host::framework f(&fw, &host);
      pcy_context ctx = nullptr;
      const uint32_t dev = 0;
      throw_if(fw.context_create(f.plugin(), &dev, 1, &ctx));
      pcy_queue q = nullptr;
      throw_if(fw.queue_create(ctx, 0, &q));
      const int64_t n = 1001;
      auto x = random_values<float>(n), y = random_values<float>(n);
      const auto y0 = y;
      // Host pointers imported into native memory (zero-copy), as the core does.
      auto wrap = [&](std::vector<float>& v) {
        pcy_memory_handle h{};
        h.struct_size = sizeof h;
        h.kind = PCY_HANDLE_HOST_POINTER;
        h.host_pointer = v.data();
        h.bytes = v.size() * sizeof(float);
        pcy_memory_import_args im{};
        im.struct_size = PCY_MEMORY_IMPORT_ARGS_SIZE_1_0;
        im.context = ctx;
        im.handle = &h;
        throw_if(fw.memory_import(&im));
        return im.memory;
      };
      pcy_memory mx = wrap(x), my = wrap(y);
      pcy_bundle_init_args bi{};
      bi.struct_size = PCY_BUNDLE_INIT_ARGS_SIZE_1_0;
      bi.host = &host;
      throw_if(bundle.initialize(&bi));
      const pcy_op_desc* ops = nullptr;
      size_t count = 0;
      throw_if(bundle.ops(bi.plugin, &ops, &count));
      const pcy_op_desc* axpy = nullptr;
      for (size_t i = 0; i < count; ++i)
        if (std::string(ops[i].name) == "axpy" && ops[i].dtype == PCY_DTYPE_F32) axpy = &ops[i];
      REQUIRE(axpy != nullptr);
      CHECK(std::string(axpy->signature) == "i s t< i t= i");
      // A 1.0 host finds every op by the exact signature of the 1.0 header (as written in
      // abi-1.0/parenchyma/abi/ext/pcy_blas.h), in both dtypes.
      const std::pair<const char*, const char*> sig_1_0[] = {
          {"asum", "i t< i t>"},
          {"axpy", "i s t< i t= i"},
          {"axpby", "i s t< i s t= i"},
          {"copy", "i t< i t> i"},
          {"dot", "i t< i t< i t>"},
          {"nrm2", "i t< i t>"},
          {"scal", "i s t= i"},
          {"swap", "i t= i t= i"},
          {"gemv", "i i i s t< i t< i s t= i"},
          {"gemm", "i i i i i s t< i t< i s t= i"}};
      for (const auto& [op, sig] : sig_1_0)
        for (pcy_dtype dt : {PCY_DTYPE_F32, PCY_DTYPE_F64}) {
          bool found = false;
          for (size_t i = 0; i < count; ++i)
            found = found || (std::string(ops[i].name) == op && ops[i].dtype == dt &&
                              std::string(ops[i].signature) == sig);
          INFO("blas." << op << " dtype " << int(dt) << " with the 1.0 signature " << sig);
          CHECK(found);
        }
      pcy_bundle_context_args ca{};
      ca.struct_size = PCY_BUNDLE_CONTEXT_ARGS_SIZE_1_0;
      ca.plugin = bi.plugin;
      ca.framework = &fw;
      ca.framework_plugin = f.plugin();
      ca.context = ctx;
      ca.queue = q;
      throw_if(bundle.context_init(&ca));
      const int64_t shape[] = {n};
      pcy_tensor tx{PCY_TENSOR_SIZE_1_0, nullptr, mx, nullptr, PCY_DTYPE_F32, 1, shape, nullptr, 0};
      pcy_tensor ty{PCY_TENSOR_SIZE_1_0, nullptr, my, nullptr, PCY_DTYPE_F32, 1, shape, nullptr, 0};
      const pcy_op_arg args[6] = {{PCY_OP_ARG_INT, PCY_INTENT_IN, nullptr, n, 0},
                                  {PCY_OP_ARG_FLOAT, PCY_INTENT_IN, nullptr, 0, 2.5},
                                  {PCY_OP_ARG_TENSOR, PCY_INTENT_IN, &tx, 0, 0},
                                  {PCY_OP_ARG_INT, PCY_INTENT_IN, nullptr, 1, 0},
                                  {PCY_OP_ARG_TENSOR, PCY_INTENT_INOUT, &ty, 0, 0},
                                  {PCY_OP_ARG_INT, PCY_INTENT_IN, nullptr, 1, 0}};
      unsigned char raw[sizeof(pcy_op_call)];
      std::memset(raw, 0xab, sizeof raw);
      auto* call = reinterpret_cast<pcy_op_call*>(raw);
      call->struct_size = op_call_1_0;
      call->ext = nullptr;
      call->context = ca.bundle;
      call->queue = q;
      call->args = args;
      call->arg_count = 6;
      throw_if(axpy->fn(call));
      throw_if(fw.queue_finish(q));
      for (int64_t i = 0; i < n; ++i) // OpenBLAS may fuse the multiply-add: one rounding apart
        REQUIRE(std::fabs(y[i] - (2.5 * double(x[i]) + double(y0[i]))) <= 1e-6);
      bundle.context_teardown(ca.bundle);
      bundle.shutdown(bi.plugin);
      fw.memory_free(mx);
      fw.memory_free(my);
      fw.queue_destroy(q);
      fw.context_destroy(ctx);
    }
    ::dlclose(b_lib);
    ::dlclose(fw_lib);
  }
}
