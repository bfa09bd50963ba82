# The layering check against a tree with one planted wrong-way include per
# rule kind (cmake -P, run by ctest as layering.catches_planted): each must
# be reported, and a clean tree must pass.
set(tree "${WORK}/planted")
file(REMOVE_RECURSE "${tree}")
file(WRITE "${tree}/core/store/ok.cpp" "#include \"core/model/vocabulary.h\"\n")
file(WRITE "${tree}/core/analysis/ok.cpp" "#include \"core/store/records.h\"\n")
execute_process(COMMAND ${CMAKE_COMMAND} -DROOT=${tree} -P ${CHECK}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "a clean tree failed the layering check:\n${out}")
endif()
foreach(planted
    "core/store/bad.cpp|#include \"core/analysis/run_analysis.h\""
    "core/model/bad.h|#include \"core/store/records.h\""
    "core/analysis/bad.cpp|#  include \"core/report/report.h\""
    "core/report/bad.cpp|#include <QWidget>"
    "ui/bad.cpp|#include <torch/torch.h>")
  string(REPLACE "|" ";" parts "${planted}")
  list(GET parts 0 file)
  list(GET parts 1 line)
  file(WRITE "${tree}/${file}" "${line}\n")
  execute_process(COMMAND ${CMAKE_COMMAND} -DROOT=${tree} -P ${CHECK}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(rc EQUAL 0 OR NOT out MATCHES "${file}")
    message(FATAL_ERROR "the planted include in ${file} was not caught:\n${out}")
  endif()
  message(STATUS "caught: ${file}: ${line}")
  file(REMOVE "${tree}/${file}")
endforeach()
file(REMOVE_RECURSE "${tree}")
