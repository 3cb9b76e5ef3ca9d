// Programs and kernels. A program is GLSL compute source, compiled at run time to SPIR-V by
// libshaderc (loaded on first use), or a SPIR-V module given as bytes (source_size set; it
// starts with the SPIR-V magic number). GLSL source may hold several kernels: a line
// `#kernel NAME` starts each one, and lines before the first are shared by all; without such a
// line the whole source is one kernel named "main". A SPIR-V module's kernels are its GLCompute
// entry points. Arguments: PCY_ARG_MEMORY arguments fill the buffer bindings of set 0 in
// binding order, then the push constants' buffer_reference members (device addresses) in member
// order; PCY_ARG_SCALAR arguments the push-constant block's other members in member order.
#include "vulkan.hpp"

#include <algorithm>
#include <cstring>

namespace parenchyma::vulkan {
namespace {

struct glsl_kernel {
  std::string name;
  std::string text; // the whole source with the other kernels' lines blanked (line numbers kept)
};

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r'; }

// "#kernel NAME" (spaces allowed around '#'), or "" when the line is something else.
std::string kernel_line(std::string_view line) {
  size_t i = 0;
  while (i < line.size() && is_space(line[i]))
    ++i;
  if (i >= line.size() || line[i] != '#') return {};
  ++i;
  while (i < line.size() && is_space(line[i]))
    ++i;
  if (line.substr(i, 6) != "kernel" || i + 6 >= line.size() || !is_space(line[i + 6])) return {};
  i += 6;
  while (i < line.size() && is_space(line[i]))
    ++i;
  size_t end = line.size();
  while (end > i && is_space(line[end - 1]))
    --end;
  std::string name(line.substr(i, end - i));
  if (name.empty()) name = "?";
  return name;
}

std::vector<glsl_kernel> split_kernels(std::string_view source) {
  std::vector<std::string_view> lines;
  for (size_t start = 0; start <= source.size();) {
    const size_t nl = source.find('\n', start);
    lines.push_back(source.substr(start, nl == std::string_view::npos ? nl : nl - start));
    if (nl == std::string_view::npos) break;
    start = nl + 1;
  }
  std::vector<int> owner(lines.size(), -1); // -1: shared prefix
  std::vector<std::string> names;
  int current = -1;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (std::string n = kernel_line(lines[i]); !n.empty()) {
      if (n == "?" || n.find_first_of(" \t") != std::string::npos)
        sdk::fail(PCY_ERR_BUILD, sdk::str("line ", i + 1, ": '#kernel' takes one name"));
      if (std::find(names.begin(), names.end(), n) != names.end())
        sdk::fail(PCY_ERR_BUILD, sdk::str("line ", i + 1, ": kernel '", n, "' is defined twice"));
      names.push_back(n);
      current = static_cast<int>(names.size()) - 1;
      owner[i] = -2; // the marker itself: blank in every kernel
      continue;
    }
    owner[i] = current;
  }
  std::vector<glsl_kernel> out;
  if (names.empty()) {
    out.push_back({"main", std::string(source)});
    return out;
  }
  for (size_t k = 0; k < names.size(); ++k) {
    glsl_kernel g{names[k], {}};
    for (size_t i = 0; i < lines.size(); ++i) {
      if (owner[i] == -1 || owner[i] == static_cast<int>(k)) g.text.append(lines[i]);
      g.text.push_back('\n');
    }
    out.push_back(std::move(g));
  }
  return out;
}

// Build options: -DNAME, -DNAME=VALUE, -O0 (no optimisation), -O (the default).
struct glsl_options {
  std::vector<std::pair<std::string, std::string>> macros;
  bool optimise = true;
};
glsl_options parse_options(const char* options) {
  glsl_options out;
  if (options == nullptr) return out;
  std::string_view s(options);
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && is_space(s[i]))
      ++i;
    if (i >= s.size()) break;
    size_t end = i;
    while (end < s.size() && !is_space(s[end]))
      ++end;
    const std::string_view tok = s.substr(i, end - i);
    if (tok.substr(0, 2) == "-D" && tok.size() > 2) {
      const std::string_view def = tok.substr(2);
      const size_t eq = def.find('=');
      out.macros.emplace_back(std::string(def.substr(0, eq)),
                              eq == std::string_view::npos ? "" : std::string(def.substr(eq + 1)));
    } else if (tok == "-O0") {
      out.optimise = false;
    } else if (tok != "-O") {
      sdk::fail(PCY_ERR_BUILD, sdk::str("the build option '", tok,
                                        "' is not known: the Vulkan plugin takes -DNAME, "
                                        "-DNAME=VALUE, -O and -O0"));
    }
    i = end;
  }
  return out;
}

