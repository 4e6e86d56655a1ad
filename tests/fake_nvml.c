/* A fake libnvidia-ml.so.1 for gpudoctor's tests, built with gcc by tests/nvml_lib.py.
 *
 * It implements the real NVML C entry points that nvidia-ml-py calls (same
 * names, same argument layout as nvml.h), returning values chosen at compile
 * time with -D options, so the worker's ctypes path runs for real. Values
 * follow the NVML API reference: return codes NVML_SUCCESS = 0,
 * NVML_ERROR_NOT_SUPPORTED = 3, NVML_ERROR_INSUFFICIENT_SIZE = 7; power in mW;
 * temperatures in degrees C; clock event reasons as nvmlClocksEventReason* bits.
 *
 * Failure modes: -DSEGV_IN_INIT (nvmlInitWithFlags / nvmlInit_v2 raise
 * SIGSEGV), -DHANG_IN_CTOR (the library constructor sleeps forever),
 * -DGARBAGE_IN_INIT (prints noise and exits 0 without a result),
 * -DEXIT_IN_INIT=n (exits with status n), -DINIT_RETURN=n (nvmlInit returns NVML error n).  -DNO_ECC makes every ECC, retired
 * page and remapped row query answer NOT_SUPPORTED (a GeForce board).
 * -DLOST_INDEX=n makes nvmlDeviceGetHandleByIndex fail for GPU n with -DLOST_RC (default 15 =
 * NVML_ERROR_GPU_IS_LOST; 999 = NVML_ERROR_UNKNOWN, what nvidia-smi prints as "Unable to determine
 * the device handle for GPU ...: Unknown Error"). -DRECOVERY_ACTION=n answers the field value
 * NVML_FI_DEV_GET_GPU_RECOVERY_ACTION (230; 0 none, 1 GPU reset, 2 node reboot, 3 drain P2P,
 * 4 drain and reset); without it nvmlDeviceGetFieldValues is absent (an older driver).
 * -DP2P_READ_STATUS=n is what nvmlDeviceGetP2PStatus answers for every pair (0 OK, 1 chipset not
 * supported, ...); -DTOPO_LEVEL=n what nvmlDeviceGetTopologyCommonAncestor answers (10 single
 * switch ... 50 system); -DNVLINK_UP=n links answer active (the rest NOT_SUPPORTED).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NVML_SUCCESS 0
#define NVML_ERROR_INVALID_ARGUMENT 2
#define NVML_ERROR_NOT_SUPPORTED 3
#define NVML_ERROR_INSUFFICIENT_SIZE 7

#ifndef DEVICE_COUNT
#define DEVICE_COUNT 1
#endif
#ifndef DRIVER_VERSION
#define DRIVER_VERSION "550.54.15"
#endif
#ifndef CUDA_VERSION
#define CUDA_VERSION 12040
#endif
#ifndef ECC_VOL_CORR
#define ECC_VOL_CORR 0
#endif
#ifndef ECC_VOL_UNC
#define ECC_VOL_UNC 0
#endif
#ifndef ECC_AGG_CORR
#define ECC_AGG_CORR 0
#endif
#ifndef ECC_AGG_UNC
#define ECC_AGG_UNC 0
#endif
#ifndef RETIRED_SBE
#define RETIRED_SBE 0
#endif
#ifndef RETIRED_DBE
#define RETIRED_DBE 0
#endif
#ifndef RETIRED_PENDING
#define RETIRED_PENDING 0
#endif
#ifndef ROWS_CORR
#define ROWS_CORR 0
#endif
#ifndef ROWS_UNC
#define ROWS_UNC 0
#endif
#ifndef ROWS_PENDING
#define ROWS_PENDING 0
#endif
#ifndef ROWS_FAILURE
#define ROWS_FAILURE 0
#endif
#ifndef CLOCK_REASONS
#define CLOCK_REASONS 0x1ULL
#endif
#ifndef PCIE_GEN_CUR
#define PCIE_GEN_CUR 4
#endif
#ifndef PCIE_GEN_MAX
#define PCIE_GEN_MAX 4
#endif
#ifndef PCIE_WIDTH_CUR
#define PCIE_WIDTH_CUR 16
#endif
#ifndef PCIE_WIDTH_MAX
#define PCIE_WIDTH_MAX 16
#endif
#ifndef TEMP
#define TEMP 41
#endif
#ifndef TEMP_SLOWDOWN
#define TEMP_SLOWDOWN 92
#endif
#ifndef TEMP_SHUTDOWN
#define TEMP_SHUTDOWN 97
#endif
#ifndef POWER_MW
#define POWER_MW 68123
#endif
#ifndef POWER_LIMIT_MW
#define POWER_LIMIT_MW 400000
#endif
#ifndef PERSISTENCE
#define PERSISTENCE 1
#endif
#ifndef COMPUTE_MODE
#define COMPUTE_MODE 0
#endif
#ifndef PROC_PID
#define PROC_PID 0 /* 0: no process */
#endif
#ifndef PROC_MEM
#define PROC_MEM (1024ULL * 1024ULL * 1024ULL)
#endif
#ifndef UTIL_GPU
#define UTIL_GPU 0
#endif
#ifndef UTIL_MEM
#define UTIL_MEM 0
#endif

