# parenchyma: cross build for aarch64 Linux from an x86-64 Debian 12 host (tools/cross/aarch64.sh).
# Compilers: Debian's g++-aarch64-linux-gnu. Libraries: Debian's arm64 packages installed side by
# side with the host's (multiarch: dpkg --add-architecture arm64), so no separate sysroot: the
# cross compiler already searches /usr/include/aarch64-linux-gnu and /usr/lib/aarch64-linux-gnu,
# and CMake's find_* look in lib/aarch64-linux-gnu, never in lib/x86_64-linux-gnu.
# Packages that are not co-installable with their amd64 twin (oneDNN's headers differ per
# architecture) are unpacked under a prefix given in CMAKE_PREFIX_PATH (aarch64.sh does so).
# Tests run under qemu-aarch64 (CMAKE_CROSSCOMPILING_EMULATOR); without binfmt_misc, the test
# scripts that start a built program themselves use the same emulator (PARENCHYMA_EMULATOR).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)

set(_pa_triple aarch64-linux-gnu)
set(CMAKE_C_COMPILER ${_pa_triple}-gcc)
set(CMAKE_CXX_COMPILER ${_pa_triple}-g++)

# qemu-aarch64 finds the arm64 dynamic linker and libraries where multiarch put them
# (/lib/ld-linux-aarch64.so.1, /usr/lib/aarch64-linux-gnu); QEMU_LD_PREFIX can point elsewhere.
find_program(PARENCHYMA_QEMU_AARCH64 NAMES qemu-aarch64 qemu-aarch64-static)
if(PARENCHYMA_QEMU_AARCH64)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${PARENCHYMA_QEMU_AARCH64})
endif()

# pkg-config (OpenBLAS) reads the arm64 .pc files only.
set(ENV{PKG_CONFIG_LIBDIR} "/usr/lib/${_pa_triple}/pkgconfig:/usr/share/pkgconfig")
set(ENV{PKG_CONFIG_PATH} "")

# Programs (python, doxygen) come from the host; libraries, headers and packages for the target.
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
