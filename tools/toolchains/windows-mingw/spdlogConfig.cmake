# spdlog in header-only mode (Debian's tweakme.h selects the external fmt) for the mingw build.
include(${CMAKE_CURRENT_LIST_DIR}/host-headers.cmake)
include(${CMAKE_CURRENT_LIST_DIR}/fmtConfig.cmake)
pcy_header_target(spdlog::spdlog_header_only HEADERS spdlog)
set_property(TARGET spdlog::spdlog_header_only PROPERTY INTERFACE_LINK_LIBRARIES fmt::fmt-header-only)
if(NOT TARGET spdlog::spdlog)
  add_library(spdlog::spdlog INTERFACE IMPORTED)
  set_property(TARGET spdlog::spdlog PROPERTY INTERFACE_LINK_LIBRARIES spdlog::spdlog_header_only)
endif()
