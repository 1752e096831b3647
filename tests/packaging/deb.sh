#!/bin/sh
# `cpack -G DEB` builds a package that holds the binary, the fixture, the library, the
# headers, the man page, the three completions and the systemd user units, and declares
# its dependencies.
# usage: deb.sh BUILD_DIR
set -eu
build=$1
tmp=$(mktemp -d "${TMPDIR:-/tmp}/mcpw-deb.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM
cpack -G DEB --config "$build/CPackConfig.cmake" -B "$tmp" >"$tmp/cpack.log" 2>&1 ||
    { cat "$tmp/cpack.log"; exit 1; }
deb=$(ls "$tmp"/*.deb | head -n1)
dpkg-deb -c "$deb" | awk '{print $6}' >"$tmp/list"
fail=0
for pat in '^\./usr/bin/mcpwarden$' \
           '^\./usr/libexec/mcpwarden/mcpwarden-fixture$' \
           '^\./usr/lib/.*libmcpwarden\.so\.0\.' \
           '^\./usr/lib/.*libmcpwarden\.a$' \
           '^\./usr/lib/.*cmake/mcpwarden/mcpwardenConfig\.cmake$' \
           '^\./usr/lib/.*pkgconfig/mcpwarden\.pc$' \
           '^\./usr/include/mcpwarden/mcpwarden\.h$' \
           '^\./usr/include/mcpwarden/mcpwarden\.hpp$' \
           '^\./usr/share/man/man1/mcpwarden\.1' \
           '^\./usr/share/bash-completion/completions/mcpwarden$' \
           '^\./usr/share/zsh/vendor-completions/_mcpwarden$' \
           '^\./usr/share/fish/vendor_completions\.d/mcpwarden\.fish$' \
           '^\./usr/lib/systemd/user/mcpwarden-reap\.service$' \
           '^\./usr/lib/systemd/user/mcpwarden-reap\.timer$' \
           '^\./usr/lib/systemd/user/mcpwarden-reap-watch\.service$' \
           '^\./usr/lib/systemd/user/mcpwarden-broker\.socket$' \
           '^\./usr/lib/systemd/user/mcpwarden-broker\.service$'; do
    grep -q "$pat" "$tmp/list" || { echo "missing from the .deb: $pat"; fail=1; }
done
# The link and SONAME symlinks are in the package too.
dpkg-deb -c "$deb" | grep 'libmcpwarden\.so\.0 -> ' >/dev/null || { echo "missing SONAME link"; fail=1; }
depends=$(dpkg-deb -f "$deb" Depends)
echo "Depends: $depends"
for lib in libsqlite3 libfmt libc6 libstdc++; do
    echo "$depends" | grep -q "$lib" || { echo "Depends lacks $lib"; fail=1; }
done
[ $fail -eq 0 ] || { dpkg-deb -c "$deb"; exit 1; }
echo "deb: OK ($(basename "$deb"))"
