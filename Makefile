# hostwire top-level build. Every C output goes under $(BUILD); each part adds its programs and
# C unit tests in its own build.mk with the hw_program / hw_ctest macros below.
#   make V=1 ...        show the commands
#   make SAN=1 ...      AddressSanitizer + UBSan build in build/asan
#   make SAN=thread ... ThreadSanitizer build in build/tsan
#   make CC=clang CFLAGS=-O0 ...
.DELETE_ON_ERROR:
.DEFAULT_GOAL := build
SHELL := /bin/bash

TOP := $(abspath $(dir $(lastword $(MAKEFILE_LIST))))
CC ?= cc
CFLAGS ?= -O2 -g
LDFLAGS ?=
SAN ?= 0
ifeq ($(SAN),1)
BUILD ?= build/asan
SAN_FLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
else ifeq ($(SAN),thread)
BUILD ?= build/tsan
SAN_FLAGS := -fsanitize=thread -fno-omit-frame-pointer
else
BUILD ?= build
SAN_FLAGS :=
endif

# Libraries found through pkg-config; a missing one is named by `check-libs`. On a fresh machine
# `setup` installs them after this file was read, so nothing asks pkg-config before a recipe runs:
# the variables below are recursive, and PKG_CFLAGS replaces itself with its value on first use.
PKGS := libpcap libtracefs libtraceevent
pkg_cflags = $(shell pkg-config --cflags $(1) 2>/dev/null)
pkg_libs = $(shell pkg-config --libs $(1) 2>/dev/null)
PKG_CFLAGS = $(eval PKG_CFLAGS := $(call pkg_cflags,$(PKGS)))$(PKG_CFLAGS)

HW_CFLAGS = -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -I$(TOP)/common \
            $(PKG_CFLAGS) $(SAN_FLAGS) -MMD -MP
HW_LDFLAGS := $(SAN_FLAGS)

ifeq ($(V),1)
Q :=
msg = @true
else
Q := @
msg = @printf '  %-6s %s\n' $(1) $(2)
endif

VENV := .venv
PY := $(VENV)/bin/python
PROGRAMS :=
CTESTS :=
LIBS_SO :=

# $(call hw_link,OUTPUT,C-SOURCES,PKG-CONFIG-NAMES,EXTRA-LDLIBS): links the sources and the
# helpers every tool shares (HW_COMMON, from common/build.mk) into OUTPUT.
define hw_link
$(1): $(patsubst %.c,$(BUILD)/obj/%.o,$(2) $(HW_COMMON)) | check-libs
	$$(call msg,LINK,$$@)
	$$(Q)mkdir -p $$(@D)
	$$(Q)$$(CC) $$(HW_LDFLAGS) $$(LDFLAGS) -o $$@ $$(filter %.o,$$^) $$(call pkg_libs,$(3)) $(4) -lm
endef

# $(call hw_program,NAME,C-SOURCES,PKG-CONFIG-NAMES,EXTRA-LDLIBS): a tool in $(BUILD)/bin.
define hw_program
$(call hw_link,$(BUILD)/bin/$(1),$(2),$(3),$(4))
PROGRAMS += $(BUILD)/bin/$(1)
endef

# $(call hw_ctest,NAME,C-SOURCES,PKG-CONFIG-NAMES,EXTRA-LDLIBS): a C unit test program that
# prints the closing line "N passed, N failed" and exits non-zero on a failure.
define hw_ctest
$(call hw_link,$(BUILD)/test/$(1),$(2),$(3),$(4))
CTESTS += $(BUILD)/test/$(1)
endef

# $(call hw_test_prog,NAME,C-SOURCES,EXTRA-LDLIBS): a helper program that tests and benchmarks
# run, in $(BUILD)/test-progs (built with the tools; not a unit test).
define hw_test_prog
$(BUILD)/test-progs/$(1): $(patsubst %.c,$(BUILD)/obj/%.o,$(2)) | check-libs
	$$(call msg,LINK,$$@)
	$$(Q)mkdir -p $$(@D)
	$$(Q)$$(CC) $$(HW_LDFLAGS) $$(LDFLAGS) -o $$@ $$(filter %.o,$$^) $(3)
PROGRAMS += $(BUILD)/test-progs/$(1)
endef

# $(call hw_shared_lib,NAME,C-SOURCES,EXTRA-LDLIBS): a preload library in $(BUILD)/lib.
define hw_shared_lib
$(BUILD)/lib/$(1): $(patsubst %.c,$(BUILD)/pic/%.o,$(2)) | check-libs
	$$(call msg,LINK,$$@)
	$$(Q)mkdir -p $$(@D)
	$$(Q)$$(CC) -shared $$(HW_LDFLAGS) $$(LDFLAGS) -o $$@ $$(filter %.o,$$^) $(3)
