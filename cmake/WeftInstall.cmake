# Install rules and the package config, so that find_package(weft) works for a consumer.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(TARGETS weft weft_nn weft_onnx weft_frontend weft_codegen weft_codegen_target weft_passes weft_ir weft_runtime
  weft_rt weft-run weftc
  EXPORT weftTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
foreach(room runtime ir passes codegen frontend nn onnx)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/${room}/include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} OPTIONAL)
endforeach()
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT weftTargets NAMESPACE weft:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/weft)
configure_package_config_file(cmake/weftConfig.cmake.in ${PROJECT_BINARY_DIR}/weftConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/weft)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/weftConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/weftConfig.cmake ${PROJECT_BINARY_DIR}/weftConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/weft)
