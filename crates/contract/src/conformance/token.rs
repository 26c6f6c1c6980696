//! Conformance tokens and the case table (spec "Conformance"; DESIGN D14).

use std::collections::BTreeSet;
use std::fmt;

use crate::{NetworkMode, RetentionMode, SandboxProviderCapabilities};
use serde::{Deserialize, Serialize};

/// A capability token a case requires and a target declares.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    strum::IntoStaticStr,
    strum::EnumIter,
    strum::EnumString,
)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "kebab-case")]
#[strum(serialize_all = "kebab-case")]
pub enum Token {
    /// Mounts stage, reads are physically contained.
    Filesystem,
    /// Bounded commands run.
    Process,
    /// Durable snapshots and clones.
    Snapshot,
    /// Allowlist egress.
    NetworkAllowlist,
    /// No egress.
    NetworkNone,
    /// Zero-data-retention release.
    Zdr,
    /// Orphan sweep.
    Cleanup,
}

impl Token {
    /// Every token, in order.
    pub const ALL: [Token; 7] = [
        Token::Filesystem,
        Token::Process,
        Token::Snapshot,
        Token::NetworkAllowlist,
        Token::NetworkNone,
        Token::Zdr,
        Token::Cleanup,
    ];

    /// The kebab-case name.
    pub fn as_str(&self) -> &'static str {
        self.into()
    }

    /// Parses a kebab-case name.
    pub fn parse(name: &str) -> Option<Token> {
        name.parse().ok()
    }

    /// Whether `envelope` can back this token: what the token's cases need
    /// the envelope to claim.
    ///
    /// # Errors
    /// [`UnbackedToken`] naming the token and the claims it lacks.
    pub fn backed_by(&self, envelope: &SandboxProviderCapabilities) -> Result<(), UnbackedToken> {
        let token = *self;
        let need = |ok: bool, needs: &'static str| {
            if ok {
                Ok(())
            } else {
                Err(UnbackedToken { token, needs })
            }
        };
        match self {
            Token::Filesystem => need(
                envelope.max_mounts >= 2 && envelope.physically_contained_file_read,
                "max_mounts >= 2 and physically_contained_file_read: true",
            ),
            Token::Process => need(true, ""),
            Token::Snapshot => need(
                envelope.snapshots
                    && envelope.snapshot_clone
                    && envelope.retention_modes.contains(&RetentionMode::Durable)
                    && envelope.physically_contained_file_read,
                "snapshots, snapshot_clone, durable retention and contained reads",
            ),
            Token::NetworkAllowlist => need(
                envelope.network_modes.contains(&NetworkMode::Allowlist),
                "network_modes containing allowlist",
            ),
            Token::NetworkNone => need(
                envelope.network_modes.contains(&NetworkMode::None),
                "network_modes containing none",
            ),
            Token::Zdr => need(
                envelope
                    .retention_modes
                    .contains(&RetentionMode::EphemeralZdr),
                "retention_modes containing ephemeral_zdr",
            ),
            Token::Cleanup => need(true, ""),
        }
    }
}

/// A token the envelope cannot back: the envelope lacks what the token's
/// cases need it to claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("token {token} is not backed by the envelope: it needs {needs}")]
pub struct UnbackedToken {
    /// The token.
    pub token: Token,
    /// What the envelope must claim, e.g. `network_modes containing none`.
    pub needs: &'static str,
}

impl fmt::Display for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One conformance case: its id, the tokens it requires, what it proves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CaseInfo {
    /// Stable id, e.g. `stage-seal-execute`.
    pub id: &'static str,
    /// Tokens a target must declare for the case to run.
    pub requires: &'static [Token],
    /// One line: what a pass proves.
    pub proves: &'static str,
}

/// The nine cases, in the spec's order.
pub const CASES: [CaseInfo; 9] = [
    CaseInfo {
        id: "stage-seal-execute",
        requires: &[Token::Filesystem, Token::Process],
        proves: "declared mounts stage, read-only data seals, command output is bounded, outputs read back",
    },
    CaseInfo {
        id: "stage-git-project",
        requires: &[Token::Filesystem, Token::Process],
        proves: "an immutable Git blob stages without a sandbox credential",
    },
    CaseInfo {
        id: "checkpoint-clone",
        requires: &[Token::Snapshot],
        proves: "a clone lands in an independent target-Session snapshot",
    },
    CaseInfo {
        id: "allowlist-egress",
        requires: &[Token::NetworkAllowlist],
        proves: "only the declared outbound hosts are reachable",
    },
    CaseInfo {
        id: "durable-round-trip",
        requires: &[Token::Snapshot],
        proves: "files survive snapshot, release and resume",
    },
    CaseInfo {
        id: "none-egress",
        requires: &[Token::NetworkNone],
        proves: "outbound traffic is denied for a none-network profile",
    },
    CaseInfo {
        id: "zdr-release",
        requires: &[Token::Zdr],
        proves: "ZDR snapshots are forbidden and release destroys all state",
    },
    CaseInfo {
        id: "orphan-reclaim",
        requires: &[Token::Cleanup],
        proves: "expired instances are reclaimed by a fresh provider without a database reset",
    },
    CaseInfo {
        id: "pause-pinning",
        requires: &[Token::Snapshot, Token::Cleanup],
        proves: "a pinned snapshot survives orphan cleanup until its own expiry",
    },
];

/// The case with this id.
pub fn case(id: &str) -> Option<&'static CaseInfo> {
    CASES.iter().find(|c| c.id == id)
}

/// The tokens of `requires` missing from `declared`.
pub fn missing(requires: &[Token], declared: &BTreeSet<Token>) -> Vec<Token> {
    requires
        .iter()
        .filter(|t| !declared.contains(t))
        .copied()
        .collect()
}
