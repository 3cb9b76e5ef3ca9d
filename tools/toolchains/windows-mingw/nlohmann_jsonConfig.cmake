# nlohmann_json (header-only) for the mingw build.
include(${CMAKE_CURRENT_LIST_DIR}/host-headers.cmake)
pcy_header_target(nlohmann_json::nlohmann_json HEADERS nlohmann)
