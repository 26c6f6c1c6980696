//! The suite against the memory oracle: honest passes, every fault fails
//! in the case the fault table names, skips are recorded, an unbacked
//! declared token fails its case.

use std::collections::BTreeSet;
use std::sync::Arc;

use async_trait::async_trait;
use checkfu_sandbox_conformance::faults::CAUGHT_BY;
use checkfu_sandbox_conformance::*;
use checkfu_sandbox_contract::*;
use checkfu_sandbox_memory::conformance::MemoryTarget;
use checkfu_sandbox_memory::Fault;

mod common;

fn quiet(_: Progress<'_>) {}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn honest_oracle_passes_all_nine_and_leaves_nothing() {
    let target = Arc::new(MemoryTarget::new());
    let evidence = run_suite(target.clone(), &SuiteOptions::default(), &quiet)
        .await
        .unwrap();
    assert_eq!(evidence.summary.passed, 9, "{}", evidence.table());
    assert!(evidence.ok());
    assert!(
        target.memory().live_instances().is_empty(),
        "{:?}",
        target.memory().live_instances()
    );
    assert!(
        target.memory().live_snapshots().is_empty(),
        "{:?}",
        target.memory().live_snapshots()
    );

    let json = serde_json::to_value(&evidence).unwrap();
    assert_eq!(json["suite_revision"], SUITE_REVISION);
    assert_eq!(json["cases"].as_array().unwrap().len(), 9);
    assert_eq!(json["cases"][0]["outcome"], "passed");
    let back: Evidence = serde_json::from_value(json).unwrap();
    assert_eq!(back, evidence);

    let xml = junit_xml(&evidence).unwrap();
    assert_eq!(xml.matches("<testcase ").count(), 9);
    assert!(!xml.contains("<failure"));
    assert!(evidence
        .table()
        .ends_with("9 passed, 0 failed, 0 skipped\n"));
}

#[test]
fn fault_table_names_every_fault_once() {
    let table: BTreeSet<&str> = CAUGHT_BY.iter().map(|(f, _)| *f).collect();
    let all: BTreeSet<String> = Fault::all().iter().map(|f| f.name()).collect();
    assert_eq!(table.len(), CAUGHT_BY.len(), "a fault is listed twice");
    assert_eq!(
        table,
        all.iter().map(String::as_str).collect::<BTreeSet<_>>()
    );
    for (_, case_id) in CAUGHT_BY {
        assert!(case(case_id).is_some(), "{case_id} is not a case");
    }
}

/// Every fault makes the suite fail, and fail in the case the table names,
/// with a failure record naming the step.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_fault_fails_the_suite_in_its_case() {
    let mut runs = tokio::task::JoinSet::new();
    for fault in Fault::all() {
        runs.spawn(async move {
            let target = Arc::new(MemoryTarget::with_faults(vec![fault]));
            let options = SuiteOptions {
                injected_faults: vec![fault.name()],
                case_deadline: std::time::Duration::from_secs(90),
                ..SuiteOptions::default()
            };
            let evidence = run_suite(target, &options, &quiet).await.unwrap();
            (fault, evidence)
        });
    }
    let mut checked = 0;
    while let Some(joined) = runs.join_next().await {
        let (fault, evidence) = joined.unwrap();
        let name = fault.name();
        assert!(
            !evidence.ok(),
            "fault {name} passed the whole suite:\n{}",
            evidence.table()
        );
        let expected_case = checkfu_sandbox_conformance::faults::caught_by(&name);
        let record = evidence
            .cases
            .iter()
            .find(|c| c.id == expected_case)
            .unwrap();
        assert!(
            matches!(record.outcome, Outcome::Failed | Outcome::TimedOut),
            "fault {name}: case {expected_case} was {:?}:\n{}",
            record.outcome,
            evidence.table()
        );
        let failure = record.failure.as_ref().unwrap();
        assert!(
            !failure.step.is_empty() && !failure.message.is_empty(),
            "{failure:?}"
        );
        assert_eq!(evidence.injected_faults, vec![name]);
        checked += 1;
    }
    assert_eq!(checked, Fault::all().len());
}

/// A memory target that declares only some tokens.
struct Declaring {
    inner: MemoryTarget,
    tokens: BTreeSet<Token>,
}

