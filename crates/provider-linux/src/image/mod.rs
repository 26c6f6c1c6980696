//! The local image store: an OCI image layout under the state directory,
//! and each image's root file system unpacked once, shared read-only.
//!
//! # Layout
//!
//! ```text
//! <state_dir>/images/oci-layout                 {"imageLayoutVersion":"1.0.0"}
//! <state_dir>/images/index.json                 one descriptor per name, annotated
//!                                               org.opencontainers.image.ref.name = <name>:<tag>
//! <state_dir>/images/blobs/sha256/<hex>         manifests, configurations, layers
//! <state_dir>/images/rootfs/<manifest hex>/     the unpacked root file system, with the
//!                                               standard mount points and /dev's nodes
//!                                               and links added
//! ```
//!
//! A pinned reference is `<name>@sha256:<manifest digest>`: the digest of
//! the OCI manifest, which names the configuration and every layer by
//! digest, so the reference fixes the bytes. Nothing is ever pulled: the
//! store is filled by [`ImageStore::write_fixture`] (offline, from a static busybox)
//! and by [`ImageStore::import`] (an OCI layout directory or a `docker save` tarball).
//!
//! Layers are uncompressed tars (`application/vnd.oci.image.layer.v1.tar`,
//! Docker's `layer.tar`); whiteouts (`.wh.<name>`, `.wh..wh..opq`) are
//! applied when layers are stacked. Compressed layers are refused with a
//! typed error naming the media type.

use std::collections::BTreeMap;
use std::fs;
use std::io::{self, Write};
use std::os::fd::AsFd as _;
use std::path::{Path, PathBuf};

use checkfu_sandbox_contract::ImageReference;
use checkfu_sandbox_hostfs::rootfs::{hex, rootfs_tar, Busybox, FIXTURE_PATH_ENV};
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

mod dev;
mod layers;
mod seen;
pub use dev::{dev_ready, DEV_LINKS, DEV_NODES};
use layers::{apply_layer, path_exists, write_atomic};
pub use seen::{dev_ready_seen, directory_seen};

/// The name of the fixture image in the store.
pub const FIXTURE_NAME: &str = "checkfu-fixture";
/// Media type of an OCI image manifest.
pub const MANIFEST_MEDIA_TYPE: &str = "application/vnd.oci.image.manifest.v1+json";
/// Media type of an OCI image index.
pub const INDEX_MEDIA_TYPE: &str = "application/vnd.oci.image.index.v1+json";
/// Media type of an OCI image configuration.
pub const CONFIG_MEDIA_TYPE: &str = "application/vnd.oci.image.config.v1+json";
/// Media type of an uncompressed layer.
pub const LAYER_MEDIA_TYPE: &str = "application/vnd.oci.image.layer.v1.tar";
/// Annotation holding a descriptor's `<name>:<tag>`.
pub const REF_NAME: &str = "org.opencontainers.image.ref.name";
/// Annotation containerd and Docker put on a descriptor (full name).
pub const CONTAINERD_NAME: &str = "io.containerd.image.name";

/// Why the store could not do something.
#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    /// A file of the store or of an import could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The failure.
        #[source]
        source: io::Error,
    },
    /// A JSON document of the store or of an import is malformed.
    #[error("{path}: invalid {what}: {reason}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What it should have been.
        what: &'static str,
        /// The decoder's message.
        reason: String,
    },
    /// A blob's bytes do not hash to its name.
    #[error("blob {expected} hashes to sha256:{actual}")]
    DigestMismatch {
        /// The digest it is named by.
        expected: String,
        /// What its bytes hash to.
        actual: String,
    },
    /// A layer's media type is not an uncompressed tar.
    #[error(
        "layer {digest} has media type {media_type}; only uncompressed tar layers are supported"
    )]
    UnsupportedLayer {
        /// The layer.
        digest: String,
        /// Its media type.
        media_type: String,
    },
    /// The reference names no image of the store.
    #[error("image {reference} is not in the local store")]
    NotFound {
        /// The reference asked for.
        reference: String,
    },
    /// The reference is malformed.
    #[error("invalid image reference {reference:?}: expected name[:tag] or name@sha256:<64 hex>")]
    InvalidReference {
        /// The reference given.
        reference: String,
    },
    /// An import held no image the store can take.
    #[error("{path}: no image found (expected an OCI layout or a docker save tarball)")]
    NothingToImport {
        /// What was given.
        path: PathBuf,
    },
}

