# Decides IPU_PYTHON_MODE from IPU_PYTHON (top-level CMakeLists.txt): whether
# python/ builds the module `ipu`. The interpreter is the one CMake's FindPython3
# finds (or -DPython3_EXECUTABLE=...); the module is built for it and its tests
# run with it, so a build never mixes two Pythons.
string(TOUPPER "${IPU_PYTHON}" IPU_PYTHON_MODE)
if(NOT IPU_PYTHON_MODE STREQUAL "OFF")
  find_package(Python3 QUIET COMPONENTS Interpreter Development.Module)
  if(Python3_FOUND)
    # pybind11 sees Python3 already found and uses it (its FindPython mode).
    find_package(pybind11 CONFIG QUIET)
  endif()
  if(Python3_FOUND AND pybind11_FOUND)
    set(IPU_PYTHON_MODE ON)
  elseif(IPU_PYTHON_MODE STREQUAL "ON")
    message(FATAL_ERROR "IPU_PYTHON=ON needs pybind11 (pybind11-dev) and Python 3's headers (python3-dev)")
  else()
    message(STATUS "pybind11 (pybind11-dev) or Python 3 headers (python3-dev) not found: the Python module "
                   "is not built; ./dev test installs them (-DIPU_PYTHON=ON makes this an error)")
    set(IPU_PYTHON_MODE OFF)
  endif()
endif()
if(IPU_PYTHON_MODE)
  # The module is a shared object linking the static libraries.
  set(CMAKE_POSITION_INDEPENDENT_CODE ON)
endif()
