//! A listing never reads a body no member can return (decision 018): a
//! regular file over the walk's hash limit is listed by its `fstat` size
//! with no SHA-256, so a 24 GiB sparse file in an output tree costs one
//! `fstat`, not 24 GiB of reads.

// A test crate: its items are not a public API; it writes host files of
// its own temporary directory.
#![allow(missing_docs, clippy::disallowed_methods)]

use std::os::fd::AsFd as _;

use checkfu_sandbox_hostfs::leaves::{walk_leaves, LeafKind};

const MIB_16: u64 = 16 << 20;

#[test]
fn a_sparse_file_over_the_hash_limit_is_listed_by_size_without_reading_it() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), b"ok\n").unwrap();
    // `dd if=/dev/zero of=s bs=1 count=0 seek=24G`: a hole, no blocks.
    let sparse = std::fs::File::create(dir.path().join("s")).unwrap();
    sparse.set_len(24 << 30).unwrap();
    drop(sparse);
    // One byte over the limit is over it too.
    let edge = std::fs::File::create(dir.path().join("edge")).unwrap();
    edge.set_len(MIB_16 + 1).unwrap();
    drop(edge);

    let root = checkfu_sandbox_contained::open_root(dir.path()).unwrap();
    let mut leaves = walk_leaves(root.as_fd(), 100, Some(MIB_16)).unwrap();
    leaves.sort_by(|a, b| a.path.cmp(&b.path));
    let shown: Vec<(String, u64, Option<[u8; 32]>)> = leaves
        .into_iter()
        .map(|l| match l.kind {
            LeafKind::RegularFile {
                size_bytes, sha256, ..
            } => (l.path.display().to_string(), size_bytes, sha256),
            other => panic!("{}: {other:?}", l.path.display()),
        })
        .collect();
    let small: [u8; 32] = {
        use sha2::Digest as _;
        sha2::Sha256::digest(b"ok\n").into()
    };
    assert_eq!(
        shown,
        vec![
            ("a.txt".to_owned(), 3, Some(small)),
            ("edge".to_owned(), MIB_16 + 1, None),
            ("s".to_owned(), 24 << 30, None),
        ]
    );
}

#[test]
fn a_file_at_the_hash_limit_is_read_and_hashed() {
    let dir = tempfile::tempdir().unwrap();
    let f = std::fs::File::create(dir.path().join("at")).unwrap();
    f.set_len(MIB_16).unwrap();
    drop(f);
    let root = checkfu_sandbox_contained::open_root(dir.path()).unwrap();
    let leaves = walk_leaves(root.as_fd(), 100, Some(MIB_16)).unwrap();
    let want: [u8; 32] = {
        use sha2::Digest as _;
        sha2::Sha256::digest(vec![0u8; MIB_16 as usize]).into()
    };
    assert!(
        matches!(
            &leaves[..],
            [l] if matches!(l.kind, LeafKind::RegularFile { size_bytes, sha256: Some(h), .. }
                if size_bytes == MIB_16 && h == want)
        ),
        "{leaves:?}"
    );
}
