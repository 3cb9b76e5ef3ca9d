// Makes a file or folder writable by every user, for the loader's trusted-path tests: the mode
// bit o+w on POSIX; on Windows an access-list entry granting Everyone write (fs::permissions
// there only toggles the read-only attribute, which the loader rightly does not look at).
#pragma once

#include <filesystem>
#include <stdexcept>
#include <string>

#if defined(_WIN32)
#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN
#endif
#ifndef NOMINMAX
#define NOMINMAX
#endif
#include <windows.h>

#include <aclapi.h>
#endif

namespace pcy_test {

inline void make_writable_by_all(const std::filesystem::path& p) {
#if defined(_WIN32)
  PACL old = nullptr;
  PSECURITY_DESCRIPTOR sd = nullptr;
  if (::GetNamedSecurityInfoW(p.c_str(), SE_FILE_OBJECT, DACL_SECURITY_INFORMATION, nullptr,
                              nullptr, &old, nullptr, &sd) != ERROR_SUCCESS)
    throw std::runtime_error("GetNamedSecurityInfoW failed on " + p.string());
  BYTE everyone[SECURITY_MAX_SID_SIZE];
  DWORD size = sizeof everyone;
  ::CreateWellKnownSid(WinWorldSid, nullptr, everyone, &size);
  EXPLICIT_ACCESS_W ea{};
  ea.grfAccessPermissions = FILE_GENERIC_WRITE;
  ea.grfAccessMode = GRANT_ACCESS;
  ea.grfInheritance = NO_INHERITANCE;
  ea.Trustee.TrusteeForm = TRUSTEE_IS_SID;
  ea.Trustee.TrusteeType = TRUSTEE_IS_WELL_KNOWN_GROUP;
  ea.Trustee.ptstrName = reinterpret_cast<LPWSTR>(everyone);
  PACL acl = nullptr;
  const DWORD rc = ::SetEntriesInAclW(1, &ea, old, &acl);
  const DWORD rc2 =
      rc == ERROR_SUCCESS
          ? ::SetNamedSecurityInfoW(const_cast<wchar_t*>(p.c_str()), SE_FILE_OBJECT,
                                    DACL_SECURITY_INFORMATION, nullptr, nullptr, acl, nullptr)
          : rc;
  if (acl != nullptr) ::LocalFree(acl);
  ::LocalFree(sd);
  if (rc2 != ERROR_SUCCESS)
    throw std::runtime_error("SetNamedSecurityInfoW failed on " + p.string() + " (error " +
                             std::to_string(rc2) + ")");
#else
  std::filesystem::permissions(p, std::filesystem::perms::others_write,
                               std::filesystem::perm_options::add);
#endif
}

} // namespace pcy_test
