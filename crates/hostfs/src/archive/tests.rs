//! Archive round trips, sparse files, bounds and refused entries.

// The tests check by path, from outside, what extraction wrote.
#![allow(clippy::disallowed_methods)]

use super::*;

fn scratch(tag: &str) -> PathBuf {
    let p = std::env::temp_dir().join(format!(
        "checkfu-archive-{tag}-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    ));
    std::fs::create_dir_all(&p).unwrap();
    p
}

fn tar_with(entries: &[(&str, tar::EntryType, &str)]) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    for (path, kind, data_or_target) in entries {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(*kind);
        h.set_mode(0o644);
        match kind {
            tar::EntryType::Symlink | tar::EntryType::Link => {
                h.set_size(0);
                // Bypass the builder's own path checks with raw names.
                h.set_link_name_literal(data_or_target).unwrap();
                let name = h.as_old_mut().name.as_mut();
                name[..path.len()].copy_from_slice(path.as_bytes());
                h.set_cksum();
                b.append(&h, io::empty()).unwrap();
            }
            _ => {
                h.set_size(data_or_target.len() as u64);
                let name = h.as_old_mut().name.as_mut();
                name[..path.len()].copy_from_slice(path.as_bytes());
                h.set_cksum();
                b.append(&h, data_or_target.as_bytes()).unwrap();
            }
        }
    }
    b.into_inner().unwrap()
}

#[test]
fn round_trip_keeps_files_links_modes() {
    let base = scratch("rt");
    let src = base.join("src");
    std::fs::create_dir_all(src.join("a/b")).unwrap();
    std::fs::write(src.join("a/b/f.txt"), b"content").unwrap();
    std::fs::write(src.join("x.sh"), b"#!/bin/sh\n").unwrap();
    std::os::unix::fs::symlink("a/b/f.txt", src.join("link")).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", src.join("abs-link")).unwrap();
    std::fs::create_dir(src.join("empty")).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(src.join("x.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
    let (bytes, summary) = archive_dir(&src, &ArchiveLimits::entries(1000), Vec::new()).unwrap();
    assert_eq!(summary.entries, 7);
    // The archive has the absolute link; extraction refuses it.
    let err = extract_archive(bytes.as_slice(), &base.join("dst1")).unwrap_err();
    assert!(matches!(err, ArchiveError::Refused { .. }), "{err}");
    assert!(!base.join("dst1").exists());
    std::fs::remove_file(src.join("abs-link")).unwrap();
    let (bytes, _) = archive_dir(&src, &ArchiveLimits::entries(1000), Vec::new()).unwrap();
    let s = extract_archive(bytes.as_slice(), &base.join("dst")).unwrap();
    assert_eq!((s.directories, s.files, s.symlinks), (3, 2, 1));
    let dst = base.join("dst");
    assert_eq!(std::fs::read(dst.join("link")).unwrap(), b"content");
    let m = std::fs::metadata(dst.join("x.sh"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(m & 0o777, 0o755);
    assert!(dst.join("empty").is_dir());
    // Deterministic bytes for the same tree.
    let (again, _) = archive_dir(&src, &ArchiveLimits::entries(1000), Vec::new()).unwrap();
    assert_eq!(bytes, again);
    std::fs::remove_dir_all(&base).unwrap();
}

#[test]
fn keeping_links_restores_escaping_links_without_following_them() {
    let base = scratch("keep");
    let outside = base.join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    let bytes = tar_with(&[
        ("abs", tar::EntryType::Symlink, "/etc/passwd"),
        ("up", tar::EntryType::Symlink, "../outside"),
        ("d", tar::EntryType::Directory, ""),
        ("d/f", tar::EntryType::Regular, "data"),
    ]);
    let dst = base.join("dst");
    let s = extract_archive_keeping_links(bytes.as_slice(), &dst).unwrap();
    assert_eq!((s.directories, s.files, s.symlinks), (1, 1, 2));
    assert_eq!(
        std::fs::read_link(dst.join("abs")).unwrap(),
        Path::new("/etc/passwd")
    );
    assert_eq!(
        std::fs::read_link(dst.join("up")).unwrap(),
        Path::new("../outside")
    );
    // Still never written through.
    let through = tar_with(&[
        ("up", tar::EntryType::Symlink, "../outside"),
        ("up/evil", tar::EntryType::Regular, "x"),
    ]);
    let err = extract_archive_keeping_links(through.as_slice(), &base.join("dst2")).unwrap_err();
    assert!(matches!(err, ArchiveError::Refused { .. }), "{err}");
    assert!(!outside.join("evil").exists());
    std::fs::remove_dir_all(&base).unwrap();
}

#[test]
fn extraction_refuses_escapes() {
    let base = scratch("esc");
    let cases: Vec<(&str, Vec<u8>)> = vec![
        (
            "dotdot",
            tar_with(&[("../evil", tar::EntryType::Regular, "x")]),
        ),
        (
            "abs",
            tar_with(&[("/tmp/evil", tar::EntryType::Regular, "x")]),
        ),
        (
            "link-abs",
            tar_with(&[("l", tar::EntryType::Symlink, "/etc")]),
        ),
        (
            "link-up",
            tar_with(&[("l", tar::EntryType::Symlink, "../x")]),
        ),
        (
            "write-through-link",
            tar_with(&[
                ("d", tar::EntryType::Directory, ""),
                ("l", tar::EntryType::Symlink, "d"),
                ("l/f", tar::EntryType::Regular, "x"),
            ]),
        ),
        (
            "chain",
            tar_with(&[
                ("sub", tar::EntryType::Directory, ""),
                ("sub/b", tar::EntryType::Symlink, ".."),
                ("sub/c", tar::EntryType::Symlink, "b/../x"),
            ]),
        ),
        (
            "hardlink",
            tar_with(&[("h", tar::EntryType::Link, "/etc/passwd")]),
        ),
        ("fifo", tar_with(&[("p", tar::EntryType::Fifo, "")])),
    ];
    for (name, bytes) in cases {
        let dst = base.join(name);
        let res = extract_archive(bytes.as_slice(), &dst);
        assert!(
            matches!(res, Err(ArchiveError::Refused { .. })),
            "{name}: {res:?}"
        );
        assert!(!dst.exists(), "{name}: partial tree left");
    }
    assert!(!base.parent().unwrap().join("evil").exists());
    std::fs::remove_dir_all(&base).unwrap();
}

use std::os::unix::fs::{MetadataExt, PermissionsExt};

const GIB: u64 = 1 << 30;

/// A file of `size` apparent bytes holding only `islands` (offset, bytes).
fn sparse_file(path: &Path, size: u64, islands: &[(u64, &[u8])]) {
    use std::os::unix::fs::FileExt;
    let f = std::fs::File::create(path).unwrap();
    f.set_len(size).unwrap();
    for (offset, bytes) in islands {
        f.write_all_at(bytes, *offset).unwrap();
    }
    f.sync_all().unwrap();
}

fn data_map_of(path: &Path) -> Option<Vec<sparse::Segment>> {
    let f = std::fs::File::open(path).unwrap();
    let size = f.metadata().unwrap().len();
    sparse::data_map(&f, size).unwrap()
}

#[test]
fn a_huge_sparse_file_archives_in_kilobytes_and_comes_back_sparse() {
    let base = scratch("sparse24");
    let src = base.join("src");
    std::fs::create_dir(&src).unwrap();
    // Never written: 24 GiB of hole.
    sparse_file(&src.join("s"), 24 * GIB, &[]);
    assert_eq!(std::fs::metadata(src.join("s")).unwrap().blocks(), 0);
    let estimate = estimate_archive_bytes(&src, 100).unwrap();
    assert!(estimate < 16 << 10, "estimate {estimate}");
    let started = std::time::Instant::now();
    let (bytes, summary) = archive_dir(&src, &ArchiveLimits::entries(100), Vec::new()).unwrap();
    assert!(bytes.len() < 8 << 10, "archive of {} bytes", bytes.len());
    assert_eq!(summary.bytes, bytes.len() as u64);
    assert!(summary.bytes <= estimate);
    assert_eq!(summary.sparse_files, 1);
    let dst = base.join("dst");
    extract_archive(bytes.as_slice(), &dst).unwrap();
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
    let meta = std::fs::metadata(dst.join("s")).unwrap();
    assert_eq!(meta.len(), 24 * GIB);
    assert!(meta.blocks() <= 8, "restored with {} blocks", meta.blocks());
    std::fs::remove_dir_all(&base).unwrap();
}

#[test]
fn data_islands_in_holes_round_trip_byte_exact() {
    let base = scratch("islands");
    let src = base.join("src");
    std::fs::create_dir(&src).unwrap();
    let small: &[(u64, &[u8])] = &[
        (0, b"head"),
        (300 << 10, &[7u8; 5000]),
        (700 << 10, b"middle"),
        ((1 << 20) - 3, b"end"),
    ];
    sparse_file(&src.join("small"), 1 << 20, small);
    let big: &[(u64, &[u8])] = &[(GIB, b"one"), (5 * GIB, &[9u8; 70_000])];
    sparse_file(&src.join("big"), 8 * GIB, big);
    // Ends in data, starts in a hole.
    sparse_file(&src.join("tail"), 2 * GIB, &[(2 * GIB - 5, b"tail!")]);
    let (bytes, summary) = archive_dir(&src, &ArchiveLimits::entries(100), Vec::new()).unwrap();
    assert_eq!(summary.sparse_files, 3);
    assert!(bytes.len() < 200 << 10, "archive of {} bytes", bytes.len());
    let dst = base.join("dst");
    extract_archive(bytes.as_slice(), &dst).unwrap();
    let status = std::process::Command::new("cmp")
        .arg(src.join("small"))
        .arg(dst.join("small"))
        .status()
        .unwrap();
    assert!(status.success(), "cmp of the small file");
    for name in ["small", "big", "tail"] {
        let (a, b) = (src.join(name), dst.join(name));
        assert_eq!(
            std::fs::metadata(&a).unwrap().len(),
            std::fs::metadata(&b).unwrap().len(),
            "{name}"
        );
        let map = data_map_of(&b);
        assert_eq!(data_map_of(&a), map, "{name}");
        // The data segments hold the same bytes.
        use std::os::unix::fs::FileExt;
        let (fa, fb) = (
            std::fs::File::open(&a).unwrap(),
            std::fs::File::open(&b).unwrap(),
        );
        for (offset, length) in map.unwrap() {
            let (mut x, mut y) = (vec![0u8; length as usize], vec![0u8; length as usize]);
            fa.read_exact_at(&mut x, offset).unwrap();
            fb.read_exact_at(&mut y, offset).unwrap();
            assert!(x == y, "{name} differs in {offset}+{length}");
        }
    }
    // The same tree gives the same bytes.
    let (again, _) = archive_dir(&src, &ArchiveLimits::entries(100), Vec::new()).unwrap();
    assert_eq!(bytes, again);
    std::fs::remove_dir_all(&base).unwrap();
}

#[test]
fn modes_round_trip_exactly() {
    let base = scratch("modes");
    let src = base.join("src");
    std::fs::create_dir(&src).unwrap();
    let cases = [("secret", 0o600), ("tool", 0o755), ("plain", 0o644)];
    for (name, mode) in cases {
        std::fs::write(src.join(name), name.as_bytes()).unwrap();
        std::fs::set_permissions(src.join(name), std::fs::Permissions::from_mode(mode)).unwrap();
    }
    sparse_file(&src.join("holes"), GIB, &[(4096, b"x")]);
    std::fs::set_permissions(src.join("holes"), std::fs::Permissions::from_mode(0o751)).unwrap();
    std::fs::create_dir(src.join("private")).unwrap();
    std::fs::set_permissions(src.join("private"), std::fs::Permissions::from_mode(0o700)).unwrap();
    let (bytes, _) = archive_dir(&src, &ArchiveLimits::entries(100), Vec::new()).unwrap();
    let dst = base.join("dst");
    extract_archive(bytes.as_slice(), &dst).unwrap();
    for (name, mode) in cases
        .into_iter()
        .chain([("holes", 0o751), ("private", 0o700)])
    {
        let got = std::fs::metadata(dst.join(name))
            .unwrap()
            .permissions()
            .mode()
            & 0o7777;
        assert_eq!(got, mode, "{name}: {got:o}");
    }
    std::fs::remove_dir_all(&base).unwrap();
}

#[test]
fn gnu_tar_reads_the_sparse_entries() {
    let base = scratch("gnutar");
    let src = base.join("src");
    std::fs::create_dir(&src).unwrap();
    sparse_file(&src.join("s"), 24 * GIB, &[(GIB, b"island")]);
    let (bytes, _) = archive_dir(&src, &ArchiveLimits::entries(100), Vec::new()).unwrap();
    std::fs::write(base.join("a.tar"), &bytes).unwrap();
    let o = std::process::Command::new("tar")
        .arg("-tvf")
        .arg(base.join("a.tar"))
        .output()
        .expect("GNU tar");
    let listing = String::from_utf8_lossy(&o.stdout);
    let complaints = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{listing}{complaints}");
    assert!(
        listing.contains(&(24 * GIB).to_string()) && listing.trim_end().ends_with(" s"),
        "{listing}"
    );
    // And extracts them sparse, islands in place.
    let out = base.join("out");
    std::fs::create_dir(&out).unwrap();
    let o = std::process::Command::new("tar")
        .arg("-xf")
        .arg(base.join("a.tar"))
        .arg("-C")
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let meta = std::fs::metadata(out.join("s")).unwrap();
    assert_eq!(meta.len(), 24 * GIB);
    assert!(meta.blocks() <= 64, "{} blocks", meta.blocks());
    use std::os::unix::fs::FileExt;
    let mut island = [0u8; 6];
    std::fs::File::open(out.join("s"))
        .unwrap()
        .read_exact_at(&mut island, GIB)
        .unwrap();
    assert_eq!(&island, b"island");
    std::fs::remove_dir_all(&base).unwrap();
}

#[test]
fn archives_stop_at_their_byte_bound_and_deadline() {
    let base = scratch("bounds");
    let src = base.join("src");
    std::fs::create_dir(&src).unwrap();
    std::fs::write(src.join("dense"), vec![1u8; 1 << 20]).unwrap();
    std::fs::File::open(src.join("dense"))
        .unwrap()
        .sync_all()
        .unwrap();
    let estimate = estimate_archive_bytes(&src, 100).unwrap();
    assert!(estimate > 1 << 20, "estimate {estimate}");
    let tight = ArchiveLimits {
        max_bytes: 64 << 10,
        ..ArchiveLimits::entries(100)
    };
    let err = archive_dir(&src, &tight, Vec::new()).unwrap_err();
    assert!(
        matches!(err, ArchiveError::OverBudget { limit_bytes, needed_bytes } if limit_bytes == 64 << 10 && needed_bytes > limit_bytes),
        "{err}"
    );
    let past = ArchiveLimits {
        deadline: Some(std::time::Instant::now()),
        ..ArchiveLimits::entries(100)
    };
    let err = archive_dir(&src, &past, Vec::new()).unwrap_err();
    assert!(matches!(err, ArchiveError::DeadlineExceeded), "{err}");

    // The snapshot helper refuses before creating the file, naming the
    // sandbox path, the bytes left and the bytes needed.
    use checkfu_sandbox_contract::{provider::op, FailureReason, SandboxError};
    let job = |name: &str| ArchiveJob {
        source: src.clone(),
        archive: base.join(name),
        sandbox_path: "/mnt/session/outputs".into(),
    };
    let err = write_archives(op::SNAPSHOT, &[job("a.tar")], 100, 64 << 10, None).unwrap_err();
    assert_eq!(
        err,
        SandboxError::SandboxFileTooLarge {
            path: "/mnt/session/outputs".into(),
            limit_bytes: 64 << 10,
            actual_bytes: estimate,
        }
    );
    assert!(!base.join("a.tar").exists());
    let err = write_archives(
        op::SNAPSHOT,
        &[job("b.tar")],
        100,
        u64::MAX,
        Some(std::time::Instant::now()),
    )
    .unwrap_err();
    assert!(
        matches!(
            &err,
            SandboxError::SandboxOperationFailed {
                reason: FailureReason::TimedOut,
                ..
            }
        ),
        "{err}"
    );
    assert!(
        !base.join("b.tar").exists(),
        "the partial archive is removed"
    );
    // Within bounds: the bytes written are the file's size on disk.
    let written = write_archives(op::SNAPSHOT, &[job("c.tar")], 100, estimate, None).unwrap();
    assert_eq!(
        written,
        std::fs::metadata(base.join("c.tar")).unwrap().len()
    );
    std::fs::remove_dir_all(&base).unwrap();
}

#[test]
fn malformed_sparse_maps_are_refused() {
    let base = scratch("badmap");
    let entry = |map_and_data: &[u8], real: &str| {
        let mut b = tar::Builder::new(Vec::new());
        b.append_pax_extensions([
            (sparse::KEY_MAJOR, b"1".as_slice()),
            (sparse::KEY_MINOR, b"0".as_slice()),
            (sparse::KEY_REALSIZE, real.as_bytes()),
        ])
        .unwrap();
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(tar::EntryType::Regular);
        h.set_mode(0o644);
        h.set_size(map_and_data.len() as u64);
        b.append_data(&mut h, "f", map_and_data).unwrap();
        b.into_inner().unwrap()
    };
    let padded = |map: &str, data: &[u8]| {
        let mut v = map.as_bytes().to_vec();
        v.resize(512, 0);
        v.extend_from_slice(data);
        v
    };
    let cases: Vec<(&str, Vec<u8>)> = vec![
        (
            "past-the-size",
            entry(&padded("1\n5\n10\n", &[1; 10]), "10"),
        ),
        ("overlap", entry(&padded("2\n0\n4\n2\n4\n", &[1; 8]), "10")),
        ("short-data", entry(&padded("1\n0\n8\n", &[1; 4]), "10")),
        ("not-decimal", entry(&padded("1\nx\n8\n", &[1; 8]), "10")),
        ("too-many", entry(&padded("99999\n0\n1\n", &[1; 1]), "10")),
        ("bad-size", entry(&padded("1\n0\n1\n", &[1; 1]), "ten")),
    ];
    for (name, bytes) in cases {
        let dst = base.join(name);
        let res = extract_archive(bytes.as_slice(), &dst);
        assert!(
            matches!(res, Err(ArchiveError::Refused { .. })),
            "{name}: {res:?}"
        );
        assert!(!dst.exists(), "{name}: partial tree left");
    }
    std::fs::remove_dir_all(&base).unwrap();
}

#[test]
fn sparse_files_keep_long_and_non_utf8_names() {
    use std::os::unix::ffi::OsStrExt;
    let base = scratch("names");
    let src = base.join("src");
    let deep = src.join("d".repeat(120));
    std::fs::create_dir_all(&deep).unwrap();
    let odd = std::ffi::OsStr::from_bytes(b"bad-\xff");
    sparse_file(&deep.join("f".repeat(150)), GIB, &[(8192, b"deep")]);
    sparse_file(&src.join(odd), GIB, &[(0, b"odd")]);
    let (bytes, summary) = archive_dir(&src, &ArchiveLimits::entries(100), Vec::new()).unwrap();
    assert_eq!(summary.sparse_files, 2);
    let dst = base.join("dst");
    extract_archive(bytes.as_slice(), &dst).unwrap();
    let long = dst.join("d".repeat(120)).join("f".repeat(150));
    assert_eq!(std::fs::metadata(&long).unwrap().len(), GIB);
    assert_eq!(data_map_of(&long), data_map_of(&deep.join("f".repeat(150))));
    assert_eq!(std::fs::metadata(dst.join(odd)).unwrap().len(), GIB);
    std::fs::remove_dir_all(&base).unwrap();
}