// Compute shaders need GLSL 430 (or 310 es). Checked before shaderc sees the source: glslang
// prints its whole built-in table to stdout when it parses a compute shader at an older
// version, and a plugin never prints.
void check_version(std::string_view source) {
  for (size_t start = 0; start < source.size();) {
    size_t nl = source.find('\n', start);
    if (nl == std::string_view::npos) nl = source.size();
    std::string_view line = source.substr(start, nl - start);
    start = nl + 1;
    size_t i = 0;
    while (i < line.size() && is_space(line[i]))
      ++i;
    if (i >= line.size() || line[i] != '#') continue;
    ++i;
    while (i < line.size() && is_space(line[i]))
      ++i;
    if (line.substr(i, 7) != "version") continue;
    int version = 0;
    size_t j = i + 7;
    while (j < line.size() && is_space(line[j]))
      ++j;
    while (j < line.size() && line[j] >= '0' && line[j] <= '9')
      version = version * 10 + (line[j++] - '0');
    const bool es = line.find("es", j) != std::string_view::npos;
    if (es ? version >= 310 : version >= 430) return;
    sdk::fail(PCY_ERR_BUILD, sdk::str("'", line.substr(i - 1),
                                      "': compute shaders need #version 430 or later "
                                      "(or 310 es); use #version 450"));
  }
  sdk::fail(PCY_ERR_BUILD, "the GLSL source has no '#version' line: Vulkan compute shaders need "
                           "one first (#version 450)");
}

std::vector<uint32_t> compile_glsl(const shaderc_api& sc, const glsl_kernel& k,
                                   const glsl_options& opts) {
  shaderc_api::compiler compiler = sc.compiler_initialize();
  shaderc_api::options o = sc.compile_options_initialize();
  if (compiler == nullptr || o == nullptr) {
    if (compiler != nullptr) sc.compiler_release(compiler);
    if (o != nullptr) sc.compile_options_release(o);
    sdk::fail(PCY_ERR_OUT_OF_MEMORY, "shaderc could not make a compiler");
  }
  sc.compile_options_set_target_env(o, shaderc_api::target_env_vulkan, shaderc_api::env_vulkan_1_2);
  sc.compile_options_set_optimization_level(o, opts.optimise ? shaderc_api::optimization_performance
                                                             : shaderc_api::optimization_zero);
  for (const auto& [name, value] : opts.macros)
    sc.compile_options_add_macro_definition(o, name.data(), name.size(), value.data(),
                                            value.size());
  const std::string file = "kernel " + k.name;
  shaderc_api::result r = sc.compile_into_spv(compiler, k.text.data(), k.text.size(),
                                              shaderc_api::compute_shader, file.c_str(), "main", o);
  sc.compile_options_release(o);
  sc.compiler_release(compiler);
  if (r == nullptr) sdk::fail(PCY_ERR_OUT_OF_MEMORY, "shaderc returned no result");
  std::vector<uint32_t> words;
  std::string log;
  const bool ok = sc.result_get_compilation_status(r) == shaderc_api::status_success;
  if (ok) {
    const size_t n = sc.result_get_length(r);
    words.resize(n / 4);
    std::memcpy(words.data(), sc.result_get_bytes(r), words.size() * 4);
  } else if (const char* m = sc.result_get_error_message(r)) {
    log = m;
  }
  sc.result_release(r);
  if (!ok) {
    while (!log.empty() && (log.back() == '\n' || log.back() == ' '))
      log.pop_back();
    sdk::fail(PCY_ERR_BUILD,
              sdk::str("the GLSL of kernel '", k.name, "' did not compile (shaderc); fix it:\n",
                       log.empty() ? "(shaderc gave no log)" : log));
  }
  return words;
}

} // namespace

