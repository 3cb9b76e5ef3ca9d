// parenchyma SDK: what every framework plugin class keeps, written once. A plugin class derives
// from sdk::framework_plugin, which names its object types for the adapter (framework.hpp) and
// holds its log, the reason it has no (or fewer) devices, and each device's properties:
//
//   class my_plugin : public sdk::framework_plugin<my_context, my_queue, my_event, my_memory,
//                                                  my_program, my_kernel> {   // both optional
//   public:
//     static constexpr sdk::plugin_info info{"mine", "1.0", "what it drives, in one line"};
//     explicit my_plugin(const pcy_host_services& host) : framework_plugin(host, info.name) {
//       sdk::property_list& d = add_device();   // or reason_ = "why there is none"
//       d.text(PCY_PROP_NAME, "My GPU 0");
//       d.number(PCY_PROP_KIND, PCY_DEVICE_GPU);
//     }
//   };
//
// device_count(), reason(), properties() and log() are then the base's, and the adapter makes a
// context as `new my_context(plugin, devices)`. Nothing here runs per op.
#pragma once

#include <parenchyma/abi/pcy_framework.h>
#include <parenchyma/sdk/common.hpp>

#include <cstdint>
#include <list>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace parenchyma::sdk {

// A plugin's identity as its table carries it: the name (also the origin of its errors and log
// lines), its own version and a one-line description. A plugin class holds it as
// `static constexpr sdk::plugin_info info{...}`, or as three members name, version, description.
struct plugin_info {
  const char* name;
  const char* version;
  const char* description;
};

namespace detail {
template <class P> constexpr plugin_info info_of() noexcept {
  if constexpr (requires { P::info; })
    return P::info;
  else
    return {P::name, P::version, P::description};
}
} // namespace detail

// One device's properties as the ABI hands them out: the pcy_property array and the strings it
// points into, owned together. A string never moves (list nodes), so the array stays valid when
// the list itself is moved; keys are the caller's (string literals or PCY_PROP_* names).
class property_list {
public:
  property_list() = default;
  property_list(property_list&&) noexcept = default;
  property_list& operator=(property_list&&) noexcept = default;
  property_list(const property_list&) = delete; // the copy's array would point into this one
  property_list& operator=(const property_list&) = delete;

  void text(const char* key, std::string value) {
    const std::string& s = strings_.emplace_back(std::move(value));
    add(key, PCY_VALUE_STRING, s.c_str(), 0);
  }
  void number(const char* key, int64_t value) { add(key, PCY_VALUE_INT, nullptr, value); }
  void flag(const char* key, bool value) { add(key, PCY_VALUE_BOOL, nullptr, value ? 1 : 0); }
  void real(const char* key, double value) { add(key, PCY_VALUE_FLOAT, nullptr, 0, value); }
  // Drops a property (its string, if any, stays owned): for plugins that test hosts on purpose.
  void remove(std::string_view key) {
    std::erase_if(props_, [&](const pcy_property& p) { return key == p.key; });
  }
  std::span<const pcy_property> view() const noexcept { return props_; }

private:
  void add(const char* key, pcy_value_type type, const char* s, int64_t i, double f = 0.0) {
    pcy_property p{};
    p.struct_size = sizeof p;
    p.key = key;
    p.type = type;
    p.s = s;
    p.i = i;
    p.f = f;
    props_.push_back(p);
  }
  std::list<std::string> strings_;
  std::vector<pcy_property> props_;
};

// The base of a framework plugin class. Program and Kernel (programs built from source) and
// Graph (captured graphs) are optional: void leaves their slots NULL.
template <class Context, class Queue, class Event, class Memory, class Program = void,
          class Kernel = void, class Graph = void>
class framework_plugin {
public:
  using context_type = Context;
  using queue_type = Queue;
  using event_type = Event;
  using memory_type = Memory;
  using program_type = Program;
  using kernel_type = Kernel;
  using graph_type = Graph;

  framework_plugin(const pcy_host_services& host, const char* origin) : log_(&host, origin) {}
  framework_plugin(const framework_plugin&) = delete;
  framework_plugin& operator=(const framework_plugin&) = delete;

  uint32_t device_count() const noexcept { return static_cast<uint32_t>(devices_.size()); }
  const char* reason() const noexcept { return reason_.empty() ? nullptr : reason_.c_str(); }
  // The adapter has checked the index.
  std::span<const pcy_property> properties(uint32_t device) const {
    return devices_[device].view();
  }
  const logger& log() const noexcept { return log_; }

protected:
  ~framework_plugin() = default;
  // A new device, last in the plugin's order; fill in its properties.
  property_list& add_device() { return devices_.emplace_back(); }

  logger log_;
  // Why there are no devices, or why some were left out (NULL through reason() when empty).
  std::string reason_;

private:
  std::vector<property_list> devices_;
};

} // namespace parenchyma::sdk
