# ktune_add_kernel(): tuned kernels in a consumer's build. Installed next to ktuneConfig.cmake;
# needs KTUNE_EXECUTABLE (the ktune binary) and a project with the C language enabled (the
# standalone runtime is C).
#
#   ktune_add_kernel(<target> NAME <symbol> TEMPLATE <template> [ARGS key=value...]
#                    DB <log> | SERVER <host:port> [DEVICE_KEY <key>]
#                    [TARGET "llvm -mtriple=..."] [REQUIRE_TUNED])
#
# At build time runs `ktune build` (the log's best record of the workload for TARGET, default
# host; the template's fallback config when there is none, unless REQUIRE_TUNED), adds the
# object to <target>, puts the directory of <symbol>.h on its include path and, once per target,
# compiles ktune_runtime.c (ktune_parallel_for: a persistent pthread pool; see the header). The
# kernel is built again when the log changes (DB; with SERVER, when the arguments or ktune
# change), so re-tuning and rebuilding ships the new best config.
include_guard(GLOBAL)

function(ktune_add_kernel target)
  cmake_parse_arguments(PARSE_ARGV 1 K "REQUIRE_TUNED" "NAME;TEMPLATE;DB;SERVER;DEVICE_KEY;TARGET" "ARGS")
  set(where "ktune_add_kernel(${target} NAME ${K_NAME})")
  if(K_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "${where}: unknown arguments: ${K_UNPARSED_ARGUMENTS}")
  endif()
  if(NOT TARGET ${target})
    message(FATAL_ERROR "${where}: ${target} is not a target")
  endif()
  if(NOT K_NAME OR NOT K_TEMPLATE)
    message(FATAL_ERROR "${where}: NAME and TEMPLATE are required")
  endif()
  if(NOT K_NAME MATCHES "^[A-Za-z_][A-Za-z0-9_]*$")
    message(FATAL_ERROR "${where}: NAME must be a C identifier")
  endif()
  if((K_DB AND K_SERVER) OR (NOT K_DB AND NOT K_SERVER))
    message(FATAL_ERROR "${where}: give exactly one of DB <log> and SERVER <host:port>")
  endif()
  get_property(languages GLOBAL PROPERTY ENABLED_LANGUAGES)
  if(NOT "C" IN_LIST languages)
    message(FATAL_ERROR "${where}: the ktune runtime is C: enable it (project(... LANGUAGES C CXX))")
  endif()
  get_target_property(names ${target} KTUNE_KERNELS)
  if(names AND "${K_NAME}" IN_LIST names)
    message(FATAL_ERROR "${where}: ${target} already has a kernel named ${K_NAME}")
  endif()

  set(dir "${CMAKE_CURRENT_BINARY_DIR}/ktune_kernels/${target}")
  file(MAKE_DIRECTORY "${dir}")
  set(object "${dir}/${K_NAME}${CMAKE_C_OUTPUT_EXTENSION}")
  set(header "${dir}/${K_NAME}.h")
  set(command "${KTUNE_EXECUTABLE}" build ${K_TEMPLATE} ${K_ARGS} --name ${K_NAME} -o "${object}" --header "${header}")
  set(outputs "${object}" "${header}")
  set(depends "${KTUNE_EXECUTABLE}")
  if(K_DB)
    get_filename_component(db "${K_DB}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
    list(APPEND command --db "${db}")
    # A log that does not exist yet cannot be a dependency (Ninja and Make stop on a missing
    # input without a rule): the kernel is the fallback until the log exists and CMake reruns.
    if(EXISTS "${db}")
      list(APPEND depends "${db}")
    else()
      message(STATUS "${where}: no tuning log at ${db}: the fallback config until it exists and CMake reruns")
    endif()
  else()
    list(APPEND command --server "${K_SERVER}")
    if(K_DEVICE_KEY)
      list(APPEND command --device-key "${K_DEVICE_KEY}")
    endif()
  endif()
  if(K_TARGET)
    list(APPEND command --target "${K_TARGET}")
  endif()
  if(K_REQUIRE_TUNED)
    list(APPEND command --require-tuned)
  endif()
  # The first kernel of a target also writes the runtime, compiled once into the target.
  get_target_property(runtime ${target} KTUNE_RUNTIME_SOURCE)
  if(NOT runtime)
    set(runtime "${dir}/ktune_runtime.c")
    list(APPEND command --runtime "${runtime}")
    list(APPEND outputs "${runtime}")
    set_target_properties(${target} PROPERTIES KTUNE_RUNTIME_SOURCE "${runtime}")
    target_sources(${target} PRIVATE "${runtime}")
    set_source_files_properties("${runtime}" PROPERTIES GENERATED TRUE LANGUAGE C)
    if(NOT TARGET Threads::Threads)
      find_package(Threads REQUIRED)
    endif()
    target_link_libraries(${target} PRIVATE Threads::Threads)
  endif()
  string(JOIN " " args_text ${K_ARGS})
  add_custom_command(OUTPUT ${outputs}
    COMMAND ${command}
    DEPENDS ${depends}
    COMMENT "ktune build ${K_TEMPLATE} ${args_text} -> ${K_NAME}"
    VERBATIM)
  set_source_files_properties("${object}" PROPERTIES EXTERNAL_OBJECT TRUE GENERATED TRUE)
  target_sources(${target} PRIVATE "${object}" "${header}")
  target_include_directories(${target} PRIVATE "${dir}")
  set_property(TARGET ${target} APPEND PROPERTY KTUNE_KERNELS "${K_NAME}")
endfunction()
