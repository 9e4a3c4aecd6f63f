/*
 * cuda/cuda_emu.h — a small CPU emulation of the part of CUDA that cuda/cuda.cu uses, so
 * that the trainer's own kernels can be compiled by a plain C++17 compiler and tested on
 * a machine without a GPU (NVIDIA's nvcc had a device-emulation mode for the same purpose,
 * -deviceemu, until CUDA 3.0). It is deliberately limited to what the trainer needs.
 *
 * Emulated
 *   launches     emu::launch(name, grid, block, kernel, args...) (cuda.cu's LAUNCH macro):
 *                the arguments are converted to the kernel's parameter types once, as the
 *                runtime copies them; then the blocks run one after the other, and within
 *                a block every thread is a fiber (ucontext: makecontext/swapcontext) with
 *                its own small stack.
 *   barriers     __syncthreads() is a real barrier: the thread yields to the scheduler,
 *                which runs the block's other threads; when all of them wait at a barrier
 *                they are all released. A thread that returns while others wait at a
 *                barrier is a bug on a GPU too (a hang or undefined behaviour): it is
 *                reported on stderr and the launch fails with cudaErrorLaunchFailure,
 *                which stays set (sticky, like a kernel fault on a GPU).
 *   schedule     between two barriers the threads run one at a time, each until its next
 *                barrier or its end, in thread-index order in even phases and in reverse
 *                order in odd phases. A missing barrier therefore shows as wrong results:
 *                the first thread resumed after a barrier runs ahead into the next phase
 *                (e.g. stores the next shared-memory tile) while the others have not yet
 *                read the current one; and a read of shared data that another thread
 *                writes in the same phase sees the old value in one of the two orders.
 *                (Threads run in lock step, statement by statement, as a warp's are, would
 *                hide the first kind: that is why such races often stay latent on a GPU.)
 *   __shared__   `static`: one copy per kernel (per template instance), shared by the
 *                fibers. Correct because blocks run one at a time, never interleaved.
 *   built-ins    threadIdx, blockIdx, blockDim, gridDim are globals that the scheduler
 *                sets before it resumes a thread.
 *   memory       "device" memory is host memory: cudaMalloc = 64-byte aligned malloc,
 *                cudaMemcpy = memcpy, cudaMemset = memset, cudaFree = free.
 *   events       cudaEventRecord reads the host's monotonic clock (launches are synchronous).
 *   errors       launch configurations are checked like the runtime does (zero or too
 *                large dimensions, more than 1024 threads per block) and reported by
 *                cudaGetLastError; cudaGetErrorString names them.
 * Not emulated (cuda.cu does not use it): warps and warp-level primitives (__shfl_*,
 * warp-synchronous code), atomics, streams and asynchrony (everything runs in launch
 * order, synchronously), dynamic shared memory, concurrency between blocks, separate
 * memory spaces (a kernel that dereferences a host pointer works here but not on a GPU),
 * the device maths library's rounding (expf, logf are the host's), and cuBLAS.
 * Fibers and AddressSanitizer: the stack switches are announced to ASan
 * (__sanitizer_start/finish_switch_fiber) when it is enabled.
 */
#ifndef PARTRAIN_CUDA_EMU_H
#define PARTRAIN_CUDA_EMU_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <ucontext.h>

#include <tuple>
#include <utility>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#define EMU_ASAN 1
#else
#define EMU_ASAN 0
#endif

#define CUDA_EMU 1

// ----------------------------------------------------------------------------
// language: qualifiers and built-in variables

#define __global__
#define __device__
#define __host__
#define __shared__ static
#define __forceinline__ inline

struct dim3 {
    unsigned x, y, z;
    constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
struct uint3 { unsigned x, y, z; };

inline uint3 threadIdx, blockIdx;   /* set by the scheduler before it resumes a thread */
inline dim3 blockDim, gridDim;

// ----------------------------------------------------------------------------
// runtime API subset: errors, device, memory, events

enum cudaError_t {
    cudaSuccess = 0,
    cudaErrorInvalidValue = 1,
    cudaErrorMemoryAllocation = 2,
    cudaErrorInvalidConfiguration = 9,
    cudaErrorLaunchFailure = 719,
};
enum cudaMemcpyKind { cudaMemcpyHostToHost, cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost, cudaMemcpyDeviceToDevice };
struct cudaDeviceProp { char name[256]; int major, minor, multiProcessorCount; size_t totalGlobalMem; };
struct emu_event { double seconds; int recorded; };
typedef emu_event *cudaEvent_t;

namespace emu {
inline cudaError_t last_error = cudaSuccess;    /* returned and cleared by cudaGetLastError */
inline cudaError_t sticky_error = cudaSuccess;  /* a failed kernel: every later call fails */
inline double now() {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
inline cudaError_t status(cudaError_t rc) { return sticky_error != cudaSuccess ? sticky_error : rc; }
}

inline const char *cudaGetErrorString(cudaError_t e) {
    switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorLaunchFailure: return "unspecified launch failure";
    }
    return "unknown error";
}
inline cudaError_t cudaGetLastError() {
    cudaError_t e = emu::status(emu::last_error);
    emu::last_error = cudaSuccess;
    return e;
}
inline cudaError_t cudaGetDeviceCount(int *n) { *n = 1; return cudaSuccess; }
inline cudaError_t cudaSetDevice(int d) { return d == 0 ? cudaSuccess : cudaErrorInvalidValue; }
inline cudaError_t cudaGetDeviceProperties(cudaDeviceProp *p, int d) {
    if (d != 0) return cudaErrorInvalidValue;
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "CPU emulation (cuda/cuda_emu.h)");
    p->multiProcessorCount = 1;
    return cudaSuccess;
}
inline cudaError_t cudaDeviceSynchronize() { return emu::status(cudaSuccess); }
inline cudaError_t cudaMalloc(void **p, size_t bytes) {
    *p = aligned_alloc(64, (bytes + 63) / 64 * 64 + 64 * (bytes == 0));
    return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}
