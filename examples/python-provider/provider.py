#!/usr/bin/env python3
"""A checkfu sandbox provider over the Docker CLI, speaking
checkfu.sandbox.wire/v1 (JSON-RPC 2.0, one message per line) on stdio.

Python 3.11 standard library only. See README.md for the flags, the
environment, the isolation it gives and what it deliberately does not do.
"""

import argparse
import base64
import binascii
import datetime as dt
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import contained  # noqa: E402

CONTRACT = "checkfu.sandbox/v1"
WIRE = "checkfu.sandbox.wire/v1"
MAX_LINE = 202_375_168
HOOK_FAILURE = -32010  # a conformance/* hook that fails (HookFailure)
PROVIDER_ID = "python-docker"
PROVIDER_REVISION = "python-docker-1"
MATERIALIZATION_REVISION = "python-docker-mat-1"
OUTPUT_PATH = "/mnt/session/outputs"
WORKLOAD_UID = 1000
WORKLOAD_GID = 1000
LABEL = "checkfu.python-provider"
FILE_BOUND = 16 * 1024 * 1024
DIGEST_RE = re.compile(r"^sha256:[0-9a-f]{64}$")
IMAGE_RE = re.compile(r"^[a-z0-9._/:-]{1,255}@sha256:[0-9a-f]{64}$")
ENV_KEY_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def log(*a):
    print("[python-provider]", *a, file=sys.stderr, flush=True)


