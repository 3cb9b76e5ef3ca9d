// The loader's look at a plugin file's header before it loads it: a shared object built for
// another CPU or operating system is refused at the file stage with a reason that says which
// ("built for x86-64"), instead of the dynamic loader's terse error or, worse, a crash.
// One function per executable format, side by side (ELF here; PE for Windows DLLs beside it).
#pragma once

#include <filesystem>
#include <optional>
#include <string>

namespace parenchyma {
inline namespace v1 {
namespace detail {

// Why `file` cannot be loaded into this process, judged from its first bytes: its format's
// machine, word size, byte order or OS is not this process's. nullopt: it is this platform's, or
// its format is unknown or the file too short (the dynamic loader's own error then says what it
// is). The file is only read, never loaded.
std::optional<std::string> foreign_binary(const std::filesystem::path& file);

// This process's CPU as the reasons name it ("x86-64", "aarch64", ...).
const char* host_machine_name() noexcept;

} // namespace detail
} // namespace v1
} // namespace parenchyma
