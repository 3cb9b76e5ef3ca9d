# fmt in header-only mode for the mingw build.
include(${CMAKE_CURRENT_LIST_DIR}/host-headers.cmake)
pcy_header_target(fmt::fmt-header-only HEADERS fmt DEFINES FMT_HEADER_ONLY=1)
if(NOT TARGET fmt::fmt)
  add_library(fmt::fmt INTERFACE IMPORTED)
  set_property(TARGET fmt::fmt PROPERTY INTERFACE_LINK_LIBRARIES fmt::fmt-header-only)
endif()
