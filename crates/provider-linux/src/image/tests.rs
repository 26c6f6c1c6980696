//! The image store's unit tests: the fixture, imports, layers.

use super::*;

fn busybox() -> Busybox {
    Busybox {
        path: "/x".into(),
        bytes: b"\x7fELF-not-really".to_vec(),
        sha256_hex: "ab".repeat(32),
        applets: vec!["sh".into(), "true".into()],
    }
}

#[test]
fn the_fixture_is_deterministic_and_resolves_by_tag_and_digest() {
    let dir = tempfile::tempdir().unwrap();
    let store = ImageStore::new(dir.path().join("images"));
    let pinned = store.write_fixture(&busybox()).unwrap();
    assert_eq!(pinned, store.write_fixture(&busybox()).unwrap());
    assert!(is_pinned(&pinned), "{pinned}");
    let by_tag = store
        .resolve(&format!("{FIXTURE_NAME}:busybox-{}", &"ab".repeat(6)))
        .unwrap();
    assert_eq!(by_tag.pinned, pinned);
    assert_eq!(store.resolve(&pinned).unwrap().env, vec![FIXTURE_PATH_ENV]);
    let other = format!("other@{}", pinned.split_once('@').unwrap().1);
    assert!(matches!(
        store.resolve(&other),
        Err(ImageError::NotFound { .. })
    ));
    let rootfs = store.unpacked(&by_tag).unwrap();
    assert!(rootfs.join("bin/busybox").symlink_metadata().is_ok());
    assert!(rootfs
        .join("bin/sh")
        .symlink_metadata()
        .unwrap()
        .is_symlink());
}

#[test]
fn a_layout_directory_imports_and_a_tampered_blob_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let src = ImageStore::new(dir.path().join("src"));
    let pinned = src.write_fixture(&busybox()).unwrap();
    let dst = ImageStore::new(dir.path().join("dst"));
    assert_eq!(dst.import(src.root()).unwrap(), vec![pinned.clone()]);
    assert_eq!(dst.resolve(&pinned).unwrap().pinned, pinned);
    // Tamper with the layer in the source: the import refuses it.
    let image = src.resolve(&pinned).unwrap();
    let layer = src.blob_path(&image.manifest.layers[0].digest[7..]);
    fs::write(&layer, b"tampered").unwrap();
    let fresh = ImageStore::new(dir.path().join("fresh"));
    assert!(matches!(
        fresh.import(src.root()),
        Err(ImageError::DigestMismatch { .. })
    ));
}

#[test]
fn whiteouts_remove_lower_entries() {
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path();
    let layer = |entries: &[(&str, &[u8])]| {
        let mut b = tar::Builder::new(Vec::new());
        for (p, data) in entries {
            let mut h = tar::Header::new_gnu();
            h.set_size(data.len() as u64);
            h.set_mode(0o644);
            h.set_uid(0);
            h.set_gid(0);
            h.set_mtime(0);
            h.set_entry_type(tar::EntryType::Regular);
            b.append_data(&mut h, p, *data).unwrap();
        }
        b.into_inner().unwrap()
    };
    apply_layer(&layer(&[("a/x", b"1"), ("a/y", b"2"), ("b/z", b"3")]), dest).unwrap();
    apply_layer(&layer(&[("a/.wh.x", b""), ("b/.wh..wh..opq", b"")]), dest).unwrap();
    assert!(!dest.join("a/x").exists());
    assert!(dest.join("a/y").exists());
    assert!(dest.join("b").exists() && !dest.join("b/z").exists());
}

#[test]
fn a_bare_manifest_digest_pins_to_a_name_it_is_listed_under() {
    let dir = tempfile::tempdir().unwrap();
    let store = ImageStore::new(dir.path().join("images"));
    let pinned = store.write_fixture(&busybox()).unwrap();
    let bare = pinned.split_once('@').unwrap().1;
    assert_eq!(store.resolve(bare).unwrap().pinned, pinned);
    // A digest the store does not hold stays NotFound (the provider's
    // typed base_image refusal).
    let absent = format!("sha256:{}", "0".repeat(64));
    assert!(matches!(
        store.resolve(&absent),
        Err(ImageError::NotFound { reference }) if reference == absent
    ));
}

#[test]
fn an_unpacked_tree_holds_dev_only_as_the_store_made_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = ImageStore::new(dir.path().join("images"));
    store.write_fixture(&busybox()).unwrap();
    let image = store.resolve(&format!("{FIXTURE_NAME}:busybox-{}", "ab".repeat(6)));
    let rootfs = store.unpacked(&image.unwrap()).unwrap();
    // The nodes need `mknod` (root): elsewhere the tree is not ready, and
    // instances fall back to the tmpfs.
    let root = rustix::process::geteuid().is_root();
    assert_eq!(dev_ready(&rootfs), root);
    if !root {
        return;
    }
    let dev = rootfs.join("dev");
    // Anything else in /dev, or a /dev others may write, is not the store's.
    fs::write(dev.join("console"), b"").unwrap();
    assert!(!dev_ready(&rootfs));
    fs::remove_file(dev.join("console")).unwrap();
    assert!(dev_ready(&rootfs));
    use std::os::unix::fs::PermissionsExt as _;
    fs::set_permissions(&dev, fs::Permissions::from_mode(0o777)).unwrap();
    assert!(!dev_ready(&rootfs));
    fs::set_permissions(&dev, fs::Permissions::from_mode(0o755)).unwrap();
    // A node replaced by a file of the same name.
    fs::remove_file(dev.join("zero")).unwrap();
    fs::write(dev.join("zero"), b"").unwrap();
    assert!(!dev_ready(&rootfs));
}
