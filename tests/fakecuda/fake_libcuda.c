/* A stand-in for the NVIDIA driver's libcuda.so.1, for tests only.
 * Exports the CUDA driver API entry points the gpudoctor probes call; every
 * answer comes from environment variables so one build serves every test:
 *   FAKE_CUDA_INIT_RC     CUresult of cuInit (default 0)
 *   FAKE_CUDA_DRIVER      cuDriverGetVersion (default 12040)
 *   FAKE_CUDA_COUNT       device count (default 1)
 *   FAKE_CUDA_COUNT_FILE  a file holding the device count, read on every call
 *                         (a node whose GPUs come up while a test watches)
 *   FAKE_CUDA_CC          compute capability "major.minor" (default "8.0")
 *   FAKE_CUDA_MEM_MIB     total memory per device in MiB (default 40960)
 *   FAKE_CUDA_CTX_FAIL    index of a device whose cuCtxCreate fails (default none)
 */
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

static int env_int(const char *name, int dflt) {
    const char *v = getenv(name);
    return v && *v ? atoi(v) : dflt;
}

int cuInit(unsigned int flags) { (void)flags; return env_int("FAKE_CUDA_INIT_RC", 0); }
int cuDriverGetVersion(int *v) { *v = env_int("FAKE_CUDA_DRIVER", 12040); return 0; }
static int device_count(void) {
    const char *path = getenv("FAKE_CUDA_COUNT_FILE");
    if (path && *path) {
        int n = 0;
        FILE *fh = fopen(path, "r");
        if (!fh) return 0;
        if (fscanf(fh, "%d", &n) != 1) n = 0;
        fclose(fh);
        return n;
    }
    return env_int("FAKE_CUDA_COUNT", 1);
}
int cuDeviceGetCount(int *n) { *n = device_count(); return 0; }
int cuDeviceGet(int *dev, int ordinal) {
    if (ordinal < 0 || ordinal >= device_count()) return 101;
    *dev = ordinal; return 0;
}
int cuDeviceGetName(char *name, int len, int dev) { snprintf(name, len, "Fake GPU %d", dev); return 0; }
int cuDeviceGetAttribute(int *pi, int attrib, int dev) {
    const char *cc = getenv("FAKE_CUDA_CC");
    int major = 8, minor = 0;
    if (cc && *cc) sscanf(cc, "%d.%d", &major, &minor);
    switch (attrib) {
        case 75: *pi = major; return 0;
        case 76: *pi = minor; return 0;
        case 33: *pi = 0x10 + dev; return 0;   /* PCI bus */
        case 34: *pi = 0; return 0;            /* PCI device */
        case 50: *pi = 0; return 0;            /* PCI domain */
    }
    return 1;
}
int cuDeviceTotalMem_v2(size_t *bytes, int dev) {
    (void)dev; *bytes = (size_t)env_int("FAKE_CUDA_MEM_MIB", 40960) * 1024 * 1024; return 0;
}
int cuDeviceGetUuid(unsigned char *uuid, int dev) {
    for (int i = 0; i < 16; i++) uuid[i] = (unsigned char)(0x10 * (i % 16) + dev);
    return 0;
}
int cuCtxCreate_v2(void **ctx, unsigned int flags, int dev) {
    (void)flags;
    if (dev == env_int("FAKE_CUDA_CTX_FAIL", -1)) return 999;
    *ctx = (void *)(long)(dev + 1); return 0;
}
int cuCtxDestroy_v2(void *ctx) { (void)ctx; return 0; }
int cuGetErrorName(int rc, const char **out) {
    switch (rc) {
        case 100: *out = "CUDA_ERROR_NO_DEVICE"; return 0;
        case 999: *out = "CUDA_ERROR_UNKNOWN"; return 0;
        case 803: *out = "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH"; return 0;
    }
    return 1;
}
int cuGetErrorString(int rc, const char **out) {
    switch (rc) {
        case 100: *out = "no CUDA-capable device is detected"; return 0;
        case 999: *out = "unknown error"; return 0;
        case 803: *out = "system has unsupported display driver / cuda driver combination"; return 0;
    }
    return 1;
}
