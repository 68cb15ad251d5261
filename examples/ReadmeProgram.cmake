# Checks that README.md shows examples/first_program.cpp as it is (cmake -DREADME=... -DPROGRAM=...
# -P ReadmeProgram.cmake), so that the program README teaches is the one the tests run.
file(READ "${README}" readme)
file(READ "${PROGRAM}" program)
string(FIND "${readme}" "```cpp\n${program}```" at)
if(at EQUAL -1)
  message(FATAL_ERROR "${README}'s code block under \"A first program\" is not ${PROGRAM}: "
                      "copy the file into it (or the block into the file) so that they agree")
endif()
