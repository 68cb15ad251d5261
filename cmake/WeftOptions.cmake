# Compiler warnings and sanitizers, applied to every weft target through weft_set_options().
function(weft_set_options target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wno-unused-parameter)
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    # GCC 12 false positives at -O2/-O3: impossible overlaps in std::string concatenation (GCC bug
    # 105329), "maybe uninitialized" members of copied std::variant values (GCC bug 105562), and
    # overflows in inlined std::vector copies (GCC bug 106199; seen with -fsanitize=thread).
    # -Wuninitialized stays on.
    target_compile_options(${target} PRIVATE -Wno-restrict -Wno-maybe-uninitialized
                                             -Wno-stringop-overflow)
  elseif(CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    # libstdc++ 12's std::stable_sort calls its own deprecated get_temporary_buffer; `omp simd`
    # loops the sanitizers' instrumentation keeps from vectorizing are not a mistake.
    target_compile_options(${target} PRIVATE -Wno-deprecated-declarations -Wno-pass-failed)
  endif()
  if(WEFT_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()

if(WEFT_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "WEFT_FUZZ needs clang (libFuzzer); use the fuzz preset")
  endif()
  add_compile_options(-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined
                      -fno-omit-frame-pointer)
  add_link_options(-fsanitize=address,undefined)
elseif("${WEFT_SANITIZE}" STREQUAL "address")
  add_compile_options(-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer)
  add_link_options(-fsanitize=address,undefined)
elseif("${WEFT_SANITIZE}" STREQUAL "thread")
  add_compile_options(-fsanitize=thread -fno-omit-frame-pointer)
  add_link_options(-fsanitize=thread)
elseif(NOT "${WEFT_SANITIZE}" STREQUAL "")
  message(FATAL_ERROR "WEFT_SANITIZE must be '', 'address' or 'thread', not '${WEFT_SANITIZE}'")
endif()
