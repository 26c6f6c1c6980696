#!/usr/bin/env python3
"""Self-test: drive provider.py by piping JSON-RPC lines to it, as the
runner would, against the local Docker daemon.

    python3 examples/python-provider/selftest.py [--root-image REF]

REF defaults to $CHECKFU_ROOT_IMAGE, then to the local image tagged
checkfu-fixture (build it with `checkfu sandbox fixture`). Uses its own
state directory and label scope and checks that nothing is left behind.
"""

import argparse
import base64
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
FAILS = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        FAILS.append(what)


def b(s):
    return base64.b64encode(s).decode()


def ub(s):
    return base64.b64decode(s)


class Peer:
    def __init__(self, image, state, scope):
        self.p = subprocess.Popen([sys.executable, os.path.join(HERE, "provider.py"),
                                   "--root-image", image, "--state-dir", state, "--scope", scope],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.n = 0

    def send(self, msg):
        self.p.stdin.write((json.dumps(msg) + "\n").encode())
        self.p.stdin.flush()

    def request(self, method, params=None, wait=True):
        self.n += 1
        self.send({"jsonrpc": "2.0", "id": self.n, "method": method, "params": params})
        return self.read() if wait else self.n

    def notify(self, method, params):
        self.send({"jsonrpc": "2.0", "method": method, "params": params})

    def read(self):
        line = self.p.stdout.readline()
        if not line:
            raise SystemExit("provider closed stdout")
        return json.loads(line)

    def call(self, method, params=None):
        r = self.request(method, params)
        if "error" in r:
            print("     error:", json.dumps(r["error"])[:300])
        return r

    def init(self):
        return self.request("initialize", {"contract_revision": "checkfu.sandbox/v1",
                                           "wire_revision": "checkfu.sandbox.wire/v1"})

    def close(self):
        self.p.stdin.close()
        return self.p.wait(timeout=30)


def tag(r):
    return (r.get("error") or {}).get("data", {}).get("_tag")


def reason(r):
    return (r.get("error") or {}).get("data", {}).get("reason")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root-image", default=os.environ.get("CHECKFU_ROOT_IMAGE"))
    a = ap.parse_args()
    image = a.root_image
    if not image:
        out = subprocess.run(["docker", "images", "--no-trunc", "--format", "{{.ID}}",
                              "checkfu-fixture"], capture_output=True, text=True).stdout.split()
        if not out:
            raise SystemExit("no root image: run `checkfu sandbox fixture` or pass --root-image")
        image = "checkfu-fixture@" + out[0]
    state = tempfile.mkdtemp(prefix="cfpy-selftest-")
    scope = "selftest-%d" % os.getpid()
    peer = Peer(image, state, scope)

    # ---- session start
    r = peer.request("sandbox/capabilities")
    check(r.get("error", {}).get("code") == -32002, "a call before initialize is -32002")
    r = peer.request("initialize", {"contract_revision": "checkfu.sandbox/v0",
                                    "wire_revision": "checkfu.sandbox.wire/v1"})
    check(r["error"]["code"] == -32001 and r["error"]["data"]["field"] == "contract_revision",
          "a foreign contract revision is -32001 naming the field")
    r = peer.init()
    res = r["result"]
    check(res["wire_revision"] == "checkfu.sandbox.wire/v1" and res["conformance"] is True,
          "initialize echoes the literals")
    caps = res["capabilities"]
    check(caps["network_modes"] == ["none"] and caps["egress_certification"] == "unsupported",
          "envelope: none only, egress unsupported")
    check(peer.request("sandbox/nope")["error"]["code"] == -32601, "unknown method is -32601")
    check(peer.request("sandbox/activate", {"instance_id": "x", "extra": 1})["error"]["code"] == -32602,
          "an unknown params member is -32602")
    d = peer.call("conformance/describe")["result"]
    check({"filesystem", "process", "network-none", "zdr", "cleanup"} <= set(d["declared_tokens"]),
          "describe declares the tokens")
    root_image = d["root_image"]

    def request(mounts, expires="2030-01-01T00:00:00.000Z", network="none"):
        return {"provider": res["provider_id"], "placement": caps["placement"], "workspace_id": "ws-1",
                "session_id": "sess-1", "run_id": "run-1", "attempt_id": "att-1",
                "lease_id": "lease-1", "lease_epoch": 7, "target": "container",
                "profile": {"profile_id": "prof", "profile_version": 1,
                            "profile_digest": "sha256:" + "2" * 64, "retention": "ephemeral_zdr",
                            "network_policy": {"mode": network}, "max_duration_seconds": 60},
                "platform": d["platform"], "root_image": root_image, "mounts": mounts,
                "expires_at": expires}

    # ---- identity echo and refusals
    rq = request([{"path": "/data", "access": "read_only"},
                  {"path": "/data/sub", "access": "read_write"},
                  {"path": "/workspace/project", "access": "read_write"}])
    r = peer.call("sandbox/provision", rq)
    inst = r["result"]["value"]
    iid = inst["instance_id"]
    peer.notify("sandbox/commit", {"handle": r["result"]["rollback_handle"]})
    same = all(inst[k] == rq[k] for k in rq)
    mat = inst["materialization"]
    check(same and inst["state"] == "provisioning" and inst["output_path"] == "/mnt/session/outputs"
          and mat["image_digest"] == root_image.split("@")[1] and mat["image_reference"] == root_image
          and mat["provider_revision"] == caps["provider_revision"], "provision echoes the identity")
    bad = request([])
    bad["profile"]["network_policy"] = {"mode": "allowlist", "destinations": []}
    r = peer.call("sandbox/provision", bad)
    check(tag(r) == "SandboxCapabilityUnavailable"
          and r["error"]["data"]["requirement"] == "network_policy", "allowlist is refused as network_policy")

    w = lambda path, data: peer.call("sandbox/writeFile", {"instance_id": iid, "path": path,
                                                           "content_base64": b(data)})
    check(w("/data/a.txt", b"read-only data").get("result", 1) is None, "stage into a read-only mount")
    check(w("/data/sub/b.txt", b"nested").get("result", 1) is None, "stage into a nested mount")
    check(w("/workspace/project/x/y.txt", b"project").get("result", 1) is None, "stage with parents")
    check(reason(w("/etc/passwd", b"x")) == "path_not_admitted", "a path outside every mount is refused")
    r = peer.call("sandbox/execute", {"instance_id": iid, "command": {
        "executable": "true", "working_directory": "/", "output_limit_bytes": 10, "timeout_seconds": 5}})
    check(tag(r) == "SandboxLifecycleConflict", "execute while provisioning is a lifecycle conflict")
    r = peer.call("sandbox/activate", {"instance_id": iid})
    check(r["result"]["value"]["state"] == "active", "activate answers active")
    peer.notify("sandbox/commit", {"handle": r["result"]["rollback_handle"]})
    check(tag(w("/data/late", b"x")) == "SandboxLifecycleConflict", "a late writeFile into a mount is refused")
    check(w("/mnt/session/outputs/staged.txt", b"out").get("result", 1) is None,
          "the output tree stays writable when active")

    def ex(exe, *args, stdin=None, limit=4096, timeout=10, env=None, wait=True):
        c = {"executable": exe, "arguments": list(args), "working_directory": "/",
             "output_limit_bytes": limit, "timeout_seconds": timeout}
        if stdin is not None:
            c["stdin_base64"] = b(stdin)
        if env:
            c["environment"] = env
        if not wait:
            return peer.request("sandbox/execute", {"instance_id": iid, "command": c}, wait=False)
        return peer.call("sandbox/execute", {"instance_id": iid, "command": c})

    r = ex("sh", "-c", "cat /data/a.txt /data/sub/b.txt /workspace/project/x/y.txt; id -u")
    check(ub(r["result"]["stdout_base64"]) == b"read-only datanestedproject1000\n",
          "staged files are visible; the workload is uid 1000")
    r = ex("touch", "/data/z")
    check(r["result"]["exit"].get("exit_code", 0) != 0, "the read-only mount is sealed")
    r = ex("sh", "-c", "touch /data/sub/z /workspace/project/z && echo ok")
    check(ub(r["result"]["stdout_base64"]) == b"ok\n", "read-write mounts are writable")
    r = ex("cat", stdin=b"hello\n")
    check(ub(r["result"]["stdout_base64"]) == b"hello\n", "stdin arrives, then EOF")
    r = ex("sh", "-c", "exit 42")
    check(r["result"]["exit"] == {"exit_code": 42}, "exit codes pass through")
    r = ex("env", env={"FOO": "bar"})
    check(b"FOO=bar" in ub(r["result"]["stdout_base64"]), "environment arrives")
    r = ex("head", "-c", "4096", "/dev/zero")
    check(len(ub(r["result"]["stdout_base64"])) == 4096, "output at the limit comes back whole")
    r = ex("head", "-c", "4097", "/dev/zero")
    check(tag(r) == "SandboxOutputLimitExceeded" and r["error"]["data"]["stream"] == "stdout",
          "one byte over is SandboxOutputLimitExceeded")
    r = ex("sh", "-c", "head -c 5000 /dev/zero >&2")
    check(tag(r) == "SandboxOutputLimitExceeded" and r["error"]["data"]["stream"] == "stderr",
          "stderr is bounded too")
    t0 = time.time()
    r = ex("sh", "-c", "sleep 100 & sleep 100", timeout=2)
    check(r["result"]["exit"] == {"timed_out": True} and time.time() - t0 < 20, "timeout settles as timed_out")
    r = ex("sh", "-c", "ps | grep -c '[s]leep 100' || true")
    check(ub(r["result"]["stdout_base64"]).strip() == b"0", "timed-out children were killed")
    r = ex("nc", "-w", "2", "1.1.1.1", "53", stdin=b"")
    check(r["result"]["exit"].get("exit_code") != 0, "no network in the sandbox")

    # ---- contained reads
    ex("sh", "-c", "cd /mnt/session/outputs && echo hi > o.txt && ln -s /etc/passwd abs && "
       "ln -s ../../../etc/passwd up && ln -s o.txt in && mkdir d && ln -s ../o.txt d/back && "
       "mkfifo f && ln -s .. dotdot")
    rf = lambda path, root="/mnt/session/outputs", mx=100: peer.call(
        "sandbox/readFile", {"instance_id": iid, "path": path, "allowed_root": root, "maximum_bytes": mx})
    r = rf("/mnt/session/outputs/o.txt")
    check(ub(r["result"]["content_base64"]) == b"hi\n", "readFile round trip through the output tree")
    check(ub(rf("/mnt/session/outputs/staged.txt")["result"]["content_base64"]) == b"out",
          "a writeFile to the output tree reads back")
    check(reason(rf("/mnt/session/outputs/abs")) == "outside_root", "an absolute link is outside_root")
    check(reason(rf("/mnt/session/outputs/up")) == "outside_root", "a .. link escaping is outside_root")
    check(reason(rf("/mnt/session/outputs/dotdot/etc/passwd")) == "outside_root",
          "a link to .. then down is outside_root")
    check("result" in rf("/mnt/session/outputs/in"), "an in-root relative link is followed")
    check("result" in rf("/mnt/session/outputs/d/back"), "an in-root ../ link is followed")
    check(reason(rf("/mnt/session/outputs/f")) == "not_regular_file", "a fifo is not_regular_file")
    check(reason(rf("/mnt/session/outputs/none")) == "not_found", "a missing file is not_found")
    check(reason(rf("/mnt/session/outputs")) == "not_regular_file", "the root itself is not a file")
    r = rf("/mnt/session/outputs/o.txt", mx=2)
    check(tag(r) == "SandboxFileTooLarge" and r["error"]["data"]["actual_bytes"] == 3, "too large")
    check(ub(rf("/data/sub/b.txt", root="/data")["result"]["content_base64"]) == b"nested",
          "a nested mount is crossed as the container sees it")
    r = peer.call("sandbox/readFiles", {"instance_id": iid, "allowed_root": "/mnt/session/outputs",
                                        "aggregate_maximum_bytes": 40, "files": [
        {"path": "/mnt/session/outputs/o.txt", "maximum_bytes": 10},
        {"path": "/mnt/session/outputs/o.txt", "maximum_bytes": 1},
        {"path": "/mnt/session/outputs/abs", "maximum_bytes": 10},
        {"path": "/mnt/session/outputs/none", "maximum_bytes": 10},
        {"path": "/mnt/session/outputs/f", "maximum_bytes": 9}]})
    check([f["outcome"] for f in r["result"]["files"]] ==
          ["read", "too_large", "outside_root", "not_found", "not_regular_file"],
          "readFiles: the closed per-file union in order")
    r = peer.call("sandbox/listProjectDir", {"instance_id": iid, "root": "/mnt/session/outputs",
                                             "max_entries": 100})
    kinds = {e["path"].rsplit("/", 1)[1]: e["kind"] for e in r["result"]["entries"]}
    check(r["result"]["complete"] is True and kinds.get("f") == "fifo" and kinds.get("abs") == "symlink"
          and kinds.get("o.txt") == "regular", "listProjectDir names special files")
    r = peer.call("sandbox/listDir", {"instance_id": iid, "root": "/workspace/project", "max_entries": 100})
    check(sorted(e["path"] for e in r["result"]["entries"]) ==
          ["/workspace/project/x/y.txt", "/workspace/project/z"], "listDir lists regular files")

    # ---- ZDR release
    r = peer.call("sandbox/snapshot", {"instance_id": iid, "expires_at": "2030-01-01T00:00:00.000Z"})
    check(tag(r) == "SandboxSnapshotForbidden", "snapshot of a ZDR instance is forbidden")
    r = peer.call("sandbox/release", {"instance_id": iid})
    check(r["result"]["value"] == {"disposition": "destroyed"}, "release is destroyed")
    peer.notify("sandbox/commit", {"handle": r["result"]["rollback_handle"]})
    live = peer.call("conformance/liveObjects")["result"]
    check(iid not in live["instances"] and not os.path.exists(os.path.join(state, scope, "instances", iid)),
          "after release nothing of the instance is left")
    check(peer.call("sandbox/destroy", {"instance_id": iid}).get("result", 1) is None, "destroy is idempotent")
    check(tag(peer.call("sandbox/activate", {"instance_id": iid})) == "SandboxInstanceNotFound",
          "a gone instance is SandboxInstanceNotFound")

    # ---- rollback handles
    r = peer.call("sandbox/provision", request([]))
    h, rid_ = r["result"]["rollback_handle"], r["result"]["value"]["instance_id"]
    check(peer.call("sandbox/rollback", {"handle": h}).get("result", 1) is None, "rollback runs")
    check(peer.call("sandbox/rollback", {"handle": h}).get("result", 1) is None, "rollback twice settles the same")
    check(rid_ not in peer.call("conformance/liveObjects")["result"]["instances"], "rolled back is gone")
    peer.notify("sandbox/commit", {"handle": h})
    r = peer.call("sandbox/rollback", {"handle": h})
    check(reason(r) == "invalid_request" and r["error"]["data"]["field"] == "handle",
          "a committed handle is unknown")

    # ---- cancel of an allocating call: finish, roll back, no reply
    before = set(peer.call("conformance/liveObjects")["result"]["instances"])
    cid = peer.request("sandbox/provision", request([]), wait=False)
    peer.notify("$/cancel", {"id": cid})
    r = peer.call("conformance/liveObjects")
    time.sleep(1.0)
    r = peer.call("conformance/liveObjects")
    check(r["id"] == peer.n and set(r["result"]["instances"]) == before,
          "a cancelled provision sends no reply and is rolled back")

    # ---- cleanup: the expired one is swept by a fresh provider, the live one kept
    r1 = peer.call("sandbox/provision", request([], expires="2026-01-01T00:00:00.000Z"))["result"]["value"]
    r2 = peer.call("sandbox/provision", request([], expires="2099-01-01T00:00:00.000Z"))["result"]["value"]
    peer.call("sandbox/activate", {"instance_id": r2["instance_id"]})
    fresh = Peer(image, state, scope)
    fresh.init()
    swept = fresh.call("sandbox/cleanup", {"now": "2027-01-01T00:00:00.000Z",
                                           "orphaned_before": "2000-01-01T00:00:00.000Z"})["result"]
    check(swept == {"instances": [r1["instance_id"]], "snapshots": []}, "cleanup sweeps only the expired one")
    swept = fresh.call("sandbox/cleanup", {"now": "2027-01-01T00:00:00.000Z",
                                           "orphaned_before": "2027-01-01T00:00:00.000Z",
                                           "pinned_snapshots": []})["result"]
    check(swept["instances"] == [r2["instance_id"]], "a cutoff after creation sweeps the live one too")
    fresh.close()

    # ---- egress hooks
    lst = peer.call("conformance/startListener")["result"]
    probe = peer.call("conformance/controlProbe", lst)["result"]
    check(ub(probe["data_base64"]) == lst["token"].encode(), "the control probe reaches the listener")
    check(peer.call("conformance/stopListener", lst).get("result", 1) is None, "stopListener")

    leak = peer.call("sandbox/provision", request([]))["result"]["value"]["instance_id"]
    check(peer.call("conformance/close").get("result", 1) is None, "conformance/close")
    check(leak not in peer.call("conformance/liveObjects")["result"]["instances"],
          "close removed what this process created")
    check(peer.call("conformance/close").get("result", 1) is None, "conformance/close is idempotent")
    check(peer.close() == 0, "the provider exits 0 when stdin closes")
    left = subprocess.run(["docker", "ps", "-aq", "--filter", "label=checkfu.python-provider.scope=" + scope],
                          capture_output=True, text=True).stdout.split()
    check(not left, "no container left in the scope")
    inst_dir = os.path.join(state, scope, "instances")
    check(not os.listdir(inst_dir), "no instance directory left")
    import shutil
    shutil.rmtree(state, ignore_errors=True)
    print("\n%d failed" % len(FAILS))
    sys.exit(1 if FAILS else 0)


if __name__ == "__main__":
    main()