// The modules of a cache entry (two parts per kernel: name, SPIR-V); empty, with a log line, when
// the entry is not one of ours.
static std::vector<program::module> from_cache(std::span<const unsigned char> payload,
                                               const std::string& path, const sdk::logger& log) {
  std::string why;
  std::vector<program::module> modules;
  try {
    auto parts = sdk::blob_cache::unpack(payload, why);
    if (parts && (parts->empty() || parts->size() % 2 != 0))
      why = sdk::str(parts->size(), " parts, not two per kernel");
    if (parts && why.empty())
      for (size_t i = 0; i < parts->size(); i += 2) {
        const auto& name = (*parts)[i];
        const auto& bytes = (*parts)[i + 1];
        if (bytes.size() % 4 != 0) throw std::runtime_error("SPIR-V of a size not a multiple of 4");
        std::vector<uint32_t> words(bytes.size() / 4);
        std::memcpy(words.data(), bytes.data(), bytes.size());
        std::string n(name.begin(), name.end());
        kernel_interface iface =
            std::move(reflect(words, sdk::str("cached kernel '", n, "'")).front());
        iface.entry = "main";
        modules.push_back({std::move(n), std::move(words), std::move(iface)});
      }
  } catch (const std::exception& e) {
    why = e.what();
  }
  if (!why.empty()) {
    log.info("kernel cache: ", path, " is not usable (", why, "); compiling again");
    modules.clear();
  }
  return modules;
}

program* context::build(std::string_view source, const char* options, bool& cache_hit) {
  cache_hit = false;
  std::vector<program::module> modules;
  uint32_t magic = 0;
  if (source.size() >= 4) std::memcpy(&magic, source.data(), 4);
  if (magic == 0x07230203u || magic == 0x03022307u) {
    if (magic != 0x07230203u)
      sdk::fail(PCY_ERR_BUILD, "a SPIR-V module in the other byte order: give it in the host's");
    if (source.size() % 4 != 0 || source.size() < 20)
      sdk::fail(PCY_ERR_BUILD,
                sdk::str("a SPIR-V module of ", source.size(),
                         " bytes: its size must be a multiple of 4 and at least 20 (give "
                         "source_size; a binary is not NUL-terminated)"));
    if (options != nullptr && options[0] != '\0' &&
        std::string_view(options).find_first_not_of(" \t") != std::string_view::npos)
      sdk::fail(PCY_ERR_BUILD, sdk::str("build options '", options,
                                        "' given with a SPIR-V module, which takes none"));
    std::vector<uint32_t> words(source.size() / 4);
    std::memcpy(words.data(), source.data(), source.size());
    for (kernel_interface& k : reflect(words, "SPIR-V module")) {
      std::string name = k.entry;
      modules.push_back({std::move(name), words, std::move(k)});
    }
  } else {
    check_version(source);
    const glsl_options opts = parse_options(options);
    // The SPIR-V of every kernel, from the cache when this source and these options were
    // compiled before (SPIR-V does not depend on the device: one entry serves every device).
    sdk::blob_cache& cache = owner_.cache();
    sdk::blob_cache::key_type key{};
    if (cache.enabled()) {
      sdk::sha256 h;
      h.field("parenchyma-vulkan-spirv-v1").field(plugin::info.version).field("vulkan1.2");
      h.field(options != nullptr ? options : "").field(source);
      key = h.finish();
      if (auto payload = cache.load(key)) {
        modules = from_cache(*payload, cache.path(key), owner_.log());
        cache_hit = !modules.empty();
        if (!cache_hit) cache.remove(key);
      }
    }
    if (!cache_hit) {
      std::string why;
      const shaderc_api* sc = owner_.shaderc(why);
      if (sc == nullptr) sdk::fail(PCY_ERR_UNSUPPORTED, why);
      const std::vector<glsl_kernel> kernels = split_kernels(source);
      owner_.log().progress(sdk::str("compiling ", kernels.size() == 1 ? "kernel " : "kernels ",
                                     kernels.front().name, kernels.size() > 1 ? ", ..." : ""));
      for (const glsl_kernel& k : kernels) {
        std::vector<uint32_t> words = compile_glsl(*sc, k, opts);
        std::vector<kernel_interface> ifaces = reflect(words, sdk::str("kernel '", k.name, "'"));
        kernel_interface iface = std::move(ifaces.front());
        iface.entry = "main";
        modules.push_back({k.name, std::move(words), std::move(iface)});
      }
      if (cache.writable()) {
        // Two parts per kernel: its name, its SPIR-V words.
        std::vector<sdk::blob_cache::blob> parts;
        for (const program::module& m : modules) {
          parts.emplace_back(m.name.begin(), m.name.end());
          const auto* w = reinterpret_cast<const unsigned char*>(m.words.data());
          parts.emplace_back(w, w + m.words.size() * 4);
        }
        cache.store_later(key, sdk::blob_cache::pack(parts));
      }
    }
  }
  for (const program::module& m : modules)
    for (const device_ref& d : devices_)
      if (m.iface.push_size > std::min(d->info.max_push_constants, 256u))
        sdk::fail(PCY_ERR_BUILD, sdk::str("kernel '", m.name, "' has ", m.iface.push_size,
                                          " bytes of push constants, '", d->info.name, "' allows ",
                                          std::min(d->info.max_push_constants, 256u),
                                          ": pass fewer scalars, or put them in a buffer"));
  return new program(devices_, std::move(modules));
}

