# The CPython interpreters the Python-frame tests run under: one per minor version from 3.10 to 3.14 that this
# machine has (a version manager's installs under ~/.pyenv or $PYENV_ROOT, then the system's), in CUMEMTRACE_TEST_PYTHONS
# as "3.N=/path/to/python3.N;...". A version absent here is skipped, and the configure step says which.
set(_candidates "")
foreach(root $ENV{PYENV_ROOT} $ENV{HOME}/.pyenv /root/.pyenv)
  file(GLOB _found ${root}/versions/3.*/bin/python3.*)
  list(APPEND _candidates ${_found})
endforeach()
file(GLOB _system /usr/bin/python3.* /usr/local/bin/python3.*)
list(APPEND _candidates ${_system})

set(CUMEMTRACE_TEST_PYTHONS "")
set(_missing "")
foreach(minor 10 11 12 13 14)
  set(_chosen "")
  foreach(candidate ${_candidates})
    # Exactly python3.N (not python3.N-config or python3.Nt, a free-threaded build).
    if(candidate MATCHES "/python3\\.${minor}$" AND EXISTS ${candidate} AND NOT IS_DIRECTORY ${candidate})
      set(_chosen ${candidate})
      break()
    endif()
  endforeach()
  if(_chosen)
    list(APPEND CUMEMTRACE_TEST_PYTHONS "3.${minor}=${_chosen}")
  else()
    list(APPEND _missing "3.${minor}")
  endif()
endforeach()
message(STATUS "Python frame tests run under: ${CUMEMTRACE_TEST_PYTHONS}")
if(_missing)
  message(STATUS "Python frame tests skip (no interpreter here): ${_missing}")
endif()
# The same list for a C++ compile definition: "3.10=/path,3.11=/path".
string(REPLACE ";" "," CUMEMTRACE_TEST_PYTHONS_CSV "${CUMEMTRACE_TEST_PYTHONS}")
