// Loader tests, Windows: DLLs that cannot run in this process are refused with Windows' reason
// and never initialised. Each PE case copies the good stub DLL and changes one field of its
// COFF header (the machine), so a copy that is left unchanged loads (checked first): only the
// changed field can explain the refusal. A Linux ELF shared object named like a plugin DLL is
// refused too. (loader_foreign.cpp does the ELF cases on Linux; loader_variants.cpp has a real
// 32-bit x86 DLL where mingw's i686 compiler is installed.)
#include "loader/testing.hpp"
#include "support/catch.hpp"

#include <parenchyma/parenchyma.hpp>

#include <cstdint>
#include <fstream>
#include <iterator>

using namespace parenchyma;
using namespace pcy_test;

namespace {

// IMAGE_FILE_MACHINE_* (the PE/COFF specification), written here rather than taken from
// <windows.h>.
constexpr uint16_t machine_i386 = 0x014c, machine_amd64 = 0x8664, machine_arm64 = 0xaa64;

std::vector<unsigned char> read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Where the COFF header's Machine field is: e_lfanew (offset 0x3c of the DOS header, 4 bytes
// little-endian) points at "PE\0\0", and Machine follows it.
size_t machine_offset(const std::vector<unsigned char>& b) {
  REQUIRE(b.size() > 0x40);
  REQUIRE(b[0] == 'M');
  REQUIRE(b[1] == 'Z');
  const size_t pe = static_cast<size_t>(b[0x3c]) | (static_cast<size_t>(b[0x3d]) << 8) |
                    (static_cast<size_t>(b[0x3e]) << 16) | (static_cast<size_t>(b[0x3f]) << 24);
  REQUIRE(pe + 6 <= b.size());
  REQUIRE(b[pe] == 'P');
  REQUIRE(b[pe + 1] == 'E');
  REQUIRE(b[pe + 2] == 0);
  REQUIRE(b[pe + 3] == 0);
  return pe + 4;
}

uint16_t machine_of(const std::vector<unsigned char>& b) {
  const size_t at = machine_offset(b);
  return static_cast<uint16_t>(b[at] | (b[at + 1] << 8));
}

fs::path write_file(const scratch_dir& dir, const std::vector<unsigned char>& bytes) {
  const fs::path p = dir / ("parenchyma-stub" PCY_TEST_SO);
  std::ofstream(p, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()),
             static_cast<std::streamsize>(bytes.size()));
  return p;
}

// The good stub DLL, copied into `dir` with its machine set to `machine`.
fs::path stub_for_machine(const scratch_dir& dir, uint16_t machine) {
  std::vector<unsigned char> bytes = read_all(stub_dir("good") / ("parenchyma-stub" PCY_TEST_SO));
  const size_t at = machine_offset(bytes);
  bytes[at] = static_cast<unsigned char>(machine & 0xff);
  bytes[at + 1] = static_cast<unsigned char>(machine >> 8);
  return write_file(dir, bytes);
}

// Refused (never loaded, no framework) at the stage where Windows' loader said no, with its
// reason and the error number: ERROR_BAD_EXE_FORMAT (193), "not a valid Win32 application".
void check_refused_by_windows(const Registry& r, const fs::path& file) {
  INFO("load report:\n" << describe(r));
  const LoadReportEntry* e = entry_for(r, file);
  REQUIRE(e != nullptr);
  CHECK(e->status == "failed");
  CHECK(e->stage == "load");
  CHECK(contains(e->reason, "error 193"));
  CHECK_FALSE(e->advice.empty());
  CHECK(r.frameworks().empty());
  CHECK(r.find_framework("stub") == nullptr);
}

} // namespace

TEST_CASE("the good stub DLL is an x86-64 PE and an unchanged copy of it loads") {
  CHECK(machine_of(read_all(stub_dir("good") / ("parenchyma-stub" PCY_TEST_SO))) == machine_amd64);
  scratch_dir dir("pe-baseline");
  const fs::path p = stub_for_machine(dir, machine_amd64);
  Registry r(isolated({dir.path()}));
  INFO("load report:\n" << describe(r));
  const LoadReportEntry* e = entry_for(r, p);
  REQUIRE(e != nullptr);
  CHECK(e->status == "loaded");
  CHECK(r.find_framework("stub") != nullptr);
}

TEST_CASE("a DLL whose machine is aarch64 is refused by Windows' loader") {
  scratch_dir dir("pe-arm64");
  const fs::path p = stub_for_machine(dir, machine_arm64);
  Registry r(isolated({dir.path()}));
  check_refused_by_windows(r, p);
}

TEST_CASE("a 64-bit DLL whose machine says 32-bit x86 is refused by Windows' loader") {
  scratch_dir dir("pe-i386");
  const fs::path p = stub_for_machine(dir, machine_i386);
  Registry r(isolated({dir.path()}));
  check_refused_by_windows(r, p);
}

TEST_CASE("a Linux ELF shared object named like a plugin DLL is refused") {
  // The ELF header of an x86-64 Linux shared object (ET_DYN), then zeros: no "MZ", so Windows'
  // loader does not take it; its machine is this CPU, so the ELF check at the file stage, which
  // judges the CPU, word size and byte order, lets it through to the loader.
  std::vector<unsigned char> elf(4096, 0);
  const unsigned char ident[] = {0x7f, 'E', 'L', 'F', 2, 1, 1, 0};
  std::copy(std::begin(ident), std::end(ident), elf.begin());
  elf[16] = 3;  // e_type: ET_DYN
  elf[18] = 62; // e_machine: EM_X86_64
  elf[20] = 1;  // e_version
  scratch_dir dir("pe-elf");
  const fs::path p = write_file(dir, elf);
  Registry r(isolated({dir.path()}));
  check_refused_by_windows(r, p);
}
