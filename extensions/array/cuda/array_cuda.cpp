// Array bundle for the CUDA framework: every array op (pcy_array.h) as CUDA C++ kernels written
// per program by the shared code generator (array_codegen.hpp) and compiled on first use by the
// framework's NVRTC program build (which caches the cubins on disk) with --fmad=false (no
// contraction: a fused and an unfused program give the same bits); NVRTC's defaults keep f32
// division and sqrt IEEE (-prec-div=true, -prec-sqrt=true) and denormals (-ftz=false). The
// context maps each program's key (instruction words, operand dtypes, rank, reduced count, kind)
// to its kernels; shapes, strides and offsets reach the kernels as arguments. Tensors reach them
// as device addresses. Nothing CUDA is linked.
#include "array_gpu.hpp"
#include "array_random_header.hpp" // generated: pcy_array_random.h's text

#include <memory>

namespace {

using namespace parenchyma;
namespace ag = parenchyma::array_bundle::gpu;

constexpr const char* bundle_name = "array_cuda";

constexpr sdk::bundle_identity identity{
    bundle_name, PCY_ARRAY_EXTENSION, "cuda",
    "array expressions, reductions, scans and random numbers as CUDA kernels generated per "
    "program (NVRTC)"};

class array_cuda_bundle : public sdk::bundle_base<identity, ag::gpu_context> {
public:
  explicit array_cuda_bundle(const pcy_host_services& host) : bundle_base(host) {
    ag::register_ops<sdk::op_table<array_cuda_bundle>, ag::gpu_context>(
        table_, "parenchyma CUDA kernels generated per program (NVRTC)");
  }

  std::span<const pcy_op_desc> ops() const { return table_.ops(); }

  context_type* create_context(const pcy_bundle_context_args& a) {
    sdk::require_slots(*a.framework, bundle_name,
                       {PCY_FRAMEWORK_SLOT_native_handle, PCY_FRAMEWORK_SLOT_program_build,
                        PCY_FRAMEWORK_SLOT_kernel_create, PCY_FRAMEWORK_SLOT_kernel_launch});
    auto cx = std::make_unique<ag::gpu_context>(a);
    const sdk::device_facts dev = sdk::device_facts_of(a);
    cx->dl = ag::dialect::cuda;
    cx->bundle = bundle_name;
    cx->random_header = array_cuda::random_header;
    cx->log = &log_;
    cx->fp64 = dev.fp64;
    cx->device_name = dev.name.empty() ? std::string("the CUDA device") : dev.name;
    cx->no_fp64_reason = sdk::str(bundle_name, ": ", cx->device_name,
                                  " reports no fp64: f64 programs cannot run on it");
    cx->wg = 256;
    cx->max_groups = dev.compute_units > 0 ? static_cast<uint64_t>(dev.compute_units) * 16 : 4096;
    cx->options = "--fmad=false --disable-warnings";
    cx->configure(settings_);
    return cx.release();
  }

private:
  sdk::op_table<array_cuda_bundle> table_;
};

} // namespace

PCY_BUNDLE_PLUGIN(array_cuda_bundle)
