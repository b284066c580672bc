# compressed_bench_smoke: writes a small class-sorted gzip file with h5py
# (bench/make_h5py_data.py quality) and runs every case of compressed_bench on it (block and
# quality at two windows), host target, briefly; stdout must be a JSON array with one object per
# case, each with a positive rate and, for the loader cases, records delivered and a label mix
# in range (1..batch distinct labels, entropy at most log2(batch)). No speed assertions.
#   cmake -DBENCH=<compressed_bench> -DPYTHON=<python3> -DMAKE=<make_h5py_data.py> -DDIR=<dir>
#         -P compressed_smoke.cmake
cmake_minimum_required(VERSION 3.25)
file(MAKE_DIRECTORY "${DIR}")
set(file "${DIR}/quality_small.h5")
execute_process(COMMAND "${PYTHON}" "${MAKE}" quality "${file}" --rows 8192 --classes 16
                RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "make_h5py_data.py failed (${rc}): ${err}")
endif()
execute_process(
  COMMAND "${BENCH}" --target host --json --workers 2 --prefetch 2 --batch 64 --seconds 0.3
          --cases decode1,decodeN,sequential,block,shuffled,quality --windows 2,0 --cold "${file}"
  OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "compressed_bench exited with ${rc}\n${err}")
endif()
string(JSON n ERROR_VARIABLE jerr LENGTH "${out}")
if(jerr)
  message(FATAL_ERROR "stdout is not a JSON array: ${jerr}\n${out}")
endif()
# dd, decode1, decode2, sequential, block/w2, block, shuffled, quality/block/w2,
# quality/block/w0, quality/shuffled
if(NOT n EQUAL 10)
  message(FATAL_ERROR "expected 10 cases, got ${n}\n${out}")
endif()
math(EXPR last "${n} - 1")
foreach(i RANGE ${last})
  string(JSON c GET "${out}" ${i} case)
  string(JSON gbs GET "${out}" ${i} gb_per_s)
  if(NOT c MATCHES "^quality" AND NOT gbs GREATER 0)
    message(FATAL_ERROR "case ${c}: rate ${gbs} is not positive")
  endif()
  if(c MATCHES "^(sequential|block|shuffled|quality)")
    string(JSON records GET "${out}" ${i} records)
    string(JSON distinct GET "${out}" ${i} mean_distinct_labels)
    string(JSON entropy GET "${out}" ${i} mean_label_entropy_bits)
    if(records LESS 64 OR distinct LESS 1 OR distinct GREATER 64 OR entropy LESS 0
       OR entropy GREATER 6.0001)
      message(FATAL_ERROR "case ${c}: records ${records}, labels/batch ${distinct}, "
                          "entropy ${entropy} out of range\n${out}")
    endif()
  endif()
endforeach()
message(STATUS "compressed_bench: ${n} cases\n${err}")
