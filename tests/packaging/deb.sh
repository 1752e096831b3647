#!/bin/sh
# `cpack -G DEB` builds the two packages Debian would split the tree into, and each holds
# what it should and nothing of the other's:
#   mcpwarden         the command, the fixture, the shared library (SONAME link, no dev
#                     link), the man page, the completions, the systemd user units;
#   libmcpwarden-dev  the headers, the static library, the .so link, pkg-config, CMake config.
# The runtime package, unpacked as dpkg would install it, stays small (no static library:
# INSTALLED_MAX_KB), and its command runs from there. Where lintian is installed, neither
# package has a tag that packaging/debian/*.lintian-overrides does not explain.
# The packages stay in OUT_DIR for the tests that install them (tests/packaging/demo.sh).
# usage: deb.sh BUILD_DIR OUT_DIR
set -eu
build=$1 out=$2
INSTALLED_MAX_KB=20480
rm -rf "$out"
mkdir -p "$out"
cpack -G DEB --config "$build/CPackConfig.cmake" -B "$out" >"$out/cpack.log" 2>&1 ||
    { cat "$out/cpack.log"; exit 1; }
run=$(ls "$out"/mcpwarden_*.deb 2>/dev/null | head -n1)
dev=$(ls "$out"/libmcpwarden-dev_*.deb 2>/dev/null | head -n1)
[ -n "$run" ] && [ -n "$dev" ] || { ls -l "$out"; echo "cpack made no mcpwarden and libmcpwarden-dev"; exit 1; }
dpkg-deb -c "$run" | awk '{print $6}' >"$out/run.list"
dpkg-deb -c "$dev" | awk '{print $6}' >"$out/dev.list"
fail=0
has() {  # list, pattern, package name
    grep -q "$2" "$1" || { echo "missing from $3: $2"; fail=1; }
}
lacks() {
    if grep -q "$2" "$1"; then echo "$3 must not hold: $(grep "$2" "$1" | head -n1)"; fail=1; fi
}

for pat in '^\./usr/bin/mcpwarden$' \
           '^\./usr/libexec/mcpwarden/mcpwarden-fixture$' \
           '^\./usr/lib/.*libmcpwarden\.so\.0\.' \
           '^\./usr/share/man/man1/mcpwarden\.1\.gz$' \
           '^\./usr/share/bash-completion/completions/mcpwarden$' \
           '^\./usr/share/zsh/vendor-completions/_mcpwarden$' \
           '^\./usr/share/fish/vendor_completions\.d/mcpwarden\.fish$' \
           '^\./usr/lib/systemd/user/mcpwarden-reap\.service$' \
           '^\./usr/lib/systemd/user/mcpwarden-reap\.timer$' \
           '^\./usr/lib/systemd/user/mcpwarden-reap-watch\.service$' \
           '^\./usr/lib/systemd/user/mcpwarden-broker\.socket$' \
           '^\./usr/lib/systemd/user/mcpwarden-broker\.service$' \
           '^\./usr/share/doc/mcpwarden/copyright$' \
           '^\./usr/share/doc/mcpwarden/changelog\.gz$'; do
    has "$out/run.list" "$pat" mcpwarden
done
dpkg-deb -c "$run" | grep -q 'libmcpwarden\.so\.0 -> ' || { echo "mcpwarden: no SONAME link"; fail=1; }
for pat in '^\./usr/include/' '\.a$' '\.pc$' '/cmake/' 'libmcpwarden\.so$'; do
    lacks "$out/run.list" "$pat" mcpwarden
done

for pat in '^\./usr/include/mcpwarden/mcpwarden\.h$' \
           '^\./usr/include/mcpwarden/mcpwarden\.hpp$' \
           '^\./usr/include/mcpwarden/version\.h$' \
           '^\./usr/lib/.*libmcpwarden\.a$' \
           '^\./usr/lib/.*libmcpwarden\.so$' \
           '^\./usr/lib/.*/pkgconfig/mcpwarden\.pc$' \
           '^\./usr/lib/.*cmake/mcpwarden/mcpwardenConfig\.cmake$' \
           '^\./usr/share/doc/libmcpwarden-dev/copyright$'; do
    has "$out/dev.list" "$pat" libmcpwarden-dev
done
for pat in '^\./usr/bin/' '^\./usr/libexec/' 'libmcpwarden\.so\.0' '^\./usr/share/man/'; do
    lacks "$out/dev.list" "$pat" libmcpwarden-dev
done

depends=$(dpkg-deb -f "$run" Depends)
echo "mcpwarden Depends: $depends"
for lib in libsqlite3 libfmt libc6 libstdc++ libcurl4; do
    echo "$depends" | grep -q "$lib" || { echo "mcpwarden: Depends lacks $lib"; fail=1; }
done
version=$(dpkg-deb -f "$run" Version)
dev_depends=$(dpkg-deb -f "$dev" Depends)
echo "libmcpwarden-dev Depends: $dev_depends"
echo "$dev_depends" | grep -q "mcpwarden (= $version)" ||
    { echo "libmcpwarden-dev: Depends lacks mcpwarden (= $version)"; fail=1; }

# Installed as dpkg would (unpacked into a root of its own), the runtime package's size, and
# its command working from there with its own library.
root=$out/root
dpkg-deb -x "$run" "$root"
installed_kb=$(du -sk "$root/usr" | cut -f1)
declared_kb=$(dpkg-deb -f "$run" Installed-Size)
echo "mcpwarden: installed $installed_kb KiB (Installed-Size $declared_kb), bound $INSTALLED_MAX_KB"
[ "$installed_kb" -le "$INSTALLED_MAX_KB" ] && [ "$declared_kb" -le "$INSTALLED_MAX_KB" ] ||
    { echo "mcpwarden installs more than $INSTALLED_MAX_KB KiB"; fail=1; }
libdir=$(dirname "$(find "$root/usr/lib" -name 'libmcpwarden.so.0' | head -n1)")
LD_LIBRARY_PATH=$libdir "$root/usr/bin/mcpwarden" --version >"$out/version.txt" 2>&1 ||
    { cat "$out/version.txt"; echo "the unpacked mcpwarden does not run"; fail=1; }

if command -v lintian >/dev/null 2>&1; then
    # Errors and warnings, as Debian's archive checks them; an overridden tag is explained in
    # the overrides file the package carries, the informational ones in packaging/README.md.
    lintian --tag-display-limit 0 "$run" "$dev" >"$out/lintian.txt" 2>&1 || true
    if grep -E '^[EWX]: ' "$out/lintian.txt"; then
        echo "lintian: the tags above are neither fixed nor explained"
        fail=1
    else
        echo "lintian: clean"
    fi
else
    echo "lintian is not installed (scripts/deps.sh installs it): not run"
fi

[ $fail -eq 0 ] || { dpkg-deb -c "$run"; dpkg-deb -c "$dev"; exit 1; }
echo "deb: OK ($(basename "$run"), $(basename "$dev"))"
