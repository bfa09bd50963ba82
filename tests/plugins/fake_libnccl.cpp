// Stands in for libnccl.so.2 in the plugin's NCCL version check: reports the
// version in FAKE_NCCL_VERSION (NCCL's encoding: 22809 is 2.28.9).

#include <cstdlib>

extern "C" __attribute__((visibility("default"))) int ncclGetVersion(int* version) {
    const char* text = std::getenv("FAKE_NCCL_VERSION");
    *version = text ? std::atoi(text) : 0;
    return 0;  // ncclSuccess
}
