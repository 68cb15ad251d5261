# weft_link_llvm_statically(target): links MLIR, LLVM and lld's static archives into `target` (the
# code generator's shared library) instead of libMLIR and libLLVM, which take ~260 MB with their own
# dependencies: a build to carry to a machine without LLVM 22, as the GPU benchmarks' device is
# (WEFT_STATIC_LLVM). Only the objects the code generator reaches are kept: ~83 MB stripped.
function(weft_link_llvm_statically target)
  get_property(weft_mlir_libs GLOBAL PROPERTY MLIR_DIALECT_LIBS)
  get_property(weft_mlir_conversions GLOBAL PROPERTY MLIR_CONVERSION_LIBS)
  get_property(weft_mlir_translations GLOBAL PROPERTY MLIR_TRANSLATION_LIBS)
  list(APPEND weft_mlir_libs ${weft_mlir_conversions} ${weft_mlir_translations}
    MLIRFuncAllExtensions MLIRTensorAllExtensions MLIRExecutionEngineUtils MLIRTransforms
    MLIRPass MLIRParser MLIRIR MLIRSupport)
  list(FILTER weft_mlir_libs EXCLUDE REGEX "Test|Wasm")
  # MLIR's and lld's archives name LLVM's shared library: they get LLVM's component archives
  # instead.
  set(weft_llvm_libs)
  foreach(lib IN LISTS LLVM_AVAILABLE_LIBS)
    if(TARGET ${lib})
      get_target_property(type ${lib} TYPE)
      get_target_property(file ${lib} LOCATION)
      if(type STREQUAL "STATIC_LIBRARY" AND EXISTS "${file}" AND
         NOT lib MATCHES "Debuginfod|LineEditor|Exegesis|BOLT|CFIVerify|Diff|OptDriver")
        list(APPEND weft_llvm_libs ${lib})
      endif()
    endif()
  endforeach()
  get_property(weft_imported DIRECTORY PROPERTY IMPORTED_TARGETS)
  foreach(lib IN LISTS weft_imported)
    if(TARGET ${lib})
      get_target_property(deps ${lib} INTERFACE_LINK_LIBRARIES)
      if(deps)
        list(REMOVE_ITEM deps Polly) # an extension Debian ships no archive of
        list(TRANSFORM deps REPLACE "^LLVM$" "${weft_llvm_libs}")
        set_target_properties(${lib} PROPERTIES INTERFACE_LINK_LIBRARIES "${deps}")
      endif()
    endif()
  endforeach()
  target_link_libraries(${target} PRIVATE lldELF lldCommon ${weft_mlir_libs})
  # lld's driver initializes every target LLVM was built with (for its LTO), which pulls all of
  # them (~100 MB) out of the archives. weft links only host objects: the other targets'
  # initializers are defined empty here, so their archives stay out.
  set(weft_stub_source "")
  foreach(def IN ITEMS Targets:TargetInfo Targets:Target Targets:TargetMC AsmPrinters:AsmPrinter
                       AsmParsers:AsmParser Disassemblers:Disassembler TargetMCAs:TargetMCA)
    string(REPLACE ":" ";" parts ${def})
    list(GET parts 0 file)
    list(GET parts 1 what)
    file(STRINGS ${LLVM_INCLUDE_DIR}/llvm/Config/${file}.def lines REGEX "^LLVM_[A-Z_]+\\(")
    foreach(line IN LISTS lines)
      string(REGEX REPLACE "^LLVM_[A-Z_]+\\(([A-Za-z0-9]+)\\).*" "\\1" arch "${line}")
      if(NOT arch STREQUAL "X86")
        string(APPEND weft_stub_source "extern \"C\" void LLVMInitialize${arch}${what}() {}\n")
      endif()
    endforeach()
  endforeach()
  # Likewise the LTO pipeline's static pass extension (Polly, whose archive Debian lacks).
  include(${LLVM_CMAKE_DIR}/LLVMConfigExtensions.cmake OPTIONAL)
  foreach(extension IN LISTS LLVM_STATIC_EXTENSIONS)
    string(APPEND weft_stub_source "llvm::PassPluginLibraryInfo get${extension}PluginInfo() {\n"
      "  return {LLVM_PLUGIN_API_VERSION, \"${extension}\", \"\", [](llvm::PassBuilder&) {}};\n}\n")
  endforeach()
  file(GENERATE OUTPUT ${CMAKE_CURRENT_BINARY_DIR}/static-llvm/OtherTargets.cpp
       CONTENT "// Generated (WEFT_STATIC_LLVM): LLVM's targets but X86 initialize nothing.
  #include \"llvm/Plugins/PassPlugin.h\"
  ${weft_stub_source}")
  target_sources(${target} PRIVATE ${CMAKE_CURRENT_BINARY_DIR}/static-llvm/OtherTargets.cpp)
  # Only weft's symbols are exported (the runtime's too: the program's copy of its globals is the
  # one used), so the unused rest of LLVM can be dropped.
  file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/static-llvm/exports.map "{ global: *4weft*; local: *; };\n")
  target_link_options(${target} PRIVATE -Wl,--gc-sections -Wl,--as-needed
    -Wl,--version-script=${CMAKE_CURRENT_BINARY_DIR}/static-llvm/exports.map)
endfunction()