#[async_trait]
impl ConformanceTarget for Declaring {
    fn name(&self) -> &str {
        "memory-subset"
    }
    fn provider(&self) -> Arc<dyn SandboxProvider> {
        self.inner.provider()
    }
    fn reopen(&self) -> Arc<dyn SandboxProvider> {
        self.inner.reopen()
    }
    fn declared_tokens(&self) -> BTreeSet<Token> {
        self.tokens.clone()
    }
    fn clock(&self) -> Arc<dyn Clock> {
        self.inner.clock()
    }
    fn root_image(&self) -> ImageReference {
        self.inner.root_image()
    }
    fn tier_platform(&self) -> (Tier, Platform) {
        self.inner.tier_platform()
    }
    async fn start_listener(&self) -> Result<Listener, TargetError> {
        self.inner.start_listener().await
    }
    async fn control_probe(&self, l: &Listener) -> Result<Vec<u8>, TargetError> {
        self.inner.control_probe(l).await
    }
    async fn stop_listener(&self, l: &Listener) {
        self.inner.stop_listener(l).await
    }
    async fn live_objects(&self) -> Result<LiveObjects, TargetError> {
        self.inner.live_objects().await
    }
    async fn close(&self) -> Result<(), TargetError> {
        self.inner.close().await
    }
}

#[tokio::test]
async fn missing_tokens_are_recorded_skips_never_passes() {
    let target = Arc::new(Declaring {
        inner: MemoryTarget::new(),
        tokens: [Token::Filesystem, Token::Process, Token::Zdr]
            .into_iter()
            .collect(),
    });
    let evidence = run_suite(target, &SuiteOptions::default(), &quiet)
        .await
        .unwrap();
    assert_eq!(evidence.summary.passed, 3, "{}", evidence.table());
    assert_eq!(evidence.summary.skipped, 6);
    let clone = evidence
        .cases
        .iter()
        .find(|c| c.id == "checkpoint-clone")
        .unwrap();
    assert_eq!(clone.outcome, Outcome::Skipped);
    assert_eq!(clone.missing_tokens, vec![Token::Snapshot]);
    let pinning = evidence
        .cases
        .iter()
        .find(|c| c.id == "pause-pinning")
        .unwrap();
    assert_eq!(
        pinning.missing_tokens,
        vec![Token::Snapshot, Token::Cleanup]
    );
    let xml = junit_xml(&evidence).unwrap();
    assert_eq!(xml.matches("<skipped ").count(), 6);
    assert!(xml.contains("missing tokens: snapshot, cleanup"));
}

#[tokio::test]
async fn selected_cases_only() {
    let options = SuiteOptions {
        cases: vec!["zdr-release".into(), "none-egress".into()],
        ..SuiteOptions::default()
    };
    let evidence = run_suite(Arc::new(MemoryTarget::new()), &options, &quiet)
        .await
        .unwrap();
    let ids: Vec<&str> = evidence.cases.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(ids, ["none-egress", "zdr-release"]);
    let unknown = SuiteOptions {
        cases: vec!["no-such-case".into()],
        ..SuiteOptions::default()
    };
    let err = run_suite(Arc::new(MemoryTarget::new()), &unknown, &quiet)
        .await
        .unwrap_err();
    assert!(
        matches!(err, SuiteError::UnknownCase(ref id, _) if id == "no-such-case"),
        "{err}"
    );
}

/// `close` destroys what a suite left behind (here: an instance and a
/// snapshot made outside any case, and a listener) and a second `close` is
/// a no-op.
#[tokio::test]
async fn close_removes_everything_and_is_idempotent() {
    let target = MemoryTarget::new();
    let live = |t: &MemoryTarget| (t.memory().live_instances(), t.memory().live_snapshots());
    let listener = target.start_listener().await.unwrap();
    assert_eq!(
        target.control_probe(&listener).await.unwrap(),
        listener.token.as_bytes()
    );
    let mut request = common::request(RetentionMode::Durable);
    request.root_image = target.root_image();
    let instance = common::active_with(target.memory(), &request, &[]).await;
    target
        .memory()
        .snapshot(SnapshotRequest {
            instance_id: instance.clone(),
            expires_at: common::ts("2030-01-01T12:00:00.000Z"),
        })
        .await
        .unwrap();
    let before = live(&target);
    assert_eq!(before.0, vec![instance]);
    assert_eq!(before.1.len(), 1);

    target.close().await.unwrap();
    assert_eq!(live(&target), (Vec::new(), Vec::new()));
    assert_eq!(
        target.control_probe(&listener).await,
        Err(TargetError::NotListening {
            host: listener.host.clone(),
            port: listener.port,
        })
    );
    target.close().await.unwrap();
    assert_eq!(live(&target), (Vec::new(), Vec::new()));
}

