// Loader tests: plugins built for another platform are refused at the file stage, from their
// header, with a reason that names what they were built for, and never loaded (docs/platforms.md).
// Each case copies the good stub plugin and changes one field of its ELF header, so a copy that
// is left unchanged loads (checked first): only the changed field can explain the refusal. A real
// plugin built by another CPU's compiler is checked too where the build had such a compiler.
#include "loader/testing.hpp"
#include "support/catch.hpp"

#include <parenchyma/parenchyma.hpp>

#include <cstdint>
#include <fstream>
#include <iterator>

using namespace parenchyma;
using namespace pcy_test;

namespace {

constexpr uint16_t em_x86_64 = 62, em_aarch64 = 183;
#if defined(__x86_64__)
constexpr uint16_t host_machine = em_x86_64;
constexpr const char* host_name = "x86-64";
#elif defined(__aarch64__)
constexpr uint16_t host_machine = em_aarch64;
constexpr const char* host_name = "aarch64";
#else
constexpr uint16_t host_machine = 0;
constexpr const char* host_name = "";
#endif
// The other of the two CPUs this project is built for.
constexpr uint16_t other_machine = host_machine == em_aarch64 ? em_x86_64 : em_aarch64;
constexpr const char* other_name = host_machine == em_aarch64 ? "x86-64" : "aarch64";

std::vector<unsigned char> read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The good stub, copied into `dir` with `patch` applied to its bytes.
template <class Patch> fs::path patched_stub(const scratch_dir& dir, Patch patch) {
  std::vector<unsigned char> bytes = read_all(stub_dir("good") / "parenchyma-stub.so");
  REQUIRE(bytes.size() > 64);
  REQUIRE(bytes[0] == 0x7f);
  REQUIRE(bytes[1] == 'E');
  patch(bytes);
  const fs::path p = dir / "parenchyma-stub.so";
  std::ofstream(p, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()),
             static_cast<std::streamsize>(bytes.size()));
  fs::permissions(p, fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read |
                         fs::perms::others_read);
  return p;
}

void set_machine(std::vector<unsigned char>& b, uint16_t m, bool big_endian = false) {
  b[18] = static_cast<unsigned char>(big_endian ? m >> 8 : m & 0xff);
  b[19] = static_cast<unsigned char>(big_endian ? m & 0xff : m >> 8);
}

// Refused at the file stage, before anything was loaded, with a reason containing `why`.
void check_foreign(const Registry& r, const fs::path& file, std::string_view why) {
  INFO("load report:\n" << describe(r));
  const LoadReportEntry* e = entry_for(r, file);
  REQUIRE(e != nullptr);
  CHECK(e->stage == "file");
  CHECK(e->status == "failed");
  CHECK(contains(e->reason, why));
  CHECK(contains(e->reason, std::string("this core runs on ") + host_name));
  CHECK_FALSE(e->advice.empty());
  CHECK(r.frameworks().empty());
}

} // namespace

TEST_CASE("an unchanged copy of the stub loads (the baseline of the cases below)") {
  scratch_dir dir("foreign-baseline");
  const fs::path p = patched_stub(dir, [](std::vector<unsigned char>&) {});
  Registry r(isolated({dir.path()}));
  INFO("load report:\n" << describe(r));
  const LoadReportEntry* e = entry_for(r, p);
  REQUIRE(e != nullptr);
  CHECK(e->status == "loaded");
  CHECK(r.find_framework("stub") != nullptr);
}

TEST_CASE("a plugin built for the other CPU is refused at the file stage") {
  if (host_machine == 0) {
    WARN("skipped: this CPU is neither x86-64 nor aarch64");
    return;
  }
  scratch_dir dir("foreign-machine");
  const fs::path p =
      patched_stub(dir, [](std::vector<unsigned char>& b) { set_machine(b, other_machine); });
  Registry r(isolated({dir.path()}));
  check_foreign(r, p, std::string("built for ") + other_name);
  CHECK(contains(entry_for(r, p)->reason, "ELF machine " + std::to_string(other_machine)));
}

TEST_CASE("a plugin for a CPU the loader has no name for gives the ELF machine number") {
  scratch_dir dir("foreign-unknown");
  const fs::path p = patched_stub(dir, [](std::vector<unsigned char>& b) { set_machine(b, 9999); });
  Registry r(isolated({dir.path()}));
  check_foreign(r, p, "built for ELF machine 9999");
}

TEST_CASE("a 32-bit or big-endian plugin for this CPU is refused with that reason") {
  SECTION("32-bit") {
    scratch_dir dir("foreign-class");
    const fs::path p = patched_stub(dir, [](std::vector<unsigned char>& b) { b[4] = 1; });
    Registry r(isolated({dir.path()}));
    check_foreign(r, p, "a 32-bit ELF file");
  }
  SECTION("big-endian") {
    scratch_dir dir("foreign-endian");
    const fs::path p = patched_stub(dir, [](std::vector<unsigned char>& b) {
      const auto m = static_cast<uint16_t>(b[18] | (b[19] << 8));
      b[5] = 2;
      set_machine(b, m, true);
    });
    Registry r(isolated({dir.path()}));
    check_foreign(r, p, "a big-endian ELF file");
  }
}

TEST_CASE("a plugin built for another operating system is refused at the file stage") {
  scratch_dir dir("foreign-os");
  const fs::path p = patched_stub(dir, [](std::vector<unsigned char>& b) { b[7] = 9; });
  Registry r(isolated({dir.path()}));
  INFO("load report:\n" << describe(r));
  const LoadReportEntry* e = entry_for(r, p);
  REQUIRE(e != nullptr);
  CHECK(e->stage == "file");
  CHECK(contains(e->reason, "built for FreeBSD"));
}

TEST_CASE("a truncated ELF header is left to the dynamic loader's own error") {
  scratch_dir dir("foreign-short");
  const fs::path p = dir.write("parenchyma-stub.so", std::string_view("\x7f"
                                                                      "ELF\x02\x01",
                                                                      6));
  fs::permissions(p, fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read |
                         fs::perms::others_read);
  Registry r(isolated({dir.path()}));
  INFO("load report:\n" << describe(r));
  const LoadReportEntry* e = entry_for(r, p);
  REQUIRE(e != nullptr);
  CHECK(e->stage == "load");
  CHECK(e->status == "failed");
}

TEST_CASE("a real plugin built by another CPU's compiler is refused at the file stage") {
#ifdef PCY_TEST_FOREIGN_PLUGIN
  const fs::path p = PCY_TEST_FOREIGN_PLUGIN;
  REQUIRE(fs::exists(p));
  Registry r(isolated({p.parent_path()}));
  check_foreign(r, p, std::string("built for ") + other_name);
#else
  WARN("skipped: no compiler for another CPU was found when this build was configured "
       "(tests/loader/CMakeLists.txt)");
#endif
}
