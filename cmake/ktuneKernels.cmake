# ktune_add_kernel(): tuned kernels in a consumer's build. Installed next to ktuneConfig.cmake;
# needs KTUNE_EXECUTABLE (the ktune binary) and a project with the C language enabled (the
# standalone runtime is C).
#
#   ktune_add_kernel(<target> NAME <symbol> TEMPLATE <template> [ARGS key=value...]
#                    DB <log> | SERVER <host:port> [DEVICE_KEY <key>] | UNTUNED
#                    [TARGET "llvm -mtriple=..."] [REQUIRE_TUNED])
#
# Each call records the kernel on <target>; at the end of the directory, the kernels of a target
# that share DB/SERVER/DEVICE_KEY/TARGET (a group; usually all of them) are built by ONE
# `ktune build --manifest` run at build time: the log's best record of each workload for TARGET
# (default host; the template's fallback config when there is none, unless REQUIRE_TUNED; every
# kernel on its fallback with UNTUNED; a DB that does not exist stops the configure), all
# compiled in one LLVM session into one static library and one header,
# ktune_kernels/<target>/ktune_kernels.h (ktune_kernels_<n>.h for the n-th further group), which
# lists every kernel and where its config came from. The library is linked into <target>; the
# directory of the headers is on its include path and holds a <symbol>.h per kernel that includes
# the group's header, so a program includes either. Once per target, ktune_runtime.c
# (ktune_parallel_for: a persistent pthread pool; see the header) is compiled into <target>. The
# kernels are built again when the log changes (DB), when the kernels or their options change (the
# manifest), or when ktune changes, so re-tuning and rebuilding ships the new best configs.
#
#   ktune_add_model(<target> NAME <name> MODEL <file.onnx>
#                   DB <log> | SERVER <host:port> [DEVICE_KEY <key>] | UNTUNED
#                   [TARGET "llvm -mtriple=..."] [INPUTS name=1x3x224x224...] [WEIGHTS_FILE <file>]
#                   [REQUIRE_TUNED])
#
# A whole ONNX model as one static library, built at build time by `ktune build --model`: every
# layer on the log's best kernel (else the nearest tuned shape's config, else the fallback, unless
# REQUIRE_TUNED), weights packed into the kernels' layouts and embedded (or written to
# WEIGHTS_FILE, which <name>_create reads). ktune_models/<target>/<name>.h declares
# <name>_create / <name>_run / <name>_destroy and the inputs' and outputs' shapes; the library is
# linked into <target>, with the runtime once per target. Rebuilt when the model, the log or
# ktune changes.
include_guard(GLOBAL)

# A string as a JSON string literal (quotes, backslashes and control characters escaped).
function(_ktune_json_string out text)
  string(REPLACE "\\" "\\\\" text "${text}")
  string(REPLACE "\"" "\\\"" text "${text}")
  string(REPLACE "\n" "\\n" text "${text}")
  string(REPLACE "\t" "\\t" text "${text}")
  set(${out} "\"${text}\"" PARENT_SCOPE)
endfunction()

# The checks ktune_add_kernel and ktune_add_model share, on the arguments parsed into <p>_*;
# `second` is the other required keyword (TEMPLATE or MODEL).
macro(_ktune_check_call where target p second)
  if(${p}_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "${where}: unknown arguments: ${${p}_UNPARSED_ARGUMENTS}")
  endif()
  if(NOT TARGET ${target})
    message(FATAL_ERROR "${where}: ${target} is not a target")
  endif()
  if(NOT ${p}_NAME OR NOT ${p}_${second})
    message(FATAL_ERROR "${where}: NAME and ${second} are required")
  endif()
  if(NOT ${p}_NAME MATCHES "^[A-Za-z_][A-Za-z0-9_]*$")
    message(FATAL_ERROR "${where}: NAME must be a C identifier")
  endif()
  set(_ktune_sources 0)
  foreach(_ktune_source DB SERVER UNTUNED)
    if(${p}_${_ktune_source})
      math(EXPR _ktune_sources "${_ktune_sources} + 1")
    endif()
  endforeach()
  if(NOT _ktune_sources EQUAL 1)
    message(FATAL_ERROR "${where}: give exactly one of DB <log>, SERVER <host:port> and UNTUNED")
  endif()
  if(${p}_UNTUNED AND ${p}_REQUIRE_TUNED)
    message(FATAL_ERROR "${where}: UNTUNED and REQUIRE_TUNED contradict each other")
  endif()
  if(${p}_DEVICE_KEY AND NOT ${p}_SERVER)
    message(FATAL_ERROR "${where}: DEVICE_KEY goes with SERVER")
  endif()
  get_property(_ktune_languages GLOBAL PROPERTY ENABLED_LANGUAGES)
  if(NOT "C" IN_LIST _ktune_languages)
    message(FATAL_ERROR "${where}: the ktune runtime is C: enable it (project(... LANGUAGES C CXX))")
  endif()
endmacro()

