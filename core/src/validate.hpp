// parenchyma core, private: the validation layer (docs/validation.md). When a registry has
// validation on (RegistryOptions::validate, PARENCHYMA_VALIDATE, config "validate"), every plugin
// table it loads is replaced by one of the layer's: the layer keeps the plugin's table, checks
// each call against what the host and the plugins promise each other (live handles of the right
// kind and owner, struct sizes, contexts, `in` tensors left unchanged by ops), and forwards.
// When validation is off nothing is wrapped: the host calls the plugin's functions directly.
#pragma once

#include <parenchyma/abi/pcy_bundle.h>
#include <parenchyma/abi/pcy_framework.h>
#include <parenchyma/export.hpp>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace parenchyma {
inline namespace v1 {

struct RegistryImpl;

namespace validate {

// Hooks of the registry (registry.cpp). `table` is the host's normalised copy: when validation
// is on for `registry` its slots are replaced by the layer's (NULL slots stay NULL), before the
// table is used for anything. Never throw.
void wrap_framework(RegistryImpl& registry, pcy_framework_api& table) noexcept;
void wrap_bundle(RegistryImpl& registry, pcy_bundle_api& table) noexcept;
// After the registry shut its plugins down: plugin instances never shut down are reported as
// leaks, and the registry's tables are given back to the layer. Cheap when nothing was wrapped.
void registry_closed(const RegistryImpl* registry) noexcept;

// What the layer has reported in this process, for tests and tools. Thread-safe.
struct counters {
  uint64_t violations = 0;                // calls that broke a rule
  uint64_t leaks = 0;                     // objects still alive when their plugin shut down
  std::map<std::string, uint64_t> rules;  // violations by rule name ("live handle", ...)
  std::map<std::string, uint64_t> leaked; // leaks by kind ("memory", "queue", ...)
  std::vector<std::string> messages;      // the last 64 reports, oldest first
  uint64_t wrapped_tables = 0;            // tables wrapped so far
};
PARENCHYMA_API counters snapshot();
PARENCHYMA_API void reset() noexcept;

} // namespace validate
} // namespace v1
} // namespace parenchyma
