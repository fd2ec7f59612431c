// A test double of an embedded CPython (libpython), just enough for the preload's Python detection: it exports
// Py_Version, the type objects whose sizes the preload checks, PyGILState_GetThisThreadState (no thread state: it
// returns null) and _PyEval_EvalFrameDefault, with the version and sizes taken from the environment when it is
// loaded. Loaded with dlopen by e2e_fake_python, as a program that embeds Python loads libpython:
//   FAKE_PY_VERSION    PY_VERSION_HEX, e.g. 0x030d00f0 for 3.13.0 (default 3.12.3)
//   FAKE_PY_CODE_SIZE  PyCode_Type.tp_basicsize (default 192, 3.12's)
//   FAKE_PY_STR_SIZE   PyUnicode_Type.tp_basicsize (default 64, 3.12's)
#include <cstdint>
#include <cstdlib>
#include <cstring>

#define EXPORT __attribute__((visibility("default")))

extern "C" {
EXPORT unsigned long Py_Version = 0x030c03f0;
// Type objects: only tp_basicsize (offset 32 of PyTypeObject) is read.
EXPORT alignas(16) unsigned char PyCode_Type[416];
EXPORT alignas(16) unsigned char PyUnicode_Type[416];
EXPORT alignas(16) unsigned char PyBytes_Type[416];

EXPORT void* PyGILState_GetThisThreadState() { return nullptr; }
EXPORT int _PyEval_EvalFrameDefault(void*, void*, int) { return 0; }
}

namespace {

uint64_t FromEnv(const char* name, uint64_t fallback) {
  const char* text = getenv(name);
  return text == nullptr ? fallback : strtoull(text, nullptr, 0);
}

void SetBasicsize(unsigned char* type, uint64_t size) { memcpy(type + 32, &size, sizeof(size)); }

__attribute__((constructor)) void Configure() {
  Py_Version = FromEnv("FAKE_PY_VERSION", Py_Version);
  SetBasicsize(PyCode_Type, FromEnv("FAKE_PY_CODE_SIZE", 192));
  SetBasicsize(PyUnicode_Type, FromEnv("FAKE_PY_STR_SIZE", 64));
  SetBasicsize(PyBytes_Type, 33);
}

}  // namespace