fn io_at(path: &Path) -> impl FnOnce(io::Error) -> ImageError + '_ {
    move |source| ImageError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// An OCI content descriptor.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Descriptor {
    /// Media type.
    pub media_type: String,
    /// `sha256:<hex>`.
    pub digest: String,
    /// Size in bytes.
    pub size: u64,
    /// Annotations.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    /// Platform (in an index).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub platform: Option<serde_json::Value>,
}

/// An OCI index (`index.json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Index {
    /// Always 2.
    pub schema_version: u32,
    /// Media type (optional in a layout's index).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media_type: Option<String>,
    /// Manifests (or nested indexes).
    pub manifests: Vec<Descriptor>,
}

/// An OCI image manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Manifest {
    /// Always 2.
    pub schema_version: u32,
    /// [`MANIFEST_MEDIA_TYPE`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media_type: Option<String>,
    /// The configuration.
    pub config: Descriptor,
    /// The layers, base first.
    pub layers: Vec<Descriptor>,
}

/// The part of an image configuration the provider uses.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct ImageConfig {
    /// The process defaults.
    #[serde(default)]
    pub config: Option<ProcessConfig>,
}

/// The process defaults of an image configuration.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct ProcessConfig {
    /// `KEY=value` entries.
    #[serde(default)]
    pub env: Option<Vec<String>>,
}

/// An image of the store, resolved from a reference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredImage {
    /// `<name>@sha256:<manifest hex>`.
    pub pinned: String,
    /// The manifest's hex digest.
    pub manifest_hex: String,
    /// The manifest.
    pub manifest: Manifest,
    /// The configuration's environment (`KEY=value`).
    pub env: Vec<String>,
}

/// What a reference missing from the store is told: how images get in
/// (no registry is ever used).
pub const STORE_HINT: &str = "(no registry is used: `checkfu sandbox fixture --provider linux` writes the fixture into the store, `checkfu sandbox image import` an OCI layout or a `docker save` tarball)";

/// The mount points every instance has (`/proc`, `/dev`, the output
/// tree), absolute.
pub const STANDARD_MOUNT_POINTS: [&str; 3] = [
    "/proc",
    "/dev",
    checkfu_sandbox_contract::bounds::OUTPUT_PATH,
];

/// Adds the [`STANDARD_MOUNT_POINTS`] an unpacked tree lacks, as
/// directories mode 0755 owned by root, without following links: an
/// instance then needs none of them in its writable layer. (`/dev` then
/// gets its nodes and links: [`dev_ready`].) A point the
/// image holds as something else (a link, a file) is left for the
/// instance's own preparation to refuse by name.
fn add_mount_points(tree: &Path) {
    let Ok(fd) = checkfu_sandbox_contained::open_root(tree) else {
        return;
    };
    for p in STANDARD_MOUNT_POINTS {
        let _ = checkfu_sandbox_contained::create_dirs_beneath(
            fd.as_fd(),
            Path::new(p.trim_start_matches('/')),
            None,
        );
    }
}

/// The image store under `<state_dir>/images`.
#[derive(Debug, Clone)]
pub struct ImageStore {
    root: PathBuf,
}

fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

fn split_reference(
    reference: &str,
) -> Result<(String, Option<String>, Option<String>), ImageError> {
    let bad = || ImageError::InvalidReference {
        reference: reference.to_owned(),
    };
    if let Some((name, digest)) = reference.split_once('@') {
        let hex = digest.strip_prefix("sha256:").ok_or_else(bad)?;
        if name.is_empty()
            || hex.len() != 64
            || !hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        {
            return Err(bad());
        }
        return Ok((name.to_owned(), None, Some(hex.to_owned())));
    }
    let (name, tag) = match reference.rsplit_once(':') {
        Some((n, t)) if !t.contains('/') => (n, t),
        _ => (reference, "latest"),
    };
    if name.is_empty() || tag.is_empty() || reference.chars().any(char::is_whitespace) {
        return Err(bad());
    }
    Ok((name.to_owned(), Some(tag.to_owned()), None))
}

fn name_of(d: &Descriptor) -> Option<(String, String)> {
    let full = d
        .annotations
        .get(CONTAINERD_NAME)
        .or_else(|| d.annotations.get(REF_NAME))?;
    match full.rsplit_once(':') {
        Some((n, t)) if !t.contains('/') => Some((n.to_owned(), t.to_owned())),
        _ => Some((full.clone(), "latest".to_owned())),
    }
}

