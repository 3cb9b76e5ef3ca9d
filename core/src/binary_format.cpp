// A plugin file's header against this process's platform (binary_format.hpp). The numbers are
// the ELF specification's (e_ident, e_machine), written here rather than taken from <elf.h> so
// that this file compiles where that header is absent (mingw).
#include "binary_format.hpp"

#include <array>
#include <cstdint>
#include <fstream>

namespace parenchyma {
inline namespace v1 {
namespace detail {

namespace {

// ELF header fields at the same offsets in 32- and 64-bit files.
constexpr size_t elf_class_at = 4;    // e_ident[EI_CLASS]: 1 = 32-bit, 2 = 64-bit
constexpr size_t elf_data_at = 5;     // e_ident[EI_DATA]: 1 = little-endian, 2 = big-endian
constexpr size_t elf_osabi_at = 7;    // e_ident[EI_OSABI]
constexpr size_t elf_machine_at = 18; // e_machine, 2 bytes in the file's byte order
constexpr size_t elf_header_min = 20;

constexpr uint16_t em_386 = 3, em_mips = 8, em_ppc = 20, em_ppc64 = 21, em_s390 = 22, em_arm = 40,
                   em_x86_64 = 62, em_aarch64 = 183, em_riscv = 243, em_loongarch = 258;

struct host_platform {
  uint16_t machine; // 0: a CPU this file does not know (then no machine check)
  uint8_t elf_class;
  uint8_t elf_data;
};

constexpr host_platform host() noexcept {
  constexpr uint8_t cls = sizeof(void*) == 8 ? 2 : 1;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  constexpr uint8_t data = 2;
#else
  constexpr uint8_t data = 1;
#endif
#if defined(__x86_64__) || defined(_M_X64)
  return {em_x86_64, cls, data};
#elif defined(__aarch64__) || defined(_M_ARM64)
  return {em_aarch64, cls, data};
#elif defined(__i386__) || defined(_M_IX86)
  return {em_386, cls, data};
#elif defined(__arm__) || defined(_M_ARM)
  return {em_arm, cls, data};
#elif defined(__riscv)
  return {em_riscv, cls, data};
#elif defined(__powerpc64__)
  return {em_ppc64, cls, data};
#elif defined(__powerpc__)
  return {em_ppc, cls, data};
#elif defined(__s390__)
  return {em_s390, cls, data};
#elif defined(__loongarch__)
  return {em_loongarch, cls, data};
#elif defined(__mips__)
  return {em_mips, cls, data};
#else
  return {0, cls, data};
#endif
}

const char* known_machine(uint16_t m) noexcept {
  switch (m) {
  case em_386: return "32-bit x86 (i386)";
  case em_mips: return "MIPS";
  case em_ppc: return "32-bit PowerPC";
  case em_ppc64: return "64-bit POWER (ppc64)";
  case em_s390: return "IBM Z (s390)";
  case em_arm: return "32-bit ARM";
  case em_x86_64: return "x86-64";
  case em_aarch64: return "aarch64";
  case em_riscv: return "RISC-V";
  case em_loongarch: return "LoongArch";
  default: return nullptr;
  }
}

std::string machine_name(uint16_t m) {
  const char* known = known_machine(m);
  return known != nullptr ? known : "ELF machine " + std::to_string(m);
}

[[maybe_unused]] std::string osabi_name(uint8_t abi) { // used where the core is an ELF one
  switch (abi) {
  case 1: return "HP-UX";
  case 2: return "NetBSD";
  case 6: return "Solaris";
  case 9: return "FreeBSD";
  case 12: return "OpenBSD";
  case 97: return "bare ARM (no OS)";
  case 255: return "no OS (standalone)";
  default: return "another OS";
  }
}

const char* word_size(uint8_t elf_class) { return elf_class == 2 ? "64-bit" : "32-bit"; }
const char* byte_order(uint8_t elf_data) { return elf_data == 2 ? "big-endian" : "little-endian"; }

std::optional<std::string> foreign_elf(const std::array<unsigned char, 64>& h, size_t n) {
  if (n < elf_header_min) return std::nullopt; // truncated: the dynamic loader says so
  const uint8_t cls = h[elf_class_at];
  const uint8_t data = h[elf_data_at];
  if ((cls != 1 && cls != 2) || (data != 1 && data != 2)) return std::nullopt;
  const uint16_t machine =
      data == 1 ? static_cast<uint16_t>(h[elf_machine_at] | (h[elf_machine_at + 1] << 8))
                : static_cast<uint16_t>((h[elf_machine_at] << 8) | h[elf_machine_at + 1]);
  constexpr host_platform me = host();
  const std::string here = std::string("this core runs on ") + host_machine_name();
  if (me.machine != 0 && machine != me.machine)
    return "built for " + machine_name(machine) + " (ELF machine " + std::to_string(machine) +
           "); " + here;
  if (cls != me.elf_class)
    return std::string("a ") + word_size(cls) + " ELF file for " + machine_name(machine) + "; " +
           here + " (" + word_size(me.elf_class) + ")";
  if (data != me.elf_data)
    return std::string("a ") + byte_order(data) + " ELF file for " + machine_name(machine) + "; " +
           here + " (" + byte_order(me.elf_data) + ")";
#if defined(__linux__)
  // glibc (and Android's loader) take System V (0) and GNU/Linux (3) objects.
  const uint8_t abi = h[elf_osabi_at];
  if (abi != 0 && abi != 3)
    return "built for " + osabi_name(abi) + " (ELF OS ABI " + std::to_string(abi) + "), not Linux";
#endif
  return std::nullopt;
}

} // namespace

const char* host_machine_name() noexcept {
  const char* known = known_machine(host().machine);
  return known != nullptr ? known : "this CPU";
}

std::optional<std::string> foreign_binary(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return std::nullopt; // the load stage reports why it cannot be opened
  std::array<unsigned char, 64> h{};
  in.read(reinterpret_cast<char*>(h.data()), static_cast<std::streamsize>(h.size()));
  const auto n = static_cast<size_t>(in.gcount());
  if (n >= 4 && h[0] == 0x7f && h[1] == 'E' && h[2] == 'L' && h[3] == 'F') return foreign_elf(h, n);
  // Other formats (a Windows DLL's "MZ", ...) are judged beside the ELF case.
  return std::nullopt;
}

} // namespace detail
} // namespace v1
} // namespace parenchyma
