# Embeds the kernel templates into the library: a generated source file holds each template's
# path (relative to templates/) and its bytes. Rebuilt when any template changes.
function(shardjit_embed_templates out_var)
  cmake_parse_arguments(ARG "" "ROOT" "FILES" ${ARGN})
  set(output ${CMAKE_CURRENT_BINARY_DIR}/generated/embedded_templates.cpp)
  add_custom_command(
    OUTPUT ${output}
    COMMAND ${CMAKE_COMMAND} -DROOT=${ARG_ROOT} -DOUTPUT=${output}
            -P ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/embed_templates_run.cmake
    DEPENDS ${ARG_FILES} ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/embed_templates_run.cmake
    COMMENT "Embedding kernel templates"
    VERBATIM)
  set(${out_var} ${output} PARENT_SCOPE)
endfunction()