/// A failing case whose detail carries terminal output (ANSI escape codes,
/// a bell, a NUL) still gives a JUnit report a standard XML 1.0 parser
/// accepts, with the failure's text intact minus the escapes.
#[tokio::test]
async fn junit_with_ansi_escapes_in_a_failure_parses_as_xml() {
    let fault = Fault::from_name("seal-ignored").unwrap();
    let target = Arc::new(MemoryTarget::with_faults(vec![fault]));
    let options = SuiteOptions {
        cases: vec!["stage-seal-execute".into(), "checkpoint-clone".into()],
        ..SuiteOptions::default()
    };
    let mut evidence = run_suite(target, &options, &quiet).await.unwrap();
    let failed = evidence
        .cases
        .iter_mut()
        .find(|c| c.outcome == Outcome::Failed)
        .expect("the fault fails a case");
    let failure = failed.failure.as_mut().unwrap();
    failure.message = "\u{1b}[31mred\u{1b}[0m stderr\u{7}\u{0} <&> \"quoted\"".into();
    let xml = junit_xml(&evidence).unwrap();

    let doc = roxmltree::Document::parse(&xml).expect("well-formed XML 1.0");
    let cases: Vec<_> = doc
        .descendants()
        .filter(|n| n.has_tag_name("testcase"))
        .collect();
    assert_eq!(cases.len(), 2);
    let failure = doc
        .descendants()
        .find(|n| n.has_tag_name("failure"))
        .expect("a failure element");
    let message = failure.attribute("message").unwrap();
    assert!(
        message.ends_with("red stderr <&> \"quoted\""),
        "{message:?}"
    );
    assert!(!xml.contains("&#x1b;") && !xml.contains('\u{1b}'), "{xml}");
    let suites = doc.root_element();
    assert_eq!(suites.attribute("tests"), Some("2"));
    assert_eq!(suites.attribute("failures"), Some("1"));
}

/// The oracle's provider with an envelope that no longer offers the
/// allowlist mode, so a declared `network-allowlist` is unbacked.
struct NoAllowlist(Arc<dyn SandboxProvider>);

#[async_trait]
impl SandboxProvider for NoAllowlist {
    fn provider_id(&self) -> &str {
        self.0.provider_id()
    }
    fn capabilities(&self) -> SandboxProviderCapabilities {
        let mut e = self.0.capabilities();
        e.network_modes.retain(|m| *m != NetworkMode::Allowlist);
        e
    }
    async fn provision(
        &self,
        r: SandboxProvisionRequest,
    ) -> Result<Handoff<SandboxInstance>, SandboxError> {
        self.0.provision(r).await
    }
    async fn write_file(&self, r: WriteFileRequest) -> Result<(), SandboxError> {
        self.0.write_file(r).await
    }
    async fn activate(&self, r: ActivateRequest) -> Result<Handoff<SandboxInstance>, SandboxError> {
        self.0.activate(r).await
    }
    async fn execute(&self, r: ExecuteRequest) -> Result<SandboxCommandResult, SandboxError> {
        self.0.execute(r).await
    }
    async fn read_file(&self, r: ReadFileRequest) -> Result<SandboxFileContent, SandboxError> {
        self.0.read_file(r).await
    }
    async fn snapshot(&self, r: SnapshotRequest) -> Result<Handoff<SandboxSnapshot>, SandboxError> {
        self.0.snapshot(r).await
    }
    async fn clone_snapshot(
        &self,
        r: CloneSnapshotRequest,
    ) -> Result<Handoff<SandboxSnapshot>, SandboxError> {
        self.0.clone_snapshot(r).await
    }
    async fn release(
        &self,
        r: ReleaseRequest,
    ) -> Result<Handoff<ReleaseDisposition>, SandboxError> {
        self.0.release(r).await
    }
    async fn resume(&self, r: ResumeRequest) -> Result<Handoff<SandboxInstance>, SandboxError> {
        self.0.resume(r).await
    }
    async fn destroy(&self, r: DestroyRequest) -> Result<(), SandboxError> {
        self.0.destroy(r).await
    }
    async fn destroy_snapshot(&self, r: DestroySnapshotRequest) -> Result<(), SandboxError> {
        self.0.destroy_snapshot(r).await
    }
    async fn cleanup(&self, r: CleanupRequest) -> Result<CleanupResult, SandboxError> {
        self.0.cleanup(r).await
    }
    fn read_files(&self) -> Option<&dyn ReadFilesMember> {
        self.0.read_files()
    }
    fn list_dir(&self) -> Option<&dyn ListDirMember> {
        self.0.list_dir()
    }
    fn list_project_dir(&self) -> Option<&dyn ListProjectDirMember> {
        self.0.list_project_dir()
    }
    fn open_process(&self) -> Option<&dyn OpenProcessMember> {
        self.0.open_process()
    }
    fn begin_active_write(&self) -> Option<&dyn ActiveWriteMember> {
        self.0.begin_active_write()
    }
}

