// A small SPIR-V reader: the compute entry points of a module with each one's work-group size,
// its buffer bindings and its push-constant block (buffer_reference members among them), which is
// what a launch needs to map pcy_kernel_args onto descriptors and push constants (and to refuse a
// wrong call by name).
#include "vulkan.hpp"

#include <algorithm>
#include <map>
#include <set>

namespace parenchyma::vulkan {
namespace {

// Opcodes, decorations and storage classes from the SPIR-V specification (unified 1.6).
enum : uint32_t {
  op_entry_point = 15,
  op_execution_mode = 16,
  op_type_int = 21,
  op_type_float = 22,
  op_type_vector = 23,
  op_type_struct = 30,
  op_type_pointer = 32,
  op_constant = 43,
  op_constant_composite = 44,
  op_spec_constant = 50,
  op_spec_constant_composite = 51,
  op_variable = 59,
  op_decorate = 71,
  op_member_decorate = 72,
  op_execution_mode_id = 331,
};
enum : uint32_t {
  model_gl_compute = 5,
  mode_local_size = 17,
  mode_local_size_id = 38,
  deco_block = 2,
  deco_buffer_block = 3,
  deco_builtin = 11,
  deco_binding = 33,
  deco_descriptor_set = 34,
  deco_offset = 35,
  builtin_workgroup_size = 25,
  class_uniform_constant = 0,
  class_uniform = 2,
  class_push_constant = 9,
  class_storage_buffer = 12,
  class_physical_storage_buffer = 5349,
};

std::string literal_string(std::span<const uint32_t> w) {
  std::string s;
  for (uint32_t word : w)
    for (int b = 0; b < 4; ++b) {
      const char c = static_cast<char>((word >> (8 * b)) & 0xff);
      if (c == '\0') return s;
      s.push_back(c);
    }
  return s;
}

} // namespace

std::vector<kernel_interface> reflect(std::span<const uint32_t> words, std::string_view origin) {
  auto bad = [&](const std::string& why) -> void {
    sdk::fail(PCY_ERR_BUILD, sdk::str(origin, ": ", why));
  };
  if (words.size() < 5 || words[0] != 0x07230203u) bad("not a SPIR-V module (no magic number)");

  struct entry {
    uint32_t id;
    std::string name;
  };
  std::vector<entry> entries;
  std::map<uint32_t, std::array<uint32_t, 3>> local_size;
  std::set<uint32_t> local_size_id;
  std::map<uint32_t, uint32_t> int_width, float_width, binding, set;
  std::map<uint32_t, std::pair<uint32_t, uint32_t>> vector_of; // id -> (component, count)
  std::map<uint32_t, std::vector<uint32_t>> struct_members;
  std::map<uint32_t, std::pair<uint32_t, uint32_t>> pointer_to; // id -> (class, type)
  std::map<uint32_t, uint32_t> constant_value;                  // OpConstant / OpSpecConstant
  std::map<uint32_t, std::vector<uint32_t>> composite;
  std::set<uint32_t> block, buffer_block, workgroup_size;
  std::map<std::pair<uint32_t, uint32_t>, uint32_t> member_offset;
  std::vector<std::pair<uint32_t, uint32_t>> variables; // (pointer type, id) of interest

  for (size_t at = 5; at < words.size();) {
    const uint32_t count = words[at] >> 16, op = words[at] & 0xffff;
    if (count == 0 || at + count > words.size()) bad("truncated instruction");
    const std::span<const uint32_t> o = words.subspan(at + 1, count - 1);
    auto arg = [&](size_t i) { return i < o.size() ? o[i] : 0u; };
    switch (op) {
    case op_entry_point:
      if (arg(0) == model_gl_compute) entries.push_back({arg(1), literal_string(o.subspan(2))});
      break;
    case op_execution_mode:
      if (arg(1) == mode_local_size) local_size[arg(0)] = {arg(2), arg(3), arg(4)};
      break;
    case op_execution_mode_id:
      if (arg(1) == mode_local_size_id) local_size_id.insert(arg(0));
      break;
    case op_type_int: int_width[arg(0)] = arg(1); break;
    case op_type_float: float_width[arg(0)] = arg(1); break;
    case op_type_vector: vector_of[arg(0)] = {arg(1), arg(2)}; break;
    case op_type_struct:
      struct_members[arg(0)] = std::vector<uint32_t>(o.begin() + 1, o.end());
      break;
    case op_type_pointer: pointer_to[arg(0)] = {arg(1), arg(2)}; break;
    case op_constant:
    case op_spec_constant: constant_value[arg(1)] = arg(2); break;
    case op_constant_composite:
    case op_spec_constant_composite:
      composite[arg(1)] = std::vector<uint32_t>(o.begin() + 2, o.end());
      break;
    case op_variable:
      if (arg(2) == class_uniform || arg(2) == class_storage_buffer ||
          arg(2) == class_push_constant || arg(2) == class_uniform_constant)
        variables.emplace_back(arg(0), arg(1));
      break;
    case op_decorate:
      if (arg(1) == deco_binding) binding[arg(0)] = arg(2);
      if (arg(1) == deco_descriptor_set) set[arg(0)] = arg(2);
      if (arg(1) == deco_block) block.insert(arg(0));
      if (arg(1) == deco_buffer_block) buffer_block.insert(arg(0));
      if (arg(1) == deco_builtin && arg(2) == builtin_workgroup_size) workgroup_size.insert(arg(0));
      break;
    case op_member_decorate:
      if (arg(2) == deco_offset) member_offset[{arg(0), arg(1)}] = arg(3);
      break;
    default: break;
    }
    at += count;
  }
  if (entries.empty()) bad("the module has no GLCompute entry point (a compute shader is needed)");

  auto scalar_size = [&](uint32_t type) -> uint32_t {
    if (auto it = int_width.find(type); it != int_width.end()) return it->second / 8;
    if (auto it = float_width.find(type); it != float_width.end()) return it->second / 8;
    return 0;
  };
  auto type_size = [&](uint32_t type) -> uint32_t {
    if (const uint32_t s = scalar_size(type)) return s;
    if (auto it = vector_of.find(type); it != vector_of.end())
      return scalar_size(it->second.first) * it->second.second;
    return 0; // arrays, structs, matrices: not checked
  };

  kernel_interface shared;
  std::set<uint32_t> used_bindings;
  for (const auto& [ptr, id] : variables) {
    const auto p = pointer_to.find(ptr);
    if (p == pointer_to.end()) continue;
    const uint32_t cls = p->second.first, type = p->second.second;
    if (cls == class_uniform_constant)
      bad("the kernel declares images, samplers or other opaque resources: only buffers "
          "(storage or uniform blocks) and push constants are supported");
    if (cls == class_push_constant) {
      const auto members = struct_members.find(type);
      if (members == struct_members.end()) bad("a push-constant block that is not a struct");
      for (uint32_t m = 0; m < members->second.size(); ++m) {
        kernel_interface::push_member pm;
        pm.offset = member_offset.count({type, m}) ? member_offset[{type, m}] : 0;
        pm.size = type_size(members->second[m]);
        if (auto ptr_type = pointer_to.find(members->second[m]);
            ptr_type != pointer_to.end() &&
            ptr_type->second.first == class_physical_storage_buffer) {
          pm.pointer = true; // a buffer_reference: the address of a PCY_ARG_MEMORY argument
          pm.size = 8;
          ++shared.pointers;
        }
        shared.push.push_back(pm);
        shared.push_size = std::max(shared.push_size, pm.offset + std::max(pm.size, 4u));
      }
      continue;
    }
    kernel_interface::binding b;
    b.set = set.count(id) ? set[id] : 0;
    b.binding = binding.count(id) ? binding[id] : 0;
    b.type = cls == class_storage_buffer || buffer_block.count(type)
                 ? VK_DESCRIPTOR_TYPE_STORAGE_BUFFER
                 : VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER;
    if (b.set != 0)
      bad(sdk::str("a buffer in descriptor set ", b.set, " (binding ", b.binding,
                   "): every buffer must be in set 0 (layout(set = 0, binding = N))"));
    if (!used_bindings.insert(b.binding).second)
      bad(sdk::str("two buffers at binding ", b.binding, " of set 0"));
    shared.bindings.push_back(b);
  }
  std::sort(shared.bindings.begin(), shared.bindings.end(),
            [](const auto& a, const auto& b) { return a.binding < b.binding; });

  // A constant decorated WorkgroupSize overrides the LocalSize mode (its spec-constant defaults
  // apply: the plugin specialises nothing yet).
  bool have_builtin = false;
  std::array<uint32_t, 3> builtin_local{1, 1, 1};
  for (uint32_t id : workgroup_size)
    if (auto c = composite.find(id); c != composite.end() && c->second.size() == 3) {
      have_builtin = true;
      for (int i = 0; i < 3; ++i)
        builtin_local[i] = constant_value.count(c->second[i]) ? constant_value[c->second[i]] : 1;
    }

  std::vector<kernel_interface> out;
  for (const entry& e : entries) {
    kernel_interface k = shared;
    k.entry = e.name;
    if (have_builtin) {
      std::copy(builtin_local.begin(), builtin_local.end(), k.local);
      k.local_known = true;
    } else if (auto it = local_size.find(e.id); it != local_size.end()) {
      std::copy(it->second.begin(), it->second.end(), k.local);
      k.local_known = true;
    } else if (local_size_id.count(e.id)) {
      bad(sdk::str("entry point '", e.name,
                   "' sets its work-group size by LocalSizeId, which this plugin does not read "
                   "yet: use layout(local_size_x = N) or local_size_x_id"));
    } else {
      bad(sdk::str("entry point '", e.name, "' has no work-group size (layout(local_size_x = N))"));
    }
    if (k.local[0] == 0 || k.local[1] == 0 || k.local[2] == 0)
      bad(sdk::str("entry point '", e.name, "' has a work-group size of 0"));
    out.push_back(std::move(k));
  }
  return out;
}

} // namespace parenchyma::vulkan
