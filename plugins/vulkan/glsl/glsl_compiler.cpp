// parenchyma-glsl: the GLSL -> SPIR-V compiler of the Vulkan plugin, as a module of its own that
// the plugin opens on its first GLSL build (never before: glslang is large). It wraps shaderc
// built from the distribution's static archives (Debian's libshaderc.so.1 cannot be opened on its
// own: it leaves glslang and SPIRV-Tools symbols to the program, as glslc provides them). Its one
// export fills the plugin's table of shaderc functions (vk_loader.hpp), each a forwarder with the
// table's plain types.
#include "../vk_loader.hpp"

#include <shaderc/shaderc.h>

namespace {
using parenchyma::vulkan::shaderc_api;

shaderc_api::compiler compiler_initialize() { return shaderc_compiler_initialize(); }
void compiler_release(shaderc_api::compiler c) {
  shaderc_compiler_release(static_cast<shaderc_compiler_t>(c));
}
shaderc_api::options options_initialize() { return shaderc_compile_options_initialize(); }
void options_release(shaderc_api::options o) {
  shaderc_compile_options_release(static_cast<shaderc_compile_options_t>(o));
}
void set_target_env(shaderc_api::options o, int env, uint32_t version) {
  shaderc_compile_options_set_target_env(static_cast<shaderc_compile_options_t>(o),
                                         static_cast<shaderc_target_env>(env), version);
}
void set_optimization_level(shaderc_api::options o, int level) {
  shaderc_compile_options_set_optimization_level(static_cast<shaderc_compile_options_t>(o),
                                                 static_cast<shaderc_optimization_level>(level));
}
void add_macro(shaderc_api::options o, const char* name, size_t name_size, const char* value,
               size_t value_size) {
  shaderc_compile_options_add_macro_definition(static_cast<shaderc_compile_options_t>(o), name,
                                               name_size, value, value_size);
}
shaderc_api::result compile(shaderc_api::compiler c, const char* text, size_t size, int kind,
                            const char* file, const char* entry, shaderc_api::options o) {
  return shaderc_compile_into_spv(static_cast<shaderc_compiler_t>(c), text, size,
                                  static_cast<shaderc_shader_kind>(kind), file, entry,
                                  static_cast<shaderc_compile_options_t>(o));
}
void result_release(shaderc_api::result r) {
  shaderc_result_release(static_cast<shaderc_compilation_result_t>(r));
}
size_t result_length(shaderc_api::result r) {
  return shaderc_result_get_length(static_cast<shaderc_compilation_result_t>(r));
}
const char* result_bytes(shaderc_api::result r) {
  return shaderc_result_get_bytes(static_cast<shaderc_compilation_result_t>(r));
}
int result_status(shaderc_api::result r) {
  return static_cast<int>(
      shaderc_result_get_compilation_status(static_cast<shaderc_compilation_result_t>(r)));
}
const char* result_error(shaderc_api::result r) {
  return shaderc_result_get_error_message(static_cast<shaderc_compilation_result_t>(r));
}

static_assert(shaderc_api::compute_shader == shaderc_glsl_compute_shader);
static_assert(shaderc_api::target_env_vulkan == shaderc_target_env_vulkan);
static_assert(shaderc_api::env_vulkan_1_2 == shaderc_env_version_vulkan_1_2);
static_assert(shaderc_api::status_success == shaderc_compilation_status_success);
static_assert(shaderc_api::optimization_zero == shaderc_optimization_level_zero);
static_assert(shaderc_api::optimization_performance == shaderc_optimization_level_performance);
} // namespace

// Fills `api` (a parenchyma::vulkan::shaderc_api of this build); returns its size, so that a
// plugin of another build can refuse a table that is not its own.
extern "C" __attribute__((visibility("default"))) size_t
pcy_vulkan_glsl_table(parenchyma::vulkan::shaderc_api* api) {
  api->compiler_initialize = &compiler_initialize;
  api->compiler_release = &compiler_release;
  api->compile_options_initialize = &options_initialize;
  api->compile_options_release = &options_release;
  api->compile_options_set_target_env = &set_target_env;
  api->compile_options_set_optimization_level = &set_optimization_level;
  api->compile_options_add_macro_definition = &add_macro;
  api->compile_into_spv = &compile;
  api->result_release = &result_release;
  api->result_get_length = &result_length;
  api->result_get_bytes = &result_bytes;
  api->result_get_compilation_status = &result_status;
  api->result_get_error_message = &result_error;
  return sizeof(parenchyma::vulkan::shaderc_api);
}
