#!/usr/bin/env python3
"""A checkfu sandbox provider: {{ID}}.

Scaffolded by `checkfu sandbox init --lang python`. It speaks the wire
protocol (PROTOCOL.md beside this file) on stdin/stdout and answers every
member of the contract, but allocates nothing yet: each member refuses with
the typed error the contract names for its situation, and the conformance
hooks declare no token, so `checkfu sandbox test --provider-cmd ./provider.py`
records all nine cases as skips and fails none.

Fill in a member, declare the token its cases need (TOKENS), widen the
envelope (capabilities) to what you really enforce, and run the suite
again. Standard library only.
"""

import json
import sys
import time

CONTRACT = "checkfu.sandbox/v1"
WIRE = "checkfu.sandbox.wire/v1"
PROVIDER_ID = "{{ID}}"
PROVIDER_REVISION = "{{ID}}-0.1.0"
MATERIALIZATION_REVISION = "{{ID}}-mat-0.1.0"
MAX_LINE = 202375168

# Tokens your implementation backs; each case needing one you leave out is
# a recorded skip (checkfu sandbox test prints which).
TOKENS = []
# Optional members you implement: read_files, list_dir, list_project_dir,
# open_process, begin_active_write.
MEMBERS = []


def log(*a):
    print("{{ID}}:", *a, file=sys.stderr, flush=True)


def capabilities():
    """The envelope: claim only what you enforce. This minimal one claims
    no optional capability and enforces nothing."""
    return {
        "placement": "runner",
        "tiers": ["container"],
        "platforms": [{"os": "linux", "architecture": "amd64"}],
        "image_mode": "profile",
        "package_managers": [],
        "network_modes": ["none"],
        "retention_modes": ["ephemeral_zdr"],
        "snapshots": False,
        "snapshot_clone": False,
        "snapshot_custody": "runner",
        "list_dir": False,
        "physically_contained_file_read": False,
        "active_mount_write": False,
        "egress_certification": "unsupported",
        "enforcement": {axis: "not_enforced" for axis in (
            "filesystem", "process", "network", "memory", "cpu", "pids", "disk",
            "duration", "privilege")},
        "max_mounts": 0,
        "provider_revision": PROVIDER_REVISION,
        "materialization_revision": MATERIALIZATION_REVISION,
    }


class Refusal(Exception):
    """A contract error: `data` is one SandboxError (schema/SandboxError.json)."""

    def __init__(self, data):
        super().__init__(data["_tag"])
        self.data = data


def instance_not_found(params):
    # No instance exists yet, so every instance id is unknown.
    return Refusal({"_tag": "SandboxInstanceNotFound",
                    "instance_id": str((params or {}).get("instance_id", ""))})


def snapshot_not_found(snapshot_id):
    return Refusal({"_tag": "SandboxSnapshotNotFound", "snapshot_id": str(snapshot_id)})


def snapshot_id_of(obj):
    return (obj or {}).get("snapshot_id", "") if isinstance(obj, dict) else ""


def provision(params):
    # TODO: allocate an instance and return a handoff
    # {"value": SandboxInstance, "rollback_handle": "..."}.
    raise Refusal({"_tag": "SandboxCapabilityUnavailable", "requirement": "base_image",
                   "detail": "{{ID}} does not provision instances yet"})


def rollback(params):
    # No allocation was ever handed out, so no handle is known.
    raise Refusal({"_tag": "SandboxOperationFailed", "operation": "rollback",
                   "reason": "invalid_request", "message": "unknown rollback handle",
                   "field": "handle",
                   "expected": "a handle this provider issued",
                   "actual": str((params or {}).get("handle", ""))})


def cleanup(params):
    # Nothing allocated, nothing to sweep.
    return {"instances": [], "snapshots": []}


def refuse_instance(params):
    raise instance_not_found(params)


def refuse_clone(params):
    raise snapshot_not_found(snapshot_id_of((params or {}).get("source")))


def refuse_resume(params):
    raise snapshot_not_found(snapshot_id_of((params or {}).get("snapshot")))