LIBS_SO += $(BUILD)/lib/$(1)
endef

# common/ first: every other part links its HW_COMMON list.
include common/build.mk
include $(filter-out common/build.mk,$(wildcard */build.mk))

$(BUILD)/obj/%.o: %.c
	$(call msg,CC,$<)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(HW_CFLAGS) $(CFLAGS) -c -o $@ $<

$(BUILD)/pic/%.o: %.c
	$(call msg,CC,$<)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(HW_CFLAGS) $(CFLAGS) -fPIC -c -o $@ $<

-include $(shell find $(BUILD)/obj $(BUILD)/pic -name '*.d' 2>/dev/null)

.PHONY: setup build build-c ctest ctest-threads test test-long test-guest test-vm demo bench soak clean check-libs kernel vm-image help \
        install uninstall deb man completion

help:
	@echo "make setup   install Debian packages and the Python venv (.venv)"
	@echo "make build   build the C tools into $(BUILD)/"
	@echo "make test    C tests (plain and ASan/UBSan) and pytest, in about six minutes on two CPUs"
	@echo "make test-long the scenarios of a minute or more (repeated kills, a vanishing interface)"
	@echo "make demo    the quick campaign between two network namespaces, its analysis and report"
	@echo "make bench   performance benchmarks against peer tools"
	@echo "make soak    one hour of 20 senders, 20 background processes and every collector, checked (SOAK_MINUTES=3 for a short one)"
	@echo "make kernel  the stock, the patched (kernel-patches/) and the v1 guest kernels under $(BUILD)/kernel/"
	@echo "make test-vm the boot tests: the guest kernels in QEMU (make kernel first)"
	@echo "make test-guest the stock guest kernel built, then the tests that boot it (a guest over ssh, fq and fq_codel)"
	@echo "make install PREFIX=/usr/local [DESTDIR=]  the tools, a private Python environment, man pages, completion"
	@echo "make uninstall PREFIX=/usr/local [DESTDIR=]  remove what make install put there"
	@echo "make deb     the Debian package $(BUILD)/hostwire_<version>_<arch>.deb (docs/install.md)"
	@echo "make man     regenerate man/ from the argument parser; make completion: completion/"
	@echo "make clean   remove build/ (the venv stays; remove .venv by hand)"

setup:
	$(Q)scripts/setup.sh

check-libs:
	$(Q)for p in $(PKGS); do pkg-config --exists $$p || { \
	  echo "hostwire: missing library $$p (pkg-config cannot find it); run 'make setup'" >&2; exit 1; }; done

# Every target a user types starts with `setup` and builds in a second make, which reads the
# libraries' flags only after setup has installed them: each works first on a fresh machine.
build: setup
	$(Q)$(MAKE) --no-print-directory build-c

build-c: $(PROGRAMS) $(LIBS_SO) $(CTESTS)

ctest: build-c
	$(Q)fail=0; for t in $(CTESTS); do echo "== $$t"; $$t || fail=1; done; exit $$fail

# The C unit tests of code that runs threads, under ThreadSanitizer (build/tsan).
CTESTS_THREADS := test-pcapcols-parts
ctest-threads: check-libs
	$(Q)$(MAKE) --no-print-directory -j$(JOBS) SAN=thread $(addprefix build/tsan/test/,$(CTESTS_THREADS))
	$(Q)fail=0; for t in $(CTESTS_THREADS); do echo "== build/tsan/test/$$t"; build/tsan/test/$$t || fail=1; done; exit $$fail

# pytest in two parts: the tests that do not depend on the host's timing on every CPU at once
# (pytest-xdist, one worker per CPU), then the `timing` ones one at a time (conftest.py). A part
# that selects nothing (pytest's exit 5) is not a failure.
JOBS ?= $(shell nproc)
PYTEST = HOSTWIRE_REQUIRE_PRIV=1 $(PY) -m pytest
define pytest_parts
	$(Q)$(2) $(PYTEST) -m "$(1) and not timing" -n $(JOBS) $(PYTEST_ARGS) || [ $$? -eq 5 ]
	$(Q)$(2) $(PYTEST) -m "$(1) and timing" $(PYTEST_ARGS) || [ $$? -eq 5 ]
endef

