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
 *   streams and  a created stream is a tag: work on it runs at once, in order, like every
 *   graphs       other launch. Between cudaStreamBeginCapture and cudaStreamEndCapture its
 *                launches, cudaMemcpyAsync and cudaMemsetAsync are recorded, not run (the
 *                kernel's arguments copied as a real capture copies them); cudaGraphLaunch
 *                replays the records in order. While a capture is open (global mode, the
 *                strictest, the one cuda.cu uses), work that the real runtime refuses
 *                during a capture - a launch or copy on the legacy stream 0, a synchronous
 *                cudaMemcpy/cudaMemset, cudaDeviceSynchronize - fails with
 *                cudaErrorStreamCaptureImplicit and invalidates the capture, so the tests
 *                catch a synchronising call slipped into the captured region.
 *   counter      CUDA_EMU_STATS=FILE: at exit, one line appended to FILE with the kernel
 *                launches run directly, the graph launches, the kernels they replayed and
 *                the kernels captured (scripts/launch-estimate.py reads it).
 *   errors       launch configurations are checked like the runtime does (zero or too
 *                large dimensions, more than 1024 threads per block) and reported by
 *                cudaGetLastError; cudaGetErrorString names them.
 * Not emulated (cuda.cu does not use it): warps and warp-level primitives (__shfl_*,
 * warp-synchronous code), atomics, asynchrony and concurrency between streams (everything
 * runs in launch order, synchronously), graph editing and conditional nodes, dynamic shared memory, concurrency between blocks, separate
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

#include <functional>
#include <new>
#include <tuple>
#include <utility>
#include <vector>

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
#define __launch_bounds__(...)

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
    cudaErrorStreamCaptureUnsupported = 900,
    cudaErrorStreamCaptureInvalidated = 901,
    cudaErrorStreamCaptureImplicit = 906,
};
enum cudaMemcpyKind { cudaMemcpyHostToHost, cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost, cudaMemcpyDeviceToDevice };
struct cudaDeviceProp { char name[256]; int major, minor, multiProcessorCount; size_t totalGlobalMem; };
struct emu_event { double seconds; int recorded; };
typedef emu_event *cudaEvent_t;
struct emu_stream;
typedef emu_stream *cudaStream_t;   /* nullptr: the legacy default stream 0 */
struct emu_graph;
typedef emu_graph *cudaGraph_t;
typedef emu_graph *cudaGraphExec_t; /* instantiating copies the recorded list */
enum cudaStreamCaptureMode { cudaStreamCaptureModeGlobal = 0, cudaStreamCaptureModeThreadLocal = 1, cudaStreamCaptureModeRelaxed = 2 };

