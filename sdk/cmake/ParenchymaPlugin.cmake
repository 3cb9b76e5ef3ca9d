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
