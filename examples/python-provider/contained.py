"""Physically contained file access on provider-owned host directories.

Every path is resolved one component at a time from a directory file
descriptor (os.open(name, dir_fd=..., O_NOFOLLOW)), never by comparing path
strings. Symbolic links are read with readlinkat and spliced into the
remaining components: a relative link that stays inside the root is
followed, an absolute link or a `..` that would climb above the root is
refused as `outside_root`. `..` pops a stack of already-open directory
descriptors, so it never reopens a parent by name.

A declared mount nested under the read's root is crossed the way the
container sees it: when the walk reaches the sandbox path of another mount
it continues in that mount's host directory.
"""

import errno
import hashlib
import os
import stat

MAX_LINKS = 40
DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC


class Refused(Exception):
    """A closed read outcome: outside_root, not_found, not_regular_file."""

    def __init__(self, reason, size=None):
        super().__init__(reason)
        self.reason = reason
        self.size = size


def components(path):
    """Components of an absolute normalized sandbox path ('/' -> [])."""
    return [c for c in path.split("/") if c]


class Root:
    """A read root: its host directory plus nested mounts (sandbox path
    components -> host directory) reachable beneath it."""

    def __init__(self, host_dir, nested=None):
        self.host_dir = host_dir
        self.nested = nested or {}  # tuple(relative components) -> host dir


def _open_dir(name, dir_fd):
    return os.open(name, DIR_FLAGS, dir_fd=dir_fd)


def resolve(root, rel, final_kind="file"):
    """Resolve `rel` (list of components relative to the root) and return an
    open descriptor of the leaf. final_kind 'file' opens the leaf without
    following a final symlink out of the root (links are spliced first) and
    requires a regular file; 'dir' requires a directory."""
    stack = []  # list of (fd, relpath tuple)
    try:
        fd = os.open(root.host_dir, DIR_FLAGS)
        stack.append((fd, ()))
        todo = list(rel)
        links = 0
        while todo:
            name = todo.pop(0)
            if name in ("", "."):
                continue
            cur_fd, cur_rel = stack[-1]
            if name == "..":
                if len(stack) == 1:
                    raise Refused("outside_root")
                os.close(stack.pop()[0])
                continue
            child_rel = cur_rel + (name,)
            if child_rel in root.nested:
                # the container sees another mount here
                nfd = os.open(root.nested[child_rel], DIR_FLAGS)
                stack.append((nfd, child_rel))
                continue
            try:
                st = os.stat(name, dir_fd=cur_fd, follow_symlinks=False)
            except FileNotFoundError:
                raise Refused("not_found")
            except NotADirectoryError:
                raise Refused("not_found")
            if stat.S_ISLNK(st.st_mode):
                links += 1
                if links > MAX_LINKS:
                    raise Refused("outside_root")
                target = os.readlink(name, dir_fd=cur_fd)
                if target.startswith("/"):
                    raise Refused("outside_root")
                todo = [c for c in target.split("/")] + todo
                continue
            if todo or final_kind == "dir":
                if not stat.S_ISDIR(st.st_mode):
                    raise Refused("not_found" if todo else "not_regular_file")
                try:
                    nfd = _open_dir(name, cur_fd)
                except OSError as e:
                    if e.errno in (errno.ELOOP, errno.ENOTDIR):
                        raise Refused("outside_root")  # swapped under us
                    if e.errno == errno.ENOENT:
                        raise Refused("not_found")
                    raise
                stack.append((nfd, child_rel))
                continue
            # the leaf, a file
            if not stat.S_ISREG(st.st_mode):
                raise Refused("not_regular_file")
            try:
                ffd = os.open(name, FILE_FLAGS, dir_fd=cur_fd)
            except OSError as e:
                if e.errno == errno.ELOOP:
                    raise Refused("outside_root")  # swapped to a link
                if e.errno == errno.ENOENT:
                    raise Refused("not_found")
                raise
            fst = os.fstat(ffd)
            if not stat.S_ISREG(fst.st_mode):
                os.close(ffd)
                raise Refused("not_regular_file")
            return ffd
        # the path ended at a directory (the root itself, or via links)
        if final_kind == "dir":
            fd, _ = stack.pop()
            return fd
        raise Refused("not_regular_file")
    finally:
        for fd, _ in stack:
            os.close(fd)


def read_file(root, rel, maximum_bytes):
    """Return bytes, or raise Refused (too_large carries the size)."""
    fd = resolve(root, rel, "file")
    try:
        size = os.fstat(fd).st_size
        if size > maximum_bytes:
            raise Refused("too_large", size)
        chunks = []
        total = 0
        while True:
            b = os.read(fd, min(1 << 20, maximum_bytes + 1 - total))
            if not b:
                break
            chunks.append(b)
            total += len(b)
            if total > maximum_bytes:
                raise Refused("too_large", max(total, os.fstat(fd).st_size))
        return b"".join(chunks)
    finally:
        os.close(fd)


