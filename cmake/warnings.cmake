function(shardjit_set_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor
                                           -Wconversion -Wno-sign-conversion)
  # GCC 12 reports -Wrestrict / -Wstringop-overflow false positives inside libstdc++'s
  # std::string at -O3 (fixed in GCC 13).
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
    target_compile_options(${target} PRIVATE -Wno-restrict -Wno-stringop-overflow)
  endif()
  if(SHARDJIT_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()
