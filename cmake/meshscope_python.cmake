# MESHSCOPE_PYTHON: the Python whose torch the capture agent is built against
# and whose CUDA build decides MESHSCOPE_BUILD_CUDA's default. Default: the
# project's .venv, or under pip install the environment pip runs in.
set(default_python "${PROJECT_SOURCE_DIR}/.venv/bin/python")
if(SKBUILD AND Python_EXECUTABLE)
  set(default_python "${Python_EXECUTABLE}")
endif()
set(MESHSCOPE_PYTHON "${default_python}" CACHE FILEPATH
    "Python interpreter whose torch the capture agent is built against")