def write_file(host_dir, rel, data, uid=None, gid=None, mode=0o644):
    """Create or replace a regular file under host_dir with exactly the
    permission bits `mode`, creating missing directories (0o755), never
    following a link (provision-time staging and the output tree, which the
    workload can also write)."""
    if not rel:
        raise Refused("not_regular_file")
    fds = [os.open(host_dir, DIR_FLAGS)]
    try:
        for name in rel[:-1]:
            if name in ("", ".", ".."):
                raise Refused("outside_root")
            try:
                os.mkdir(name, 0o755, dir_fd=fds[-1])
                if uid is not None:
                    os.chown(name, uid, gid, dir_fd=fds[-1], follow_symlinks=False)
            except FileExistsError:
                pass
            try:
                fds.append(_open_dir(name, fds[-1]))
            except OSError as e:
                if e.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise Refused("outside_root")
                raise
        leaf = rel[-1]
        if leaf in ("", ".", ".."):
            raise Refused("outside_root")
        tmp = ".cfpy-tmp-%s-%s" % (os.getpid(), os.urandom(4).hex())
        ffd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                      0o644, dir_fd=fds[-1])
        try:
            view = memoryview(data)
            while view:
                n = os.write(ffd, view)
                view = view[n:]
            if uid is not None:
                os.fchown(ffd, uid, gid)
            os.fchmod(ffd, mode)
        finally:
            os.close(ffd)
        try:
            st = os.stat(leaf, dir_fd=fds[-1], follow_symlinks=False)
            if stat.S_ISDIR(st.st_mode):
                os.unlink(tmp, dir_fd=fds[-1])
                raise Refused("not_regular_file")
        except FileNotFoundError:
            pass
        # rename replaces a link itself, never writes through it
        os.rename(tmp, leaf, src_dir_fd=fds[-1], dst_dir_fd=fds[-1])
    finally:
        for fd in fds:
            os.close(fd)


def make_dir(host_dir, rel, uid=None, gid=None, mode=0o755):
    """Make rel under host_dir a directory with exactly the permission bits
    `mode` (writeFile with kind "directory"): missing parents are created
    (0o755), a directory already there is kept, a link is never followed
    (outside_root) and a file there is not_regular_file."""
    if not rel:
        raise Refused("not_regular_file")
    fds = [os.open(host_dir, DIR_FLAGS)]
    try:
        for i, name in enumerate(rel):
            if name in ("", ".", ".."):
                raise Refused("outside_root")
            created = False
            try:
                os.mkdir(name, 0o755, dir_fd=fds[-1])
                created = True
            except FileExistsError:
                pass
            try:
                fds.append(_open_dir(name, fds[-1]))
            except OSError as e:
                if e.errno == errno.ELOOP:
                    raise Refused("outside_root")
                if e.errno == errno.ENOTDIR:
                    st = os.stat(name, dir_fd=fds[-1], follow_symlinks=False)
                    if stat.S_ISLNK(st.st_mode) or i < len(rel) - 1:
                        raise Refused("outside_root")
                    raise Refused("not_regular_file")
                raise
            last = i == len(rel) - 1
            if uid is not None and (created or last):
                os.fchown(fds[-1], uid, gid)
            if last:
                os.fchmod(fds[-1], mode)
            elif created:
                os.fchmod(fds[-1], 0o755)
    finally:
        for fd in fds:
            os.close(fd)


def mkdirs(host_dir, rel, uid=None, gid=None):
    """Create directories rel under host_dir (mount points of nested mounts)."""
    fds = [os.open(host_dir, DIR_FLAGS)]
    try:
        for name in rel:
            try:
                os.mkdir(name, 0o755, dir_fd=fds[-1])
                if uid is not None:
                    os.chown(name, uid, gid, dir_fd=fds[-1], follow_symlinks=False)
            except FileExistsError:
                pass
            fds.append(_open_dir(name, fds[-1]))
    finally:
        for fd in fds:
            os.close(fd)


def walk(root, rel, visit, max_entries):
    """Enumerate every leaf under root/rel without following links.
    visit(kind, rel_components, dir_fd, name, st) is called per leaf;
    returns False when max_entries would be exceeded."""
    start = resolve(root, rel, "dir")
    count = [0]

    def rec(dfd, crel):
        try:
            names = sorted(os.listdir(dfd))
        except OSError:
            return True
        for name in names:
            child_rel = crel + (name,)
            if child_rel in root.nested:
                nfd = os.open(root.nested[child_rel], DIR_FLAGS)
                try:
                    if not rec(nfd, child_rel):
                        return False
                finally:
                    os.close(nfd)
                continue
            try:
                st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
            except FileNotFoundError:
                continue
            if stat.S_ISDIR(st.st_mode):
                try:
                    nfd = _open_dir(name, dfd)
                except OSError:
                    continue
                try:
                    if not rec(nfd, child_rel):
                        return False
                finally:
                    os.close(nfd)
                continue
            count[0] += 1
            if count[0] > max_entries:
                return False
            visit(child_rel, dfd, name, st)
        return True

    try:
        return rec(start, tuple(rel))
    finally:
        os.close(start)


def kind_of(st):
    m = st.st_mode
    if stat.S_ISREG(m):
        return "regular"
    if stat.S_ISLNK(m):
        return "symlink"
    if stat.S_ISCHR(m) or stat.S_ISBLK(m):
        return "device"
    if stat.S_ISSOCK(m):
        return "socket"
    if stat.S_ISFIFO(m):
        return "fifo"
    return "other"


def hash_leaf(dfd, name, hash_limit=None):
    """Size and sha256 of a regular file opened by descriptor, or None if it
    changed kind under us. A file over hash_limit bytes (by fstat) is not
    read: (size, None)."""
    try:
        fd = os.open(name, FILE_FLAGS, dir_fd=dfd)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None
        if hash_limit is not None and st.st_size > hash_limit:
            return st.st_size, None
        h = hashlib.sha256()
        size = 0
        while True:
            b = os.read(fd, 1 << 20)
            if not b:
                break
            h.update(b)
            size += len(b)
        return size, "sha256:" + h.hexdigest()
    finally:
        os.close(fd)
