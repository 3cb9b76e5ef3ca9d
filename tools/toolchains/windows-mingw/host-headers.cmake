# Shared by the package configs here: a folder of links to one host header tree each
# (<build>/mingw-host-headers/<name> -> /usr/include/<name>), so that the cross compiler sees
# these header-only libraries and nothing else of the host's /usr/include.
function(pcy_host_headers out)
  set(dir ${CMAKE_BINARY_DIR}/mingw-host-headers)
  foreach(name IN LISTS ARGN)
    if(NOT EXISTS /usr/include/${name})
      message(FATAL_ERROR "mingw build: /usr/include/${name} is missing (tools/cross/windows.sh installs it)")
    endif()
    if(NOT EXISTS ${dir}/${name})
      file(MAKE_DIRECTORY ${dir})
      file(CREATE_LINK /usr/include/${name} ${dir}/${name} SYMBOLIC)
    endif()
  endforeach()
  set(${out} ${dir} PARENT_SCOPE)
endfunction()

# A header-only INTERFACE IMPORTED target over the linked headers.
function(pcy_header_target target)
  cmake_parse_arguments(A "" "" "HEADERS;DEFINES" ${ARGN})
  if(TARGET ${target})
    return()
  endif()
  pcy_host_headers(dir ${A_HEADERS})
  add_library(${target} INTERFACE IMPORTED)
  set_target_properties(${target} PROPERTIES INTERFACE_INCLUDE_DIRECTORIES ${dir}
                                             INTERFACE_SYSTEM_INCLUDE_DIRECTORIES ${dir})
  if(A_DEFINES)
    set_property(TARGET ${target} PROPERTY INTERFACE_COMPILE_DEFINITIONS ${A_DEFINES})
  endif()
endfunction()