test: setup
	$(Q)$(MAKE) --no-print-directory -j$(JOBS) build-c
	$(Q)$(MAKE) --no-print-directory -j$(JOBS) SAN=1 build-c
	$(Q)$(MAKE) --no-print-directory ctest
	$(Q)$(MAKE) --no-print-directory SAN=1 ctest
	$(Q)$(MAKE) --no-print-directory ctest-threads
	$(call pytest_parts,not vm and not long,)
	$(call pytest_parts,sanitized and not long,HOSTWIRE_BUILD=$(TOP)/build/asan)

# The long scenarios (pytest marker `long`: those of a minute or more, and the tests of about four
# seconds or more that conftest.py's LONG_TESTS lists), one at a time, the sanitized ones also
# against the ASan/UBSan build; .ci/run runs them after make test.
test-long: setup
	$(Q)$(MAKE) --no-print-directory -j$(JOBS) build-c
	$(Q)$(MAKE) --no-print-directory -j$(JOBS) SAN=1 build-c
	$(Q)$(PYTEST) -m "long and not vm" $(PYTEST_ARGS)
	$(Q)HOSTWIRE_BUILD=$(TOP)/build/asan $(PYTEST) -m "long and sanitized and not vm" $(PYTEST_ARGS) || [ $$? -eq 5 ]

demo: setup
	$(Q)$(MAKE) --no-print-directory build-c
	$(Q)scripts/demo.sh

bench: setup
	$(Q)$(MAKE) --no-print-directory build-c
	$(Q)perf/run-all.sh

# One hour (SOAK_MINUTES) of configs/soak.toml, checked: no collector loss, flat memory, the disk
# use --dry-run predicted, the capture and the gap causes analysed in bounded memory (perf/soak.py; not in make test).
SOAK_MINUTES ?= 60
soak: setup
	$(Q)$(MAKE) --no-print-directory build-c
	$(Q)$(PY) perf/soak.py --minutes $(SOAK_MINUTES) $(SOAK_ARGS)

clean:
	rm -rf build

kernel: setup
	$(Q)scripts/kernel.sh build all

# The guest mounts the host's root read-only over 9p (kernel-patches/vm-init.sh): the kernels are
# the whole image.
vm-image: kernel
	@echo "hostwire: the guest runs this host's root read-only over 9p; the kernels are its image"

# The vm tests that need only the stock guest kernel (marker `guest`): a guest reached over ssh
# with a clock of its own, and the qdiscs this host's kernel may lack.
test-guest: setup
	$(Q)$(MAKE) --no-print-directory build-c
	$(Q)scripts/kernel.sh build stock
	$(Q)HOSTWIRE_REQUIRE_PRIV=1 $(PY) -m pytest -m "vm and guest" $(PYTEST_ARGS)

test-vm: setup
	$(Q)$(MAKE) --no-print-directory build-c
	$(Q)HOSTWIRE_REQUIRE_PRIV=1 $(PY) -m pytest -m vm $(PYTEST_ARGS)

# Installed layout (docs/install.md): PREFIX/libexec/hostwire (C tools), PREFIX/lib/hostwire/venv
# (the package and its pinned dependencies), PREFIX/bin/hostwire (launcher), man pages and
# completion under PREFIX/share. Always from the plain build, whatever SAN says.
PREFIX ?= /usr/local
DESTDIR ?=
INSTALL_PYTHON ?= $(firstword $(wildcard /usr/bin/python3) python3)
INSTALL_ENV = PREFIX=$(PREFIX) DESTDIR=$(DESTDIR) BUILD=$(TOP)/build PYTHON=$(INSTALL_PYTHON) \
              REVISION=$$(packaging/revision.sh)
install: setup
	$(Q)$(MAKE) --no-print-directory SAN=0 BUILD=build build-c
	$(Q)$(INSTALL_ENV) packaging/install.sh

uninstall:
	$(Q)PREFIX=$(PREFIX) DESTDIR=$(DESTDIR) packaging/uninstall.sh

# The Debian package: the same layout under /usr, its Python environment built here (nothing is
# downloaded when it is installed).
deb: setup
	$(Q)$(MAKE) --no-print-directory SAN=0 BUILD=build build-c
	$(Q)BUILD=$(TOP)/build REVISION=$$(packaging/revision.sh) packaging/deb.sh $(TOP)/build/deb

# Generated from the argument parser and committed (tests/test_install_docs.py checks they are
# current): installing needs neither tool.
man:
	$(Q)$(PY) packaging/gen_man.py man

completion:
	$(Q)$(PY) packaging/gen_completion.py completion
