# Install rules: the commands, the C++ libraries with their public headers, and the CMake package
# that `find_package(ktune 0.2)` loads in a consumer project (lib/cmake/ktune):
#   bin/ktune, bin/ktune-runner                   the commands (ktune_add_kernel runs ktune build)
#   lib/libktune_*.a                              the module libraries (static)
#   include/ktune/<module>/*.h                    their public headers, included as "module/file.h"
#   lib/cmake/ktune/ktuneConfig.cmake (+Version)  ktune::ktune, ktune::runner, ktune_add_kernel()
#   lib/cmake/ktune/ktuneLibrary.cmake            finds the libraries' dependencies, then loads
#   lib/cmake/ktune/ktuneTargets.cmake            ktune::library and one ktune::<module> per library
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)
if(NOT (TARGET ktune AND TARGET ktune-runner AND TARGET ktune_deploy))
  return()
endif()
set(KTUNE_PACKAGE_DIR lib/cmake/ktune)  # ktuneConfig.cmake finds the prefix three levels up

# The installed programs and libraries carry no debug information (the build tree keeps it): a
# RelWithDebInfo build's prefix was 513 MB, most of it DWARF. Programs are stripped by the install
# rules below; the static libraries lose their debug sections at the end.
install(CODE "set(CMAKE_INSTALL_DO_STRIP TRUE)")

install(TARGETS ktune ktune-runner RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

# Every product library (baselines/ is for comparisons only and stays out). The generated
# protobuf code and the device-side libraries come as link dependencies: none of their headers is
# installed. The tuning server runs model jobs, so it brings multi-task tuning and ONNX.
set(KTUNE_INSTALLED_LIBRARIES
  ktune_support ktune_te ktune_codegen_base ktune_codegen ktune_schedule_space ktune_cost_model
  ktune_tuning_db ktune_tuner ktune_tuner_model ktune_frontend ktune_tuner_scheduler ktune_model_tuning
  ktune_runner_proto ktune_runner_core ktune_local_runner ktune_rpc_proto ktune_protocol_core ktune_protocol
  ktune_worker_core ktune_worker ktune_client ktune_server ktune_deploy)
foreach(lib IN LISTS KTUNE_INSTALLED_LIBRARIES)
  string(REGEX REPLACE "^ktune_" "" name ${lib})
  set_target_properties(${lib} PROPERTIES EXPORT_NAME ${name})  # ktune::te, ktune::codegen, ...
endforeach()

# The one target a consumer links. In this build tree it is ktune::library too.
add_library(ktune_library INTERFACE)
add_library(ktune::library ALIAS ktune_library)
set_target_properties(ktune_library PROPERTIES EXPORT_NAME library)
# What a program that builds and tunes kernels at run time needs (apply_history_best, the local
# runner, the tuners); the server (ktune::server) and worker (ktune::worker) are their own targets.
target_link_libraries(ktune_library INTERFACE ktune_deploy ktune_local_runner ktune_tuner_model ktune_tuner
  ktune_tuning_db ktune_cost_model ktune_schedule_space ktune_codegen ktune_te ktune_support)
target_compile_features(ktune_library INTERFACE cxx_std_20)  # the headers are C++20

# include/ktune makes the headers' own includes ("codegen/kernel.h") resolve; include lets a
# consumer spell them <ktune/codegen/kernel.h>, which says where they come from.
install(TARGETS ${KTUNE_INSTALLED_LIBRARIES} ktune_library EXPORT ktuneTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/ktune ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT ktuneTargets NAMESPACE ktune:: DESTINATION ${KTUNE_PACKAGE_DIR})

# Public headers: every header of an installed module but those that would need what stays
# private (LLVM inside codegen, the generated protobuf/gRPC code inside rpc_runner) or belong to a
# library that is not installed. install_consumer_test compiles every installed header.
set(KTUNE_PRIVATE_HEADERS
  codegen/llvm_init.h codegen/llvm_module.h codegen/llvm_dot.h
  rpc_runner/protocol/credentials.h rpc_runner/server/device_pool.h rpc_runner/server/fleet_measurer.h
  rpc_runner/server/device_calibration.h
  rpc_runner/server/job_manager.h rpc_runner/worker/prebuilt_runner.h rpc_runner/protocol/service_convert.h
  rpc_runner/worker/worker_session.h rpc_runner/server/model_job.h rpc_runner/protocol/measure_convert.h
  rpc_runner/protocol/peer_checks.h rpc_runner/worker/simulated_fleet.h rpc_runner/server/managed_job.h
  deploy/model_planner.h)
foreach(module support te codegen schedule_space frontend cost_model tuning_db tuner rpc_runner deploy)
  file(GLOB_RECURSE headers RELATIVE ${PROJECT_SOURCE_DIR} CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/${module}/*.h)
  foreach(header IN LISTS headers)
    if(NOT header IN_LIST KTUNE_PRIVATE_HEADERS)
      get_filename_component(folder ${header} DIRECTORY)
      install(FILES ${header} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/ktune/${folder})
    endif()
  endforeach()
endforeach()

# The package. The paths of the libraries' dependencies are the system's, recorded here so that
# the consumer finds the same ones (LLVM 19 must be pinned: an unpinned search may take LLVM 14).
configure_file(cmake/ktuneConfig.cmake.in ${PROJECT_BINARY_DIR}/package/ktuneConfig.cmake @ONLY)
configure_file(cmake/ktuneLibrary.cmake.in ${PROJECT_BINARY_DIR}/package/ktuneLibrary.cmake @ONLY)
# 0.x: a minor release may change the kernel ABI, so 0.2 accepts 0.2.y only. Architecture-
# independent because the commands are host tools that cross consumers use too (the libraries
# refuse a cross build in ktuneLibrary.cmake).
write_basic_package_version_file(${PROJECT_BINARY_DIR}/package/ktuneConfigVersion.cmake
  COMPATIBILITY SameMinorVersion ARCH_INDEPENDENT)
install(FILES ${PROJECT_BINARY_DIR}/package/ktuneConfig.cmake ${PROJECT_BINARY_DIR}/package/ktuneConfigVersion.cmake
  ${PROJECT_BINARY_DIR}/package/ktuneLibrary.cmake cmake/ktuneKernels.cmake DESTINATION ${KTUNE_PACKAGE_DIR})
install(CODE "
  file(GLOB _ktune_libs \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}/libktune_*.a\")
  foreach(_lib IN LISTS _ktune_libs)
    execute_process(COMMAND \"${CMAKE_STRIP}\" --strip-debug \"\${_lib}\" RESULT_VARIABLE _rc)
    if(NOT _rc EQUAL 0)
      message(FATAL_ERROR \"cannot strip \${_lib}\")
    endif()
  endforeach()")
