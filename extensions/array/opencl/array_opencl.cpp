// Array bundle for the OpenCL framework: every array op (pcy_array.h) as OpenCL C 1.2 kernels
// written per program by the shared code generator (array_codegen.hpp) and built on first use
// through the framework's program build (its kernel cache keeps the binaries); the context maps
// each program's key (instruction words, operand dtypes, rank, reduced count, kind) to its
// kernels, so a new shape with the same instructions builds nothing. Shapes, strides and offsets
// reach the kernels as arguments. Builds ask for correctly rounded f32 divide and sqrt
// (-cl-fp32-correctly-rounded-divide-sqrt); a device that refuses it builds without (OpenCL
// 1.2's bounds: 2.5 ulp division, 3 ulp sqrt, logged once). Contraction is off in every kernel
// (#pragma OPENCL FP_CONTRACT OFF). f64 needs cl_khr_fp64: without it the f64 ops are
// unavailable and any program computing in f64 is refused (PCY_ERR_UNSUPPORTED, naming the
// device).
#include "array_gpu.hpp"
#include "array_random_header.hpp" // generated: pcy_array_random.h's text

#include <memory>

namespace {

using namespace parenchyma;
namespace ag = parenchyma::array_bundle::gpu;

constexpr const char* bundle_name = "array_opencl";

constexpr sdk::bundle_identity identity{
    bundle_name, PCY_ARRAY_EXTENSION, "opencl",
    "array expressions, reductions, scans and random numbers as OpenCL C kernels generated per "
    "program"};

class array_opencl_bundle : public sdk::bundle_base<identity, ag::gpu_context> {
public:
  explicit array_opencl_bundle(const pcy_host_services& host) : bundle_base(host) {
    ag::register_ops<sdk::op_table<array_opencl_bundle>, ag::gpu_context>(
        table_, "parenchyma OpenCL C kernels generated per program");
  }

  std::span<const pcy_op_desc> ops() const { return table_.ops(); }

  context_type* create_context(const pcy_bundle_context_args& a) {
    sdk::require_slots(*a.framework, bundle_name,
                       {PCY_FRAMEWORK_SLOT_program_build, PCY_FRAMEWORK_SLOT_kernel_create,
                        PCY_FRAMEWORK_SLOT_kernel_launch});
    auto cx = std::make_unique<ag::gpu_context>(a);
    const sdk::device_facts dev = sdk::device_facts_of(a);
    cx->dl = ag::dialect::opencl;
    cx->bundle = bundle_name;
    cx->random_header = array_opencl::random_header;
    cx->log = &log_;
    cx->fp64 = dev.fp64;
    cx->cpu = dev.cpu;
    cx->device_name = dev.name.empty() ? std::string("the OpenCL device") : dev.name;
    cx->no_fp64_reason = sdk::str(bundle_name, ": ", cx->device_name,
                                  " has no fp64 (cl_khr_fp64): f64 programs cannot run on it");
    const int64_t max_wg = dev.max_work_group > 0 ? dev.max_work_group : 256;
    uint32_t wg = 1;
    while (wg * 2 <= std::min<int64_t>(max_wg, dev.cpu ? 64 : 256))
      wg *= 2;
    cx->wg = wg;
    cx->max_groups =
        dev.cpu ? static_cast<uint64_t>(std::clamp<int64_t>(dev.compute_units * 4, 4, 1024)) : 4096;
    cx->options = "-cl-fp32-correctly-rounded-divide-sqrt";
    cx->fallback_options = " ";
    cx->configure(settings_);
    return cx.release();
  }

private:
  sdk::op_table<array_opencl_bundle> table_;
};

} // namespace

PCY_BUNDLE_PLUGIN(array_opencl_bundle)
