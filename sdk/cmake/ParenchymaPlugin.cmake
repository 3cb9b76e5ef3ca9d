# parenchyma_add_plugin(<name> SOURCES ... [LIBRARIES ...] [OUTPUT_DIR dir])
# Builds a plugin as a MODULE library named parenchyma-<name>.so whose only exported symbol is
# its entry point. Used in-tree and, installed with the SDK, by third-party plugin authors.
function(parenchyma_add_plugin name)
  cmake_parse_arguments(ARG "" "OUTPUT_DIR" "SOURCES;LIBRARIES" ${ARGN})
  set(target parenchyma-${name})
  add_library(${target} MODULE ${ARG_SOURCES})
  set_target_properties(${target} PROPERTIES
    PREFIX ""
    OUTPUT_NAME parenchyma-${name}
    CXX_VISIBILITY_PRESET hidden
    C_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON)
  if(ARG_OUTPUT_DIR)
    set_target_properties(${target} PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${ARG_OUTPUT_DIR})
  elseif(DEFINED PARENCHYMA_PLUGIN_OUTPUT_DIR)
    set_target_properties(${target} PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${PARENCHYMA_PLUGIN_OUTPUT_DIR})
  endif()
  if(TARGET parenchyma::sdk)
    target_link_libraries(${target} PRIVATE parenchyma::sdk)
  endif()
  if(TARGET parenchyma_warnings)
    target_link_libraries(${target} PRIVATE parenchyma_warnings)
  endif()
  if(ARG_LIBRARIES)
    target_link_libraries(${target} PRIVATE ${ARG_LIBRARIES})
  endif()
  if(CMAKE_SYSTEM_NAME STREQUAL "Linux")
    target_link_options(${target} PRIVATE -Wl,--no-undefined -Wl,--exclude-libs,ALL)
  endif()
  if(DEFINED PARENCHYMA_PLUGIN_SUBDIR AND NOT ARG_OUTPUT_DIR)
    install(TARGETS ${target} LIBRARY DESTINATION ${PARENCHYMA_PLUGIN_SUBDIR} COMPONENT plugins)
  endif()
endfunction()

# parenchyma_embed_source(<target> <file> NAME <identifier> [NAMESPACE <ns>] [HEADER <name>])
# Embeds a source file that a plugin compiles at run time (an OpenCL .cl or CUDA .cu kernel file)
# in <target> at build time, so that the kernels stay files of their own (compiled, checked and
# inspected on their own) and the plugin still carries them. A header generated in the build
# tree, <binary dir>/embedded/<name> (default: <file's name>.hpp, e.g. kernels.cl.hpp), on
# <target>'s include path, defines
#   namespace <ns> { inline constexpr char <identifier>[] = {<the file's bytes>, 0}; }
# the file's text exactly, NUL-terminated. A char array rather than a string literal: compilers
# cap the length of a literal (MSVC at 16 KiB a piece), not that of an array. The header is
# written again when the file changes.
set(PARENCHYMA_EMBED_SCRIPT ${CMAKE_CURRENT_LIST_FILE})
function(parenchyma_embed_source target file)
  cmake_parse_arguments(ARG "" "NAME;NAMESPACE;HEADER" "" ${ARGN})
  if(NOT ARG_NAME)
    message(FATAL_ERROR "parenchyma_embed_source(${target} ${file}): NAME <identifier> is required")
  endif()
  get_filename_component(input ${file} ABSOLUTE)
  get_filename_component(file_name ${file} NAME)
  if(NOT ARG_HEADER)
    set(ARG_HEADER ${file_name}.hpp)
  endif()
  set(dir ${CMAKE_CURRENT_BINARY_DIR}/embedded)
  add_custom_command(OUTPUT ${dir}/${ARG_HEADER}
    COMMAND ${CMAKE_COMMAND} -DPARENCHYMA_EMBED_IN=${input} -DPARENCHYMA_EMBED_OUT=${dir}/${ARG_HEADER}
            -DPARENCHYMA_EMBED_NAME=${ARG_NAME} -DPARENCHYMA_EMBED_NAMESPACE=${ARG_NAMESPACE}
            -P ${PARENCHYMA_EMBED_SCRIPT}
    DEPENDS ${input} ${PARENCHYMA_EMBED_SCRIPT}
    COMMENT "Embedding ${file_name} in ${target} (${ARG_HEADER})"
    VERBATIM)
  target_sources(${target} PRIVATE ${dir}/${ARG_HEADER})
  target_include_directories(${target} PRIVATE ${dir})
endfunction()

# Run as a script (cmake -P, by the command above): writes the header.
if(CMAKE_SCRIPT_MODE_FILE AND DEFINED PARENCHYMA_EMBED_IN)
  file(READ ${PARENCHYMA_EMBED_IN} hex HEX)
  # '\xNN' literals: a char is signed on most targets, and 0x80 and above would narrow.
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "'\\\\x\\1'," bytes "${hex}")
  string(REPEAT "'.x..'," 12 line) # 12 bytes a line
  string(REGEX REPLACE "(${line})" "\\1\n    " bytes "${bytes}")
  get_filename_component(from ${PARENCHYMA_EMBED_IN} NAME)
  set(open "")
  set(close "")
  if(PARENCHYMA_EMBED_NAMESPACE)
    set(open "namespace ${PARENCHYMA_EMBED_NAMESPACE} {\n")
    set(close "} // namespace ${PARENCHYMA_EMBED_NAMESPACE}\n")
  endif()
  file(WRITE ${PARENCHYMA_EMBED_OUT}
       "// Generated from ${from} by parenchyma_embed_source (ParenchymaPlugin.cmake): edit ${from}.\n"
       "#pragma once\n\n${open}// ${from}, byte for byte, then a NUL.\n"
       "inline constexpr char ${PARENCHYMA_EMBED_NAME}[] = {\n    ${bytes}0};\n${close}")
endif()