template <class T> inline cudaError_t cudaMalloc(T **p, size_t bytes) { return cudaMalloc((void **)p, bytes); }
inline cudaError_t cudaFree(void *p) { free(p); return cudaSuccess; }
inline cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, cudaMemcpyKind) {
    if (bytes) memmove(dst, src, bytes);
    return emu::status(cudaSuccess);
}
inline cudaError_t cudaMemset(void *p, int v, size_t bytes) { memset(p, v, bytes); return emu::status(cudaSuccess); }
inline cudaError_t cudaEventCreate(cudaEvent_t *e) {
    *e = (cudaEvent_t)calloc(1, sizeof(emu_event));
    return *e ? cudaSuccess : cudaErrorMemoryAllocation;
}
inline cudaError_t cudaEventDestroy(cudaEvent_t e) { free(e); return cudaSuccess; }
inline cudaError_t cudaEventRecord(cudaEvent_t e, int stream = 0) {
    (void)stream;
    e->seconds = emu::now();
    e->recorded = 1;
    return emu::status(cudaSuccess);
}
inline cudaError_t cudaEventSynchronize(cudaEvent_t e) { return emu::status(e->recorded ? cudaSuccess : cudaErrorInvalidValue); }
inline cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b) {
    if (!a->recorded || !b->recorded) return cudaErrorInvalidValue;
    *ms = (float)(1e3 * (b->seconds - a->seconds));
    return emu::status(cudaSuccess);
}

// ----------------------------------------------------------------------------
// the block scheduler: one fiber per thread, barriers as yields

