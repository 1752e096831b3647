#!/usr/bin/env python3
"""A registry on 127.0.0.1 that serves the packages of a node_modules tree, for filling an
npm cache without the network (tests/packaging/demo.sh).

usage: npm_registry.py NODE_MODULES PORT_FILE

Every package found in NODE_MODULES (nested node_modules too) is served: its packument at
/<name> (/@scope%2fname), listing each version found, and its tarball, made on request
from the directory (under package/, nested node_modules left out), at /-/<name>/<version>.tgz.
The port it listens on is written to PORT_FILE once it listens. It serves until killed.
"""
import http.server
import io
import json
import os
import sys
import tarfile
import urllib.parse


def is_package_dir(path):
    parent = os.path.dirname(path)
    if os.path.basename(parent) == "node_modules":
        return True
    return (os.path.basename(parent).startswith("@")
            and os.path.basename(os.path.dirname(parent)) == "node_modules")


def packages(root):
    found = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if not d.startswith(".")]
        if "package.json" not in filenames or not is_package_dir(dirpath):
            continue
        try:
            with open(os.path.join(dirpath, "package.json"), encoding="utf-8") as f:
                meta = json.load(f)
        except (OSError, ValueError):
            continue
        name, version = meta.get("name"), meta.get("version")
        if name and version:
            found.setdefault(name, {}).setdefault(version, (dirpath, meta))
    return found


def tarball(path):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for dirpath, dirnames, filenames in os.walk(path):
            dirnames[:] = [d for d in dirnames if d != "node_modules"]
            for name in filenames:
                full = os.path.join(dirpath, name)
                if os.path.islink(full) or not os.path.isfile(full):
                    continue
                arc = "package/" + os.path.relpath(full, path)
                tar.add(full, arcname=arc)
    return buf.getvalue()


class Handler(http.server.BaseHTTPRequestHandler):
    pkgs = {}

    def log_message(self, *args):
        pass

    def send(self, code, body, ctype):
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        path = urllib.parse.unquote(self.path.split("?")[0])
        if path.startswith("/-/") and path.endswith(".tgz"):
            name, version = path[3:-4].rsplit("/", 1)
            entry = self.pkgs.get(name, {}).get(version)
            if entry:
                return self.send(200, tarball(entry[0]), "application/octet-stream")
            return self.send(404, b"{}", "application/json")
        name = path[1:]
        versions = self.pkgs.get(name)
        if not versions:
            return self.send(404, b'{"error":"not found"}', "application/json")
        host = "http://%s:%d" % self.server.server_address[:2]
        doc = {"name": name, "versions": {}, "dist-tags": {}}
        for version, (_, meta) in versions.items():
            v = {k: meta[k] for k in ("name", "version", "dependencies", "peerDependencies",
                                      "optionalDependencies", "bin", "engines", "os", "cpu",
                                      "peerDependenciesMeta") if k in meta}
            v["dist"] = {"tarball": "%s/-/%s/%s.tgz" % (host, name, version)}
            doc["versions"][version] = v

        def key(v):
            return [int(p) if p.isdigit() else 0 for p in v.split("-")[0].split(".")]
        doc["dist-tags"]["latest"] = max(versions, key=key)
        self.send(200, json.dumps(doc).encode(), "application/json")


def main():
    Handler.pkgs = packages(sys.argv[1])
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    with open(sys.argv[2] + ".tmp", "w") as f:
        f.write(str(server.server_address[1]))
    os.rename(sys.argv[2] + ".tmp", sys.argv[2])
    server.serve_forever()


if __name__ == "__main__":
    main()
