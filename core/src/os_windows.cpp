// parenchyma core: the operating-system services of os.hpp for Windows (Win32 API; built with
// mingw-w64 and tested under wine, docs/platforms.md).
#include "os.hpp"

#include <windows.h>

#include <aclapi.h>
#include <sddl.h>

#include <array>
#include <atomic>
#include <memory>
#include <stdexcept>
#include <vector>

namespace parenchyma {
inline namespace v1 {
namespace detail::os {

namespace fs = std::filesystem;
using sdk::os::error_text;
using sdk::os::narrow;

const char* plugin_suffix() noexcept { return ".dll"; }
char path_list_separator() noexcept { return ';'; }
const char* dependency_tool() noexcept { return "objdump -p"; }

fs::path core_library_dir() {
  try {
    HMODULE self = nullptr;
    if (::GetModuleHandleExW(GET_MODULE_HANDLE_EX_FLAG_FROM_ADDRESS |
                                 GET_MODULE_HANDLE_EX_FLAG_UNCHANGED_REFCOUNT,
                             reinterpret_cast<LPCWSTR>(&core_library_dir), &self) == 0)
      return {};
    std::wstring name(MAX_PATH, L'\0');
    for (;;) {
      const DWORD n = ::GetModuleFileNameW(self, name.data(), static_cast<DWORD>(name.size()));
      if (n == 0) return {};
      if (n < name.size()) {
        name.resize(n);
        break;
      }
      name.resize(name.size() * 2); // truncated: a long path
    }
    const fs::path p = fs::path(name).parent_path();
    std::error_code ec;
    fs::path c = fs::weakly_canonical(p, ec);
    return ec ? p : c;
  } catch (...) {
    return {};
  }
}

// Windows has no set-uid programs: a process runs with the rights of the user who started it,
// and its environment is that user's (docs/platforms.md).
bool secure_process() noexcept { return false; }

namespace {

struct local_free {
  void operator()(void* p) const noexcept { ::LocalFree(p); }
};

// The SIDs that may own or write a place code is loaded from: this process's user, the local
// Administrators group, LocalSystem, and TrustedInstaller (which owns Windows' own folders).
class trusted_sids {
public:
  trusted_sids() {
    HANDLE token = nullptr;
    if (::OpenProcessToken(::GetCurrentProcess(), TOKEN_QUERY, &token) != 0) {
      DWORD size = 0;
      ::GetTokenInformation(token, TokenUser, nullptr, 0, &size);
      user_.resize(size);
      if (size == 0 || ::GetTokenInformation(token, TokenUser, user_.data(), size, &size) == 0)
        user_.clear();
      ::CloseHandle(token);
    }
    add_well_known(WinBuiltinAdministratorsSid);
    add_well_known(WinLocalSystemSid);
    add_well_known(WinCreatorOwnerSid); // meaningful only in inherited entries: the owner
    PSID ti = nullptr;
    if (::ConvertStringSidToSidW(L"S-1-5-80-956008885-3418522649-1831038044-1853292631-2271478464",
                                 &ti) != 0) {
      const DWORD n = ::GetLengthSid(ti);
      others_.emplace_back(static_cast<BYTE*>(ti), static_cast<BYTE*>(ti) + n);
      ::LocalFree(ti);
    }
  }

  bool contains(PSID sid) const noexcept {
    if (sid == nullptr || ::IsValidSid(sid) == 0) return false;
    if (!user_.empty() &&
        ::EqualSid(sid, reinterpret_cast<const TOKEN_USER*>(user_.data())->User.Sid) != 0)
      return true;
    for (const auto& o : others_)
      if (::EqualSid(sid, const_cast<BYTE*>(o.data())) != 0) return true;
    return false;
  }

private:
  void add_well_known(WELL_KNOWN_SID_TYPE type) {
    std::vector<BYTE> sid(SECURITY_MAX_SID_SIZE);
    DWORD n = static_cast<DWORD>(sid.size());
    if (::CreateWellKnownSid(type, nullptr, sid.data(), &n) != 0) {
      sid.resize(n);
      others_.push_back(std::move(sid));
    }
  }
  std::vector<BYTE> user_;
  std::vector<std::vector<BYTE>> others_;
};

// "DOMAIN\name (S-1-5-...)" or the SID alone when it has no name.
std::string sid_name(PSID sid) {
  std::string text;
  LPWSTR s = nullptr;
  if (::ConvertSidToStringSidW(sid, &s) != 0) {
    text = narrow(s);
    ::LocalFree(s);
  }
  std::array<wchar_t, 256> name{}, domain{};
  DWORD nn = name.size(), dn = domain.size();
  SID_NAME_USE use{};
  if (::LookupAccountSidW(nullptr, sid, name.data(), &nn, domain.data(), &dn, &use) != 0) {
    std::string who = narrow(domain.data());
    who += (who.empty() ? "" : "\\") + narrow(name.data());
    return who + " (" + text + ")";
  }
  return text.empty() ? std::string("an unknown account") : text;
}

// Rights with which another account could change what is loaded from a place. `leaf`: the
// plugin file or folder itself, where adding or changing any entry counts; a folder above it may
// let others add entries (as C:\ lets every user create folders), since that replaces nothing of
// ours — as a sticky directory on Linux — but not delete, rename or re-permission them.
DWORD dangerous_rights(bool leaf) noexcept {
  DWORD m = DELETE | WRITE_DAC | WRITE_OWNER | GENERIC_WRITE | GENERIC_ALL | FILE_DELETE_CHILD;
  if (leaf) m |= FILE_WRITE_DATA | FILE_APPEND_DATA | FILE_WRITE_EA | FILE_WRITE_ATTRIBUTES;
  return m;
}

std::optional<std::string> untrusted_component(const fs::path& p, bool leaf,
                                               const trusted_sids& trusted) {
  PSID owner = nullptr;
  PACL dacl = nullptr;
  PSECURITY_DESCRIPTOR sd = nullptr;
  const DWORD rc = ::GetNamedSecurityInfoW(p.c_str(), SE_FILE_OBJECT,
                                           OWNER_SECURITY_INFORMATION | DACL_SECURITY_INFORMATION,
                                           &owner, nullptr, &dacl, nullptr, &sd);
  if (rc != ERROR_SUCCESS)
    return utf8(p) + " cannot be examined (its owner and access list: " + error_text(rc) + ")";
  const std::unique_ptr<void, local_free> keep(sd);
  if (!trusted.contains(owner)) return utf8(p) + " is owned by another account, " + sid_name(owner);
  if (dacl == nullptr) return utf8(p) + " has no access list: every account may change it";
  ACL_SIZE_INFORMATION info{};
  if (::GetAclInformation(dacl, &info, sizeof info, AclSizeInformation) == 0)
    return utf8(p) + " cannot be examined (its access list: " + error_text(::GetLastError()) + ")";
  for (DWORD i = 0; i < info.AceCount; ++i) {
    void* raw = nullptr;
    if (::GetAce(dacl, i, &raw) == 0) continue;
    const auto* header = static_cast<const ACE_HEADER*>(raw);
    if ((header->AceFlags & INHERIT_ONLY_ACE) != 0) continue; // for children, checked there
    // Every kind of entry begins with the header and the access mask.
    const auto* ace = static_cast<const ACCESS_ALLOWED_ACE*>(raw);
    if ((ace->Mask & dangerous_rights(leaf)) == 0) continue;
    switch (header->AceType) {
    case ACCESS_ALLOWED_ACE_TYPE:
    case ACCESS_ALLOWED_CALLBACK_ACE_TYPE: { // a condition may hold: counted as granted
      PSID who = const_cast<DWORD*>(&ace->SidStart);
      if (!trusted.contains(who))
        return utf8(p) + " is writable by " + sid_name(who) + " (its access list allows it)";
      break;
    }
    case ACCESS_ALLOWED_OBJECT_ACE_TYPE:
    case ACCESS_ALLOWED_CALLBACK_OBJECT_ACE_TYPE:
      // Not read here (their account follows optional GUIDs): refused rather than passed.
      return utf8(p) + " has an object access entry granting write rights, which this check "
                       "cannot attribute to an account";
    default: break; // deny and audit entries only take away or log
    }
  }
  return std::nullopt;
}

std::optional<std::string> untrusted_chain(const fs::path& abs, const trusted_sids& trusted) {
  bool leaf = true;
  for (fs::path cur = abs;; cur = cur.parent_path()) {
    if (auto why = untrusted_component(cur, leaf, trusted)) return why;
    leaf = false;
    if (!cur.has_relative_path()) break; // reached the root of the drive or share
  }
  return std::nullopt;
}

} // namespace

// The Windows meaning of the trusted-path rules (docs/platforms.md): the path and every folder
// above it, as written and with links and junctions resolved, must be owned by this user, the
// Administrators group, SYSTEM or TrustedInstaller, and their access lists must give no other
// account a right to change them (the path itself: write, append, delete, change permissions or
// owner; the folders above it: delete, rename or re-permission entries).
std::optional<std::string> untrusted(const fs::path& p) {
  std::error_code ec;
  const fs::path abs = fs::absolute(p, ec).lexically_normal();
  if (ec) return utf8(p) + ": " + ec.message();
  const trusted_sids trusted;
  if (auto why = untrusted_chain(abs, trusted)) return why;
  const fs::path canon = fs::canonical(abs, ec);
  if (ec) return utf8(abs) + ": " + ec.message();
  if (canon != abs)
    if (auto why = untrusted_chain(canon, trusted)) return why;
  return std::nullopt;
}

file_info examine(const fs::path& p) {
  file_info f;
  std::error_code ec;
  const fs::file_status st = fs::status(p, ec);
  f.type = st.type();
  if (ec || st.type() == fs::file_type::not_found) {
    f.missing = st.type() == fs::file_type::not_found;
    f.error = ec ? ec.message() : std::string("No such file or directory");
    f.type = fs::file_type::not_found;
  }
  return f;
}

std::string read_regular_file(const fs::path& file, uint64_t limit, const char* expected) {
  // FILE_FLAG_BACKUP_SEMANTICS opens a folder too, so that it is named as one below.
  HANDLE h = ::CreateFileW(file.c_str(), GENERIC_READ,
                           FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE, nullptr,
                           OPEN_EXISTING, FILE_FLAG_BACKUP_SEMANTICS, nullptr);
  if (h == INVALID_HANDLE_VALUE)
    throw std::runtime_error("cannot be opened (" + error_text(::GetLastError()) + ")");
  struct closer {
    HANDLE h;
    ~closer() { ::CloseHandle(h); }
  } guard{h};
  const DWORD type = ::GetFileType(h);
  BY_HANDLE_FILE_INFORMATION info{};
  const bool have_info = type == FILE_TYPE_DISK && ::GetFileInformationByHandle(h, &info) != 0;
  if (type != FILE_TYPE_DISK || !have_info ||
      (info.dwFileAttributes & FILE_ATTRIBUTE_DIRECTORY) != 0) {
    const char* what = type == FILE_TYPE_PIPE   ? "a pipe"
                       : type == FILE_TYPE_CHAR ? "a device"
                       : have_info              ? "a directory"
                                                : "not a regular file";
    throw std::runtime_error(std::string("is ") + what + ", not " + expected +
                             ": point it at a regular file");
  }
  const uint64_t size = (static_cast<uint64_t>(info.nFileSizeHigh) << 32) | info.nFileSizeLow;
  if (size > limit)
    throw std::runtime_error("is " + std::to_string(size) + " bytes, more than the " +
                             std::to_string(limit) + " a config file may have");
  std::string text(static_cast<size_t>(size), '\0');
  size_t done = 0;
  while (done < text.size()) {
    DWORD n = 0;
    const DWORD want = static_cast<DWORD>(std::min<size_t>(text.size() - done, 1u << 30));
    if (::ReadFile(h, text.data() + done, want, &n, nullptr) == 0)
      throw std::runtime_error("cannot be read: " + error_text(::GetLastError()));
    if (n == 0) break; // shrank while we read: use what is there
    done += n;
  }
  text.resize(done);
  return text;
}

std::string default_cache_dir(const std::function<std::optional<std::string>(const char*)>& env) {
  if (auto l = env("LOCALAPPDATA"); l && !l->empty()) return *l + "\\parenchyma\\cache";
  return {};
}

bool on_fork_child(void (*)()) noexcept { return false; }

namespace {
std::atomic<bool> ending{false};
}
bool process_ending() noexcept { return ending.load(std::memory_order_acquire); }
void note_process_detach(bool process_exit) noexcept {
  if (process_exit) ending.store(true, std::memory_order_release);
}

} // namespace detail::os
} // namespace v1
} // namespace parenchyma

// The core DLL's entry: DLL_PROCESS_DETACH with a non-NULL `reserved` is process termination
// (ExitProcess), as opposed to FreeLibrary. The C runtime calls this before it runs the DLL's
// exit handlers (the global registry's destructor among them).
extern "C" BOOL WINAPI DllMain(HINSTANCE, DWORD reason, LPVOID reserved) {
  if (reason == DLL_PROCESS_DETACH)
    parenchyma::detail::os::note_process_detach(reserved != nullptr);
  return TRUE;
}
