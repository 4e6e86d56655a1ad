/* A stand-in for cuDNN's libcudnn.so.N shim, for tests only: cudnnGetVersion()
 * returns FAKE_CUDNN_VERSION (default 90100 = 9.1.0). */
#include <stdlib.h>
size_t cudnnGetVersion(void) {
    const char *v = getenv("FAKE_CUDNN_VERSION");
    return v && *v ? (size_t)atol(v) : 90100;
}
