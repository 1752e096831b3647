#!/bin/sh
# The example hosts build against the INSTALLED package in a temporary prefix (CMake
# package config, pkg-config, shared and static) and run with zero leftovers; the shared
# library exports only the API.
# usage: install_examples.sh SOURCE_DIR BUILD_DIR
set -eu
src=$1 build=$2
tmp=$(mktemp -d "${TMPDIR:-/tmp}/mcpw-install.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM
prefix=$tmp/prefix

cmake --install "$build" --prefix "$prefix" >/dev/null
for f in bin/mcpwarden libexec/mcpwarden/mcpwarden-fixture include/mcpwarden/mcpwarden.h \
         include/mcpwarden/mcpwarden.hpp include/mcpwarden/version.h \
         include/mcpwarden/export.h share/man/man1/mcpwarden.1.gz; do
    test -e "$prefix/$f" || { echo "not installed: $f"; exit 1; }
done
libdir=$(dirname "$(find "$prefix" -name 'libmcpwarden.so.*.*' | head -n1)")
test -f "$libdir/libmcpwarden.a" || { echo "libmcpwarden.a not installed"; exit 1; }
readelf -d "$libdir/libmcpwarden.so" | grep -q 'SONAME.*libmcpwarden\.so\.0' ||
    { echo "libmcpwarden.so has no SONAME libmcpwarden.so.0"; exit 1; }

# Only the API is exported: C symbols mcpw_*, C++ symbols in warden::api.
leaked=$(nm -D --defined-only "$libdir/libmcpwarden.so" | awk '$2 ~ /[TDBRVWu]/ {print $3}' |
         grep -v '^mcpw_' | c++filt | grep -v '^warden::api::' |
         grep -v '^_init$\|^_fini$\|^typeinfo\|^vtable\|^std::\|^void std::\|^__' || true)
if [ -n "$leaked" ]; then echo "symbols exported beyond the API:"; echo "$leaked" | head; exit 1; fi
nm -D --defined-only "$libdir/libmcpwarden.so" | grep -q ' T mcpw_spawn$' || { echo "mcpw_spawn not exported"; exit 1; }

# The installed CLI finds the installed fixture and reports its build.
"$prefix/bin/mcpwarden" --version | grep -q '^mcpwarden ' || { echo "--version failed"; exit 1; }

# The C++ API from the installed headers alone: each public header compiles by itself (no
# internal header, no missing include), and the umbrella links against the shared library.
for h in "$prefix"/include/mcpwarden/*.hpp; do
    printf '#include <mcpwarden/%s>\nint main() { return 0; }\n' "$(basename "$h")" >"$tmp/one.cpp"
    c++ -std=c++20 -Wall -Wextra -Werror -fsyntax-only -I"$prefix/include" "$tmp/one.cpp" ||
        { echo "installed header does not compile by itself: $(basename "$h")"; exit 1; }
done
cat >"$tmp/cxx_host.cpp" <<'CXX'
#include <mcpwarden/mcpwarden.hpp>
#include <cstdio>
int main() { std::printf("%s\n", warden::api::build_info().version.c_str()); }
CXX
c++ -std=c++20 -Wall -Werror -o "$tmp/cxx_host" "$tmp/cxx_host.cpp" -I"$prefix/include" \
    -L"$libdir" -lmcpwarden -Wl,-rpath,"$libdir"
"$tmp/cxx_host" | grep -q '^[0-9]' || { echo "C++ host against the installed library failed"; exit 1; }

# c_host through find_package(mcpwarden): shared and static.
cmake -S "$src/examples/c_host" -B "$tmp/c_host" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$tmp/c_host" >/dev/null
"$tmp/c_host/c_host"
"$tmp/c_host/c_host_static"

# c_host through pkg-config.
PKG_CONFIG_PATH=$libdir/pkgconfig; export PKG_CONFIG_PATH
cc -Wall -Werror -o "$tmp/c_host_pc" "$src/examples/c_host/main.c" \
   -DMCPWARDEN_FIXTURE="\"$prefix/libexec/mcpwarden/mcpwarden-fixture\"" \
   $(pkg-config --cflags --libs mcpwarden) -Wl,-rpath,"$libdir"
"$tmp/c_host_pc"

# python_host through ctypes.
python3 "$src/examples/python_host/host.py" --lib "$libdir/libmcpwarden.so.0" \
    --fixture "$prefix/libexec/mcpwarden/mcpwarden-fixture"
echo "install_examples: OK"
