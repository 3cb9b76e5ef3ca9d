# The build of an extension (blas, nn, ...), written once for every extension in the tree.
#
# parenchyma_add_extension(<ext>)
#   In extensions/<ext>/: the header-only front-end parenchyma::<ext> from include/ (installed
#   with the core's headers; an application links only parenchyma::core), the target
#   parenchyma_<ext>_bundle_common for what the extension's bundles share (common/: argument
#   decoding and checks; never installed), and one bundle plugin per framework from the
#   subfolders native/, opencl/, cuda/ and vulkan/ that exist and whose framework this build has.
#
# parenchyma_add_cuda_bundle(<name> SOURCES ... HEADERS <header>... [LIBRARIES ...]
#                            [KERNELS <file.cu>])
#   A bundle for the CUDA framework that loads its vendor libraries at run time (dlopen): nothing
#   CUDA is linked, only the HEADERS are needed, found under CUDAToolkit_ROOT, CUDA_HOME,
#   CUDA_PATH, /usr/local/cuda, /opt/cuda or /usr and included as system headers (not ours to keep
#   warning-free). Without one of them the bundle is skipped with a message (no target).
#   KERNELS: the bundle's CUDA C file, embedded at build time as parenchyma::<name>::kernel_body
#   in the generated header <name>_kernels.hpp (parenchyma_embed_source).

function(parenchyma_add_extension ext)
  set(front parenchyma_${ext})
  add_library(${front} INTERFACE)
  add_library(parenchyma::${ext} ALIAS ${front})
  set_target_properties(${front} PROPERTIES EXPORT_NAME ${ext})
  target_include_directories(${front} INTERFACE
    $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/include>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  target_link_libraries(${front} INTERFACE parenchyma::core)
  install(TARGETS ${front} EXPORT parenchyma-targets)
  install(DIRECTORY include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

  add_library(parenchyma_${ext}_bundle_common INTERFACE)
  target_include_directories(parenchyma_${ext}_bundle_common INTERFACE
    ${CMAKE_CURRENT_SOURCE_DIR}/common)
  target_link_libraries(parenchyma_${ext}_bundle_common INTERFACE parenchyma::sdk)

  set(frameworks native)
  if(PARENCHYMA_WITH_OPENCL)
    list(APPEND frameworks opencl)
  endif()
  if(PARENCHYMA_WITH_CUDA AND PARENCHYMA_CUDA_BUNDLES)
    list(APPEND frameworks cuda)
  endif()
  # Vulkan bundles need no Vulkan header (they use the framework ABI), but only mean something
  # where the framework plugin is built.
  if(PARENCHYMA_WITH_VULKAN AND TARGET parenchyma-vulkan)
    list(APPEND frameworks vulkan)
  endif()
  foreach(fw IN LISTS frameworks)
    if(EXISTS ${CMAKE_CURRENT_SOURCE_DIR}/${fw}/CMakeLists.txt)
      add_subdirectory(${fw})
    endif()
  endforeach()
endfunction()

function(parenchyma_add_cuda_bundle name)
  cmake_parse_arguments(ARG "" "KERNELS" "SOURCES;HEADERS;LIBRARIES" ${ARGN})
  set(dirs)
  foreach(header IN LISTS ARG_HEADERS)
    string(MAKE_C_IDENTIFIER "${header}" id)
    string(TOUPPER "PARENCHYMA_CUDA_${id}_DIR" var)
    find_path(${var} NAMES ${header}
      HINTS ${CUDAToolkit_ROOT} $ENV{CUDAToolkit_ROOT} $ENV{CUDA_HOME} $ENV{CUDA_PATH}
      PATHS /usr/local/cuda /opt/cuda /usr
      PATH_SUFFIXES include targets/x86_64-linux/include targets/sbsa-linux/include)
    if(NOT ${var})
      string(REPLACE ";" "/" wanted "${ARG_HEADERS}")
      message(STATUS "${name}: ${wanted} not found (set CUDAToolkit_ROOT); bundle not built")
      return()
    endif()
    list(APPEND dirs ${${var}})
  endforeach()
  list(REMOVE_DUPLICATES dirs)
  string(REPLACE "_" "-" plugin "${name}")
  message(STATUS "${name}: CUDA headers from ${dirs}")
  parenchyma_add_plugin(${plugin} SOURCES ${ARG_SOURCES}
    LIBRARIES ${ARG_LIBRARIES} ${CMAKE_DL_LIBS})
  target_include_directories(parenchyma-${plugin} SYSTEM PRIVATE ${dirs})
  if(ARG_KERNELS)
    parenchyma_embed_source(parenchyma-${plugin} ${ARG_KERNELS} NAME kernel_body
      NAMESPACE parenchyma::${name} HEADER ${name}_kernels.hpp)
  endif()
endfunction()
