# Catch2 v2's single header for the mingw build.
include(${CMAKE_CURRENT_LIST_DIR}/host-headers.cmake)
pcy_header_target(Catch2::Catch2 HEADERS catch2)