#ifndef MEM_USED_MIB
#define MEM_USED_MIB 0ULL /* -DMEM_USED_MIB=n: memory in use that no process accounts for */
#endif

#ifndef MIG_DEVICES
#define MIG_DEVICES 0 /* MIG devices on GPU 0 (MIG mode on when > 0) */
#endif

typedef struct { unsigned int index; int mig; /* -1: a GPU; >= 0: MIG device number */ } fake_device;
static fake_device devices[8];
static fake_device mig_devices[7];

/* Appends this process's pid to $FAKE_NVML_PIDFILE, so a test can prove it is gone. */
static void note_pid(void) {
    const char *path = getenv("FAKE_NVML_PIDFILE");
    if (path == NULL) return;
    FILE *f = fopen(path, "a");
    if (f == NULL) return;
    fprintf(f, "%d\n", (int)getpid());
    fclose(f);
}

#ifdef HANG_IN_CTOR
/* The constructor forks a helper (same process group) and both sleep forever. */
__attribute__((constructor)) static void hang(void) {
    fork();
    note_pid();
    for (;;) pause();
}
#endif

static int init_common(void) {
#ifdef SEGV_IN_INIT
    note_pid();
    raise(SIGSEGV);
#endif
#ifdef GARBAGE_IN_INIT
    fputs("NVRM: unexpected things\n{not json\n", stdout);
    fflush(stdout);
    _exit(0);
#endif
#ifdef EXIT_IN_INIT
    _exit(EXIT_IN_INIT);
#endif
#ifdef INIT_RETURN
    return INIT_RETURN; /* e.g. 9 = NVML_ERROR_DRIVER_NOT_LOADED */
#endif
    return NVML_SUCCESS;
}

int nvmlInitWithFlags(unsigned int flags) { (void)flags; return init_common(); }
int nvmlInit_v2(void) { return init_common(); }
int nvmlShutdown(void) { return NVML_SUCCESS; }
const char *nvmlErrorString(int result) {
    switch (result) {
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case 9: return "Driver Not Loaded";
    default: return "Unknown Error";
    }
}

int nvmlSystemGetDriverVersion(char *version, unsigned int length) {
    snprintf(version, length, "%s", DRIVER_VERSION);
    return NVML_SUCCESS;
}
int nvmlSystemGetCudaDriverVersion(int *v) { *v = CUDA_VERSION; return NVML_SUCCESS; }
int nvmlDeviceGetCount_v2(unsigned int *count) { *count = DEVICE_COUNT; return NVML_SUCCESS; }
#ifndef LOST_RC
#define LOST_RC 15
#endif
int nvmlDeviceGetHandleByIndex_v2(unsigned int index, fake_device **device) {
    if (index >= DEVICE_COUNT) return NVML_ERROR_INVALID_ARGUMENT;
#ifdef LOST_INDEX
    if (index == LOST_INDEX) return LOST_RC;
#endif
    devices[index].index = index;
    devices[index].mig = -1;
    *device = &devices[index];
    return NVML_SUCCESS;
}
int nvmlDeviceGetName(fake_device *d, char *name, unsigned int length) {
    if (d->mig >= 0) snprintf(name, length, "NVIDIA H100 80GB HBM3 MIG 1g.10gb");
    else snprintf(name, length, "NVIDIA H100 80GB HBM3");
    return NVML_SUCCESS;
}
int nvmlDeviceGetUUID(fake_device *d, char *uuid, unsigned int length) {
    if (d->mig >= 0) snprintf(uuid, length, "MIG-%08d-aaaa-bbbb-cccc-dddddddddddd", d->mig);
    else snprintf(uuid, length, "GPU-%08u-1111-2222-3333-444444444444", d->index);
    return NVML_SUCCESS;
}
int nvmlDeviceGetMaxMigDeviceCount(fake_device *d, unsigned int *count) {
    (void)d; *count = 7; return NVML_SUCCESS;
}
/* NVML_ERROR_NOT_FOUND (6) for an empty slot, as NVML does */
int nvmlDeviceGetMigDeviceHandleByIndex(fake_device *d, unsigned int index, fake_device **mig) {
    if (d->index != 0 || index >= MIG_DEVICES) return 6;
    mig_devices[index].index = d->index;
    mig_devices[index].mig = (int)index;
    *mig = &mig_devices[index];
    return NVML_SUCCESS;
}
int nvmlDeviceGetGpuInstanceId(fake_device *d, unsigned int *id) { *id = 7 + d->mig; return NVML_SUCCESS; }
int nvmlDeviceGetComputeInstanceId(fake_device *d, unsigned int *id) { (void)d; *id = 0; return NVML_SUCCESS; }
typedef struct {
    char busIdLegacy[16];
    unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
    char busId[32];
} nvml_pci_info;
int nvmlDeviceGetPciInfo_v3(fake_device *d, nvml_pci_info *pci) {
    memset(pci, 0, sizeof *pci);
    pci->bus = 0x18 + d->index;
    pci->pciDeviceId = 0x233010de;
    snprintf(pci->busId, sizeof pci->busId, "00000000:%02X:00.0", pci->bus);
    return NVML_SUCCESS;
}
int nvmlDeviceGetCudaComputeCapability(fake_device *d, int *major, int *minor) {
    (void)d; *major = 9; *minor = 0; return NVML_SUCCESS;
}
typedef struct { unsigned long long total, free, used; } nvml_memory;
int nvmlDeviceGetMemoryInfo(fake_device *d, nvml_memory *m) {
    (void)d; m->total = 81559ULL * 1024 * 1024; m->used = MEM_USED_MIB * 1024ULL * 1024ULL; m->free = m->total - m->used;
    return NVML_SUCCESS;
}
int nvmlDeviceGetMigMode(fake_device *d, unsigned int *cur, unsigned int *pending) {
    *cur = *pending = (MIG_DEVICES > 0 && d->index == 0); return NVML_SUCCESS;
}

