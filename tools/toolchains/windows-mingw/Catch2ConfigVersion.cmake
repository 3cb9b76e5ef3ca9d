include(${CMAKE_CURRENT_LIST_DIR}/package-version.cmake)