kernel* program::create_kernel(const char* name) {
  for (const module& m : modules_) {
    if (m.name != name) continue;
    auto k = std::make_unique<kernel>(m.name, m.iface);
    for (const device_ref& d : devices_)
      k->add(d, m.words);
    return k.release();
  }
  std::string names;
  for (const module& m : modules_)
    names += (names.empty() ? "" : ", ") + m.name;
  sdk::fail(PCY_ERR_NOT_FOUND,
            sdk::str("the program has no kernel '", name, "' (its kernels: ", names,
                     "; a GLSL source names its kernels with '#kernel NAME' lines)"));
}

// ---- kernels ----------------------------------------------------------------------------------

// SPIR-V as compiled (and cached) asks nothing of subnormals, and a driver may then flush them:
// NVIDIA's flushed f32 subnormal results to zero (blas_vulkan's nrm2, dot and axpy on tiny
// values, 2026-12-07). Where the device can preserve them, the module given to the driver gains
// the DenormPreserve capability and one DenormPreserve execution mode per float width it
// declares (SPIR-V 1.4 and later have float controls in the core; older modules are left alone).
// Modules that already say something about subnormals are left as they are.
std::vector<uint32_t> with_denorm_preserve(std::span<const uint32_t> words, const device_info& d) {
  constexpr uint32_t op_capability = 17, op_entry_point = 15, op_execution_mode = 16;
  constexpr uint32_t cap_float16 = 9, cap_float64 = 10, cap_denorm_preserve = 4464,
                     cap_denorm_flush = 4465, mode_denorm_preserve = 4459;
  std::vector<uint32_t> out(words.begin(), words.end());
  if (words.size() < 5 || words[0] != 0x07230203u || words[1] < 0x00010400u) return out;
  bool f16 = false, f64 = false;
  size_t after_caps = 0, after_entries = 0;
  std::vector<uint32_t> entries;
  for (size_t i = 5; i < words.size();) {
    const uint32_t count = words[i] >> 16, op = words[i] & 0xffffu;
    if (count == 0 || i + count > words.size()) return out; // malformed: the driver will say
    if (op == op_capability && count >= 2) {
      if (words[i + 1] == cap_denorm_preserve || words[i + 1] == cap_denorm_flush) return out;
      f16 = f16 || words[i + 1] == cap_float16;
      f64 = f64 || words[i + 1] == cap_float64;
      after_caps = i + count;
    } else if (op == op_entry_point && count >= 3) {
      entries.push_back(words[i + 2]);
      after_entries = i + count;
    } else if (op == op_execution_mode) {
      after_entries = i + count;
    }
    i += count;
  }
  std::vector<uint32_t> widths;
  if (d.denorm_preserve32) widths.push_back(32);
  if (f16 && d.denorm_preserve16) widths.push_back(16);
  if (f64 && d.denorm_preserve64) widths.push_back(64);
  if (widths.empty() || entries.empty() || after_caps == 0 || after_entries < after_caps)
    return out;
  std::vector<uint32_t> modes;
  for (const uint32_t e : entries)
    for (const uint32_t w : widths)
      modes.insert(modes.end(), {(4u << 16) | op_execution_mode, e, mode_denorm_preserve, w});
  out.insert(out.begin() + static_cast<std::ptrdiff_t>(after_entries), modes.begin(), modes.end());
  const uint32_t cap[] = {(2u << 16) | op_capability, cap_denorm_preserve};
  out.insert(out.begin() + static_cast<std::ptrdiff_t>(after_caps), std::begin(cap), std::end(cap));
  return out;
}

