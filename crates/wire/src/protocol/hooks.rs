//! Shapes of the conformance hooks a served target may answer.

use super::*;

/// `conformance/describe` result: what a conformance target declares.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DescribeResult {
    /// Short target name for evidence.
    pub name: String,
    /// Declared conformance tokens.
    pub declared_tokens: Vec<Token>,
    /// The pinned root image (`name@sha256:<hex>`).
    pub root_image: String,
    /// The tier to request.
    pub tier: Tier,
    /// The platform to request.
    pub platform: Platform,
    /// The provider's clock now; with `manual_clock` the runner starts a
    /// manual clock at this instant, otherwise it uses the system clock.
    pub clock_now: Timestamp,
    /// Whether the served provider's clock is manual (deterministic).
    pub manual_clock: bool,
    /// Whether the provider's beginActiveWrite journal keeps file bodies on
    /// durable host storage (then `ephemeral_zdr` transactions must be
    /// refused). Absent: `false`.
    #[serde(default)]
    pub active_write_journal_durable: bool,
}

/// `conformance/pauseWorkload` params: pause (`paused: true`) or unpause an
/// instance's workload from outside the provider.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PauseWorkloadParams {
    /// The instance.
    pub instance_id: String,
    /// `true` to pause, `false` to unpause.
    pub paused: bool,
}

/// `conformance/workloadPaused` params.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkloadPausedParams {
    /// The instance.
    pub instance_id: String,
}

/// `conformance/workloadPaused` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkloadPausedResult {
    /// Whether the workload is paused now.
    pub paused: bool,
}

/// A listener (`conformance/startListener` result; `controlProbe` and
/// `stopListener` params).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListenerWire {
    /// Host the sandbox would dial.
    pub host: String,
    /// TCP port.
    pub port: u16,
    /// Bytes the listener sends on accept.
    pub token: String,
}

/// `conformance/controlProbe` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProbeResult {
    /// What the listener sent.
    pub data_base64: Bytes,
}

/// `conformance/liveObjects` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LiveObjectsWire {
    /// Instance ids.
    pub instances: Vec<String>,
    /// Snapshot ids.
    pub snapshots: Vec<String>,
}

/// A hook failure: the `error.data` of a failed `conformance/*` call
/// (code [`code::HOOK_FAILED`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HookFailure {
    /// What went wrong.
    pub message: String,
}