def now_ts():
    t = dt.datetime.now(dt.timezone.utc)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + "%03dZ" % (t.microsecond // 1000)


def host_arch():
    m = os.uname().machine
    return {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}.get(m, m)


# ---------------------------------------------------------------- errors

class SandboxError(Exception):
    def __init__(self, data, message=None):
        super().__init__(message or data.get("_tag"))
        self.data = data
        self.message = message or "%s" % json.dumps(data)


class RpcError(Exception):
    def __init__(self, code, message, data=None):
        super().__init__(message)
        self.code, self.message, self.data = code, message, data


def op_failed(operation, reason, message="", field=None, expected=None, actual=None):
    d = {"_tag": "SandboxOperationFailed", "operation": operation, "reason": reason,
         "message": message}
    if field is not None:
        d["field"] = field
    if expected is not None:
        d["expected"] = expected
    if actual is not None:
        d["actual"] = actual
    return SandboxError(d, "%s failed: %s %s" % (operation, reason, message))


def unavailable(requirement, detail):
    return SandboxError({"_tag": "SandboxCapabilityUnavailable", "requirement": requirement,
                         "detail": detail})


def not_found(instance_id):
    return SandboxError({"_tag": "SandboxInstanceNotFound", "instance_id": instance_id})


def conflict(operation, expected, actual):
    return SandboxError({"_tag": "SandboxLifecycleConflict", "operation": operation,
                         "expected": expected, "actual": actual})


# ---------------------------------------------------------------- params

# top-level members per method: (required, optional). Unknown members are
# refused with -32602 (the wire refuses unknown members in any message).
PARAMS = {
    "sandbox/provision": ({"provider", "placement", "workspace_id", "session_id", "run_id",
                           "attempt_id", "lease_id", "lease_epoch", "target", "profile",
                           "platform", "root_image", "mounts", "expires_at"}, set()),
    "sandbox/writeFile": ({"instance_id", "path", "content_base64"}, {"mode", "kind"}),
    "sandbox/activate": ({"instance_id"}, set()),
    "sandbox/execute": ({"instance_id", "command"}, set()),
    "sandbox/readFile": ({"instance_id", "path", "allowed_root", "maximum_bytes"}, set()),
    "sandbox/readFiles": ({"instance_id", "allowed_root", "files", "aggregate_maximum_bytes"},
                          set()),
    "sandbox/listDir": ({"instance_id", "root", "max_entries"}, set()),
    "sandbox/listProjectDir": ({"instance_id", "root", "max_entries"}, set()),
    "sandbox/snapshot": ({"instance_id", "expires_at"}, set()),
    "sandbox/cloneSnapshot": ({"source", "target_session_id"}, set()),
    "sandbox/release": ({"instance_id"}, {"snapshot_expires_at"}),
    "sandbox/resume": ({"request", "snapshot"}, set()),
    "sandbox/destroy": ({"instance_id"}, set()),
    "sandbox/destroySnapshot": ({"snapshot_id"}, set()),
    "sandbox/cleanup": ({"now", "orphaned_before"}, {"pinned_snapshots"}),
    "sandbox/rollback": ({"handle"}, set()),
    "conformance/controlProbe": ({"host", "port", "token"}, set()),
    "conformance/stopListener": ({"host", "port", "token"}, set()),
}
NULL_PARAMS = {"sandbox/capabilities", "conformance/describe", "conformance/startListener",
               "conformance/liveObjects", "conformance/close"}
COMMAND_KEYS = ({"executable", "working_directory", "output_limit_bytes", "timeout_seconds"},
                {"arguments", "environment", "stdin_base64"})


def check_members(obj, required, optional, where):
    if not isinstance(obj, dict):
        raise RpcError(-32602, "%s: expected an object" % where)
    unknown = set(obj) - required - optional
    if unknown:
        raise RpcError(-32602, "%s: unknown member(s) %s" % (where, sorted(unknown)))
    missing = {k for k in required if obj.get(k) is None}
    if missing:
        raise RpcError(-32602, "%s: missing member(s) %s" % (where, sorted(missing)))


def b64decode(s, where):
    try:
        return base64.b64decode(s, validate=True)
    except (binascii.Error, ValueError, TypeError):
        raise RpcError(-32602, "%s: not standard padded base64" % where)


def b64(b):
    return base64.b64encode(b).decode("ascii")


# A file path on the wire is a JSON string when its bytes are UTF-8, else
# {"bytes_base64": "<standard padded base64>"} (docs/decisions/021-byte-paths.md).
# Inside, a path is a str whose bytes that are not UTF-8 are surrogate
# escapes: what os.listdir returns and every os function takes.

def wire_path(v, where):
    """A wire path as a str (surrogate escapes for bytes that are not UTF-8)."""
    if isinstance(v, str):
        path = v
    elif isinstance(v, dict):
        check_members(v, {"bytes_base64"}, set(), where)
        raw = b64decode(v["bytes_base64"], where + ".bytes_base64")
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError:
            path = raw.decode("utf-8", "surrogateescape")
        else:
            raise RpcError(-32602, "%s.bytes_base64: a path whose bytes are valid UTF-8 "
                                   "travels as a string" % where)
    else:
        raise RpcError(-32602, "%s: expected a string or {\"bytes_base64\": ...}" % where)
    if "\0" in path:
        raise RpcError(-32602, "%s: a path without NUL" % where)
    return path


def path_wire(path):
    """The wire form of a path str."""
    raw = path.encode("utf-8", "surrogateescape")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return {"bytes_base64": b64(raw)}


def shown(path):
    """A path for a message: bytes that are not UTF-8 as \\xNN."""
    return path.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def scrub(v):
    """A message value with every surrogate escape as \\xNN (JSON text is UTF-8)."""
    if isinstance(v, str):
        try:
            v.encode("utf-8")
            return v
        except UnicodeEncodeError:
            return shown(v)
    if isinstance(v, dict):
        return {k: scrub(x) for k, x in v.items()}
    if isinstance(v, list):
        return [scrub(x) for x in v]
    return v


# ---------------------------------------------------------------- docker

def docker(*args, check=True, timeout=120, input=None):
    p = subprocess.run(["docker", *args], capture_output=True, timeout=timeout, input=input)
    if check and p.returncode != 0:
        raise op_failed("docker", "provider_error",
                        "docker %s: %s" % (args[0], p.stderr.decode(errors="replace").strip()))
    return p


# ---------------------------------------------------------------- provider

class Provider:
    def __init__(self, root_image, state_dir, scope):
        self.root_image_arg = root_image
        self.state_dir = os.path.abspath(state_dir)
        self.inst_dir = os.path.join(self.state_dir, "instances")
        os.makedirs(self.inst_dir, mode=0o700, exist_ok=True)
        self.scope = scope
        self.lock = threading.RLock()
        self.handles = {}  # handle -> callable compensation
        self.handle_seq = 0
        self.listeners = {}  # (host, port, token) -> socket
        self.exec_kill = {}  # request id -> callable
        self._root_image = None
        self.created = set()  # instance ids this process provisioned (conformance/close)

    # ---- envelope
    def capabilities(self):
        return {
            "placement": "runner",
            "tiers": ["container"],
            "platforms": [{"os": "linux", "architecture": host_arch()}],
            "image_mode": "profile",
            "package_managers": [],
            "network_modes": ["none"],
            "retention_modes": ["ephemeral_zdr"],
            "snapshots": False,
            "snapshot_clone": False,
            "snapshot_custody": "runner",
            "list_dir": True,
            "physically_contained_file_read": True,
            "active_mount_write": False,
            "egress_certification": "unsupported",
            "enforcement": {
                "filesystem": "provider_enforced",
                "process": "provider_enforced",
                "network": "provider_enforced",
                "memory": "provider_enforced",
                "cpu": "provider_enforced",
                "pids": "provider_enforced",
                "disk": "not_enforced",
                "duration": "provider_enforced",
                "privilege": "provider_enforced",
            },
            "max_mounts": 64,
            "provider_revision": PROVIDER_REVISION,
            "materialization_revision": MATERIALIZATION_REVISION,
        }

    MEMBERS = ["read_files", "list_dir", "list_project_dir"]
    TOKENS = ["filesystem", "process", "network-none", "zdr", "cleanup"]

    # ---- root image
    def root_image(self):
        """The pinned reference name@sha256:<image id> of the local root image."""
        if self._root_image:
            return self._root_image
        arg = self.root_image_arg
        if not arg:
            # fall back to the local fixture `checkfu sandbox fixture` builds (it is
            # labelled checkfu.sandbox.fixture=true); never a registry
            p = docker("images", "--no-trunc", "--filter", "label=checkfu.sandbox.fixture=true",
                       "--format", "{{.ID}} {{.Repository}}", check=False)
            rows = [l.split() for l in p.stdout.decode().splitlines() if l.strip()]
            if not rows:
                raise RuntimeError("no root image: pass --root-image, set CHECKFU_ROOT_IMAGE, "
                                   "or build the fixture with `checkfu sandbox fixture`")
            image_id, repo = rows[0][0], (rows[0][1:] or ["checkfu-fixture"])[0]
            arg = "%s@%s" % (repo if repo != "<none>" else "checkfu-fixture", image_id)
        ref = arg.split("@", 1)[1] if "@" in arg else arg
        p = docker("image", "inspect", "--format", "{{.Id}} {{json .RepoTags}}", ref, check=False)
        if p.returncode != 0:
            raise RuntimeError("root image %r is not a local image" % arg)
        image_id, tags = p.stdout.decode().strip().split(" ", 1)
        if "@" in arg:
            name = arg.split("@", 1)[0]
        else:
            tags = json.loads(tags) or []
            name = tags[0].rsplit(":", 1)[0] if tags else "checkfu-fixture"
        self._root_image = "%s@%s" % (name, image_id)
        return self._root_image

    # ---- records
    def rec_path(self, iid):
        if not re.fullmatch(r"py-[0-9a-f]{24}", iid or ""):
            return None
        return os.path.join(self.inst_dir, iid)

    def load(self, iid, operation=None):
        d = self.rec_path(iid)
        try:
            with open(os.path.join(d, "record.json")) as f:
                return json.load(f)
        except (TypeError, FileNotFoundError, NotADirectoryError):
            raise not_found(iid)

    def save(self, rec):
        d = self.rec_path(rec["instance_id"])
        tmp = os.path.join(d, ".record.%s.tmp" % secrets.token_hex(4))
        with open(tmp, "w") as f:
            json.dump(rec, f)
        os.replace(tmp, os.path.join(d, "record.json"))

    def instance_value(self, rec, state):
        req = rec["request"]
        return {
            "instance_id": rec["instance_id"],
            "provider": req["provider"],
            "placement": req["placement"],
            "state": state,
            "workspace_id": req["workspace_id"],
            "session_id": req["session_id"],
            "run_id": req["run_id"],
            "attempt_id": req["attempt_id"],
            "lease_id": req["lease_id"],
            "lease_epoch": req["lease_epoch"],
            "target": req["target"],
            "profile": req["profile"],
            "platform": req["platform"],
            "root_image": req["root_image"],
            "mounts": req["mounts"],
            "output_path": OUTPUT_PATH,
            "expires_at": req["expires_at"],
            "materialization": {
                "profile_digest": req["profile"]["profile_digest"],
                "image_reference": req["root_image"],
                "image_digest": req["root_image"].split("@", 1)[1],
                "provider_revision": PROVIDER_REVISION,
                "materialization_revision": MATERIALIZATION_REVISION,
            },
        }

    def new_handle(self, compensation):
        with self.lock:
            self.handle_seq += 1
            h = "rb-%d-%s" % (self.handle_seq, secrets.token_hex(4))
            self.handles[h] = compensation
            return h

    # ---- provision
    def provision(self, req):
        caps = self.capabilities()
        if req["target"] not in caps["tiers"]:
            raise unavailable("tier", "asked %s, offered container" % req["target"])
        if req["platform"] not in caps["platforms"]:
            raise unavailable("platform", "asked %s" % json.dumps(req["platform"]))
        if req["placement"] != caps["placement"]:
            raise unavailable("tier", "placement %s, offered runner" % req["placement"])
        prof = req["profile"]
        if not isinstance(prof, dict) or not isinstance(prof.get("network_policy"), dict):
            raise RpcError(-32602, "profile: not an object")
        if prof["network_policy"].get("mode") != "none":
            raise unavailable("network_policy", "asked %s, offered none"
                              % prof["network_policy"].get("mode"))
        if prof.get("retention") != "ephemeral_zdr":
            raise unavailable("retention", "asked %s, offered ephemeral_zdr" % prof.get("retention"))
        if prof.get("packages"):
            raise unavailable("packages", "no package managers are offered")
        res = prof.get("resources") or {}
        if res.get("disk_bytes") is not None:
            raise unavailable("resources", "disk limits are not enforced by this provider")
        if not IMAGE_RE.match(req["root_image"]):
            raise RpcError(-32602, "root_image: not name@sha256:<hex>")
        digest = req["root_image"].split("@", 1)[1]
        p = docker("image", "inspect", "--format", "{{.Id}}", digest, check=False)
        if p.returncode != 0 or p.stdout.decode().strip() != digest:
            raise unavailable("base_image", "%s is not a local image" % req["root_image"])
        mounts = req["mounts"]
        if len(mounts) > caps["max_mounts"]:
            raise unavailable("mounts", "%d mounts, at most %d" % (len(mounts), caps["max_mounts"]))
        for m in mounts:
            check_members(m, {"path", "access"}, set(), "mounts[]")

        iid = "py-" + secrets.token_hex(12)
        final = os.path.join(self.inst_dir, iid)
        tmp = os.path.join(self.inst_dir, ".tmp-" + iid)
        try:
            os.mkdir(tmp, 0o711)
            out = os.path.join(tmp, "outputs")
            os.mkdir(out, 0o755)
            os.chown(out, WORKLOAD_UID, WORKLOAD_GID)
            mrec = []
            for i, m in enumerate(mounts):
                host = "m%d" % i
                hd = os.path.join(tmp, host)
                os.mkdir(hd, 0o755)
                if m["access"] == "read_write":
                    os.chown(hd, WORKLOAD_UID, WORKLOAD_GID)
                mrec.append({"path": m["path"], "access": m["access"], "host": host})
            # mount points of nested mounts exist in their parent mount
            for m in mrec:
                parent = self.owner_mount(mrec, m["path"], strict=True)
                if parent:
                    rel = contained.components(m["path"])[len(contained.components(parent["path"])):]
                    rw = parent["access"] == "read_write"
                    contained.mkdirs(os.path.join(tmp, parent["host"]), rel,
                                     WORKLOAD_UID if rw else None, WORKLOAD_GID if rw else None)
            rec = {"instance_id": iid, "scope": self.scope, "state": "provisioning",
                   "created_at": now_ts(), "expires_at": req["expires_at"],
                   "container": None, "mounts": mrec, "request": req}
            with open(os.path.join(tmp, "record.json"), "w") as f:
                json.dump(rec, f)
            os.rename(tmp, final)
            self.created.add(iid)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        value = self.instance_value(rec, "provisioning")
        return {"value": value, "rollback_handle": self.new_handle(lambda: self.destroy_id(iid))}

    @staticmethod
    def owner_mount(mrec, path, strict=False):
        """The deepest declared mount containing path (component-wise)."""
        pc = contained.components(path)
        best = None
        for m in mrec:
            mc = contained.components(m["path"])
            if len(mc) <= len(pc) and pc[:len(mc)] == mc and not (strict and len(mc) == len(pc)):
                if best is None or len(mc) > len(contained.components(best["path"])):
                    best = m
        return best

    def host_of(self, rec, m):
        return os.path.join(self.rec_path(rec["instance_id"]), m["host"])

    # ---- writeFile
    def write_file(self, p):
        data = b64decode(p["content_base64"], "content_base64")
        # Optional kind (WriteFileRequest.kind): "file" (absent) or
        # "directory", whose content is empty.
        kind = p.get("kind") or "file"
        if kind not in ("file", "directory"):
            raise op_failed("write_file", "invalid_request", "unknown kind",
                            "kind", "file or directory", json.dumps(kind))
        # Optional permission bits (WriteFileRequest.mode, 0..=0o777);
        # absent means 0o644 for a file, 0o755 for a directory. Applied
        # exactly, without the umask.
        mode = p.get("mode")
        if mode is None:
            mode = 0o755 if kind == "directory" else 0o644
        if isinstance(mode, bool) or not isinstance(mode, int) or not 0 <= mode <= 0o777:
            raise op_failed("write_file", "invalid_request", "mode must be 0..=511",
                            "mode", "permission bits of at most 0o777",
                            "0o%o" % mode if type(mode) is int and mode >= 0
                            else json.dumps(mode))
        if kind == "directory" and data:
            raise op_failed("write_file", "invalid_request", "a directory has no content",
                            "content_base64", "empty content for kind directory",
                            "%d bytes" % len(data))
        rec = self.load(p["instance_id"])
        path = wire_path(p["path"], "path")
        if len(data) > FILE_BOUND:
            raise SandboxError({"_tag": "SandboxFileTooLarge", "path": shown(path),
                                "limit_bytes": FILE_BOUND, "actual_bytes": len(data)})
        pc = contained.components(path)
        oc = contained.components(OUTPUT_PATH)
        if pc[:len(oc)] == oc and len(pc) > len(oc):
            host, rel, rw = os.path.join(self.rec_path(rec["instance_id"]), "outputs"), pc[len(oc):], True
        else:
            m = self.owner_mount(rec["mounts"], path)
            if m is None:
                raise op_failed("write_file", "path_not_admitted",
                                "%s is outside every mount and the output tree" % shown(path))
            if m["path"] == path:
                raise op_failed("write_file", "invalid_request", "%s is a mount root" % path,
                                "path", "a normalized file path below its root", path)
            if rec["state"] != "provisioning":
                raise conflict("write_file", "provisioning", rec["state"])
            host, rel = self.host_of(rec, m), pc[len(contained.components(m["path"])):]
            rw = m["access"] == "read_write"
        try:
            if kind == "directory":
                contained.make_dir(host, rel, WORKLOAD_UID if rw else None,
                                   WORKLOAD_GID if rw else None, mode)
            else:
                contained.write_file(host, rel, data, WORKLOAD_UID if rw else None,
                                     WORKLOAD_GID if rw else None, mode)
        except contained.Refused as r:
            raise op_failed("write_file", "path_not_admitted" if r.reason == "outside_root"
                            else r.reason, "cannot write %s" % shown(path))
        return None

    # ---- activate
    def activate(self, p):
        iid = p["instance_id"]
        with self.lock:
            rec = self.load(iid)
            if rec["state"] != "provisioning":
                raise conflict("activate", "provisioning", rec["state"])
            req = rec["request"]
            name = "cfpy-" + iid
            d = self.rec_path(iid)
            args = ["create", "--pull", "never", "--name", name,
                    "--network", "none", "--cap-drop", "ALL",
                    "--security-opt", "no-new-privileges",
                    "--user", "%d:%d" % (WORKLOAD_UID, WORKLOAD_GID),
                    "--hostname", "sandbox", "--workdir", "/",
                    "--label", "%s.scope=%s" % (LABEL, self.scope),
                    "--label", "%s.instance=%s" % (LABEL, iid),
                    "--label", "%s.created_at=%s" % (LABEL, rec["created_at"]),
                    "--label", "%s.expires_at=%s" % (LABEL, rec["expires_at"]),
                    "--label", "%s.session=%s" % (LABEL, req["session_id"]),
                    "--mount", "type=bind,src=%s,dst=%s" % (os.path.join(d, "outputs"), OUTPUT_PATH)]
            for m in sorted(rec["mounts"], key=lambda m: len(contained.components(m["path"]))):
                spec = "type=bind,src=%s,dst=%s" % (self.host_of(rec, m), m["path"])
                if m["access"] == "read_only":
                    spec += ",readonly"
                args += ["--mount", spec]
            res = req["profile"].get("resources") or {}
            if res.get("memory_bytes") is not None:
                args += ["--memory", str(res["memory_bytes"])]
            if res.get("cpu_millis") is not None:
                args += ["--cpus", "%.3f" % (res["cpu_millis"] / 1000)]
            args += ["--pids-limit", str(res["pids"]) if res.get("pids") is not None else "4096"]
            args += [req["root_image"].split("@", 1)[1], "sleep", "2147483647"]
            try:
                docker(*args)
                docker("start", name)
            except BaseException:
                docker("rm", "-f", name, check=False)
                raise
            rec["state"] = "active"
            rec["container"] = name
            self.save(rec)
        value = self.instance_value(rec, "active")
        return {"value": value, "rollback_handle": self.new_handle(lambda: self.deactivate(iid))}

    def deactivate(self, iid):
        """activate's compensation: remove the container, back to provisioning."""
        with self.lock:
            try:
                rec = self.load(iid)
            except SandboxError:
                return
            docker("rm", "-f", "cfpy-" + iid, check=False)
            if rec["state"] == "active":
                rec["state"] = "provisioning"
                rec["container"] = None
                self.save(rec)

    def active(self, iid, operation):
        rec = self.load(iid)
        if rec["state"] != "active":
            raise conflict(operation, "active", rec["state"])
        return rec

    # ---- execute
    def execute(self, p, rid):
        cmd = p["command"]
        check_members(cmd, *COMMAND_KEYS, "command")
        rec = self.active(p["instance_id"], "execute")
        limit = cmd["output_limit_bytes"]
        args = cmd.get("arguments") or []
        env = cmd.get("environment") or {}
        for k in env:
            if not ENV_KEY_RE.match(k):
                raise op_failed("execute", "invalid_request", "", "command.environment",
                                "a key matching ^[A-Za-z_][A-Za-z0-9_]*$", k)
        stdin = None
        if cmd.get("stdin_base64") is not None:
            stdin = b64decode(cmd["stdin_base64"], "command.stdin_base64")
        argv = ["docker", "exec"]
        if stdin is not None:
            argv.append("-i")
        argv += ["-w", cmd["working_directory"]]
        for k, v in env.items():
            argv += ["-e", "%s=%s" % (k, v)]
        argv += [rec["container"], cmd["executable"], *args]
        started = now_ts()
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        bufs = {"stdout": bytearray(), "stderr": bytearray()}
        overflow = []
        killed = threading.Event()

        def kill_workload():
            if killed.is_set():
                return
            killed.set()
            self.kill_workload(rec["container"])

        self.exec_kill[rid] = kill_workload

        def drain(stream, name):
            while True:
                b = stream.read1(65536) if hasattr(stream, "read1") else stream.read(65536)
                if not b:
                    break
                buf = bufs[name]
                if len(buf) <= limit:
                    buf += b
                if len(buf) > limit and not overflow:
                    overflow.append(name)
                    kill_workload()

        def feed():
            try:
                proc.stdin.write(stdin)
            except (BrokenPipeError, OSError):
                pass
            finally:
                try:
                    proc.stdin.close()
                except OSError:
                    pass

        threads = [threading.Thread(target=drain, args=(proc.stdout, "stdout"), daemon=True),
                   threading.Thread(target=drain, args=(proc.stderr, "stderr"), daemon=True)]
        if stdin is not None:
            threads.append(threading.Thread(target=feed, daemon=True))
        for t in threads:
            t.start()
        timed_out = False
        try:
            proc.wait(timeout=cmd["timeout_seconds"])
        except subprocess.TimeoutExpired:
            timed_out = not overflow
            kill_workload()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for t in threads:
            t.join(timeout=15)
        self.exec_kill.pop(rid, None)
        finished = now_ts()
        if overflow:
            raise SandboxError({"_tag": "SandboxOutputLimitExceeded", "stream": overflow[0],
                                "limit_bytes": limit})
        if timed_out:
            exit_ = {"timed_out": True}
        elif killed.is_set():
            # Only a cancelled request is killed, and its reply is never sent
            # (reply() drops it); the reason is the closed provider_error.
            raise op_failed("execute", "provider_error", "the command was cancelled")
        else:
            rc = proc.returncode
            if rc < 0:  # the docker client itself died of a signal
                raise op_failed("execute", "provider_error", "docker exec died of signal %d" % -rc)
            if rc != 0 and bytes(bufs["stderr"]).startswith(b"Error response from daemon"):
                # the daemon refused the exec (container gone or stopped): not the workload's status
                raise op_failed("execute", "provider_error",
                                bytes(bufs["stderr"]).decode(errors="replace").strip()[:500])
            exit_ = {"exit_code": rc}
        return {"exit": exit_, "stdout_base64": b64(bytes(bufs["stdout"])),
                "stderr_base64": b64(bytes(bufs["stderr"])),
                "started_at": started, "finished_at": max(finished, started)}

    def kill_workload(self, container):
        """Kill every process of the workload in the container except its
        init (the Engine API cannot kill one exec): host PIDs from docker top."""
        p = docker("inspect", "--format", "{{.State.Pid}}", container, check=False)
        init = p.stdout.decode().strip()
        p = docker("top", container, "-eo", "pid", check=False)
        for line in p.stdout.decode().splitlines()[1:]:
            pid = line.strip()
            if pid.isdigit() and pid != init:
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except ProcessLookupError:
                    pass

    # ---- reads
    def read_root(self, rec, allowed_root, operation):
        """The host root for allowed_root (a mount root or the output tree),
        with the nested mounts below it."""
        base = self.rec_path(rec["instance_id"])
        roots = [{"path": OUTPUT_PATH, "host": "outputs"}] + rec["mounts"]
        chosen = None
        for m in roots:
            if contained.components(m["path"]) == contained.components(allowed_root):
                chosen = m
        if chosen is None:
            raise op_failed(operation, "path_not_admitted",
                            "%s is not a mount root or the output tree" % allowed_root)
        rc = contained.components(chosen["path"])
        nested = {}
        for m in roots:
            mc = contained.components(m["path"])
            if len(mc) > len(rc) and mc[:len(rc)] == rc:
                nested[tuple(mc[len(rc):])] = os.path.join(base, m["host"])
        return contained.Root(os.path.join(base, chosen["host"]), nested), rc

    @staticmethod
    def relative(path, rc):
        pc = contained.components(path)
        if pc[:len(rc)] != rc:
            return None
        return pc[len(rc):]

    def read_file(self, p):
        rec = self.active(p["instance_id"], "read_file")
        if p["maximum_bytes"] > FILE_BOUND:
            raise op_failed("read_file", "invalid_request", "", "maximum_bytes",
                            "at most %d" % FILE_BOUND, str(p["maximum_bytes"]))
        root, rc = self.read_root(rec, p["allowed_root"], "read_file")
        path = wire_path(p["path"], "path")
        rel = self.relative(path, rc)
        if rel is None:
            raise op_failed("read_file", "outside_root", "%s is not under %s"
                            % (shown(path), p["allowed_root"]))
        try:
            data = contained.read_file(root, rel, p["maximum_bytes"])
        except contained.Refused as r:
            if r.reason == "too_large":
                raise SandboxError({"_tag": "SandboxFileTooLarge", "path": shown(path),
                                    "limit_bytes": p["maximum_bytes"], "actual_bytes": r.size})
            raise op_failed("read_file", r.reason, shown(path))
        return {"path": path_wire(path), "content_base64": b64(data)}

    def read_files(self, p):
        rec = self.active(p["instance_id"], "read_files")
        files = p["files"]
        total = 0
        for f in files:
            check_members(f, {"path", "maximum_bytes"}, set(), "files[]")
            total += f["maximum_bytes"]
        if total != p["aggregate_maximum_bytes"] or len(files) > 1024 or total > 128 * 1024 * 1024:
            raise op_failed("read_files", "invalid_request", "", "aggregate_maximum_bytes",
                            str(total), str(p["aggregate_maximum_bytes"]))
        root, rc = self.read_root(rec, p["allowed_root"], "read_files")
        out = []
        paths = [wire_path(f["path"], "files[].path") for f in files]
        for f, path in zip(files, paths):
            rel = self.relative(path, rc)
            try:
                if rel is None:
                    raise contained.Refused("outside_root")
                data = contained.read_file(root, rel, f["maximum_bytes"])
                out.append({"outcome": "read", "path": path_wire(path),
                            "content_base64": b64(data)})
            except contained.Refused as r:
                o = {"outcome": r.reason, "path": path_wire(path)}
                if r.reason == "too_large":
                    o["size_bytes"] = r.size
                out.append(o)
        return {"files": out}

    def _listing(self, p, operation, project):
        rec = self.active(p["instance_id"], operation)
        if p["max_entries"] > 100_000:
            raise op_failed(operation, "invalid_request", "", "max_entries", "at most 100000",
                            str(p["max_entries"]))
        root, rc = self.read_root(rec, p["root"], operation)
        entries = []
        prefix = "/" + "/".join(rc) if rc else ""

        def visit(crel, dfd, name, st):
            path = prefix + "/" + "/".join(crel)
            kind = contained.kind_of(st)
            if kind == "regular":
                # listDir never reads a body over 16 MiB, which no member can
                # return (its sha256 is then absent); listProjectDir's is required.
                h = contained.hash_leaf(dfd, name, None if project else FILE_BOUND)
                if h is None:
                    if project:
                        entries.append({"path": path_wire(path), "kind": "other"})
                    return
                e = {"path": path_wire(path), "size_bytes": h[0]}
                if h[1] is not None:
                    e["sha256"] = h[1]
                if project:
                    e["kind"] = "regular"
                elif st.st_mode & 0o777 != 0o644:
                    # listDir's optional mode: absent means 0o644.
                    e["mode"] = st.st_mode & 0o777
                entries.append(e)
            elif project:
                e = {"path": path_wire(path), "kind": kind}
                if kind == "symlink":
                    e["target"] = path_wire(os.readlink(name, dir_fd=dfd))
                entries.append(e)

        try:
            ok = contained.walk(root, [], visit, p["max_entries"])
        except contained.Refused as r:
            raise op_failed(operation, r.reason, p["root"])
        if not ok:
            raise op_failed(operation, "invalid_request", "more entries than max_entries",
                            "max_entries", "at least the number of entries", str(p["max_entries"]))
        if project:
            return {"entries": entries, "complete": True}
        return {"entries": entries}

    # ---- release / destroy / snapshots
    def release(self, p):
        iid = p["instance_id"]
        with self.lock:
            rec = self.active(iid, "release")
            if rec["request"]["profile"]["retention"] != "ephemeral_zdr":
                raise unavailable("retention", "durable release is not offered")
            self.destroy_id(iid)
        # nothing is left to compensate: ZDR destruction is final
        return {"value": {"disposition": "destroyed"},
                "rollback_handle": self.new_handle(lambda: None)}

    def destroy_id(self, iid):
        d = self.rec_path(iid)
        if d is None:
            return
        with self.lock:
            docker("rm", "-f", "-v", "cfpy-" + iid, check=False)
            p = docker("ps", "-aq", "--filter", "label=%s.instance=%s" % (LABEL, iid), check=False)
            for cid in p.stdout.decode().split():
                docker("rm", "-f", "-v", cid, check=False)
            shutil.rmtree(d, ignore_errors=True)
            shutil.rmtree(os.path.join(self.inst_dir, ".tmp-" + iid), ignore_errors=True)
            if os.path.exists(d):
                raise op_failed("destroy", "provider_error", "could not remove %s" % d)

    def snapshot(self, p):
        rec = self.active(p["instance_id"], "snapshot")
        retention = rec["request"]["profile"]["retention"]
        raise SandboxError({"_tag": "SandboxSnapshotForbidden", "instance_id": p["instance_id"],
                            "retention": retention})

    # ---- cleanup
    def cleanup(self, p):
        now, cutoff = p["now"], p["orphaned_before"]
        swept = []
        # timestamps are canonical fixed-width UTC, so they order as strings
        seen = set()
        for name in sorted(os.listdir(self.inst_dir)):
            if name.startswith(".tmp-"):
                # a provision that crashed before publishing: no id was handed out
                full = os.path.join(self.inst_dir, name)
                if time.time() - os.stat(full).st_mtime > 3600:
                    shutil.rmtree(full, ignore_errors=True)
                continue
            try:
                rec = self.load(name)
            except SandboxError:
                continue
            seen.add(name)
            if rec["created_at"] < cutoff or rec["expires_at"] <= now:
                self.destroy_id(name)
                swept.append(name)
        # containers whose record is gone (Docker's own state)
        fmt = '{{.Label "%s.instance"}} {{.Label "%s.created_at"}} {{.Label "%s.expires_at"}}' % (
            LABEL, LABEL, LABEL)
        ps = docker("ps", "-a", "--filter", "label=%s.scope=%s" % (LABEL, self.scope),
                    "--format", fmt, check=False)
        for line in ps.stdout.decode().splitlines():
            parts = line.split()
            if len(parts) != 3 or parts[0] in seen:
                continue
            iid, created, expires = parts
            if created < cutoff or expires <= now:
                self.destroy_id(iid)
                if iid not in swept:
                    swept.append(iid)
        return {"instances": swept, "snapshots": []}

    def live_objects(self):
        ids = set()
        for name in os.listdir(self.inst_dir):
            if not name.startswith(".") and os.path.exists(os.path.join(self.inst_dir, name, "record.json")):
                ids.add(name)
        ps = docker("ps", "-a", "--filter", "label=%s.scope=%s" % (LABEL, self.scope),
                    "--format", '{{.Label "%s.instance"}}' % LABEL, check=False)
        ids.update(x for x in ps.stdout.decode().split() if x)
        return {"instances": sorted(ids), "snapshots": []}

    # ---- conformance hooks
    def close(self):
        """conformance/close: everything this provider process created is gone
        (instances it provisioned, listeners, probe containers). Idempotent."""
        for key in list(self.listeners):
            self.stop_listener({"host": key[0], "port": key[1], "token": key[2]})
        for iid in sorted(self.created):
            self.destroy_id(iid)
        ps = docker("ps", "-aq", "--filter", "label=%s.probe=1" % LABEL,
                    "--filter", "label=%s.scope=%s" % (LABEL, self.scope), check=False)
        for cid in ps.stdout.decode().split():
            docker("rm", "-f", cid, check=False)
        return None

    def describe(self):
        return {"name": "python-docker (examples/python-provider)",
                "declared_tokens": self.TOKENS, "root_image": self.root_image(),
                "tier": "container", "platform": {"os": "linux", "architecture": host_arch()},
                "clock_now": now_ts(), "manual_clock": False}

    def bridge_gateway(self):
        p = docker("network", "inspect", "bridge", "--format",
                   "{{range .IPAM.Config}}{{.Gateway}} {{.Subnet}} {{end}}", check=False)
        for item in p.stdout.decode().split():
            if "/" not in item and item.count(".") == 3:
                return item
        for item in p.stdout.decode().split():
            if "/" in item:
                net = item.split("/")[0].split(".")
                return ".".join(net[:3] + [str(int(net[3]) + 1)])
        return "172.17.0.1"

    def start_listener(self):
        host = self.bridge_gateway()
        token = secrets.token_hex(16)
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((host, 0))
        s.listen(16)
        port = s.getsockname()[1]

        def serve():
            while True:
                try:
                    c, _ = s.accept()
                except OSError:
                    return
                try:
                    c.sendall(token.encode())
                finally:
                    c.close()

        threading.Thread(target=serve, daemon=True).start()
        self.listeners[(host, port, token)] = s
        return {"host": host, "port": port, "token": token}

    def stop_listener(self, p):
        s = self.listeners.pop((p["host"], p["port"], p["token"]), None)
        if s:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()
        return None

    def control_probe(self, p):
        """Dial the listener from a container on Docker's default bridge: the
        same image, the same daemon, only the network differs from a sandbox."""
        name = "cfpy-probe-" + secrets.token_hex(6)
        try:
            r = docker("run", "--rm", "--pull", "never", "--name", name, "--network", "bridge",
                       "--cap-drop", "ALL", "--user", "%d:%d" % (WORKLOAD_UID, WORKLOAD_GID),
                       "--label", "%s.scope=%s" % (LABEL, self.scope), "--label", "%s.probe=1" % LABEL,
                       self.root_image().split("@", 1)[1], "nc", "-w", "5", p["host"], str(p["port"]),
                       check=False, timeout=60, input=b"")
        finally:
            docker("rm", "-f", name, check=False)
        if r.returncode != 0 and not r.stdout:
            raise RpcError(HOOK_FAILURE, "control probe failed", {"message": "control probe failed: %s"
                                                            % r.stderr.decode(errors="replace")})
        return {"data_base64": b64(r.stdout)}


# ---------------------------------------------------------------- server

ALLOCATING = {"sandbox/provision", "sandbox/activate", "sandbox/snapshot",
              "sandbox/cloneSnapshot", "sandbox/release", "sandbox/resume"}


class Server:
    def __init__(self, provider):
        self.p = provider
        self.out = sys.stdout.buffer
        self.out_lock = threading.Lock()
        self.initialized = False
        self.cancelled = set()
        self.pending = set()
        self.plock = threading.Lock()
        self.threads = []

    def send(self, msg):
        msg = scrub(msg)
        line = json.dumps(msg, separators=(",", ":"), ensure_ascii=False).encode("utf-8") + b"\n"
        if len(line) - 1 > MAX_LINE:
            log("refusing to send a line over the bound")
            msg = {"jsonrpc": "2.0", "id": msg.get("id"),
                   "error": {"code": -32000, "message": "result over the line bound",
                             "data": {"_tag": "SandboxOperationFailed", "operation": "wire",
                                      "reason": "provider_error", "message": "line bound"}}}
            line = json.dumps(msg).encode() + b"\n"
        with self.out_lock:
            self.out.write(line)
            self.out.flush()

    def reply(self, rid, result=None, error=None):
        with self.plock:
            self.pending.discard(rid)
            if rid in self.cancelled:
                self.cancelled.discard(rid)
                return
        if error is not None:
            self.send({"jsonrpc": "2.0", "id": rid, "error": error})
        else:
            self.send({"jsonrpc": "2.0", "id": rid, "result": result})

    def run(self):
        inp = sys.stdin.buffer
        while True:
            line = inp.readline(MAX_LINE + 2)
            if not line:
                break
            if len(line) > MAX_LINE + 1 or (len(line) == MAX_LINE + 1 and not line.endswith(b"\n")):
                log("a line over the bound of %d bytes: closing" % MAX_LINE)
                break
            line = line.rstrip(b"\n")
            if not line.strip():
                continue
            try:
                msg = json.loads(line)
            except ValueError:
                log("a line that is not JSON: closing")
                break
            if not isinstance(msg, dict) or msg.get("jsonrpc") != "2.0" or "method" not in msg:
                log("not a JSON-RPC request or notification: closing")
                break
            if set(msg) - {"jsonrpc", "id", "method", "params"}:
                rid = msg.get("id")
                if isinstance(rid, int):
                    self.send({"jsonrpc": "2.0", "id": rid,
                               "error": {"code": -32600, "message": "unknown member in message"}})
                continue
            self.dispatch(msg)
        # the connection ended: no reply can reach the runner any more, so every
        # call in flight is treated as cancelled (an allocating one finishes and is
        # rolled back here: the runner cannot own a value it never received); then
        # the handles already answered are dropped unrun; objects stay for cleanup
        with self.plock:
            self.cancelled |= self.pending
        deadline = time.time() + 150
        for t in self.threads:
            t.join(timeout=max(0.0, deadline - time.time()))
        for s in list(self.p.listeners.values()):
            s.close()

    def dispatch(self, msg):
        method, params = msg["method"], msg.get("params")
        if "id" not in msg:
            self.notification(method, params)
            return
        rid = msg["id"]
        if not isinstance(rid, int) or isinstance(rid, bool) or rid < 0:
            log("bad request id %r: closing" % (rid,))
            sys.exit(1)
        if method == "initialize":
            self.initialize(rid, params)
            return
        if not self.initialized:
            self.send({"jsonrpc": "2.0", "id": rid,
                       "error": {"code": -32002, "message": "initialize first"}})
            return
        with self.plock:
            self.pending.add(rid)
        t = threading.Thread(target=self.handle, args=(rid, method, params), daemon=True)
        self.threads = [x for x in self.threads if x.is_alive()] + [t]
        t.start()

    def notification(self, method, params):
        if method == "sandbox/commit":
            if isinstance(params, dict):
                with self.p.lock:
                    self.p.handles.pop(params.get("handle"), None)
        elif method == "$/cancel":
            rid = params.get("id") if isinstance(params, dict) else None
            with self.plock:
                if rid in self.pending:
                    self.cancelled.add(rid)
            kill = self.p.exec_kill.get(rid)
            if kill:
                threading.Thread(target=kill, daemon=True).start()
        # process/* notifications: openProcess is not offered; ignore

    def initialize(self, rid, params):
        if not isinstance(params, dict):
            self.send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32602, "message": "params"}})
            return
        for field, mine in (("contract_revision", CONTRACT), ("wire_revision", WIRE)):
            if params.get(field) != mine:
                self.send({"jsonrpc": "2.0", "id": rid, "error": {
                    "code": -32001, "message": "revision mismatch",
                    "data": {"field": field, "expected": mine, "actual": params.get(field)}}})
                return
        self.initialized = True
        self.send({"jsonrpc": "2.0", "id": rid, "result": {
            "contract_revision": CONTRACT, "wire_revision": WIRE,
            "provider_id": PROVIDER_ID, "provider_name": "Python Docker provider (example)",
            "capabilities": self.p.capabilities(), "members": Provider.MEMBERS,
            "conformance": True,
            "limits": {"max_line_bytes": MAX_LINE, "stdin_credit_bytes": 0,
                       "replay_window_bytes": 0, "stream_chunk_bytes": 65536,
                       "resume_window_ms": 0}}})

    def handle(self, rid, method, params):
        p = self.p
        try:
            if method in NULL_PARAMS:
                # PROTOCOL.md says `null`; an absent or empty-object params is
                # accepted too (the reference server accepts `{}`)
                if params not in (None, {}):
                    raise RpcError(-32602, "params must be null")
            elif method in PARAMS:
                check_members(params, *PARAMS[method], method)
            table = {
                "sandbox/capabilities": lambda: p.capabilities(),
                "sandbox/provision": lambda: p.provision(params),
                "sandbox/writeFile": lambda: p.write_file(params),
                "sandbox/activate": lambda: p.activate(params),
                "sandbox/execute": lambda: p.execute(params, rid),
                "sandbox/readFile": lambda: p.read_file(params),
                "sandbox/readFiles": lambda: p.read_files(params),
                "sandbox/listDir": lambda: p._listing(params, "list_dir", False),
                "sandbox/listProjectDir": lambda: p._listing(params, "list_project_dir", True),
                "sandbox/snapshot": lambda: p.snapshot(params),
                "sandbox/cloneSnapshot": lambda: (_ for _ in ()).throw(
                    unavailable("snapshot_clone", "snapshots are not offered")),
                "sandbox/resume": lambda: (_ for _ in ()).throw(
                    unavailable("snapshots", "snapshots are not offered")),
                "sandbox/release": lambda: p.release(params),
                "sandbox/destroy": lambda: p.destroy_id(params["instance_id"]),
                "sandbox/destroySnapshot": lambda: None,
                "sandbox/cleanup": lambda: p.cleanup(params),
                "sandbox/rollback": lambda: self.rollback(params["handle"]),
                "conformance/describe": lambda: p.describe(),
                "conformance/startListener": lambda: p.start_listener(),
                "conformance/stopListener": lambda: p.stop_listener(params),
                "conformance/controlProbe": lambda: p.control_probe(params),
                "conformance/liveObjects": lambda: p.live_objects(),
                "conformance/close": lambda: p.close(),
            }
            fn = table.get(method)
            if fn is None:
                raise RpcError(-32601, "method not found: %s" % method)
            result = fn()
            with self.plock:
                was_cancelled = rid in self.cancelled
            if was_cancelled and method in ALLOCATING and isinstance(result, dict):
                # finished after the caller left: unwind it ourselves, exactly once
                comp = None
                with p.lock:
                    comp = p.handles.pop(result.get("rollback_handle"), None)
                if comp:
                    comp()
            self.reply(rid, result)
        except SandboxError as e:
            if method.startswith("conformance/"):
                self.reply(rid, error={"code": HOOK_FAILURE, "message": e.message,
                                       "data": {"message": e.message}})
            else:
                self.reply(rid, error={"code": -32000, "message": e.message, "data": e.data})
        except RpcError as e:
            err = {"code": e.code, "message": e.message}
            if e.data is not None:
                err["data"] = e.data
            self.reply(rid, error=err)
        except Exception as e:  # a defect or a platform failure
            log(traceback.format_exc())
            msg = "%s: %s" % (type(e).__name__, e)
            if method.startswith("conformance/"):
                self.reply(rid, error={"code": HOOK_FAILURE, "message": msg, "data": {"message": msg}})
            else:
                op = re.sub(r"(?<!^)(?=[A-Z])", "_", method.split("/", 1)[1]).lower()
                self.reply(rid, error={"code": -32000, "message": msg, "data": {
                    "_tag": "SandboxOperationFailed", "operation": op,
                    "reason": "provider_error", "message": msg}})

    def rollback(self, handle):
        with self.p.lock:
            comp = self.p.handles.get(handle)
        if comp is None:
            raise op_failed("rollback", "invalid_request", "unknown rollback handle", "handle",
                            "a handle this provider issued and the runner has not committed",
                            handle)
        comp()  # idempotent; kept until sandbox/commit so a retry settles the same way
        return None


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--root-image", default=os.environ.get("CHECKFU_ROOT_IMAGE"),
                    help="the local root image (name@sha256:<id>, an image id, or a local tag); "
                         "env CHECKFU_ROOT_IMAGE")
    ap.add_argument("--state-dir", default=os.environ.get(
        "CHECKFU_PY_STATE_DIR", os.path.join(os.environ.get("XDG_STATE_HOME") or
                                             os.path.expanduser("~/.local/state"),
                                             "checkfu-python-provider")),
                    help="provider-owned host directory; env CHECKFU_PY_STATE_DIR")
    ap.add_argument("--scope", default=os.environ.get("CHECKFU_PY_SCOPE", "default"),
                    help="label scope: cleanup never looks beyond it; env CHECKFU_PY_SCOPE")
    a = ap.parse_args()
    if not re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", a.scope):
        ap.error("--scope: letters, digits, _ . - only")
    state = os.path.join(a.state_dir, a.scope)
    Server(Provider(a.root_image, state, a.scope)).run()


if __name__ == "__main__":
    main()