void kernel::add(const device_ref& dev, std::span<const uint32_t> given) {
  const vk_device_api& fn = dev->fn;
  if (iface_.pointers > 0 && !dev->info.device_address)
    sdk::fail(PCY_ERR_UNSUPPORTED,
              sdk::str("kernel '", name_, "' takes ", iface_.pointers,
                       " buffer_reference push constants, but '", dev->info.name,
                       "' has no bufferDeviceAddress (its 'buffer_device_address' property is "
                       "false): bind the buffers as descriptors (at most maxStorageBufferRange, ",
                       dev->info.max_storage_range, " bytes, each) on this device"));
  const std::vector<uint32_t> words = with_denorm_preserve(given, dev->info);
  pipeline p;
  p.dev = dev;
  // Pushed first: the destructor releases whatever was made if a later step fails.
  pipelines_.push_back(p);
  pipeline& q = pipelines_.back();
  VkShaderModuleCreateInfo si{};
  si.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO;
  si.codeSize = words.size() * 4;
  si.pCode = words.data();
  vk_check(fn.vkCreateShaderModule(dev->device, &si, nullptr, &q.shader), "vkCreateShaderModule",
           PCY_ERR_BUILD, sdk::str("kernel '", name_, "' on '", dev->info.name, "'"));

  std::vector<VkDescriptorSetLayoutBinding> bindings;
  storage_ = uniform_ = 0;
  for (const auto& b : iface_.bindings) {
    VkDescriptorSetLayoutBinding lb{};
    lb.binding = b.binding;
    lb.descriptorType = b.type;
    lb.descriptorCount = 1;
    lb.stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
    bindings.push_back(lb);
    (b.type == VK_DESCRIPTOR_TYPE_STORAGE_BUFFER ? storage_ : uniform_) += 1;
  }
  VkDescriptorSetLayoutCreateInfo li{};
  li.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO;
  li.bindingCount = static_cast<uint32_t>(bindings.size());
  li.pBindings = bindings.data();
  vk_check(fn.vkCreateDescriptorSetLayout(dev->device, &li, nullptr, &q.set_layout),
           "vkCreateDescriptorSetLayout");
  VkPushConstantRange range{VK_SHADER_STAGE_COMPUTE_BIT, 0, (iface_.push_size + 3) / 4 * 4};
  VkPipelineLayoutCreateInfo pl{};
  pl.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO;
  pl.setLayoutCount = 1;
  pl.pSetLayouts = &q.set_layout;
  pl.pushConstantRangeCount = iface_.push_size > 0 ? 1 : 0;
  pl.pPushConstantRanges = &range;
  vk_check(fn.vkCreatePipelineLayout(dev->device, &pl, nullptr, &q.layout),
           "vkCreatePipelineLayout");
  VkComputePipelineCreateInfo ci{};
  ci.sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO;
  ci.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
  ci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  ci.stage.module = q.shader;
  ci.stage.pName = iface_.entry.c_str();
  ci.layout = q.layout;
  vk_check(
      fn.vkCreateComputePipelines(dev->device, dev->pipeline_cache, 1, &ci, nullptr, &q.pipeline),
      "vkCreateComputePipelines", PCY_ERR_BUILD,
      sdk::str("kernel '", name_, "' on '", dev->info.name, "'"));
}

