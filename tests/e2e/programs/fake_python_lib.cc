// A test double of an embedded CPython (libpython), just enough for the preload's Python detection: it exports the
// version (Py_Version, or with FAKE_PY_LEGACY_VERSION defined at build time only Py_GetVersion, as 3.10 and older
// do), _PyRuntime starting with its debug offsets' head, the type objects whose sizes the preload checks,
// PyGILState_GetThisThreadState (no thread state: it returns null) and _PyEval_EvalFrameDefault, with the version,
// sizes and head taken from the environment when it is loaded. Loaded with dlopen by e2e_fake_python, as a program
// that embeds Python loads libpython:
//   FAKE_PY_VERSION        PY_VERSION_HEX, e.g. 0x030d00f0 for 3.13.0 (default 3.12.3)
//   FAKE_PY_CODE_SIZE      PyCode_Type.tp_basicsize (default 192, 3.12's)
//   FAKE_PY_STR_SIZE       PyUnicode_Type.tp_basicsize (default 64, 3.12's)
//   FAKE_PY_COOKIE         the debug offsets' cookie (default "xdebugpy")
//   FAKE_PY_FREE_THREADED  the debug offsets' free_threaded flag (default 0)
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#define EXPORT __attribute__((visibility("default")))

extern "C" {
#ifdef FAKE_PY_LEGACY_VERSION
char fake_version_text[64] = "3.12.3 (fake)";
EXPORT const char* Py_GetVersion() { return fake_version_text; }
#else
EXPORT unsigned long Py_Version = 0x030c03f0;
#endif
// The debug offsets start with an 8-byte cookie, the version and the free-threaded flag; the rest is zeros, which
// no real interpreter has.
EXPORT alignas(16) unsigned char _PyRuntime[4096];
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
  const uint64_t version = FromEnv("FAKE_PY_VERSION", 0x030c03f0);
#ifdef FAKE_PY_LEGACY_VERSION
  snprintf(fake_version_text, sizeof(fake_version_text), "%u.%u.%u (fake)", static_cast<unsigned>(version >> 24),
           static_cast<unsigned>((version >> 16) & 0xFF), static_cast<unsigned>((version >> 8) & 0xFF));
#else
  Py_Version = version;
#endif
  const char* cookie = getenv("FAKE_PY_COOKIE");
  memcpy(_PyRuntime, cookie != nullptr ? cookie : "xdebugpy", 8);
  memcpy(_PyRuntime + 8, &version, sizeof(version));
  const uint64_t free_threaded = FromEnv("FAKE_PY_FREE_THREADED", 0);
  memcpy(_PyRuntime + 16, &free_threaded, sizeof(free_threaded));
  SetBasicsize(PyCode_Type, FromEnv("FAKE_PY_CODE_SIZE", 192));
  SetBasicsize(PyUnicode_Type, FromEnv("FAKE_PY_STR_SIZE", 64));
  SetBasicsize(PyBytes_Type, 33);
}

}  // namespace
