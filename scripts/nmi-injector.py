#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Inject NMIs into the test VM on request, over QEMU's QMP socket.

Usage: nmi-injector.py QMP_SOCKET SHARED_DIR

A guest test writes a count N into SHARED_DIR/nmi-request; this process then sends N
`inject-nmi` commands as fast as QMP answers, writes the number it sent into
SHARED_DIR/nmi-done and removes the request. It exits when the socket goes away (the VM
ended) or after the VM never appeared.
"""
import json, os, socket, sys, time

sock_path, shared = sys.argv[1], sys.argv[2]
request = os.path.join(shared, "nmi-request")
done = os.path.join(shared, "nmi-done")

deadline = time.time() + 120
while not os.path.exists(sock_path):
    if time.time() > deadline:
        sys.exit(0)
    time.sleep(0.2)
time.sleep(0.5)

s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    s.connect(sock_path)
except OSError as e:
    print("cannot connect:", e)
    sys.exit(0)
f = s.makefile("rw")


def cmd(name):
    f.write(json.dumps({"execute": name}) + "\n")
    f.flush()
    while True:
        line = f.readline()
        if not line:
            raise EOFError
        msg = json.loads(line)
        if "return" in msg or "error" in msg:
            return msg


try:
    f.readline()  # greeting
    cmd("qmp_capabilities")
    while True:
        if os.path.exists(request):
            try:
                text = open(request).read().strip()
            except OSError:
                text = ""
            if not text:
                # Created but not written yet: read again shortly.
                time.sleep(0.05)
                continue
            try:
                n = int(text)
            except ValueError:
                n = 0
            os.unlink(request)
            sent = 0
            for _ in range(n):
                if "return" in cmd("inject-nmi"):
                    sent += 1
            with open(done + ".tmp", "w") as out:
                out.write(f"{sent}\n")
            os.rename(done + ".tmp", done)
            print("injected", sent)
        else:
            time.sleep(0.05)
            # Probe the connection so we leave when the VM is gone.
            cmd("query-status")
except (EOFError, OSError, ValueError):
    pass
