# `make install`: the command, the C library (shared, with its SONAME symlinks, and static), the
# preload shim, the header and a pkg-config file, under PREFIX (default /usr/local), staged under
# DESTDIR when set (for packagers: the files name PREFIX, not DESTDIR). `make uninstall` removes
# them; `make install-check` installs into a temporary prefix and builds and runs the C example
# from there with pkg-config. Included from the Makefile.
#
#   PREFIX/bin/cotenant
#   PREFIX/lib/libcotenant_ffi.so.<version>, .so.<major> (the SONAME) and .so -> .so.<major>
#   PREFIX/lib/libcotenant_ffi.a
#   PREFIX/lib/cotenant/libcotenant_preload.so   (where `cotenant run --preload` looks: bin/../lib/cotenant)
#   PREFIX/include/cotenant.h
#   PREFIX/lib/pkgconfig/cotenant.pc

PREFIX ?= /usr/local
DESTDIR ?=
CARGO ?= cargo
INSTALL ?= install

# Where cargo leaves the release build.
COTENANT_RELEASE_DIR = $(or $(CARGO_TARGET_DIR),target)/release
COTENANT_FFI_DIR = crates/cotenant-ffi
# The files' final places, and where they are written (DESTDIR in front).
COTENANT_LIBDIR = $(PREFIX)/lib
COTENANT_DEST = $(DESTDIR)$(PREFIX)

.PHONY: install uninstall install-check

install:
	@case "$(PREFIX)" in /*) ;; *) echo "install: PREFIX must be an absolute path, got '$(PREFIX)'" >&2; exit 1 ;; esac
	$(CARGO) build --release --locked -p cotenant-cli -p cotenant-ffi -p cotenant-preload
	@set -eu; \
	version=$$($(CARGO) pkgid cotenant-ffi | sed 's/.*[#@]//'); \
	case "$$version" in \
	    [0-9]*.[0-9]*.[0-9]*) ;; \
	    *) echo "install: cannot read cotenant-ffi's version from '$(CARGO) pkgid cotenant-ffi' (got '$$version')" >&2; exit 1 ;; \
	esac; \
	major=$${version%%.*}; \
	for f in cotenant libcotenant_ffi.so libcotenant_ffi.a libcotenant_preload.so; do \
	    [ -f "$(COTENANT_RELEASE_DIR)/$$f" ] || { echo "install: $(COTENANT_RELEASE_DIR)/$$f was not built" >&2; exit 1; }; \
	done; \
	set -x; \
	$(INSTALL) -d "$(COTENANT_DEST)/bin" "$(COTENANT_DEST)/lib/cotenant" "$(COTENANT_DEST)/lib/pkgconfig" "$(COTENANT_DEST)/include"; \
	$(INSTALL) -m 755 "$(COTENANT_RELEASE_DIR)/cotenant" "$(COTENANT_DEST)/bin/cotenant"; \
	$(INSTALL) -m 644 "$(COTENANT_RELEASE_DIR)/libcotenant_ffi.so" "$(COTENANT_DEST)/lib/libcotenant_ffi.so.$$version"; \
	ln -sfn "libcotenant_ffi.so.$$version" "$(COTENANT_DEST)/lib/libcotenant_ffi.so.$$major"; \
	ln -sfn "libcotenant_ffi.so.$$major" "$(COTENANT_DEST)/lib/libcotenant_ffi.so"; \
	$(INSTALL) -m 644 "$(COTENANT_RELEASE_DIR)/libcotenant_ffi.a" "$(COTENANT_DEST)/lib/libcotenant_ffi.a"; \
	$(INSTALL) -m 644 "$(COTENANT_RELEASE_DIR)/libcotenant_preload.so" "$(COTENANT_DEST)/lib/cotenant/libcotenant_preload.so"; \
	$(INSTALL) -m 644 "$(COTENANT_FFI_DIR)/include/cotenant.h" "$(COTENANT_DEST)/include/cotenant.h"; \
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@LIBDIR@|$${prefix}/lib|g' -e 's|@INCLUDEDIR@|$${prefix}/include|g' \
	    -e "s|@VERSION@|$$version|g" "$(COTENANT_FFI_DIR)/cotenant.pc.in" > "$(COTENANT_DEST)/lib/pkgconfig/cotenant.pc"; \
	chmod 644 "$(COTENANT_DEST)/lib/pkgconfig/cotenant.pc"

# Removes what `install` put there (the versioned library of any version), and the shim's
# directory if nothing else is in it.
uninstall:
	rm -f "$(COTENANT_DEST)/bin/cotenant" "$(COTENANT_DEST)/lib/libcotenant_ffi.so" \
	    "$(COTENANT_DEST)"/lib/libcotenant_ffi.so.* "$(COTENANT_DEST)/lib/libcotenant_ffi.a" \
	    "$(COTENANT_DEST)/lib/cotenant/libcotenant_preload.so" "$(COTENANT_DEST)/include/cotenant.h" \
	    "$(COTENANT_DEST)/lib/pkgconfig/cotenant.pc"
	rmdir "$(COTENANT_DEST)/lib/cotenant" 2>/dev/null || true

# Installs into a fresh `mktemp -d` prefix, builds examples/c/example.c with
# `pkg-config --cflags --libs cotenant` from there, runs it against the installed library, and
# removes the prefix whatever happens (crates/cotenant-ffi/install-check.sh).
install-check:
	MAKE="$(MAKE)" CARGO="$(CARGO)" sh $(COTENANT_FFI_DIR)/install-check.sh