namespace emu {
enum { MAX_THREADS = 1024, STACK_BYTES = 64 * 1024, GUARD_BYTES = 4096 };
enum fiber_state { RUNNING, AT_BARRIER, FINISHED };

struct fiber {
    ucontext_t ctx;
    fiber_state state;
    void *fake_stack;   /* ASan's bookkeeping of this fiber's stack */
};

struct scheduler {
    ucontext_t home;                   /* the launching thread's context */
    fiber *fibers;                     /* MAX_THREADS, with their stacks below */
    char *stacks;
    int current;                       /* index of the running fiber */
    void (*body)(void *);              /* the kernel call, type-erased */
    void *arg;
    const void *home_bottom;           /* ASan: the launching thread's stack */
    size_t home_size;
};
inline scheduler S;

inline char *stack_of(int t) { return S.stacks + (size_t)t * (STACK_BYTES + GUARD_BYTES) + GUARD_BYTES; }

/* Stacks for the largest block, allocated once: each with an inaccessible guard page
 * below it, so that a stack overflow faults instead of corrupting its neighbour. */
inline bool setup() {
    if (S.fibers) return true;
    size_t span = (size_t)MAX_THREADS * (STACK_BYTES + GUARD_BYTES);
    void *m = mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    fiber *f = (fiber *)calloc(MAX_THREADS, sizeof(fiber));
    if (m == MAP_FAILED || !f) return false;
    S.stacks = (char *)m;
    for (int t = 0; t < MAX_THREADS; t++) {
        if (mprotect(S.stacks + (size_t)t * (STACK_BYTES + GUARD_BYTES), GUARD_BYTES, PROT_NONE)) return false;
        /* getcontext once per fiber (it costs a system call); makecontext re-arms the same
         * context for every block, which glibc allows for a context that has returned */
        if (getcontext(&f[t].ctx)) return false;
    }
    S.fibers = f;
    return true;
}

/* Fiber -> scheduler. */
inline void switch_home(fiber *f, bool finished) {
#if EMU_ASAN
    __sanitizer_start_switch_fiber(finished ? nullptr : &f->fake_stack, S.home_bottom, S.home_size);
#endif
    if (finished) return;   /* returning from fiber_main resumes uc_link = home */
    swapcontext(&f->ctx, &S.home);
#if EMU_ASAN
    __sanitizer_finish_switch_fiber(f->fake_stack, &S.home_bottom, &S.home_size);
#endif
}

/* Scheduler -> fiber t. */
inline void resume(int t) {
    S.current = t;
    threadIdx.x = (unsigned)t % blockDim.x;
    threadIdx.y = (unsigned)t / blockDim.x % blockDim.y;
    threadIdx.z = (unsigned)t / (blockDim.x * blockDim.y);
    fiber *f = &S.fibers[t];
#if EMU_ASAN
    void *fake = nullptr;
    __sanitizer_start_switch_fiber(&fake, stack_of(t), STACK_BYTES);
#endif
    swapcontext(&S.home, &f->ctx);
#if EMU_ASAN
    __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#endif
}

inline void fiber_main() {
    fiber *f = &S.fibers[S.current];
#if EMU_ASAN
    __sanitizer_finish_switch_fiber(nullptr, &S.home_bottom, &S.home_size);
#endif
    S.body(S.arg);
    f->state = FINISHED;
    switch_home(f, true);
}

/* __syncthreads(): the switch is an opaque call (glibc declares swapcontext without the
 * `leaf` attribute), so the compiler reloads __shared__ statics and the built-ins after it. */
inline void barrier() {
    fiber *f = &S.fibers[S.current];
    f->state = AT_BARRIER;
    switch_home(f, false);
}

inline bool bad_config(dim3 g, dim3 b) {
    unsigned long long threads = (unsigned long long)b.x * b.y * b.z;
    return !g.x || !g.y || !g.z || !b.x || !b.y || !b.z || threads > MAX_THREADS ||
           b.x > 1024 || b.y > 1024 || b.z > 64 || g.x > 2147483647u || g.y > 65535 || g.z > 65535;
}

/* Runs every block of the grid; a failure is left in last_error (and sticky_error). */
inline void run_grid(const char *name, dim3 grid, dim3 block, void (*body)(void *), void *arg) {
    if (sticky_error != cudaSuccess) { last_error = sticky_error; return; }
    if (bad_config(grid, block)) { last_error = cudaErrorInvalidConfiguration; return; }
    if (!setup()) { last_error = cudaErrorMemoryAllocation; return; }
    gridDim = grid;
    blockDim = block;
    S.body = body;
    S.arg = arg;
    int n = (int)(block.x * block.y * block.z);
    for (unsigned bz = 0; bz < grid.z; bz++)
        for (unsigned by = 0; by < grid.y; by++)
            for (unsigned bx = 0; bx < grid.x; bx++) {
                blockIdx.x = bx; blockIdx.y = by; blockIdx.z = bz;
                for (int t = 0; t < n; t++) {
                    fiber *f = &S.fibers[t];
                    f->ctx.uc_stack.ss_sp = stack_of(t);
                    f->ctx.uc_stack.ss_size = STACK_BYTES;
                    f->ctx.uc_link = &S.home;
                    makecontext(&f->ctx, fiber_main, 0);
                    f->state = RUNNING;
                }
                for (int phase = 0;; phase++) {
                    for (int i = 0; i < n; i++) resume(phase % 2 ? n - 1 - i : i);
                    int waiting = 0, first_finished = -1;
                    for (int t = 0; t < n; t++) {
                        if (S.fibers[t].state == AT_BARRIER) waiting++;
                        else if (first_finished < 0) first_finished = t;
                    }
                    if (waiting == 0) break;              /* every thread returned */
                    if (waiting < n) {
                        fprintf(stderr, "cuda_emu: kernel %s, block (%u,%u,%u): thread (%u,%u,%u) returned while %d of "
                                "the block's %d threads wait at __syncthreads() (a hang or undefined behaviour on a GPU)\n",
                                name, bx, by, bz, (unsigned)first_finished % block.x,
                                (unsigned)first_finished / block.x % block.y,
                                (unsigned)first_finished / (block.x * block.y), waiting, n);
                        last_error = sticky_error = cudaErrorLaunchFailure;
                        return;                           /* the waiting fibers are abandoned */
                    }
                    for (int t = 0; t < n; t++) S.fibers[t].state = RUNNING;   /* release */
                }
            }
}

template <class... P> struct call {
    void (*kernel)(P...);
    std::tuple<P...> args;
    static void run(void *self) {
        call *c = (call *)self;
        std::apply(c->kernel, c->args);
    }
};

template <class... P, class... A>
void launch(const char *name, dim3 grid, dim3 block, void (*kernel)(P...), A &&...args) {
    call<P...> c{kernel, std::tuple<P...>(std::forward<A>(args)...)};
    run_grid(name, grid, block, &call<P...>::run, &c);
}
}  // namespace emu

inline void __syncthreads() { emu::barrier(); }

#endif