# The standalone runtime (ktune_parallel_for), compiled into <target> once: the first build step
# of the target that asks adds `--runtime <dir>/ktune_runtime.c` to `command` and the file to
# `outputs` (the caller's variables); later calls for the target add nothing.
macro(_ktune_add_runtime target dir)
  get_target_property(_ktune_has_runtime ${target} KTUNE_RUNTIME)
  if(NOT _ktune_has_runtime)
    set(_ktune_runtime "${dir}/ktune_runtime.c")
    list(APPEND command --runtime "${_ktune_runtime}")
    list(APPEND outputs "${_ktune_runtime}")
    target_sources(${target} PRIVATE "${_ktune_runtime}")
    set_source_files_properties("${_ktune_runtime}" PROPERTIES GENERATED TRUE LANGUAGE C)
    set_property(TARGET ${target} PROPERTY KTUNE_RUNTIME "${_ktune_runtime}")
    if(NOT TARGET Threads::Threads)
      find_package(Threads REQUIRED)
    endif()
    target_link_libraries(${target} PRIVATE Threads::Threads)
  endif()
endmacro()

# Appends to the list `out` where configs come from and what they are compiled for, from the
# arguments parsed into <p>_*: --untuned, --db (made absolute; also set as `db`, else `db` is
# empty) or --server [--device-key], and --target. A log that does not exist stops the configure
# (`where` names the call): a typo must not ship fallback configs in silence.
macro(_ktune_source_options p out)
  set(db "")
  if(${p}_UNTUNED)
    list(APPEND ${out} --untuned)
  elseif(${p}_DB)
    get_filename_component(db "${${p}_DB}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
    if(NOT EXISTS "${db}")
      message(FATAL_ERROR "${where}: no tuning log at ${db} (`ktune tune` and `ktune tune-model` "
                          "write one; UNTUNED builds every kernel on its fallback config)")
    endif()
    list(APPEND ${out} --db "${db}")
  else()
    list(APPEND ${out} --server "${${p}_SERVER}")
    if(${p}_DEVICE_KEY)
      list(APPEND ${out} --device-key "${${p}_DEVICE_KEY}")
    endif()
  endif()
  if(${p}_TARGET)
    list(APPEND ${out} --target "${${p}_TARGET}")
  endif()
endmacro()

function(ktune_add_kernel target)
  cmake_parse_arguments(PARSE_ARGV 1 K "REQUIRE_TUNED;UNTUNED" "NAME;TEMPLATE;DB;SERVER;DEVICE_KEY;TARGET" "ARGS")
  set(where "ktune_add_kernel(${target} NAME ${K_NAME})")
  _ktune_check_call("${where}" ${target} K TEMPLATE)
  if(K_NAME MATCHES "^ktune_kernels(_[0-9]+)?$")
    message(FATAL_ERROR "${where}: ${K_NAME} is the name of a group's header: choose another NAME")
  endif()
  get_target_property(names ${target} KTUNE_KERNELS)
  if(names AND "${K_NAME}" IN_LIST names)
    message(FATAL_ERROR "${where}: ${target} already has a kernel named ${K_NAME}")
  endif()

  # Where the kernel's config comes from and what it is compiled for: one group per combination.
  set(options "")
  _ktune_source_options(K options)
  string(MD5 key "${options}")
  get_target_property(groups ${target} KTUNE_GROUPS)
  if(NOT groups)
    set(groups "")
    # The manifests can only be written once every kernel of the target is known. A deferred
    # call's arguments are evaluated when it runs, outside this function: pass the name itself.
    cmake_language(EVAL CODE "cmake_language(DEFER CALL _ktune_build_kernel_groups [==[${target}]==])")
  endif()
  list(FIND groups "${key}" group)
  if(group EQUAL -1)
    list(LENGTH groups group)
    set_property(TARGET ${target} APPEND PROPERTY KTUNE_GROUPS "${key}")
    set_property(TARGET ${target} PROPERTY KTUNE_GROUP_${group}_OPTIONS "${options}")
    if(K_DB)
      set_property(TARGET ${target} PROPERTY KTUNE_GROUP_${group}_DB "${db}")
    endif()
  endif()

  _ktune_json_string(name_json "${K_NAME}")
  _ktune_json_string(template_json "${K_TEMPLATE}")
  set(args_json "")
  foreach(arg IN LISTS K_ARGS)
    _ktune_json_string(arg_json "${arg}")
    list(APPEND args_json "${arg_json}")
  endforeach()
  string(JOIN ", " args_json ${args_json})
  set(entry "{\"name\": ${name_json}, \"template\": ${template_json}, \"args\": [${args_json}]")
  if(K_REQUIRE_TUNED)
    string(APPEND entry ", \"require_tuned\": true")
  endif()
  string(APPEND entry "}")
  # Entries are joined with a line break (not ';') so that arguments may hold any character.
  get_target_property(entries ${target} KTUNE_GROUP_${group}_ENTRIES)
  if(entries)
    set(entries "${entries},\n  ${entry}")
  else()
    set(entries "  ${entry}")
  endif()
  set_property(TARGET ${target} PROPERTY KTUNE_GROUP_${group}_ENTRIES "${entries}")
  set_property(TARGET ${target} APPEND PROPERTY KTUNE_GROUP_${group}_NAMES "${K_NAME}")
  set_property(TARGET ${target} APPEND PROPERTY KTUNE_KERNELS "${K_NAME}")
endfunction()

function(ktune_add_model target)
  cmake_parse_arguments(PARSE_ARGV 1 M "REQUIRE_TUNED;UNTUNED" "NAME;MODEL;DB;SERVER;DEVICE_KEY;TARGET;WEIGHTS_FILE" "INPUTS")
  set(where "ktune_add_model(${target} NAME ${M_NAME})")
  _ktune_check_call("${where}" ${target} M MODEL)
  get_filename_component(model "${M_MODEL}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
  set(dir "${CMAKE_CURRENT_BINARY_DIR}/ktune_models/${target}")
  file(MAKE_DIRECTORY "${dir}")
  set(library "${dir}/lib${M_NAME}.a")
  set(header "${dir}/${M_NAME}.h")
  set(command "${KTUNE_EXECUTABLE}" build --model "${model}" --name "${M_NAME}" -o "${library}" --header "${header}")
  set(outputs "${library}" "${header}")
  set(depends "${KTUNE_EXECUTABLE}" "${model}")
  _ktune_source_options(M command)
  if(db)
    list(APPEND depends "${db}")
  endif()
  foreach(input IN LISTS M_INPUTS)
    list(APPEND command --input "${input}")
  endforeach()
  if(M_WEIGHTS_FILE)
    get_filename_component(weights "${M_WEIGHTS_FILE}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_BINARY_DIR}")
    list(APPEND command --weights "${weights}")
    list(APPEND outputs "${weights}")
  endif()
  if(M_REQUIRE_TUNED)
    list(APPEND command --require-tuned)
  endif()
  # The runtime, once per target (shared with ktune_add_kernel).
  _ktune_add_runtime(${target} "${dir}")
  add_custom_command(OUTPUT ${outputs}
    COMMAND ${command}
    DEPENDS ${depends}
    COMMENT "ktune build --model ${M_MODEL}: ${M_NAME}"
    VERBATIM)
  target_sources(${target} PRIVATE "${header}")
  target_link_libraries(${target} PRIVATE "${library}")
  target_include_directories(${target} PRIVATE "${dir}")
endfunction()

# Called at the end of the directory of <target>'s first ktune_add_kernel: one manifest, one
# `ktune build --manifest` command, one library and header per group.
function(_ktune_build_kernel_groups target)
  set(dir "${CMAKE_CURRENT_BINARY_DIR}/ktune_kernels/${target}")
  file(MAKE_DIRECTORY "${dir}")
  get_target_property(groups ${target} KTUNE_GROUPS)
  list(LENGTH groups count)
  math(EXPR last "${count} - 1")
  foreach(group RANGE ${last})
    set(base ktune_kernels)
    if(group GREATER 0)
      set(base ktune_kernels_${group})
    endif()
    set(manifest "${dir}/${base}.json")
    set(library "${dir}/lib${base}.a")
    set(header "${dir}/${base}.h")
    get_target_property(options ${target} KTUNE_GROUP_${group}_OPTIONS)
    get_target_property(entries ${target} KTUNE_GROUP_${group}_ENTRIES)
    get_target_property(names ${target} KTUNE_GROUP_${group}_NAMES)
    get_target_property(db ${target} KTUNE_GROUP_${group}_DB)
    # Rewritten only when it changes (file(CONFIGURE)), so an unchanged manifest rebuilds nothing.
    file(CONFIGURE OUTPUT "${manifest}" CONTENT "[\n${entries}\n]\n" @ONLY)
    set(command "${KTUNE_EXECUTABLE}" build --manifest "${manifest}" ${options} -o "${library}" --header "${header}")
    set(outputs "${library}" "${header}")
    set(depends "${KTUNE_EXECUTABLE}" "${manifest}")
    if(db)
      list(APPEND depends "${db}")
    endif()
    # The first group also writes the runtime, once per target (shared with ktune_add_model).
    if(group EQUAL 0)
      _ktune_add_runtime(${target} "${dir}")
    endif()
    # <symbol>.h: what a program that wants one kernel includes.
    set(stubs "")
    foreach(name IN LISTS names)
      file(CONFIGURE OUTPUT "${dir}/${name}.h" CONTENT
           "/* ${name}: generated by ktune_add_kernel; the kernel is declared in ${base}.h. */\n#include \"${base}.h\"\n"
           @ONLY)
      list(APPEND stubs "${dir}/${name}.h")
    endforeach()
    string(JOIN " " names_text ${names})
    add_custom_command(OUTPUT ${outputs}
      COMMAND ${command}
      DEPENDS ${depends}
      COMMENT "ktune build --manifest ${base}.json: ${names_text}"
      VERBATIM)
    # The header as a source attaches the command to the target; the library is linked by path
    # (the link step depends on it).
    target_sources(${target} PRIVATE "${header}" ${stubs})
    target_link_libraries(${target} PRIVATE "${library}")
  endforeach()
  target_include_directories(${target} PRIVATE "${dir}")
endfunction()