/* ---- health ---- */
int nvmlDeviceGetEccMode(fake_device *d, int *cur, int *pending) {
    (void)d;
#ifdef NO_ECC
    (void)cur; (void)pending; return NVML_ERROR_NOT_SUPPORTED;
#else
    *cur = 1; *pending = 1; return NVML_SUCCESS;
#endif
}
/* errorType 0 corrected, 1 uncorrected; counterType 0 volatile, 1 aggregate */
int nvmlDeviceGetTotalEccErrors(fake_device *d, int errorType, int counterType, unsigned long long *count) {
    (void)d;
#ifdef NO_ECC
    (void)errorType; (void)counterType; (void)count; return NVML_ERROR_NOT_SUPPORTED;
#else
    if (counterType == 0) *count = errorType == 0 ? ECC_VOL_CORR : ECC_VOL_UNC;
    else *count = errorType == 0 ? ECC_AGG_CORR : ECC_AGG_UNC;
    return NVML_SUCCESS;
#endif
}
/* cause 0 multiple single-bit, 1 double-bit */
int nvmlDeviceGetRetiredPages(fake_device *d, int cause, unsigned int *count, unsigned long long *addresses) {
    (void)d;
#ifdef NO_ECC
    (void)cause; (void)count; (void)addresses; return NVML_ERROR_NOT_SUPPORTED;
#else
    unsigned int n = cause == 0 ? RETIRED_SBE : RETIRED_DBE;
    if (addresses == NULL || *count < n) { *count = n; return n ? NVML_ERROR_INSUFFICIENT_SIZE : NVML_SUCCESS; }
    for (unsigned int i = 0; i < n; i++) addresses[i] = 0x1000ULL * (i + 1) + cause;
    *count = n;
    return NVML_SUCCESS;
#endif
}
int nvmlDeviceGetRetiredPagesPendingStatus(fake_device *d, int *pending) {
    (void)d;
#ifdef NO_ECC
    (void)pending; return NVML_ERROR_NOT_SUPPORTED;
#else
    *pending = RETIRED_PENDING; return NVML_SUCCESS;
#endif
}
int nvmlDeviceGetRemappedRows(fake_device *d, unsigned int *corr, unsigned int *unc, unsigned int *pending,
                              unsigned int *failure) {
    (void)d;
#ifdef NO_ECC
    (void)corr; (void)unc; (void)pending; (void)failure; return NVML_ERROR_NOT_SUPPORTED;
#else
    *corr = ROWS_CORR; *unc = ROWS_UNC; *pending = ROWS_PENDING; *failure = ROWS_FAILURE; return NVML_SUCCESS;
#endif
}
int nvmlDeviceGetCurrentClocksEventReasons(fake_device *d, unsigned long long *reasons) {
    (void)d; *reasons = CLOCK_REASONS; return NVML_SUCCESS;
}
int nvmlDeviceGetCurrentClocksThrottleReasons(fake_device *d, unsigned long long *reasons) {
    (void)d; *reasons = CLOCK_REASONS; return NVML_SUCCESS;
}
int nvmlDeviceGetCurrPcieLinkGeneration(fake_device *d, unsigned int *v) { (void)d; *v = PCIE_GEN_CUR; return 0; }
int nvmlDeviceGetMaxPcieLinkGeneration(fake_device *d, unsigned int *v) { (void)d; *v = PCIE_GEN_MAX; return 0; }
int nvmlDeviceGetCurrPcieLinkWidth(fake_device *d, unsigned int *v) { (void)d; *v = PCIE_WIDTH_CUR; return 0; }
int nvmlDeviceGetMaxPcieLinkWidth(fake_device *d, unsigned int *v) { (void)d; *v = PCIE_WIDTH_MAX; return 0; }
int nvmlDeviceGetTemperature(fake_device *d, int sensor, unsigned int *t) {
    (void)d; if (sensor != 0) return NVML_ERROR_INVALID_ARGUMENT; *t = TEMP; return NVML_SUCCESS;
}
/* threshold 0 shutdown, 1 slowdown */
int nvmlDeviceGetTemperatureThreshold(fake_device *d, int threshold, unsigned int *t) {
    (void)d;
    if (threshold == 0) { *t = TEMP_SHUTDOWN; return NVML_SUCCESS; }
    if (threshold == 1) { *t = TEMP_SLOWDOWN; return NVML_SUCCESS; }
    return NVML_ERROR_NOT_SUPPORTED;
}
int nvmlDeviceGetPowerUsage(fake_device *d, unsigned int *mw) { (void)d; *mw = POWER_MW; return NVML_SUCCESS; }
int nvmlDeviceGetEnforcedPowerLimit(fake_device *d, unsigned int *mw) {
    (void)d; *mw = POWER_LIMIT_MW; return NVML_SUCCESS;
}
int nvmlDeviceGetPersistenceMode(fake_device *d, int *mode) { (void)d; *mode = PERSISTENCE; return NVML_SUCCESS; }
int nvmlDeviceGetComputeMode(fake_device *d, int *mode) { (void)d; *mode = COMPUTE_MODE; return NVML_SUCCESS; }
typedef struct {
    unsigned int pid;
    unsigned long long usedGpuMemory;
    unsigned int gpuInstanceId, computeInstanceId;
} nvml_process_info;
int nvmlDeviceGetComputeRunningProcesses_v3(fake_device *d, unsigned int *count, nvml_process_info *infos) {
    unsigned int n = (PROC_PID != 0 && d->index == 0) ? 1 : 0;
    if (infos == NULL || *count < n) { *count = n; return n ? NVML_ERROR_INSUFFICIENT_SIZE : NVML_SUCCESS; }
    if (n) {
        infos[0].pid = PROC_PID; infos[0].usedGpuMemory = PROC_MEM;
        infos[0].gpuInstanceId = 0xFFFFFFFF; infos[0].computeInstanceId = 0xFFFFFFFF;
    }
    *count = n;
    return NVML_SUCCESS;
}
int nvmlDeviceGetGraphicsRunningProcesses_v3(fake_device *d, unsigned int *count, nvml_process_info *infos) {
    (void)d; (void)infos; *count = 0; return NVML_SUCCESS;
}
typedef struct { unsigned int gpu, memory; } nvml_utilization;
int nvmlDeviceGetUtilizationRates(fake_device *d, nvml_utilization *u) {
    (void)d; u->gpu = UTIL_GPU; u->memory = UTIL_MEM; return NVML_SUCCESS;
}

