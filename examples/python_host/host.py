#!/usr/bin/env python3
"""python_host: a minimal MCP host in Python on libmcpwarden's C ABI, through ctypes.

Starts the fixture MCP server (shape "setsid": it leaves a helper that called setsid() and
holds a port), sends initialize and tools/call echo over its stdio, checks the answer,
tears the whole tree down, prints the report and checks from outside, through /proc, that
no process carrying this run's tag is left. Standard library only.

usage: host.py [--lib PATH-TO-libmcpwarden.so] [--fixture PATH-TO-mcpwarden-fixture]
       (defaults: $MCPWARDEN_LIB or ctypes.util.find_library("mcpwarden");
                  $MCPWARDEN_FIXTURE or /usr/libexec/mcpwarden/mcpwarden-fixture)
"""
import argparse
import ctypes
import ctypes.util
import json
import os
import select
import sys
import time

MCPW_OK = 0


class TeardownOptions(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32), ("eof_window_ms", ctypes.c_int),
                ("grace_ms", ctypes.c_int), ("kill_wait_ms", ctypes.c_int),
                ("verify_ports", ctypes.c_int)]


def load(path):
    lib = ctypes.CDLL(path)
    lib.mcpw_version.restype = ctypes.c_char_p
    lib.mcpw_last_error.restype = ctypes.c_char_p
    lib.mcpw_spawn.argtypes = [ctypes.POINTER(ctypes.c_char_p), ctypes.POINTER(ctypes.c_char_p),
                               ctypes.c_char_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p)]
    for name in ("mcpw_server_pid", "mcpw_server_stdin", "mcpw_server_stdout"):
        getattr(lib, name).argtypes = [ctypes.c_void_p]
    lib.mcpw_server_session.argtypes = [ctypes.c_void_p]
    lib.mcpw_server_session.restype = ctypes.c_char_p
    lib.mcpw_teardown_options_init.argtypes = [ctypes.POINTER(TeardownOptions)]
    # report_json is a char** we release with mcpw_free: keep it a void pointer.
    lib.mcpw_teardown.argtypes = [ctypes.c_void_p, ctypes.POINTER(TeardownOptions),
                                  ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_int)]
    lib.mcpw_free.argtypes = [ctypes.c_void_p]
    lib.mcpw_server_free.argtypes = [ctypes.c_void_p]
    return lib


def c_strings(items):
    arr = (ctypes.c_char_p * (len(items) + 1))()
    for i, s in enumerate(items):
        arr[i] = s.encode()
    arr[len(items)] = None
    return arr


def read_line(fd, timeout=10.0):
    buf = b""
    deadline = time.monotonic() + timeout
    while not buf.endswith(b"\n"):
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            raise TimeoutError("no answer from the server")
        chunk = os.read(fd, 65536)
        if not chunk:
            raise EOFError("the server closed its stdout")
        buf += chunk
    return buf.decode()


def tagged_live(needle):
    """Live (not zombie) processes whose environment holds needle (b"KEY=VALUE")."""
    pids = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/environ", "rb") as f:
                if needle not in f.read().split(b"\0"):
                    continue
            with open(f"/proc/{d}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            pids.append(int(d))
    return pids


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", default=os.environ.get("MCPWARDEN_LIB")
                    or ctypes.util.find_library("mcpwarden"))
    ap.add_argument("--fixture", default=os.environ.get("MCPWARDEN_FIXTURE")
                    or "/usr/libexec/mcpwarden/mcpwarden-fixture")
    a = ap.parse_args()
    if not a.lib:
        sys.exit("python_host: libmcpwarden not found (use --lib or MCPWARDEN_LIB)")
    lib = load(a.lib)
    print(f"libmcpwarden {lib.mcpw_version().decode()} (abi {lib.mcpw_abi_version()})")

    tag = f"MCPW_EXAMPLE_TAG=python-host-{os.getpid()}-{int(time.time())}"
    server = ctypes.c_void_p()
    rc = lib.mcpw_spawn(c_strings([a.fixture, "--shape", "setsid"]), c_strings([tag]), None,
                        None, ctypes.byref(server))
    if rc != MCPW_OK:
        sys.exit(f"python_host: {lib.mcpw_last_error().decode()} (code {rc})")
    print(f"server pid {lib.mcpw_server_pid(server)}, "
          f"session {lib.mcpw_server_session(server).decode()}")

    ok = True
    try:
        w, r = lib.mcpw_server_stdin(server), lib.mcpw_server_stdout(server)
        os.write(w, (json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "python_host", "version": "1"}}}) + "\n").encode())
        init = json.loads(read_line(r))
        assert init.get("id") == 1 and "result" in init, init
        os.write(w, (json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n"
                     + json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
                         "name": "echo", "arguments": {"text": "hello from Python"}}})
                     + "\n").encode())
        answer = json.loads(read_line(r))
        texts = [c.get("text") for c in answer["result"]["content"]]
        assert "hello from Python" in texts, answer
        print(f"echo answered: {texts}")
    except (AssertionError, OSError, TimeoutError, EOFError, KeyError, ValueError) as e:
        print(f"python_host: talking to the server failed: {e!r}", file=sys.stderr)
        ok = False

    opts = TeardownOptions()
    lib.mcpw_teardown_options_init(ctypes.byref(opts))
    opts.grace_ms = 1000
    report_ptr, survivors = ctypes.c_void_p(), ctypes.c_int(-1)
    rc = lib.mcpw_teardown(server, ctypes.byref(opts), ctypes.byref(report_ptr),
                           ctypes.byref(survivors))
    report = json.loads(ctypes.string_at(report_ptr).decode()) if report_ptr.value else {}
    lib.mcpw_free(report_ptr)
    if rc != MCPW_OK:
        print(f"python_host: teardown: {lib.mcpw_last_error().decode()}", file=sys.stderr)
        ok = False
    lib.mcpw_server_free(server)
    print("teardown report:", json.dumps(report, indent=1, sort_keys=True))

    left = tagged_live(tag.encode())
    print(f"survivors {survivors.value}, tagged processes left {len(left)} {left}")
    ok = ok and survivors.value == 0 and not left
    print("python_host: OK" if ok else "python_host: FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