def refuse_destroy_snapshot(params):
    raise snapshot_not_found((params or {}).get("snapshot_id", ""))


def now_ts():
    t = time.time()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + ".%03dZ" % int(t % 1 * 1000)


# The conformance hooks (PROTOCOL.md "Conformance hooks").
def describe(params):
    return {"name": PROVIDER_ID, "declared_tokens": TOKENS,
            "root_image": "docker.io/library/busybox@sha256:" + "0" * 64,
            "tier": "container", "platform": {"os": "linux", "architecture": "amd64"},
            "clock_now": now_ts(), "manual_clock": False}


def hook_unsupported(params):
    raise Refusal({"_tag": "SandboxOperationFailed", "operation": "conformance",
                   "reason": "provider_error", "message": "no listener support yet"})


METHODS = {
    "sandbox/capabilities": lambda p: capabilities(),
    "sandbox/provision": provision,
    "sandbox/writeFile": refuse_instance,
    "sandbox/activate": refuse_instance,
    "sandbox/execute": refuse_instance,
    "sandbox/readFile": refuse_instance,
    "sandbox/snapshot": refuse_instance,
    "sandbox/cloneSnapshot": refuse_clone,
    "sandbox/release": refuse_instance,
    "sandbox/resume": refuse_resume,
    "sandbox/destroy": refuse_instance,
    "sandbox/destroySnapshot": refuse_destroy_snapshot,
    "sandbox/cleanup": cleanup,
    "sandbox/rollback": rollback,
    "conformance/describe": describe,
    "conformance/liveObjects": lambda p: {"instances": [], "snapshots": []},
    "conformance/close": lambda p: None,
    "conformance/stopListener": lambda p: None,
    "conformance/startListener": hook_unsupported,
    "conformance/controlProbe": hook_unsupported,
}


def send(msg):
    sys.stdout.buffer.write(json.dumps(msg, separators=(",", ":")).encode() + b"\n")
    sys.stdout.buffer.flush()


def answer(rid, method, params):
    if method == "initialize":
        for field, mine in (("contract_revision", CONTRACT), ("wire_revision", WIRE)):
            if (params or {}).get(field) != mine:
                return {"error": {"code": -32001, "message": "revision mismatch", "data": {
                    "field": field, "expected": mine, "actual": (params or {}).get(field)}}}
        return {"result": {
            "contract_revision": CONTRACT, "wire_revision": WIRE,
            "provider_id": PROVIDER_ID, "provider_name": PROVIDER_ID,
            "capabilities": capabilities(), "members": MEMBERS, "conformance": True,
            "limits": {"max_line_bytes": MAX_LINE, "stdin_credit_bytes": 0,
                       "replay_window_bytes": 0, "stream_chunk_bytes": 65536,
                       "resume_window_ms": 0}}}
    fn = METHODS.get(method)
    if fn is None:
        return {"error": {"code": -32601, "message": "method not found: %s" % method}}
    try:
        return {"result": fn(params)}
    except Refusal as r:
        if method.startswith("conformance/"):
            return {"error": {"code": -32010, "message": r.data.get("message", r.data["_tag"]),
                              "data": {"message": r.data.get("message", r.data["_tag"])}}}
        return {"error": {"code": -32000, "message": r.data["_tag"], "data": r.data}}


def main():
    initialized = False
    for line in sys.stdin.buffer:
        if len(line) > MAX_LINE + 1:
            log("a line over the bound: closing")
            return
        line = line.strip()
        if not line:
            continue
        try:
            msg = json.loads(line)
        except ValueError:
            log("a line that is not JSON: closing")
            return
        if "id" not in msg:
            continue  # notifications: sandbox/commit, $/cancel, process/*
        rid, method = msg["id"], msg.get("method", "")
        if method != "initialize" and not initialized:
            send({"jsonrpc": "2.0", "id": rid,
                  "error": {"code": -32002, "message": "initialize first"}})
            continue
        reply = answer(rid, method, msg.get("params"))
        if method == "initialize" and "result" in reply:
            initialized = True
        send(dict({"jsonrpc": "2.0", "id": rid}, **reply))


if __name__ == "__main__":
    main()
