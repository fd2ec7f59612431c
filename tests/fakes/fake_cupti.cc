// Test double: a fake libcupti.so.13 (CUPTI's callback API) for cumemtrace's CPU tests; there is no GPU behind it.
//
// Why this exists: cumemtrace can use CUPTI as a second source of memory events (CUMEMTRACE_CUPTI=1), and the tests
// must prove, without a GPU, that a call interposition cannot see is recorded once from CUPTI, that a call both
// see is recorded once, and that a failed subscription (another subscriber in the process) leaves tracing running.
// It implements only the entry points cumemtrace uses: cuptiSubscribe, cuptiUnsubscribe, cuptiEnableCallback,
// cuptiEnableDomain, cuptiGetResultString. The fake libcuda.so.1 calls it around its memory functions
// (FakeCudaSetApiCallback); it forwards enabled driver-domain callbacks to the one subscriber as CUpti_CallbackData.
//
// Environment:
//   FAKE_CUPTI_BUSY=1        cuptiSubscribe fails with CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED, as it does
//                            when another tool (torch.profiler, Nsight) already subscribed
//   FAKE_CUPTI_MARKER=<path> the library creates this file when it is loaded (tests prove it was never loaded)
//
// What it must never do: change errno, or call the subscriber for a callback it did not enable.
#include <cupti.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <atomic>

#include "fake_cuda_control.h"

struct CUpti_Subscriber_st {
  CUpti_CallbackFunc callback;
  void* userdata;
};

namespace {

constexpr unsigned int kMaxCallbackIds = 4096;

CUpti_Subscriber_st subscriber;
std::atomic<bool> subscribed{false};
std::atomic<bool> enabled[kMaxCallbackIds];

void OnDriverApi(void*, int site, unsigned int cbid, const char* name, const void* params, const CUresult* result) {
  if (!subscribed.load() || cbid >= kMaxCallbackIds || !enabled[cbid].load()) return;
  const int saved_errno = errno;
  CUresult returned = result != nullptr ? *result : CUDA_SUCCESS;
  CUpti_CallbackData data{};
  data.callbackSite = site == 0 ? CUPTI_API_ENTER : CUPTI_API_EXIT;
  data.functionName = name;
  data.symbolName = name;
  data.functionParams = params;
  data.functionReturnValue = result != nullptr ? &returned : nullptr;
  subscriber.callback(subscriber.userdata, CUPTI_CB_DOMAIN_DRIVER_API, cbid, &data);
  errno = saved_errno;
}

__attribute__((constructor)) void OnLoad() {
  const int saved_errno = errno;
  const char* marker = getenv("FAKE_CUPTI_MARKER");
  if (marker != nullptr && marker[0] != '\0') {
    const int fd = open(marker, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd >= 0) close(fd);
  }
  errno = saved_errno;
}

}  // namespace

extern "C" {

CUptiResult cuptiSubscribe(CUpti_SubscriberHandle* handle, CUpti_CallbackFunc callback, void* userdata) {
  if (handle == nullptr || callback == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  const char* busy = getenv("FAKE_CUPTI_BUSY");
  if ((busy != nullptr && strcmp(busy, "1") == 0) || subscribed.load()) {
    return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  }
  subscriber.callback = callback;
  subscriber.userdata = userdata;
  for (auto& e : enabled) e.store(false);
  subscribed.store(true);
  FakeCudaSetApiCallback(OnDriverApi, nullptr);
  *handle = &subscriber;
  return CUPTI_SUCCESS;
}

CUptiResult cuptiUnsubscribe(CUpti_SubscriberHandle handle) {
  if (handle != &subscriber || !subscribed.load()) return CUPTI_ERROR_INVALID_PARAMETER;
  FakeCudaSetApiCallback(nullptr, nullptr);
  subscribed.store(false);
  return CUPTI_SUCCESS;
}

CUptiResult cuptiEnableCallback(uint32_t enable, CUpti_SubscriberHandle handle, CUpti_CallbackDomain domain,
                                CUpti_CallbackId cbid) {
  if (handle != &subscriber || domain != CUPTI_CB_DOMAIN_DRIVER_API || cbid >= kMaxCallbackIds) {
    return CUPTI_ERROR_INVALID_PARAMETER;
  }
  enabled[cbid].store(enable != 0);
  return CUPTI_SUCCESS;
}

CUptiResult cuptiEnableDomain(uint32_t enable, CUpti_SubscriberHandle handle, CUpti_CallbackDomain domain) {
  if (handle != &subscriber || domain != CUPTI_CB_DOMAIN_DRIVER_API) return CUPTI_ERROR_INVALID_PARAMETER;
  for (auto& e : enabled) e.store(enable != 0);
  return CUPTI_SUCCESS;
}

CUptiResult cuptiGetResultString(CUptiResult result, const char** str) {
  if (str == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  switch (result) {
    case CUPTI_SUCCESS: *str = "CUPTI_SUCCESS"; break;
    case CUPTI_ERROR_INVALID_PARAMETER: *str = "CUPTI_ERROR_INVALID_PARAMETER"; break;
    case CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED: *str = "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED"; break;
    default: *str = "CUPTI_ERROR_UNKNOWN"; return CUPTI_ERROR_INVALID_PARAMETER;
  }
  return CUPTI_SUCCESS;
}

}  // extern "C"
