# Cross-process determinism: two separate runs of `raftlog-sim --seed S --trace` print identical bytes.
# Usage: cmake -DSIM=<path to raftlog-sim> -DSEED=<n> -DNODES=<3|5> -P same_seed_same_trace.cmake
foreach(run first second)
  execute_process(
    COMMAND "${SIM}" --seed ${SEED} --nodes ${NODES} --trace
    OUTPUT_VARIABLE out_${run}
    RESULT_VARIABLE rc_${run})
  if(NOT rc_${run} EQUAL 0)
    message(FATAL_ERROR "raftlog-sim --seed ${SEED} failed (${rc_${run}}):\n${out_${run}}")
  endif()
endforeach()
string(LENGTH "${out_first}" length)
if(length LESS 10000)
  message(FATAL_ERROR "trace suspiciously short (${length} bytes)")
endif()
if(NOT out_first STREQUAL out_second)
  message(FATAL_ERROR "two runs of seed ${SEED} printed different traces")
endif()
message(STATUS "seed ${SEED}: ${length} identical trace bytes")