namespace emu {
inline cudaError_t last_error = cudaSuccess;    /* returned and cleared by cudaGetLastError */
inline cudaError_t sticky_error = cudaSuccess;  /* a failed kernel: every later call fails */
inline double now() {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
inline cudaError_t status(cudaError_t rc) { return sticky_error != cudaSuccess ? sticky_error : rc; }

/* streams, capture and graphs: a graph is the list of recorded operations */
struct node { const char *name; std::function<void()> run; bool kernel; };
}
struct emu_graph { std::vector<emu::node> nodes; };
struct emu_stream { emu_graph *capture; bool invalidated; };   /* capture: open, or nullptr */
namespace emu {
inline emu_stream *capturing = nullptr;   /* the one stream being captured (global mode) */
/* launch counter (CUDA_EMU_STATS) */
inline long long n_direct = 0, n_graph_launches = 0, n_replayed = 0, n_captured = 0;
/* Work for stream s: recorded if s is capturing; refused (and the capture invalidated) if
 * another stream is capturing and s is the legacy stream; else run now. */
inline void report_stats();
inline cudaError_t submit(cudaStream_t s, const char *name, bool kernel, std::function<void()> run) {
    static bool registered = (atexit(report_stats), true);   /* the counter's line at exit */
    (void)registered;
    if (s && s->capture) {
        if (s->invalidated) return cudaErrorStreamCaptureInvalidated;
        s->capture->nodes.push_back(node{name, std::move(run), kernel});
        n_captured += kernel;
        return cudaSuccess;
    }
    if (!s && capturing) { capturing->invalidated = true; return cudaErrorStreamCaptureImplicit; }
    n_direct += kernel;
    run();
    return cudaSuccess;
}
/* a synchronous call (cudaMemcpy, cudaMemset, cudaDeviceSynchronize) during a capture */
inline cudaError_t sync_call() {
    if (!capturing) return cudaSuccess;
    capturing->invalidated = true;
    return cudaErrorStreamCaptureImplicit;
}
inline void report_stats() {
    const char *path = getenv("CUDA_EMU_STATS");
    FILE *f = path && *path ? fopen(path, "a") : nullptr;
    if (!f) return;
    fprintf(f, "direct_launches=%lld graph_launches=%lld replayed_launches=%lld captured_launches=%lld\n",
            n_direct, n_graph_launches, n_replayed, n_captured);
    fclose(f);
}
}

inline const char *cudaGetErrorString(cudaError_t e) {
    switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorLaunchFailure: return "unspecified launch failure";
    case cudaErrorStreamCaptureUnsupported: return "operation not permitted when stream is capturing";
    case cudaErrorStreamCaptureInvalidated: return "operation failed due to a previous error during capture";
    case cudaErrorStreamCaptureImplicit: return "operation would make the legacy stream depend on a capturing blocking stream";
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
inline cudaError_t cudaDeviceSynchronize() { cudaError_t rc = emu::sync_call(); return emu::status(rc); }
inline cudaError_t cudaMalloc(void **p, size_t bytes) {
    *p = aligned_alloc(64, (bytes + 63) / 64 * 64 + 64 * (bytes == 0));
    return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}
template <class T> inline cudaError_t cudaMalloc(T **p, size_t bytes) { return cudaMalloc((void **)p, bytes); }
inline cudaError_t cudaFree(void *p) { free(p); return cudaSuccess; }
inline cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, cudaMemcpyKind) {
    if (cudaError_t rc = emu::sync_call()) return rc;
    if (bytes) memmove(dst, src, bytes);
    return emu::status(cudaSuccess);
}
inline cudaError_t cudaMemset(void *p, int v, size_t bytes) {
    if (cudaError_t rc = emu::sync_call()) return rc;
    memset(p, v, bytes);
    return emu::status(cudaSuccess);
}
/* recorded when the stream is capturing: the pointers and sizes as given, so a replay
 * copies from the host buffer's contents at replay time, as a captured copy does */
inline cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, cudaMemcpyKind, cudaStream_t s = nullptr) {
    if (emu::sticky_error) return emu::sticky_error;
    return emu::submit(s, "cudaMemcpyAsync", false, [=] { if (bytes) memmove(dst, src, bytes); });
}
inline cudaError_t cudaMemsetAsync(void *p, int v, size_t bytes, cudaStream_t s = nullptr) {
    if (emu::sticky_error) return emu::sticky_error;
    return emu::submit(s, "cudaMemsetAsync", false, [=] { memset(p, v, bytes); });
}
inline cudaError_t cudaStreamCreate(cudaStream_t *s) {
    *s = new (std::nothrow) emu_stream{nullptr, false};
    return *s ? cudaSuccess : cudaErrorMemoryAllocation;
}
inline cudaError_t cudaStreamDestroy(cudaStream_t s) {
    if (!s || s->capture) return cudaErrorInvalidValue;
    delete s;
    return cudaSuccess;
}
inline cudaError_t cudaStreamSynchronize(cudaStream_t s) {
    if ((s && s->capture) || (!s && emu::capturing)) return emu::sync_call();
    return emu::status(cudaSuccess);
}
/* one capture at a time, on a created stream (the legacy stream cannot be captured) */
inline cudaError_t cudaStreamBeginCapture(cudaStream_t s, cudaStreamCaptureMode) {
    if (!s || s->capture || emu::capturing) return cudaErrorStreamCaptureUnsupported;
    s->capture = new (std::nothrow) emu_graph;
    if (!s->capture) return cudaErrorMemoryAllocation;
    s->invalidated = false;
    emu::capturing = s;
    return emu::status(cudaSuccess);
}
inline cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t *g) {
    if (!s || !s->capture) return cudaErrorInvalidValue;   /* not capturing */
    emu_graph *graph = s->capture;
    bool bad = s->invalidated;
    s->capture = nullptr;
    s->invalidated = false;
    emu::capturing = nullptr;
    if (bad) { delete graph; *g = nullptr; return cudaErrorStreamCaptureInvalidated; }
    *g = graph;
    return emu::status(cudaSuccess);
}
inline cudaError_t cudaGraphInstantiate(cudaGraphExec_t *e, cudaGraph_t g, unsigned long long flags = 0) {
    if (!g || flags) return cudaErrorInvalidValue;
    *e = new (std::nothrow) emu_graph(*g);
    return *e ? emu::status(cudaSuccess) : cudaErrorMemoryAllocation;
}
inline cudaError_t cudaGraphDestroy(cudaGraph_t g) { delete g; return cudaSuccess; }
inline cudaError_t cudaGraphExecDestroy(cudaGraphExec_t e) { delete e; return cudaSuccess; }
/* replays the recorded operations in order; a kernel's failure is sticky, as on a GPU */
inline cudaError_t cudaGraphLaunch(cudaGraphExec_t e, cudaStream_t s) {
    if (!e) return cudaErrorInvalidValue;
    if (s && s->capture) return cudaErrorStreamCaptureUnsupported;   /* no nested capture here */
    if (!s && emu::capturing) return emu::sync_call();
    if (emu::sticky_error) return emu::sticky_error;
    emu::n_graph_launches++;
    for (const emu::node &n : e->nodes) {
        n.run();
        emu::n_replayed += n.kernel;
        if (emu::sticky_error) return emu::sticky_error;
    }
    return cudaSuccess;
}
inline cudaError_t cudaEventCreate(cudaEvent_t *e) {
    *e = (cudaEvent_t)calloc(1, sizeof(emu_event));
    return *e ? cudaSuccess : cudaErrorMemoryAllocation;
}
inline cudaError_t cudaEventDestroy(cudaEvent_t e) { free(e); return cudaSuccess; }
inline cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s = nullptr) {
    if (s && s->capture) return cudaErrorStreamCaptureUnsupported;   /* event nodes: not emulated */
    if (!s && emu::capturing) return emu::sync_call();
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

/* a launch on stream s: run now, or recorded with its arguments if s is capturing (a
 * refused launch sets last_error, as the runtime's launch does) */
template <class... P, class... A>
void launch(const char *name, cudaStream_t s, dim3 grid, dim3 block, void (*kernel)(P...), A &&...args) {
    call<P...> c{kernel, std::tuple<P...>(std::forward<A>(args)...)};
    if (sticky_error != cudaSuccess) { last_error = sticky_error; return; }
    if (bad_config(grid, block)) { last_error = cudaErrorInvalidConfiguration; return; }
    cudaError_t rc = submit(s, name, true, [=]() mutable { run_grid(name, grid, block, &call<P...>::run, &c); });
    if (rc != cudaSuccess) last_error = rc;
}
/* on the legacy stream 0 */
template <class... P, class... A>
void launch(const char *name, dim3 grid, dim3 block, void (*kernel)(P...), A &&...args) {
    launch(name, (cudaStream_t) nullptr, grid, block, kernel, std::forward<A>(args)...);
}
}  // namespace emu

inline void __syncthreads() { emu::barrier(); }

#endif
