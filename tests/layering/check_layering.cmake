# Fails when a module includes something its layer may not depend on:
#   core    -> no Qt, no torch/pybind, no ui/capture/app/plugins headers, and
#              inside core only downwards (core/CMakeLists.txt: one target
#              per layer): model/util <- store <- policy, synth, analysis
#              <- report/export
#   ui      -> no torch/pybind, no capture headers
#   plugins -> no ui/capture/app headers
#   capture -> no Qt, no ui/app headers
set(rules
  "core|<Q[A-Za-z]*>|<torch/|<ATen/|<c10/|<pybind11/|\"ui/|\"capture/|\"app/|\"plugins/"
  "ui|<torch/|<ATen/|<c10/|<pybind11/|\"capture/"
  "plugins|\"ui/|\"capture/|\"app/|<Q[A-Za-z]*>"
  "capture|<Q[A-Za-z]*>|\"ui/|\"app/"
  "core/model|\"core/store/|\"core/policy/|\"core/synth/|\"core/analysis/|\"core/report/|\"core/export/"
  "core/util|\"core/store/|\"core/policy/|\"core/synth/|\"core/analysis/|\"core/report/|\"core/export/"
  "core/store|\"core/policy/|\"core/synth/|\"core/analysis/|\"core/report/|\"core/export/"
  "core/policy|\"core/synth/|\"core/analysis/|\"core/report/|\"core/export/"
  "core/synth|\"core/policy/|\"core/analysis/|\"core/report/|\"core/export/"
  "core/analysis|\"core/policy/|\"core/synth/|\"core/report/|\"core/export/")
set(violations "")
foreach(rule IN LISTS rules)
  string(REPLACE "|" ";" parts "${rule}")
  list(POP_FRONT parts module)
  file(GLOB_RECURSE sources "${ROOT}/${module}/*.h" "${ROOT}/${module}/*.hpp" "${ROOT}/${module}/*.cpp"
       "${ROOT}/${module}/*.cu")
  foreach(source IN LISTS sources)
    file(STRINGS "${source}" includes REGEX "^[ \t]*#[ \t]*include")
    foreach(line IN LISTS includes)
      foreach(forbidden IN LISTS parts)
        string(REPLACE "<" "#[ \t]*include[ \t]*<" pattern "${forbidden}")
        string(REPLACE "\"" "#[ \t]*include[ \t]*\"" pattern "${pattern}")
        if(line MATCHES "${pattern}")
          file(RELATIVE_PATH rel "${ROOT}" "${source}")
          string(APPEND violations "${rel}: '${line}' crosses the ${module} layer\n")
        endif()
      endforeach()
    endforeach()
  endforeach()
endforeach()
if(violations)
  message(FATAL_ERROR "layering violations:\n${violations}")
endif()
message(STATUS "layering: all includes respect the layers (docs/architecture.md)")
