# Runs fashion_mnist twice, on the CPU and on DEVICE, with the same ARGS (its compiled train step
# both times: generated CPU kernels there, the device's shaders from the same plan here), and fails
# unless both end with a test accuracy and the two agree within TOLERANCE percentage points. Usage: cmake -DPROGRAM=... -DDEVICE=vulkan -DARGS="..." -DTOLERANCE=1
#   -DOUT=prefix -P SameAccuracy.cmake
separate_arguments(args UNIX_COMMAND "${ARGS}")
foreach(where cpu ${DEVICE})
  execute_process(COMMAND ${PROGRAM} --device ${where} ${args} --out ${OUT}-${where}
                  OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "fashion_mnist --device ${where} failed (${rc}):\n${out}\n${err}")
  endif()
  if(NOT out MATCHES "test accuracy: ([0-9.]+)%\n$")
    message(FATAL_ERROR "fashion_mnist --device ${where} printed no final accuracy:\n${out}")
  endif()
  set(accuracy_${where} ${CMAKE_MATCH_1})
  message(STATUS "${where}: test accuracy ${CMAKE_MATCH_1}%")
endforeach()
execute_process(COMMAND awk -v a=${accuracy_cpu} -v b=${accuracy_${DEVICE}} -v t=${TOLERANCE}
                "BEGIN { d = a - b; if (d < 0) d = -d; exit d <= t ? 0 : 1 }"
                RESULT_VARIABLE close)
if(NOT close EQUAL 0)
  message(FATAL_ERROR "accuracy on ${DEVICE} (${accuracy_${DEVICE}}%) is not within ${TOLERANCE} "
                      "points of the CPU's (${accuracy_cpu}%)")
endif()
