//! The oracle's in-memory filesystem: one per instance, deep-copied into
//! snapshots and clones.
//!
//! Nodes are keyed by their physical absolute path (no symlink in any
//! ancestor of a key). Resolution walks the tree one component at a time
//! and substitutes symlink text as it meets links, the way the kernel does;
//! contained resolution ([`Fs::read_contained`]) additionally starts at the
//! allowed root and refuses any step that would leave it, which is the
//! in-memory analogue of `openat2(RESOLVE_BENEATH)`.

use std::collections::{BTreeMap, VecDeque};

use crate::script::Job;

/// Most bytes one file stores, in bytes (64 MiB): a write that would
/// store more is refused as `No space left on device`. Holes (see
/// [`Fs::set_len`]) store nothing, so a file's apparent size is unbounded.
pub(crate) const MAX_STORED_FILE_BYTES: u64 = 64 * 1024 * 1024;

/// The most symlinks one resolution follows before it is a loop (Linux's
/// `MAXSYMLINKS`).
pub const MAX_LINK_HOPS: usize = 40;

/// A special (non-regular, non-directory) file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SpecialKind {
    /// `/dev/null`: reads are empty, writes vanish.
    NullDevice,
    /// `/dev/zero`: reads are endless zero bytes.
    ZeroDevice,
    /// Any other character or block device.
    Device,
    /// A Unix socket.
    Socket,
    /// A named pipe: a read blocks until a writer appears (never, here).
    Fifo,
    /// A Git submodule (gitlink) marker.
    Submodule,
    /// Anything else.
    Other,
}

/// A node of the in-memory tree.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum FsNode {
    /// A directory; its children are the keys below it.
    Directory,
    /// A regular file and its bytes.
    File(Vec<u8>),
    /// A symbolic link and its target text (relative or absolute).
    Symlink(String),
    /// A special file.
    Special(SpecialKind),
}

/// Why a walk stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WalkError {
    /// A component does not exist.
    NotFound,
    /// A non-final component is not a directory.
    NotDirectory,
    /// More than [`MAX_LINK_HOPS`] links.
    Loop,
    /// A contained walk would leave its root.
    Escape,
}

/// Why a contained read refused (maps to the closed reasons).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReadRefusal {
    /// `outside_root`.
    OutsideRoot,
    /// `not_found`.
    NotFound,
    /// `not_regular_file`.
    NotRegular,
}

/// A path or one component of it, as bytes: a file name is any bytes but
/// `/` and NUL, UTF-8 or not.
pub(crate) type Name = Vec<u8>;

/// A path as text for messages (lossy; never used as a key).
pub(crate) fn text(path: &[u8]) -> String {
    String::from_utf8_lossy(path).into_owned()
}

/// Splits an absolute or relative path into its non-empty components.
pub(crate) fn split(path: impl AsRef<[u8]>) -> Vec<Name> {
    path.as_ref()
        .split(|b| *b == b'/')
        .filter(|c| !c.is_empty())
        .map(<[u8]>::to_vec)
        .collect()
}

/// Joins components into an absolute path (`/` for none).
pub(crate) fn join(components: &[Name]) -> Name {
    if components.is_empty() {
        b"/".to_vec()
    } else {
        let mut s = Vec::new();
        for c in components {
            s.push(b'/');
            s.extend_from_slice(c);
        }
        s
    }
}

/// True when `path` is `root` or below it, comparing whole components.
pub(crate) fn is_within(path: impl AsRef<[u8]>, root: impl AsRef<[u8]>) -> bool {
    let p = split(path);
    let r = split(root);
    p.len() >= r.len() && p[..r.len()] == r[..]
}

/// The parent of an absolute path (`/` for `/`).
pub(crate) fn parent(path: impl AsRef<[u8]>) -> Name {
    let mut c = split(path);
    c.pop();
    join(&c)
}

/// The last component of a path (empty for `/`).
pub(crate) fn basename(path: impl AsRef<[u8]>) -> Name {
    split(path).pop().unwrap_or_default()
}