/// The memory target, every token declared, behind [`NoAllowlist`].
struct Unbacked {
    inner: MemoryTarget,
    provider: Arc<dyn SandboxProvider>,
}

#[async_trait]
impl ConformanceTarget for Unbacked {
    fn name(&self) -> &str {
        "memory-unbacked"
    }
    fn provider(&self) -> Arc<dyn SandboxProvider> {
        self.provider.clone()
    }
    fn reopen(&self) -> Arc<dyn SandboxProvider> {
        Arc::new(NoAllowlist(self.inner.reopen()))
    }
    fn declared_tokens(&self) -> BTreeSet<Token> {
        self.inner.declared_tokens()
    }
    fn clock(&self) -> Arc<dyn Clock> {
        self.inner.clock()
    }
    fn root_image(&self) -> ImageReference {
        self.inner.root_image()
    }
    fn tier_platform(&self) -> (Tier, Platform) {
        self.inner.tier_platform()
    }
    async fn start_listener(&self) -> Result<Listener, TargetError> {
        self.inner.start_listener().await
    }
    async fn control_probe(&self, l: &Listener) -> Result<Vec<u8>, TargetError> {
        self.inner.control_probe(l).await
    }
    async fn stop_listener(&self, l: &Listener) {
        self.inner.stop_listener(l).await
    }
    async fn live_objects(&self) -> Result<LiveObjects, TargetError> {
        self.inner.live_objects().await
    }
    async fn close(&self) -> Result<(), TargetError> {
        self.inner.close().await
    }
}

/// "Declare and fail": a declared token the envelope cannot back fails the
/// case that needs it, naming the token and the missing claim, and the
/// suite goes on to pass every other case.
#[tokio::test]
async fn an_unbacked_declared_token_fails_its_case_and_the_suite_runs_on() {
    let inner = MemoryTarget::new();
    let provider: Arc<dyn SandboxProvider> = Arc::new(NoAllowlist(inner.provider()));
    assert!(inner.declared_tokens().contains(&Token::NetworkAllowlist));
    let target = Arc::new(Unbacked { inner, provider });
    let evidence = run_suite(target.clone(), &SuiteOptions::default(), &quiet)
        .await
        .unwrap();
    assert_eq!(evidence.summary.failed, 1, "{}", evidence.table());
    assert_eq!(evidence.summary.passed, 8, "{}", evidence.table());
    let allowlist = evidence
        .cases
        .iter()
        .find(|c| c.id == "allowlist-egress")
        .unwrap();
    assert_eq!(allowlist.outcome, Outcome::Failed);
    let failure = allowlist.failure.as_ref().unwrap();
    assert_eq!(failure.step, "declared tokens");
    assert_eq!(
        failure.message,
        "declared token network-allowlist is not backed by the envelope: it needs network_modes containing allowlist"
    );
    target.close().await.unwrap();
}
