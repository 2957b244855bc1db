# The kernels compiled with the library (runtime/cache/prebuilt_kernels.hpp): shardjit-prebuild
# (tools/prebuild) compiles the kernels no op shape changes for the archs and dtypes below and
# writes the table's source, which the library links. Their keys are the run-time keys, so a
# process whose NVRTC, templates or library version differ never finds them and compiles as
# before. Off (or no archs): an empty table, every kernel compiled at run time.
option(SHARDJIT_PREBUILT_KERNELS "Compile the shape-independent kernels when the library is built" ON)
set(SHARDJIT_PREBUILT_ARCHS "sm_90a" CACHE STRING "Targets of the prebuilt kernels (;-list, e.g. sm_90a;sm_80)")
set(SHARDJIT_PREBUILT_DTYPES "bf16;fp16" CACHE STRING "Input dtypes of the prebuilt kernels (;-list)")

add_executable(shardjit_prebuild ${CMAKE_CURRENT_SOURCE_DIR}/tools/prebuild/prebuild_kernels.cpp)
set_target_properties(shardjit_prebuild PROPERTIES OUTPUT_NAME shardjit-prebuild)
# Linking the object library brings its objects and its include folders.
target_link_libraries(shardjit_prebuild PRIVATE shardjit_objects ${SHARDJIT_LINK_LIBRARIES})
shardjit_set_warnings(shardjit_prebuild)

if(SHARDJIT_PREBUILT_KERNELS)
  set(shardjit_prebuilt_archs "${SHARDJIT_PREBUILT_ARCHS}")
  set(shardjit_prebuilt_dtypes "${SHARDJIT_PREBUILT_DTYPES}")
else()
  set(shardjit_prebuilt_archs "")
  set(shardjit_prebuilt_dtypes "")
endif()
string(REPLACE ";" "," shardjit_prebuilt_archs "${shardjit_prebuilt_archs}")
string(REPLACE ";" "," shardjit_prebuilt_dtypes "${shardjit_prebuilt_dtypes}")

set(SHARDJIT_PREBUILT_SOURCE ${CMAKE_CURRENT_BINARY_DIR}/generated/prebuilt_kernels.cpp)
add_custom_command(
  OUTPUT ${SHARDJIT_PREBUILT_SOURCE}
  COMMAND shardjit_prebuild --out ${SHARDJIT_PREBUILT_SOURCE}
          --cache-dir ${CMAKE_CURRENT_BINARY_DIR}/prebuilt-cache
          --archs "${shardjit_prebuilt_archs}" --dtypes "${shardjit_prebuilt_dtypes}"
  DEPENDS shardjit_prebuild
  COMMENT "Compiling the prebuilt kernels (${shardjit_prebuilt_archs})"
  VERBATIM)
