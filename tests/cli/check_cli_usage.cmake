# Usage errors exit 2 with CLI11's message, --help and --version exit 0, --version prints the
# project version, and `doctor --data MISSING` fails one check for its one cause with no gpufeed
# source location in what it prints. -DGPUFEED=<CLI> -DVERSION=<project version> -DWORK_DIR=<dir>.
cmake_minimum_required(VERSION 3.25)

function(run prefix)
  execute_process(COMMAND "${GPUFEED}" ${ARGN} OUTPUT_VARIABLE out ERROR_VARIABLE err
                  RESULT_VARIABLE rc)
  message(STATUS "gpufeed ${ARGN}: exit ${rc}\n${out}${err}")
  set(${prefix}_out "${out}" PARENT_SCOPE)
  set(${prefix}_err "${err}" PARENT_SCOPE)
  set(${prefix}_rc "${rc}" PARENT_SCOPE)
endfunction()

function(expect_rc want)
  run(r ${ARGN})
  if(NOT r_rc EQUAL want)
    message(FATAL_ERROR "gpufeed ${ARGN}: exit ${r_rc}, expected ${want}")
  endif()
endfunction()

# Usage errors: no subcommand, an unknown option or subcommand, a missing required argument,
# a value outside its range, a value of the wrong type.
expect_rc(2)
expect_rc(2 --no-such-option)
expect_rc(2 no-such-command)
expect_rc(2 bench)
expect_rc(2 bench . --seconds 0)
expect_rc(2 bench . --workers many)
expect_rc(2 doctor --max-gib -1)
expect_rc(2 inspect)
expect_rc(0 --help)
expect_rc(0 bench --help)

run(v --version)
if(NOT v_rc EQUAL 0 OR NOT v_out STREQUAL "gpufeed ${VERSION}\n")
  message(FATAL_ERROR "--version printed '${v_out}' (exit ${v_rc}); expected 'gpufeed ${VERSION}'")
endif()

# One cause, one failed check: the storage check fails, the loader check is skipped.
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")
run(d doctor --json --data "${WORK_DIR}/missing" --max-gib 0.01)
if(NOT d_rc EQUAL 1)
  message(FATAL_ERROR "doctor --data MISSING: exit ${d_rc}, expected 1")
endif()
string(JSON n LENGTH "${d_out}" checks)
set(failed "")
math(EXPR last "${n} - 1")
foreach(i RANGE ${last})
  string(JSON status GET "${d_out}" checks ${i} status)
  string(JSON id GET "${d_out}" checks ${i} id)
  if(status STREQUAL "fail")
    list(APPEND failed ${id})
  endif()
  if(id STREQUAL "loader" AND NOT status STREQUAL "skip")
    message(FATAL_ERROR "doctor --data MISSING: the loader check is '${status}', expected skip")
  endif()
endforeach()
if(NOT failed STREQUAL "storage")
  message(FATAL_ERROR "doctor --data MISSING: failed checks '${failed}', expected only storage")
endif()
if(NOT d_err STREQUAL "gpufeed doctor: failed checks: storage\n")
  message(FATAL_ERROR "doctor --data MISSING: stderr '${d_err}'")
endif()
# gpufeed's source locations look like "at .../tools/gpufeed/shards.hpp:36".
foreach(text "${d_out}" "${d_err}")
  if(text MATCHES "\\.(hpp|cpp):[0-9]+")
    message(FATAL_ERROR "doctor printed a source location: ${CMAKE_MATCH_0}")
  endif()
endforeach()

# bench on a path that is not there: exit 1, one line naming it, no source location.
run(b bench "${WORK_DIR}/missing" --seconds 1)
if(NOT b_rc EQUAL 1 OR NOT b_err MATCHES "^gpufeed bench: error: [^\n]*missing[^\n]*\n$"
   OR b_err MATCHES "\\.(hpp|cpp):[0-9]+")
  message(FATAL_ERROR "bench MISSING: exit ${b_rc}, stderr '${b_err}'")
endif()
message(STATUS "gpufeed CLI: exit codes, --version and doctor's one failure check out")