impl ImageStore {
    /// The store rooted at `root` (created on first write).
    pub fn new(root: PathBuf) -> Self {
        ImageStore { root }
    }

    /// The store's directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    fn blob_path(&self, hex: &str) -> PathBuf {
        self.root.join("blobs").join("sha256").join(hex)
    }

    /// The unpacked root file system of a manifest.
    pub fn rootfs_dir(&self, manifest_hex: &str) -> PathBuf {
        self.root.join("rootfs").join(manifest_hex)
    }

    fn ensure_layout(&self) -> Result<(), ImageError> {
        let blobs = self.root.join("blobs").join("sha256");
        fs::create_dir_all(&blobs).map_err(io_at(&blobs))?;
        let marker = self.root.join("oci-layout");
        if !path_exists(&marker) {
            write_atomic(&marker, br#"{"imageLayoutVersion":"1.0.0"}"#)?;
        }
        Ok(())
    }

    /// Writes a blob (idempotent) and returns its descriptor.
    fn put_blob(&self, media_type: &str, bytes: &[u8]) -> Result<Descriptor, ImageError> {
        let hex = sha256_hex(bytes);
        let path = self.blob_path(&hex);
        if !path_exists(&path) {
            write_atomic(&path, bytes)?;
        }
        Ok(Descriptor {
            media_type: media_type.to_owned(),
            digest: format!("sha256:{hex}"),
            size: bytes.len() as u64,
            annotations: BTreeMap::new(),
            platform: None,
        })
    }

    // Blobs of the store are the provider's own files.
    #[allow(clippy::disallowed_methods)]
    fn read_blob(&self, digest: &str) -> Result<Vec<u8>, ImageError> {
        let hex = digest
            .strip_prefix("sha256:")
            .filter(|h| h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit()))
            .ok_or_else(|| ImageError::InvalidReference {
                reference: digest.to_owned(),
            })?;
        let path = self.blob_path(hex);
        let bytes = fs::read(&path).map_err(io_at(&path))?;
        let actual = sha256_hex(&bytes);
        if actual != hex {
            return Err(ImageError::DigestMismatch {
                expected: digest.to_owned(),
                actual,
            });
        }
        Ok(bytes)
    }

    // index.json is the provider's own file.
    #[allow(clippy::disallowed_methods)]
    fn read_index(&self) -> Result<Index, ImageError> {
        let path = self.root.join("index.json");
        match fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| ImageError::Invalid {
                path,
                what: "OCI index",
                reason: e.to_string(),
            }),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Index {
                schema_version: 2,
                media_type: Some(INDEX_MEDIA_TYPE.to_owned()),
                manifests: Vec::new(),
            }),
            Err(source) => Err(ImageError::Io { path, source }),
        }
    }

    /// Adds (or moves) the name `<name>:<tag>` to a manifest descriptor, under
    /// the store's lock.
    fn tag(&self, name: &str, tag: &str, manifest: &Descriptor) -> Result<(), ImageError> {
        let _lock = self.lock()?;
        let mut index = self.read_index()?;
        let full = format!("{name}:{tag}");
        index
            .manifests
            .retain(|d| d.annotations.get(REF_NAME) != Some(&full));
        let mut d = manifest.clone();
        d.annotations.insert(REF_NAME.to_owned(), full);
        index.manifests.push(d);
        let bytes = serde_json::to_vec_pretty(&index).map_err(|e| ImageError::Invalid {
            path: self.root.join("index.json"),
            what: "OCI index",
            reason: e.to_string(),
        })?;
        write_atomic(&self.root.join("index.json"), &bytes)
    }

    // The lock file is the provider's own.
    #[allow(clippy::disallowed_methods)]
    fn lock(&self) -> Result<std::os::fd::OwnedFd, ImageError> {
        self.ensure_layout()?;
        let path = self.root.join(".lock");
        let f = fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(io_at(&path))?;
        let fd = std::os::fd::OwnedFd::from(f);
        rustix::fs::flock(&fd, rustix::fs::FlockOperation::LockExclusive).map_err(|e| {
            ImageError::Io {
                path,
                source: e.into(),
            }
        })?;
        Ok(fd)
    }

    /// Resolves `reference` (`name[:tag]`, `name@sha256:<hex>` or a bare
    /// manifest digest `sha256:<hex>`) to an image of the store. A pinned
    /// reference must name a manifest the index lists under that name; a
    /// bare digest pins to one of the names the index lists it under
    /// (`checkfu-fixture` when it is one, else the first in order), as the
    /// Docker provider pins a bare image ID.
    ///
    /// # Errors
    ///
    /// [`ImageError::InvalidReference`], [`ImageError::NotFound`], or a
    /// failure reading the store.
    pub fn resolve(&self, reference: &str) -> Result<StoredImage, ImageError> {
        let bare = reference.strip_prefix("sha256:").filter(|hex| {
            hex.len() == 64 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        });
        if let Some(hex) = bare {
            let index = self.read_index()?;
            let mut names: Vec<String> = index
                .manifests
                .iter()
                .filter(|d| d.digest.strip_prefix("sha256:") == Some(hex))
                .filter_map(|d| name_of(d).map(|(n, _)| n))
                .collect();
            names.sort();
            let name = names
                .iter()
                .find(|n| *n == FIXTURE_NAME)
                .or_else(|| names.first())
                .ok_or_else(|| ImageError::NotFound {
                    reference: reference.to_owned(),
                })?;
            return self.resolve(&format!("{name}@{reference}"));
        }
        let (name, tag, pinned_hex) = split_reference(reference)?;
        let index = self.read_index()?;
        let found = index.manifests.iter().find(|d| {
            let Some((n, t)) = name_of(d) else {
                return false;
            };
            n == name
                && match (&tag, &pinned_hex) {
                    (_, Some(hex)) => d.digest.strip_prefix("sha256:") == Some(hex.as_str()),
                    (Some(tag), None) => &t == tag,
                    (None, None) => false,
                }
        });
        let Some(d) = found else {
            return Err(ImageError::NotFound {
                reference: reference.to_owned(),
            });
        };
        let bytes = self.read_blob(&d.digest)?;
        let manifest: Manifest =
            serde_json::from_slice(&bytes).map_err(|e| ImageError::Invalid {
                path: self.blob_path(&d.digest[7..]),
                what: "OCI manifest",
                reason: e.to_string(),
            })?;
        let config: ImageConfig = serde_json::from_slice(&self.read_blob(&manifest.config.digest)?)
            .map_err(|e| ImageError::Invalid {
                path: self.blob_path(&manifest.config.digest[7..]),
                what: "OCI image configuration",
                reason: e.to_string(),
            })?;
        let manifest_hex = d.digest[7..].to_owned();
        Ok(StoredImage {
            pinned: format!("{name}@sha256:{manifest_hex}"),
            manifest_hex,
            manifest,
            env: config.config.and_then(|c| c.env).unwrap_or_default(),
        })
    }

    /// Writes the offline fixture for `busybox` into the store (its
    /// root file system as one layer) and names it
    /// `checkfu-fixture:busybox-<12 hex>`. Deterministic: the same busybox
    /// gives the same manifest digest. Returns the pinned reference.
    ///
    /// # Errors
    ///
    /// A failure writing the store or building the layer.
    pub fn write_fixture(&self, busybox: &Busybox) -> Result<String, ImageError> {
        self.ensure_layout()?;
        let layer = rootfs_tar(busybox).map_err(|e| ImageError::Io {
            path: busybox.path.clone(),
            source: io::Error::other(e.to_string()),
        })?;
        let layer_d = self.put_blob(LAYER_MEDIA_TYPE, &layer)?;
        let config = serde_json::json!({
            "architecture": oci_arch(),
            "os": "linux",
            "config": { "Env": [FIXTURE_PATH_ENV], "WorkingDir": "/" },
            "rootfs": { "type": "layers", "diff_ids": [layer_d.digest] },
        });
        let config_d = self.put_blob(
            CONFIG_MEDIA_TYPE,
            &serde_json::to_vec(&config).expect("a JSON value serializes"),
        )?;
        let manifest = Manifest {
            schema_version: 2,
            media_type: Some(MANIFEST_MEDIA_TYPE.to_owned()),
            config: config_d,
            layers: vec![layer_d],
        };
        let manifest_d = self.put_blob(
            MANIFEST_MEDIA_TYPE,
            &serde_json::to_vec(&manifest).expect("a manifest serializes"),
        )?;
        let tag = format!("busybox-{}", &busybox.sha256_hex[..12]);
        self.tag(FIXTURE_NAME, &tag, &manifest_d)?;
        Ok(format!("{FIXTURE_NAME}@{}", manifest_d.digest))
    }

    /// The unpacked root file system of `image`, unpacking it first when
    /// this is its first use (into a temporary sibling renamed into place,
    /// so a concurrent user never sees half a tree). Blocking.
    ///
    /// # Errors
    ///
    /// A failure reading a layer or writing the tree.
    // Layers are blobs of the provider's own store.
    #[allow(clippy::disallowed_methods)]
    pub fn unpacked(&self, image: &StoredImage) -> Result<PathBuf, ImageError> {
        let dir = self.rootfs_dir(&image.manifest_hex);
        if path_exists(&dir) {
            return Ok(dir);
        }
        for l in &image.manifest.layers {
            if !is_plain_tar(&l.media_type) {
                return Err(ImageError::UnsupportedLayer {
                    digest: l.digest.clone(),
                    media_type: l.media_type.clone(),
                });
            }
        }
        let parent = self.root.join("rootfs");
        fs::create_dir_all(&parent).map_err(io_at(&parent))?;
        let tmp = parent.join(format!(
            ".{}.{}.tmp",
            image.manifest_hex,
            std::process::id()
        ));
        let _ = fs::remove_dir_all(&tmp);
        fs::create_dir(&tmp).map_err(io_at(&tmp))?;
        let res = (|| {
            for l in &image.manifest.layers {
                let bytes = self.read_blob(&l.digest)?;
                apply_layer(&bytes, &tmp)?;
            }
            add_mount_points(&tmp);
            dev::add_dev(&tmp);
            Ok(())
        })();
        if let Err(e) = res {
            let _ = fs::remove_dir_all(&tmp);
            return Err(e);
        }
        if fs::rename(&tmp, &dir).is_err() {
            // Another process unpacked it first.
            let _ = fs::remove_dir_all(&tmp);
        }
        Ok(dir)
    }

    /// Imports every named image of an OCI layout directory or of a
    /// `docker save` tarball (OCI layout inside, or the older
    /// `manifest.json` form). Returns the pinned references imported.
    /// Blobs are verified against their digests. Blocking.
    ///
    /// # Errors
    ///
    /// [`ImageError::NothingToImport`] when `source` holds no image; a
    /// read, digest or format failure otherwise.
    pub fn import(&self, source: &Path) -> Result<Vec<String>, ImageError> {
        self.ensure_layout()?;
        // A path named by the operator on the command line.
        #[allow(clippy::disallowed_methods)]
        let is_dir = source.is_dir();
        if is_dir {
            return self.import_dir(source);
        }
        let scratch = self
            .root
            .join(format!(".import.{}.tmp", std::process::id()));
        let _ = fs::remove_dir_all(&scratch);
        fs::create_dir_all(&scratch).map_err(io_at(&scratch))?;
        let res = (|| {
            // The operator's tarball.
            #[allow(clippy::disallowed_methods)]
            let f = fs::File::open(source).map_err(io_at(source))?;
            let mut ar = tar::Archive::new(io::BufReader::new(f));
            ar.set_preserve_permissions(false);
            ar.unpack(&scratch).map_err(io_at(source))?;
            self.import_dir(&scratch)
        })();
        let _ = fs::remove_dir_all(&scratch);
        res
    }

    // The import source is the operator's directory.
    #[allow(clippy::disallowed_methods)]
    fn import_dir(&self, dir: &Path) -> Result<Vec<String>, ImageError> {
        let read_json =
            |path: PathBuf, what: &'static str| -> Result<serde_json::Value, ImageError> {
                let bytes = fs::read(&path).map_err(io_at(&path))?;
                serde_json::from_slice(&bytes).map_err(|e| ImageError::Invalid {
                    path,
                    what,
                    reason: e.to_string(),
                })
            };
        let copy_blob = |digest: &str, media_type: &str| -> Result<Descriptor, ImageError> {
            let hex = digest.strip_prefix("sha256:").unwrap_or(digest);
            let path = dir.join("blobs").join("sha256").join(hex);
            let bytes = fs::read(&path).map_err(io_at(&path))?;
            let d = self.put_blob(media_type, &bytes)?;
            if d.digest != format!("sha256:{hex}") {
                return Err(ImageError::DigestMismatch {
                    expected: format!("sha256:{hex}"),
                    actual: d.digest[7..].to_owned(),
                });
            }
            Ok(d)
        };
        let mut imported = Vec::new();
        if path_exists(&dir.join("index.json")) {
            let index: Index =
                serde_json::from_value(read_json(dir.join("index.json"), "OCI index")?).map_err(
                    |e| ImageError::Invalid {
                        path: dir.join("index.json"),
                        what: "OCI index",
                        reason: e.to_string(),
                    },
                )?;
            for d in &index.manifests {
                let Some((name, tag)) = name_of(d) else {
                    continue;
                };
                let mut manifest_d = d.clone();
                if d.media_type == INDEX_MEDIA_TYPE
                    || d.media_type == "application/vnd.docker.distribution.manifest.list.v2+json"
                {
                    // A nested index: take the manifest for this platform.
                    let nested: Index = serde_json::from_value(read_json(
                        dir.join("blobs/sha256").join(&d.digest[7..]),
                        "OCI index",
                    )?)
                    .map_err(|e| ImageError::Invalid {
                        path: dir.join("blobs/sha256").join(&d.digest[7..]),
                        what: "OCI index",
                        reason: e.to_string(),
                    })?;
                    let pick = nested.manifests.iter().find(|m| {
                        m.platform
                            .as_ref()
                            .is_some_and(|p| p["os"] == "linux" && p["architecture"] == oci_arch())
                    });
                    let Some(m) = pick else { continue };
                    manifest_d = m.clone();
                }
                let mpath = dir.join("blobs/sha256").join(&manifest_d.digest[7..]);
                let manifest: Manifest =
                    serde_json::from_value(read_json(mpath.clone(), "OCI manifest")?).map_err(
                        |e| ImageError::Invalid {
                            path: mpath,
                            what: "OCI manifest",
                            reason: e.to_string(),
                        },
                    )?;
                copy_blob(&manifest.config.digest, &manifest.config.media_type)?;
                for l in &manifest.layers {
                    copy_blob(&l.digest, &l.media_type)?;
                }
                let stored = copy_blob(&manifest_d.digest, &manifest_d.media_type)?;
                self.tag(&name, &tag, &stored)?;
                imported.push(format!("{name}@{}", stored.digest));
            }
        } else if path_exists(&dir.join("manifest.json")) {
            // The older `docker save` form.
            #[derive(Deserialize)]
            #[serde(rename_all = "PascalCase")]
            struct Saved {
                config: String,
                #[serde(default)]
                repo_tags: Option<Vec<String>>,
                layers: Vec<String>,
            }
            let saved: Vec<Saved> = serde_json::from_value(read_json(
                dir.join("manifest.json"),
                "docker save manifest",
            )?)
            .map_err(|e| ImageError::Invalid {
                path: dir.join("manifest.json"),
                what: "docker save manifest",
                reason: e.to_string(),
            })?;
            for s in saved {
                let read = |rel: &str| {
                    let p = dir.join(rel);
                    fs::read(&p).map_err(io_at(&p))
                };
                let config_d = self.put_blob(CONFIG_MEDIA_TYPE, &read(&s.config)?)?;
                let mut layers = Vec::new();
                for l in &s.layers {
                    layers.push(self.put_blob(LAYER_MEDIA_TYPE, &read(l)?)?);
                }
                let manifest = Manifest {
                    schema_version: 2,
                    media_type: Some(MANIFEST_MEDIA_TYPE.to_owned()),
                    config: config_d,
                    layers,
                };
                let manifest_d = self.put_blob(
                    MANIFEST_MEDIA_TYPE,
                    &serde_json::to_vec(&manifest).expect("a manifest serializes"),
                )?;
                for full in s.repo_tags.unwrap_or_default() {
                    let (name, tag) = match full.rsplit_once(':') {
                        Some((n, t)) if !t.contains('/') => (n.to_owned(), t.to_owned()),
                        _ => (full.clone(), "latest".to_owned()),
                    };
                    self.tag(&name, &tag, &manifest_d)?;
                    imported.push(format!("{name}@{}", manifest_d.digest));
                }
            }
        }
        if imported.is_empty() {
            return Err(ImageError::NothingToImport {
                path: dir.to_path_buf(),
            });
        }
        Ok(imported)
    }
}

fn is_plain_tar(media_type: &str) -> bool {
    matches!(
        media_type,
        LAYER_MEDIA_TYPE
            | "application/vnd.docker.image.rootfs.diff.tar"
            | "application/vnd.oci.image.layer.nondistributable.v1.tar"
    )
}

/// The OCI architecture name of this host.
pub fn oci_arch() -> &'static str {
    if std::env::consts::ARCH == "aarch64" {
        "arm64"
    } else {
        "amd64"
    }
}

/// Whether `reference` parses as the contract's pinned reference.
pub fn is_pinned(reference: &str) -> bool {
    ImageReference::parse(reference).is_ok()
}

#[cfg(test)]
// The tests check files they made themselves.
#[allow(clippy::disallowed_methods)]
mod tests;