/// A regular file as a read finds it: its stored bytes and its apparent
/// size (at least as large; the rest reads as zeros, like a hole).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FileView<'a> {
    /// The bytes the tree stores.
    pub(crate) stored: &'a [u8],
    /// The file's size in bytes, holes included.
    pub(crate) size_bytes: u64,
}

impl FileView<'_> {
    /// The whole body, holes as zeros. Callers bound `size_bytes` first.
    pub(crate) fn to_vec(self) -> Vec<u8> {
        let mut bytes = self.stored.to_vec();
        bytes.resize(usize::try_from(self.size_bytes).unwrap_or(usize::MAX), 0);
        bytes
    }
}

/// One instance's tree, and the background jobs writing into it
/// (`crate::probe`'s shell; a snapshot's copy has none).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Fs {
    nodes: BTreeMap<Name, FsNode>,
    /// Permission bits that differ from a node's default (`0o755` for a
    /// directory, `0o644` for anything else).
    modes: BTreeMap<Name, u32>,
    /// Apparent sizes of regular files larger than their stored bytes.
    sizes: BTreeMap<Name, u64>,
    /// Background jobs that outlived the command that started them.
    pub(crate) jobs: Vec<Job>,
}

impl Fs {
    /// A tree holding only `/`.
    pub(crate) fn new() -> Self {
        let mut nodes = BTreeMap::new();
        nodes.insert(b"/".to_vec(), FsNode::Directory);
        Fs {
            nodes,
            ..Fs::default()
        }
    }

    /// A copy of the tree without its jobs: what a snapshot keeps.
    pub(crate) fn without_jobs(&self) -> Fs {
        Fs {
            nodes: self.nodes.clone(),
            modes: self.modes.clone(),
            sizes: self.sizes.clone(),
            jobs: Vec::new(),
        }
    }

    /// The apparent size of the regular file at a physical path that
    /// stores `stored_bytes`.
    pub(crate) fn apparent_size(&self, path: impl AsRef<[u8]>, stored_bytes: usize) -> u64 {
        let stored = stored_bytes as u64;
        self.sizes
            .get(&join(&split(path)))
            .map_or(stored, |s| (*s).max(stored))
    }

    /// Truncates or extends the regular file at a physical path to `len`
    /// bytes; an extension is a hole that stores nothing.
    pub(crate) fn set_len(&mut self, path: impl AsRef<[u8]>, len: u64) {
        let key = join(&split(path));
        if let Some(FsNode::File(bytes)) = self.nodes.get_mut(&key) {
            if len > bytes.len() as u64 {
                self.sizes.insert(key, len);
            } else {
                bytes.truncate(len as usize);
                self.sizes.remove(&key);
            }
        }
    }

