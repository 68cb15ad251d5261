# Runs an example twice, on the CPU and on DEVICE, with the same ARGS (its compiled train step both
# times: generated CPU kernels there, the device's generated SPIR-V and shaders from the same
# trace here), and fails unless both print the number METRIC (a regex of one group, matched at the
# end of the output) and the two agree within TOLERANCE. Usage:
#   cmake -DPROGRAM=... -DDEVICE=vulkan -DARGS="..." -DMETRIC="test accuracy: ([0-9.]+)%\n$"
#         -DTOLERANCE=1 [-DOUT=prefix: --out prefix-<device>] -P SameResult.cmake
separate_arguments(args UNIX_COMMAND "${ARGS}")
foreach(where cpu ${DEVICE})
  set(out_args)
  if(OUT)
    set(out_args --out ${OUT}-${where})
  endif()
  execute_process(COMMAND ${PROGRAM} --device ${where} ${args} ${out_args}
                  OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${PROGRAM} --device ${where} failed (${rc}):\n${out}\n${err}")
  endif()
  if(NOT out MATCHES "${METRIC}")
    message(FATAL_ERROR "${PROGRAM} --device ${where} printed no '${METRIC}':\n${out}")
  endif()
  set(result_${where} ${CMAKE_MATCH_1})
  message(STATUS "${where}: ${CMAKE_MATCH_1}")
endforeach()
execute_process(COMMAND awk -v a=${result_cpu} -v b=${result_${DEVICE}} -v t=${TOLERANCE}
                "BEGIN { d = a - b; if (d < 0) d = -d; exit d <= t ? 0 : 1 }"
                RESULT_VARIABLE close)
if(NOT close EQUAL 0)
  message(FATAL_ERROR "${result_${DEVICE}} on ${DEVICE} is not within ${TOLERANCE} of the CPU's "
                      "${result_cpu}")
endif()
