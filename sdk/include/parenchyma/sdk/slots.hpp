// parenchyma SDK, C++ side: the ABI tables' slot lists (PCY_FRAMEWORK_API_SLOTS,
// PCY_BUNDLE_API_SLOTS) as constexpr data, for code that walks every slot: the registry's
// required-slot check, the validation layer's wrapper test, tools. Generated from the one list in
// the C header; nothing here names a slot by hand.
#pragma once

#include <parenchyma/abi/pcy_bundle.h>
#include <parenchyma/abi/pcy_framework.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <span>
#include <type_traits>

namespace parenchyma::sdk {

// The `need` column: a REQUIRED slot must be filled; the others may be NULL (a group all together).
enum class slot_need : uint8_t { required, optional, programs, graphs };
// The `thread` column: the threading rule the validation layer checks (docs/abi.md G2, G4).
enum class slot_thread : uint8_t { lifecycle, enqueue, any };

struct slot_info {
  const char* name;
  uint32_t minor; // the ABI minor that added it
  slot_need need;
  slot_thread thread;
  size_t offset; // in the table
};

// The list's column tokens, pasted (`need_##need`), so that a platform macro of the same name
// (Windows defines OPTIONAL) is never expanded in them.
namespace slot_column {
inline constexpr slot_need need_REQUIRED = slot_need::required;
inline constexpr slot_need need_OPTIONAL = slot_need::optional;
inline constexpr slot_need need_PROGRAMS = slot_need::programs;
inline constexpr slot_need need_GRAPHS = slot_need::graphs;
inline constexpr slot_thread thread_LIFECYCLE = slot_thread::lifecycle;
inline constexpr slot_thread thread_ENQUEUE = slot_thread::enqueue;
inline constexpr slot_thread thread_ANY = slot_thread::any;
} // namespace slot_column

// (Each pastes its own columns: a column forwarded to another macro would be expanded first.)
#define PCY_SDK_FRAMEWORK_SLOT_INFO(name, minor, need, thread, ret, params, args)                  \
  ::parenchyma::sdk::slot_info{#name, minor, ::parenchyma::sdk::slot_column::need_##need,          \
                               ::parenchyma::sdk::slot_column::thread_##thread,                    \
                               offsetof(pcy_framework_api, name)},
#define PCY_SDK_BUNDLE_SLOT_INFO(name, minor, need, thread, ret, params, args)                     \
  ::parenchyma::sdk::slot_info{#name, minor, ::parenchyma::sdk::slot_column::need_##need,          \
                               ::parenchyma::sdk::slot_column::thread_##thread,                    \
                               offsetof(pcy_bundle_api, name)},

inline constexpr slot_info framework_slots[] = {
    PCY_FRAMEWORK_API_SLOTS(PCY_SDK_FRAMEWORK_SLOT_INFO)};
inline constexpr slot_info bundle_slots[] = {PCY_BUNDLE_API_SLOTS(PCY_SDK_BUNDLE_SLOT_INFO)};

static_assert(std::size(framework_slots) == PCY_FRAMEWORK_SLOT_COUNT);
static_assert(std::size(bundle_slots) == PCY_BUNDLE_SLOT_COUNT);

template <class Table> constexpr std::span<const slot_info> slots_of() {
  if constexpr (std::is_same_v<Table, pcy_framework_api>)
    return framework_slots;
  else
    return bundle_slots;
}

// The slot's function pointer, as an untyped pointer (NULL: the slot is empty).
template <class Table> const void* slot_value(const Table& table, const slot_info& s) noexcept {
  void (*fn)(void) = nullptr;
  std::memcpy(&fn, reinterpret_cast<const char*>(&table) + s.offset, sizeof fn);
  return reinterpret_cast<const void*>(fn);
}

// The first REQUIRED slot the table leaves NULL, or nullptr when all are there.
template <class Table> const char* missing_required_slot(const Table& table) noexcept {
  for (const slot_info& s : slots_of<Table>())
    if (s.need == slot_need::required && slot_value(table, s) == nullptr) return s.name;
  return nullptr;
}

} // namespace parenchyma::sdk
