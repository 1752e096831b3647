#!/usr/bin/env python3
"""A read-only npm registry on 127.0.0.1 serving the packages of one node_modules tree.

    local_registry.py NODE_MODULES

Prints the port it listens on, then serves until its stdin closes. Each package found in the
tree (nested node_modules included, every version found) gets a packument whose tarballs are
packed from the installed files on first request. Tests use it to fill an npm cache the way
a first `npx -y PACKAGE` does, without the network: npm's own resolution, install and cache
writes run for real, against packages that are already on this machine.
"""
import http.server
import io
import json
import os
import sys
import tarfile
import threading
import urllib.parse


def packages_in(root):
    """{name: {version: directory}} for every package.json under root's node_modules."""
    found = {}

    def walk(nm):
        try:
            entries = sorted(os.listdir(nm))
        except OSError:
            return
        for e in entries:
            if e.startswith("."):
                continue
            path = os.path.join(nm, e)
            if e.startswith("@"):
                for sub in sorted(os.listdir(path)):
                    visit(os.path.join(path, sub))
            else:
                visit(path)

    def visit(path):
        try:
            with open(os.path.join(path, "package.json")) as f:
                manifest = json.load(f)
        except (OSError, ValueError):
            return
        name, version = manifest.get("name"), manifest.get("version")
        if name and version:
            found.setdefault(name, {}).setdefault(version, path)
        walk(os.path.join(path, "node_modules"))

    walk(root)
    return found


def pack(directory):
    """The package's files as npm packs them: a gzipped tar under package/."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for base, dirs, files in os.walk(directory):
            dirs[:] = sorted(d for d in dirs if d != "node_modules")
            for f in sorted(files):
                full = os.path.join(base, f)
                rel = os.path.relpath(full, directory)
                tar.add(full, arcname="package/" + rel, recursive=False)
    return buf.getvalue()


def main():
    root = sys.argv[1]
    packages = packages_in(root)
    tarballs = {}
    lock = threading.Lock()

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def reply(self, code, body, kind):
            self.send_response(code)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            path = urllib.parse.unquote(self.path.split("?")[0]).lstrip("/")
            host = "http://%s:%d/" % self.server.server_address[:2]
            if "/-/" in path:
                name, file = path.split("/-/", 1)
                version = file[len(name.split("/")[-1]) + 1 : -len(".tgz")]
                directory = packages.get(name, {}).get(version)
                if not directory:
                    return self.reply(404, b"{}", "application/json")
                with lock:
                    if (name, version) not in tarballs:
                        tarballs[(name, version)] = pack(directory)
                return self.reply(200, tarballs[(name, version)], "application/octet-stream")
            versions = packages.get(path)
            if not versions:
                return self.reply(404, b'{"error":"not found"}', "application/json")
            doc = {"name": path, "versions": {}, "dist-tags": {}}
            for version, directory in versions.items():
                with open(os.path.join(directory, "package.json")) as f:
                    manifest = json.load(f)
                manifest = {k: v for k, v in manifest.items() if not k.startswith("_")}
                manifest.pop("scripts", None)  # installed already: nothing to build
                short = path.split("/")[-1]
                manifest["dist"] = {"tarball": "%s%s/-/%s-%s.tgz" % (host, path, short, version)}
                doc["versions"][version] = manifest
            doc["dist-tags"]["latest"] = sorted(
                versions, key=lambda v: [int(p) if p.isdigit() else 0 for p in v.split("-")[0].split(".")]
            )[-1]
            self.reply(200, json.dumps(doc).encode(), "application/json")

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print(server.server_address[1], flush=True)
    sys.stdin.read()  # until the test closes it (or dies)
    server.shutdown()


if __name__ == "__main__":
    main()
