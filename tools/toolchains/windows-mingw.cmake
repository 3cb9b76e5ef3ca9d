# Cross-compiling parenchyma for Windows x86-64 with Debian's mingw-w64 (posix threads, so that
# std::thread and std::mutex work), tested under wine64 (tools/cross/windows.sh).
#
# Debian has no mingw builds of Boost, spdlog, fmt, nlohmann_json or Catch2. The parts we use are
# header-only and written for every platform (Boost's headers, fmt and spdlog in header-only
# mode, nlohmann_json, Catch2 v2's single header, DLPack's C header): the package configs in
# windows-mingw/ make targets of those headers from the host's /usr/include, through a folder of
# links that holds only them, so no glibc header reaches the cross compiler.
set(CMAKE_SYSTEM_NAME Windows)
set(CMAKE_SYSTEM_PROCESSOR x86_64)

set(PCY_MINGW_TRIPLE x86_64-w64-mingw32)
set(CMAKE_C_COMPILER ${PCY_MINGW_TRIPLE}-gcc-posix)
set(CMAKE_CXX_COMPILER ${PCY_MINGW_TRIPLE}-g++-posix)
set(CMAKE_RC_COMPILER ${PCY_MINGW_TRIPLE}-windres)

set(CMAKE_FIND_ROOT_PATH /usr/${PCY_MINGW_TRIPLE} ${CMAKE_CURRENT_LIST_DIR}/windows-mingw)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
# The header-only packages (windows-mingw/<name>Config.cmake), found before anything else.
list(PREPEND CMAKE_PREFIX_PATH /)
set(PCY_MINGW_SHIMS ${CMAKE_CURRENT_LIST_DIR}/windows-mingw)
foreach(pkg Boost spdlog fmt nlohmann_json Catch2)
  set(${pkg}_DIR ${PCY_MINGW_SHIMS} CACHE PATH "header-only ${pkg} for mingw (tools/toolchains)")
endforeach()
# pkg-config would answer with the host's packages (OpenBLAS for Linux): only mingw's own.
set(ENV{PKG_CONFIG_LIBDIR} /usr/${PCY_MINGW_TRIPLE}/lib/pkgconfig)
set(ENV{PKG_CONFIG_PATH} "")

include(${PCY_MINGW_SHIMS}/host-headers.cmake)
# The Khronos OpenCL headers (plugins/opencl needs only them: OpenCL.dll is loaded at run time).
if(EXISTS /usr/include/CL/cl.h)
  pcy_host_headers(PCY_MINGW_HOST_HEADERS CL)
  set(PARENCHYMA_OPENCL_INCLUDE_DIR ${PCY_MINGW_HOST_HEADERS} CACHE PATH "OpenCL (host's headers)")
endif()
# cuda.h and nvrtc.h (plugins/cuda needs only them: nvcuda.dll is loaded at run time), from the
# host's CUDA toolkit where there is one; both are written for Windows too.
if(EXISTS /usr/local/cuda/include/cuda.h AND EXISTS /usr/local/cuda/include/nvrtc.h)
  set(pcy_cuda_dir ${CMAKE_BINARY_DIR}/mingw-cuda-headers)
  foreach(h cuda.h nvrtc.h)
    if(NOT EXISTS ${pcy_cuda_dir}/${h})
      file(MAKE_DIRECTORY ${pcy_cuda_dir})
      file(CREATE_LINK /usr/local/cuda/include/${h} ${pcy_cuda_dir}/${h} SYMBOLIC)
    endif()
  endforeach()
  set(PARENCHYMA_CUDA_INCLUDE_DIR ${pcy_cuda_dir} CACHE PATH "cuda.h and nvrtc.h (host's toolkit)")
endif()

# The C++ runtime stays shared (libstdc++-6.dll, libgcc_s_seh-1.dll, libwinpthread-1.dll, put
# beside the programs by tools/cross/windows.sh): the core's C++ API passes exceptions and
# standard types between parenchyma-core.dll and the program, which must then share one runtime.

# Tests run through wine (CTest prefixes every test command with this).
find_program(PCY_WINE64 NAMES wine64 PATHS /usr/lib/wine NO_CMAKE_FIND_ROOT_PATH)
if(PCY_WINE64)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${PCY_WINE64})
endif()