#ifdef RECOVERY_ACTION
typedef struct {
    unsigned int fieldId; unsigned int scopeId; long long timestamp; long long latencyUsec;
    int valueType; int nvmlReturn; unsigned long long value;
} nvml_field_value;
int nvmlDeviceGetFieldValues(fake_device *d, int count, nvml_field_value *values) {
    (void)d;
    for (int i = 0; i < count; i++) {
        if (values[i].fieldId == 230) { values[i].nvmlReturn = 0; values[i].valueType = 1; values[i].value = RECOVERY_ACTION; }
        else values[i].nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
    }
    return NVML_SUCCESS;
}
#endif
#ifndef P2P_READ_STATUS
#define P2P_READ_STATUS 0
#endif
#ifndef TOPO_LEVEL
#define TOPO_LEVEL 10
#endif
#ifndef NVLINK_UP
#define NVLINK_UP 0
#endif
int nvmlDeviceGetP2PStatus(fake_device *a, fake_device *b, int index, int *status) {
    (void)a; (void)b; (void)index; *status = P2P_READ_STATUS; return NVML_SUCCESS;
}
int nvmlDeviceGetTopologyCommonAncestor(fake_device *a, fake_device *b, int *level) {
    (void)a; (void)b; *level = TOPO_LEVEL; return NVML_SUCCESS;
}
int nvmlDeviceGetNvLinkState(fake_device *d, unsigned int link, int *active) {
    (void)d;
    if (link >= NVLINK_UP) return NVML_ERROR_NOT_SUPPORTED;
    *active = 1; return NVML_SUCCESS;
}