    /// Writes `data` at byte `offset` of the regular file at a physical
    /// path, growing it as needed. Zeros past the stored bytes stay a hole.
    ///
    /// # Errors
    /// `No space left on device` when the file would store more than
    /// [`MAX_STORED_FILE_BYTES`].
    pub(crate) fn write_at(
        &mut self,
        path: impl AsRef<[u8]>,
        offset: u64,
        data: &[u8],
    ) -> Result<(), &'static str> {
        if data.iter().all(|b| *b == 0) {
            return self.write_zeros_at(path, offset, data.len() as u64);
        }
        let key = join(&split(path));
        let end = offset.saturating_add(data.len() as u64);
        if end > MAX_STORED_FILE_BYTES {
            return Err("No space left on device");
        }
        let apparent = self.apparent_size(&key, 0);
        if let Some(FsNode::File(bytes)) = self.nodes.get_mut(&key) {
            let (start, end) = (offset as usize, end as usize);
            if bytes.len() < end {
                bytes.resize(end, 0);
            }
            bytes[start..end].copy_from_slice(data);
            if apparent <= bytes.len() as u64 {
                self.sizes.remove(&key);
            }
        }
        Ok(())
    }

    /// Writes `count` zero bytes at byte `offset` of the regular file at a
    /// physical path: within its stored bytes they are stored, past them
    /// they only move its apparent size.
    pub(crate) fn write_zeros_at(
        &mut self,
        path: impl AsRef<[u8]>,
        offset: u64,
        count: u64,
    ) -> Result<(), &'static str> {
        let key = join(&split(path));
        let apparent = self.apparent_size(&key, 0);
        if let Some(FsNode::File(bytes)) = self.nodes.get_mut(&key) {
            let stored = bytes.len() as u64;
            let end = offset.saturating_add(count);
            if offset < stored {
                bytes[offset as usize..end.min(stored) as usize].fill(0);
            }
            let size = apparent.max(stored).max(end);
            if size > stored {
                self.sizes.insert(key, size);
            }
        }
        Ok(())
    }

    /// Appends to the regular file at a physical path (at its apparent
    /// end). Writes to `/dev/null`, and to a file that is gone or no longer
    /// regular, vanish.
    ///
    /// # Errors
    /// As [`Fs::write_at`].
    pub(crate) fn append(
        &mut self,
        path: impl AsRef<[u8]>,
        data: &[u8],
    ) -> Result<(), &'static str> {
        let key = join(&split(path));
        let end = match self.nodes.get(&key) {
            Some(FsNode::File(bytes)) => self.apparent_size(&key, bytes.len()),
            _ => return Ok(()),
        };
        self.write_at(&key, end, data)
    }

    /// The permission bits a node gets when inserted: `0o755` for a
    /// directory, `0o644` for anything else.
    fn default_mode(&self, key: &[u8]) -> u32 {
        match self.nodes.get(key) {
            Some(FsNode::Directory) => 0o755,
            _ => 0o644,
        }
    }

    /// The permission bits of the node at a physical path (its default,
    /// `0o755` for a directory and `0o644` otherwise, unless set by
    /// [`Fs::set_mode`] since the node was last inserted).
    pub(crate) fn mode(&self, path: impl AsRef<[u8]>) -> u32 {
        let key = join(&split(path));
        self.modes
            .get(&key)
            .copied()
            .unwrap_or_else(|| self.default_mode(&key))
    }

    /// Sets the permission bits (`& 0o777`) of the node at a physical path.
    pub(crate) fn set_mode(&mut self, path: impl AsRef<[u8]>, mode: u32) {
        let key = join(&split(path));
        let mode = mode & 0o777;
        if mode == self.default_mode(&key) {
            self.modes.remove(&key);
        } else {
            self.modes.insert(key, mode);
        }
    }

    /// The node at a physical path.
    pub(crate) fn get(&self, path: impl AsRef<[u8]>) -> Option<&FsNode> {
        self.nodes.get(&join(&split(path)))
    }

    /// The node at a physical path, mutably.
    pub(crate) fn get_mut(&mut self, path: impl AsRef<[u8]>) -> Option<&mut FsNode> {
        self.nodes.get_mut(&join(&split(path)))
    }

    /// Inserts a node at a physical path (the parent must already exist).
    pub(crate) fn insert(&mut self, path: impl AsRef<[u8]>, node: FsNode) {
        let key = join(&split(path));
        self.modes.remove(&key);
        self.sizes.remove(&key);
        self.nodes.insert(key, node);
    }

    /// Creates every missing directory of a physical path, replacing
    /// nothing that exists (provider-internal, textual).
    pub(crate) fn mkdir_all(&mut self, path: impl AsRef<[u8]>) {
        let comps = split(path);
        for i in 1..=comps.len() {
            self.nodes
                .entry(join(&comps[..i]))
                .or_insert(FsNode::Directory);
        }
    }

    /// Removes a node and everything below it.
    pub(crate) fn remove_tree(&mut self, path: impl AsRef<[u8]>) {
        let key = join(&split(path));
        let below: Vec<Name> = self.subtree_keys(&key).cloned().collect();
        for k in below {
            self.modes.remove(&k);
            self.nodes.remove(&k);
            self.sizes.remove(&k);
        }
        if key != b"/" {
            self.modes.remove(&key);
            self.nodes.remove(&key);
            self.sizes.remove(&key);
        }
    }

    /// Keys strictly below a directory, in path order.
    fn subtree_keys<'a>(&'a self, dir: &[u8]) -> impl Iterator<Item = &'a Name> + 'a {
        let prefix: Name = if dir == b"/" {
            b"/".to_vec()
        } else {
            [dir, b"/"].concat()
        };
        let dir_key = dir.to_vec();
        self.nodes
            .range(prefix.clone()..)
            .map(|(k, _)| k)
            .take_while(move |k| k.starts_with(&prefix))
            .filter(move |k| **k != dir_key)
    }

    /// Every node strictly below a physical directory, in path order.
    pub(crate) fn subtree(&self, dir: impl AsRef<[u8]>) -> Vec<(&Name, &FsNode)> {
        let key = join(&split(dir));
        self.subtree_keys(&key)
            .filter_map(|k| self.nodes.get(k).map(|n| (k, n)))
            .collect()
    }

    /// The names of a physical directory's children, sorted.
    pub(crate) fn children(&self, dir: impl AsRef<[u8]>) -> Vec<Name> {
        let key = join(&split(dir));
        let depth = split(&key).len();
        self.subtree_keys(&key)
            .filter(|k| split(k).len() == depth + 1)
            .map(basename)
            .collect()
    }

    /// Walks `rel` from the physical directory `start`.
    ///
    /// Symlinks are followed in every non-final component, and in the final
    /// one when `follow_final`. With `floor: Some(depth)` the walk is
    /// contained: `..` above `depth` components and any absolute link are
    /// [`WalkError::Escape`]. Without a floor, `..` at `/` stays at `/` and an
    /// absolute link restarts at `/`.
    ///
    /// Returns the physical components of the final location and its node,
    /// `None` when only the final component is missing.
    pub(crate) fn walk(
        &self,
        start: Vec<Name>,
        rel: Vec<Name>,
        follow_final: bool,
        floor: Option<usize>,
    ) -> Result<(Vec<Name>, Option<&FsNode>), WalkError> {
        let mut cur = start;
        let mut rest: VecDeque<Name> = rel.into();
        let mut hops = 0usize;
        while let Some(c) = rest.pop_front() {
            if c == b"." {
                continue;
            }
            if c == b".." {
                if let Some(depth) = floor {
                    if cur.len() <= depth {
                        return Err(WalkError::Escape);
                    }
                }
                cur.pop();
                continue;
            }
            let is_last = rest.is_empty();
            let mut child = cur.clone();
            child.push(c);
            match self.nodes.get(&join(&child)) {
                None if is_last => return Ok((child, None)),
                None => return Err(WalkError::NotFound),
                Some(FsNode::Directory) => cur = child,
                Some(FsNode::Symlink(target)) if !is_last || follow_final => {
                    hops += 1;
                    if hops > MAX_LINK_HOPS {
                        return Err(WalkError::Loop);
                    }
                    if target.is_empty() {
                        return Err(WalkError::NotFound);
                    }
                    if target.starts_with('/') {
                        if floor.is_some() {
                            return Err(WalkError::Escape);
                        }
                        cur.clear();
                    }
                    for t in split(target).into_iter().rev() {
                        rest.push_front(t);
                    }
                }
                Some(node) if is_last => return Ok((child, Some(node))),
                Some(_) => return Err(WalkError::NotDirectory),
            }
        }
        let node = self.nodes.get(&join(&cur));
        Ok((cur, node))
    }

    /// Workload resolution: `path` (absolute, or relative to `cwd`) from `/`,
    /// uncontained.
    pub(crate) fn resolve(
        &self,
        cwd: impl AsRef<[u8]>,
        path: impl AsRef<[u8]>,
        follow_final: bool,
    ) -> Result<(Name, Option<&FsNode>), WalkError> {
        let (cwd, path) = (cwd.as_ref(), path.as_ref());
        let full: Name = if path.starts_with(b"/") {
            path.to_vec()
        } else {
            [cwd, b"/", path].concat()
        };
        let (comps, node) = self.walk(Vec::new(), split(&full), follow_final, None)?;
        Ok((join(&comps), node))
    }

    /// Checks that `root` is a real directory reached through directories
    /// only (no symlink anywhere on it). Returns its components.
    pub(crate) fn physical_root(&self, root: impl AsRef<[u8]>) -> Result<Vec<Name>, ReadRefusal> {
        let comps = split(root);
        for i in 0..=comps.len() {
            match self.nodes.get(&join(&comps[..i])) {
                Some(FsNode::Directory) => {}
                Some(FsNode::Symlink(_)) => return Err(ReadRefusal::OutsideRoot),
                Some(_) | None => return Err(ReadRefusal::NotFound),
            }
        }
        Ok(comps)
    }

    /// Resolves `path` contained under `root` and returns the regular file
    /// as a [`FileView`].
    ///
    /// The path must be `root` or below it as text; resolution then starts
    /// at the physical root and refuses, as `outside_root`, any absolute
    /// link, any `..` that would climb above the root (directly or through a
    /// link), and link loops. A link that stays inside the root is followed.
    /// A dangling link inside the root is `not_found` (what `openat2` reports
    /// as `ENOENT`); one pointing outside is `outside_root`, because
    /// containment is decided before existence. A non-directory in the
    /// middle of the path is `not_found`.
    ///
    /// With `textual` (the [`crate::Fault::TextualContainment`] fault) only the
    /// text is compared and resolution runs from `/`, following links out.
    pub(crate) fn read_contained(
        &self,
        root: impl AsRef<[u8]>,
        path: impl AsRef<[u8]>,
        textual: bool,
    ) -> Result<FileView<'_>, ReadRefusal> {
        let (root, path) = (root.as_ref(), path.as_ref());
        if !is_within(path, root) {
            return Err(ReadRefusal::OutsideRoot);
        }
        let walked = if textual {
            self.walk(Vec::new(), split(path), true, None)
        } else {
            let root_comps = self.physical_root(root)?;
            let depth = root_comps.len();
            let rel = split(path)[depth..].to_vec();
            self.walk(root_comps, rel, true, Some(depth))
        };
        match walked {
            Ok((comps, Some(FsNode::File(bytes)))) => Ok(FileView {
                stored: bytes,
                size_bytes: self.apparent_size(join(&comps), bytes.len()),
            }),
            Ok((_, Some(_))) => Err(ReadRefusal::NotRegular),
            Ok((_, None)) => Err(ReadRefusal::NotFound),
            Err(WalkError::NotFound) | Err(WalkError::NotDirectory) => Err(ReadRefusal::NotFound),
            Err(WalkError::Escape) | Err(WalkError::Loop) => Err(ReadRefusal::OutsideRoot),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tree with a root `/data` holding files, a secret outside it, and
    /// planted links of every escape shape.
    fn tree() -> Fs {
        let mut fs = Fs::new();
        fs.mkdir_all("/data/sub/deeper");
        fs.mkdir_all("/secret");
        fs.mkdir_all("/data2");
        fs.insert("/secret/key", FsNode::File(b"outside".to_vec()));
        fs.insert("/data2/file", FsNode::File(b"sibling".to_vec()));
        fs.insert("/data/a.txt", FsNode::File(b"inside".to_vec()));
        fs.insert("/data/sub/b.txt", FsNode::File(b"nested".to_vec()));
        let links: &[(&str, &str)] = &[
            ("/data/abs", "/secret/key"),
            ("/data/abs_inside", "/data/a.txt"),
            ("/data/rel_out", "../secret/key"),
            ("/data/sub/rel_deep_out", "../../secret/key"),
            ("/data/dotdot_dir", ".."),
            ("/data/sub/up", ".."),
            ("/data/sibling", "../data2/file"),
            ("/data/dangling_in", "missing.txt"),
            ("/data/dangling_out", "../nowhere"),
            ("/data/dangling_abs", "/nowhere"),
            ("/data/loop_a", "loop_b"),
            ("/data/loop_b", "loop_a"),
            ("/data/self", "self"),
            ("/data/ok_rel", "sub/b.txt"),
            ("/data/ok_up_down", "sub/../a.txt"),
            ("/data/chain1", "chain2"),
            ("/data/chain2", "sub/up/a.txt"),
            ("/data/root_link", "/"),
            ("/data/sub/deeper/up2", "../../../secret"),
            ("/data/dir_link", "sub"),
        ];
        for (at, target) in links {
            fs.insert(at, FsNode::Symlink(target.to_string()));
        }
        fs.insert("/data/fifo", FsNode::Special(SpecialKind::Fifo));
        fs.insert("/data/dev", FsNode::Special(SpecialKind::Device));
        fs
    }

    #[test]
    fn escape_shapes_are_outside_root() {
        let fs = tree();
        let escapes = [
            "/data/abs",                       // absolute symlink out
            "/data/abs_inside",                // absolute symlink, even inside
            "/data/rel_out",                   // relative link leaving the root
            "/data/sub/rel_deep_out",          // deeper relative escape
            "/data/dotdot_dir/secret/key",     // `..` through a link
            "/data/sub/up/../secret/key",      // `..` after a link to the root
            "/data/sibling",                   // sibling dir with a shared prefix
            "/data/dangling_out",              // dangling link outside
            "/data/dangling_abs",              // dangling absolute link
            "/data/loop_a",                    // two-link loop
            "/data/self",                      // self loop
            "/data/root_link/secret/key",      // link to `/`
            "/data/sub/deeper/up2/key",        // link climbing three levels
            "/data2/file",                     // text outside the root
            "/secret/key",                     // text outside the root
            "/data/dir_link/../../secret/key", // `..` after a directory link
        ];
        for p in escapes {
            assert_eq!(
                fs.read_contained("/data", p, false),
                Err(ReadRefusal::OutsideRoot),
                "{p}"
            );
        }
    }

    #[test]
    fn links_inside_the_root_are_followed() {
        let fs = tree();
        for (p, want) in [
            ("/data/a.txt", &b"inside"[..]),
            ("/data/ok_rel", b"nested"),
            ("/data/ok_up_down", b"inside"),
            ("/data/chain1", b"inside"),
            ("/data/dir_link/b.txt", b"nested"),
            ("/data/sub/up/a.txt", b"inside"),
        ] {
            assert_eq!(
                fs.read_contained("/data", p, false).map(|b| b.stored),
                Ok(want),
                "{p}"
            );
        }
    }

    #[test]
    fn missing_and_special_reasons() {
        let fs = tree();
        let cases = [
            ("/data/nope", ReadRefusal::NotFound),
            ("/data/dangling_in", ReadRefusal::NotFound),
            ("/data/a.txt/x", ReadRefusal::NotFound),
            ("/data/sub", ReadRefusal::NotRegular),
            ("/data/fifo", ReadRefusal::NotRegular),
            ("/data/dev", ReadRefusal::NotRegular),
            ("/data", ReadRefusal::NotRegular),
        ];
        for (p, want) in cases {
            assert_eq!(fs.read_contained("/data", p, false), Err(want), "{p}");
        }
    }

    #[test]
    fn a_root_reached_through_a_link_is_refused() {
        let mut fs = tree();
        fs.insert("/alias", FsNode::Symlink("/data".into()));
        assert_eq!(
            fs.read_contained("/alias", "/alias/a.txt", false),
            Err(ReadRefusal::OutsideRoot)
        );
        assert_eq!(
            fs.read_contained("/gone", "/gone/a.txt", false),
            Err(ReadRefusal::NotFound)
        );
    }

    #[test]
    fn textual_containment_follows_links_out() {
        let fs = tree();
        assert_eq!(
            fs.read_contained("/data", "/data/abs", true)
                .map(|b| b.stored),
            Ok(&b"outside"[..])
        );
        assert_eq!(
            fs.read_contained("/data", "/data/rel_out", true)
                .map(|b| b.stored),
            Ok(&b"outside"[..])
        );
        // Text outside the root is still refused by the textual check.
        assert_eq!(
            fs.read_contained("/data", "/secret/key", true),
            Err(ReadRefusal::OutsideRoot)
        );
    }

    #[test]
    fn workload_resolution_follows_everything() {
        let fs = tree();
        let (p, n) = fs.resolve("/", "/data/abs", true).unwrap();
        assert_eq!(p, b"/secret/key");
        assert_eq!(n, Some(&FsNode::File(b"outside".to_vec())));
        let (p, _) = fs.resolve("/data/sub", "../rel_out", true).unwrap();
        assert_eq!(p, b"/secret/key");
        let (p, n) = fs.resolve("/", "/data/abs", false).unwrap();
        assert_eq!(p, b"/data/abs");
        assert!(matches!(n, Some(FsNode::Symlink(_))));
        assert_eq!(fs.resolve("/", "/data/loop_a", true), Err(WalkError::Loop));
        assert_eq!(
            fs.resolve("/", "/../../data/a.txt", true).unwrap().0,
            b"/data/a.txt"
        );
    }

    #[test]
    fn children_and_subtree() {
        let mut fs = Fs::new();
        fs.mkdir_all("/a/b");
        fs.insert("/a/x", FsNode::File(vec![]));
        fs.mkdir_all("/a-c");
        assert_eq!(fs.children("/a"), vec![b"b".to_vec(), b"x".to_vec()]);
        assert_eq!(fs.subtree("/a").len(), 2);
        fs.remove_tree("/a");
        assert!(fs.get("/a/b").is_none() && fs.get("/a").is_none());
        assert!(fs.get("/a-c").is_some());
    }

    #[test]
    fn a_hole_moves_the_size_and_stores_nothing() {
        let mut fs = Fs::new();
        fs.mkdir_all("/o");
        fs.insert("/o/s", FsNode::File(b"ab".to_vec()));
        fs.set_len("/o/s", 24 << 30);
        assert_eq!(fs.get("/o/s"), Some(&FsNode::File(b"ab".to_vec())));
        let view = fs.read_contained("/o", "/o/s", false).unwrap();
        assert_eq!((view.stored, view.size_bytes), (&b"ab"[..], 24 << 30));
        fs.set_len("/o/s", 5);
        let view = fs.read_contained("/o", "/o/s", false).unwrap();
        assert_eq!(view.to_vec(), b"ab\0\0\0");
        fs.set_len("/o/s", 1);
        assert_eq!(
            fs.read_contained("/o", "/o/s", false).unwrap().to_vec(),
            b"a"
        );
    }

    #[test]
    fn writes_past_the_stored_bytes_fill_or_keep_the_hole() {
        let mut fs = Fs::new();
        fs.mkdir_all("/o");
        fs.insert("/o/f", FsNode::File(b"ab".to_vec()));
        fs.write_zeros_at("/o/f", 10, 6).unwrap();
        assert_eq!(fs.apparent_size("/o/f", 2), 16);
        assert_eq!(fs.get("/o/f"), Some(&FsNode::File(b"ab".to_vec())));
        fs.append("/o/f", b"z").unwrap();
        let view = fs.read_contained("/o", "/o/f", false).unwrap();
        assert_eq!(view.size_bytes, 17);
        assert_eq!(view.to_vec(), [&b"ab"[..], &[0; 14], b"z"].concat());
        fs.write_at("/o/f", 0, b"X").unwrap();
        assert_eq!(
            fs.read_contained("/o", "/o/f", false).unwrap().stored[0],
            b'X'
        );
        assert_eq!(
            fs.write_at("/o/f", MAX_STORED_FILE_BYTES, b"x"),
            Err("No space left on device")
        );
        fs.append("/o/gone", b"x").unwrap();
        assert_eq!(fs.get("/o/gone"), None);
        fs.insert("/o/f", FsNode::File(vec![]));
        assert_eq!(fs.apparent_size("/o/f", 0), 0, "a new node has no hole");
    }
}