kernel::~kernel() {
  for (const pipeline& p : pipelines_) {
    device_state* d = p.dev.get();
    // Raw handles only: a device_ref in the graveyard would keep the device alive forever.
    auto release = [d, pipe = p.pipeline, layout = p.layout, set_layout = p.set_layout,
                    shader = p.shader] {
      const vk_device_api& fn = d->fn;
      if (pipe != VK_NULL_HANDLE) fn.vkDestroyPipeline(d->device, pipe, nullptr);
      if (layout != VK_NULL_HANDLE) fn.vkDestroyPipelineLayout(d->device, layout, nullptr);
      if (set_layout != VK_NULL_HANDLE)
        fn.vkDestroyDescriptorSetLayout(d->device, set_layout, nullptr);
      if (shader != VK_NULL_HANDLE) fn.vkDestroyShaderModule(d->device, shader, nullptr);
    };
    // Work that uses the pipeline may still be recorded or running: freed after it.
    try {
      d->bury(release);
    } catch (...) {
      std::lock_guard lock(d->submit_mutex);
      d->fn.vkDeviceWaitIdle(d->device);
      release();
    }
  }
}

// ---- launch -----------------------------------------------------------------------------------

VkDescriptorSet queue::descriptor_set(VkDescriptorSetLayout layout, uint32_t storage,
                                      uint32_t uniform) {
  VkDescriptorSetAllocateInfo ai{};
  ai.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO;
  ai.descriptorSetCount = 1;
  ai.pSetLayouts = &layout;
  VkDescriptorSet set = VK_NULL_HANDLE;
  batch& into = recording(); // a graph's sets live as long as the graph
  if (!into.pools.empty()) {
    ai.descriptorPool = into.pools.back();
    const VkResult r = dev_->fn.vkAllocateDescriptorSets(dev_->device, &ai, &set);
    if (r == VK_SUCCESS) return set;
    if (r != VK_ERROR_OUT_OF_POOL_MEMORY && r != VK_ERROR_FRAGMENTED_POOL)
      vk_fail(status_for(r, PCY_ERR_DEVICE), "vkAllocateDescriptorSets", r);
  }
  // A pool per 64 launches of a batch (or graph), freed with it.
  constexpr uint32_t sets = 64;
  const VkDescriptorPoolSize sizes[2] = {
      {VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, sets * std::max(storage, 8u)},
      {VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER, sets * std::max(uniform, 2u)}};
  VkDescriptorPoolCreateInfo pi{};
  pi.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO;
  pi.maxSets = sets;
  pi.poolSizeCount = 2;
  pi.pPoolSizes = sizes;
  VkDescriptorPool pool = VK_NULL_HANDLE;
  vk_check(dev_->fn.vkCreateDescriptorPool(dev_->device, &pi, nullptr, &pool),
           "vkCreateDescriptorPool");
  try {
    into.pools.push_back(pool);
  } catch (...) {
    dev_->fn.vkDestroyDescriptorPool(dev_->device, pool, nullptr);
    throw;
  }
  ai.descriptorPool = pool;
  vk_check(dev_->fn.vkAllocateDescriptorSets(dev_->device, &ai, &set), "vkAllocateDescriptorSets");
  return set;
}

