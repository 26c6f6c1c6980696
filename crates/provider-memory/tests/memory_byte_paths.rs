//! File names are bytes (decision 021): a name that is not
//! UTF-8 is written, listed, read (one and batch), kept by a snapshot and
//! resumed exactly, and its wire form decodes back to the same bytes.

mod common;

use checkfu_sandbox_contract::*;
use common::*;

const BAD: &[u8] = b"/mnt/session/outputs/bad-\xff";

fn bad() -> SandboxPath {
    SandboxPath::from_bytes(BAD.to_vec())
}

async fn listed(p: &checkfu_sandbox_memory::MemoryProvider, id: &str) -> Vec<SandboxPath> {
    p.list_dir()
        .expect("list_dir")
        .list_dir(ListDirRequest {
            instance_id: id.into(),
            root: "/mnt/session/outputs".into(),
            max_entries: 10,
        })
        .await
        .unwrap()
        .entries
        .into_iter()
        .map(|e| e.path)
        .collect()
}

#[tokio::test]
async fn a_name_that_is_not_utf8_survives_listing_reads_and_a_snapshot_exactly() {
    let (p, _clock) = provider();
    let req = request(RetentionMode::Durable);
    let id = provision(&p, &req).await;
    for (path, body) in [
        (bad(), &b"bad\n"[..]),
        ("/mnt/session/outputs/good.txt".into(), b"good\n"),
    ] {
        p.write_file(WriteFileRequest {
            instance_id: id.clone(),
            path,
            content_base64: Bytes(body.to_vec()),
            mode: None,
            kind: None,
        })
        .await
        .unwrap();
    }
    p.activate(ActivateRequest {
        instance_id: id.clone(),
    })
    .await
    .unwrap();

    let paths = listed(&p, &id).await;
    assert_eq!(paths, vec![bad(), "/mnt/session/outputs/good.txt".into()]);
    assert_eq!(paths[0].as_bytes(), BAD);

    // The listing's wire form carries the exact bytes and decodes back.
    let listing = ListDirResult {
        entries: vec![DirEntry {
            path: paths[0].clone(),
            size_bytes: 4,
            sha256: None,
            mode: None,
        }],
    };
    let wire = serde_json::to_value(&listing).unwrap();
    assert_eq!(
        wire["entries"][0]["path"],
        serde_json::json!({"bytes_base64": "L21udC9zZXNzaW9uL291dHB1dHMvYmFkLf8="})
    );
    let back: ListDirResult = serde_json::from_value(wire).unwrap();
    assert_eq!(back, listing);

    let one = p
        .read_file(ReadFileRequest {
            instance_id: id.clone(),
            path: bad(),
            allowed_root: "/mnt/session/outputs".into(),
            maximum_bytes: 100,
        })
        .await
        .unwrap();
    assert_eq!((one.path, one.content_base64.0), (bad(), b"bad\n".to_vec()));
    let batch = p
        .read_files()
        .expect("read_files")
        .read_files(ReadFilesRequest {
            instance_id: id.clone(),
            allowed_root: "/mnt/session/outputs".into(),
            files: vec![ReadFilesEntry {
                path: bad(),
                maximum_bytes: 100,
            }],
            aggregate_maximum_bytes: 100,
        })
        .await
        .unwrap();
    assert_eq!(
        batch.files,
        vec![ReadFileOutcome::Read {
            path: bad(),
            content_base64: Bytes(b"bad\n".to_vec()),
        }]
    );

    let snap = p
        .snapshot(SnapshotRequest {
            instance_id: id.clone(),
            expires_at: ts("2030-02-01T00:00:00.000Z"),
        })
        .await
        .unwrap()
        .value;
    p.destroy(DestroyRequest {
        instance_id: id.clone(),
    })
    .await
    .unwrap();
    let mut resume = req.clone();
    resume.run_id = "run-2".into();
    let resumed = p
        .resume(ResumeRequest {
            request: resume,
            snapshot: snap.clone(),
        })
        .await
        .unwrap()
        .value;
    assert_eq!(
        listed(&p, &resumed.instance_id).await,
        vec![bad(), "/mnt/session/outputs/good.txt".into()]
    );
    for instance_id in [resumed.instance_id] {
        p.destroy(DestroyRequest { instance_id }).await.unwrap();
    }
    p.destroy_snapshot(DestroySnapshotRequest {
        snapshot_id: snap.snapshot_id,
    })
    .await
    .unwrap();
    assert!(p.live_instances().is_empty());
}