void queue::launch(kernel& k, const pcy_kernel_launch_args& a) {
  const kernel::pipeline* p = k.on(dev_.get());
  if (p == nullptr) [[unlikely]]
    sdk::fail(PCY_ERR_INVALID_ARGUMENT,
              sdk::str("kernel '", k.name(), "' was built in another context than the queue's"));
  const kernel_interface& in = k.iface();
  // Memory arguments fill the bindings in binding order, then the push constants' pointers
  // (buffer_reference members) in member order; scalars fill the other push members in order.
  const size_t buffers = in.bindings.size(), pointers = in.pointers,
               scalars = in.push.size() - in.pointers;
  if (a.arg_count != buffers + pointers + scalars) [[unlikely]]
    sdk::fail(PCY_ERR_INVALID_ARGUMENT,
              sdk::str("kernel '", k.name(), "' takes ", buffers + pointers + scalars,
                       " arguments (", buffers, " buffers of set 0, ", pointers,
                       " buffer_reference push constants, ", scalars,
                       " other push-constant members), got ", a.arg_count));
  if (a.arg_count != 0 && a.args == nullptr) [[unlikely]]
    sdk::fail(PCY_ERR_INVALID_ARGUMENT, "kernel launch: args is NULL");

  std::vector<VkDescriptorBufferInfo> infos;
  infos.reserve(buffers);
  unsigned char push[256] = {};
  size_t bi = 0, pi = 0, si = 0; // bindings, pointer members, scalar members filled
  auto next_member = [&](size_t& at, bool pointer) -> const kernel_interface::push_member* {
    for (size_t seen = 0, m = 0; m < in.push.size(); ++m)
      if (in.push[m].pointer == pointer && seen++ == at) {
        ++at;
        return &in.push[m];
      }
    return nullptr;
  };
  for (uint32_t i = 0; i < a.arg_count; ++i) {
    const pcy_kernel_arg& arg = a.args[i];
    switch (arg.kind) {
    case PCY_ARG_MEMORY: {
      if (bi >= buffers + pointers)
        sdk::fail(PCY_ERR_INVALID_ARGUMENT, sdk::str("argument ", i, " of kernel '", k.name(),
                                                     "' is a buffer, but the kernel has only ",
                                                     buffers, " buffer bindings and ", pointers,
                                                     " buffer_reference push constants (and ",
                                                     scalars, " other push-constant members)"));
      const auto* m = reinterpret_cast<const memory*>(arg.memory);
      if (m == nullptr)
        sdk::fail(PCY_ERR_INVALID_ARGUMENT,
                  sdk::str("argument ", i, " of kernel '", k.name(), "': NULL memory"));
      same_device(*m, sdk::str("argument ", i, " of kernel '", k.name(), "'").c_str());
      if (bi >= buffers) { // a buffer_reference: the buffer's address, no range limit
        const kernel_interface::push_member* pm = next_member(pi, true);
        const VkDeviceAddress address = m->address();
        std::memcpy(push + pm->offset, &address, sizeof address);
        ++bi;
        break;
      }
      if (m->bytes() > dev_->info.max_storage_range)
        sdk::fail(PCY_ERR_UNSUPPORTED,
                  sdk::str("argument ", i, " of kernel '", k.name(), "': a buffer of ", m->bytes(),
                           " bytes, above '", dev_->info.name, "' maxStorageBufferRange (",
                           dev_->info.max_storage_range,
                           " bytes), the most a descriptor binding can hold; ",
                           dev_->info.device_address
                               ? "take the buffer as a buffer_reference push constant "
                                 "(GL_EXT_buffer_reference: the device has bufferDeviceAddress, "
                                 "which has no such limit), or use smaller tensors"
                               : "the device has no bufferDeviceAddress either (which a "
                                 "buffer_reference needs): use smaller tensors on this device"));
      infos.push_back({m->handle(), 0, VK_WHOLE_SIZE});
      ++bi;
      break;
    }
    case PCY_ARG_SCALAR: {
      const kernel_interface::push_member* member = next_member(si, false);
      if (member == nullptr)
        sdk::fail(PCY_ERR_INVALID_ARGUMENT, sdk::str("argument ", i, " of kernel '", k.name(),
                                                     "' is a scalar, but the "
                                                     "kernel's push-constant block has only ",
                                                     scalars, " scalar members (and ", pointers,
                                                     " buffer_reference members, which take "
                                                     "memory arguments)"));
      if (arg.value == nullptr || arg.size == 0)
        sdk::fail(PCY_ERR_INVALID_ARGUMENT, sdk::str("argument ", i, " of kernel '", k.name(),
                                                     "': a scalar without a value"));
      const kernel_interface::push_member& pm = *member;
      if ((pm.size != 0 && arg.size != pm.size) || pm.offset + arg.size > sizeof push)
        sdk::fail(PCY_ERR_INVALID_ARGUMENT,
                  sdk::str("argument ", i, " of kernel '", k.name(), "' (push-constant member ",
                           si - 1, ") is ", pm.size, " bytes, got a scalar of ", arg.size,
                           ": pass the type the kernel declares"));
      std::memcpy(push + pm.offset, arg.value, arg.size);
      break;
    }
    case PCY_ARG_LOCAL:
      sdk::fail(PCY_ERR_UNSUPPORTED,
                sdk::str("argument ", i, " of kernel '", k.name(),
                         "': Vulkan kernels declare their shared memory in the shader (a "
                         "'shared' array), not as a launch argument"));
    default:
      sdk::fail(PCY_ERR_INVALID_ARGUMENT,
                sdk::str("argument ", i, " of kernel '", k.name(), "': unknown argument kind ",
                         static_cast<int>(arg.kind)));
    }
  }

  uint32_t groups[3] = {1, 1, 1};
  for (uint32_t d = 0; d < a.dims; ++d) {
    if (a.local[d] != 0 && a.local[d] != in.local[d])
      sdk::fail(PCY_ERR_INVALID_ARGUMENT,
                sdk::str("kernel '", k.name(), "': local size ", a.local[d], " in dimension ", d,
                         ", but the shader fixes its work-group size at ", in.local[0], "x",
                         in.local[1], "x", in.local[2],
                         " (layout(local_size_x = ...)); pass 0 or that size"));
    if (a.global[d] == 0) return; // nothing to run
    const uint64_t g = (a.global[d] + in.local[d] - 1) / in.local[d];
    if (g > dev_->info.max_group_count[d])
      sdk::fail(PCY_ERR_LAUNCH,
                sdk::str("kernel '", k.name(), "': ", g, " work-groups in dimension ", d, ", '",
                         dev_->info.name, "' allows ", dev_->info.max_group_count[d],
                         " (maxComputeWorkGroupCount); use a larger work-group size or a "
                         "loop in the kernel"));
    groups[d] = static_cast<uint32_t>(g);
  }

  std::lock_guard lock(mutex_);
  VkCommandBuffer cmd = command();
  dev_->fn.vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, p->pipeline);
  if (buffers > 0) {
    try {
      VkDescriptorSet set = descriptor_set(p->set_layout, k.storage_count(), k.uniform_count());
      std::vector<VkWriteDescriptorSet> writes(buffers);
      for (size_t b = 0; b < buffers; ++b) {
        VkWriteDescriptorSet& w = writes[b];
        w.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET;
        w.dstSet = set;
        w.dstBinding = in.bindings[b].binding;
        w.descriptorCount = 1;
        w.descriptorType = in.bindings[b].type;
        w.pBufferInfo = &infos[b];
      }
      dev_->fn.vkUpdateDescriptorSets(dev_->device, static_cast<uint32_t>(writes.size()),
                                      writes.data(), 0, nullptr);
      dev_->fn.vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, p->layout, 0, 1, &set,
                                       0, nullptr);
    } catch (...) {
      // The command buffer holds a half-recorded launch: a graph with it never launches (a
      // queue's batch runs a bound pipeline without a dispatch, which does nothing).
      if (capture_ != nullptr) capture_->broken_ = true;
      throw;
    }
  }
  if (in.push_size > 0)
    dev_->fn.vkCmdPushConstants(cmd, p->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0,
                                (in.push_size + 3) / 4 * 4, push);
  dev_->fn.vkCmdDispatch(cmd, groups[0], groups[1], groups[2]);
  if (open_.commands >= 256) submit();
}

} // namespace parenchyma::vulkan
