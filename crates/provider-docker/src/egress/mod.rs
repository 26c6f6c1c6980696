//! Allowlist egress, enforced from the host side.
//!
//! An instance whose profile asks for `allowlist` joins one bridge network
//! ([`EgressConfig::network`]) and gets an nftables rule set ([`nft`]) in
//! its own network namespace, loaded by the provider from the host
//! (`nsenter --target PID --net nft -f -`) before the instance is handed
//! out. The workload cannot change it: every sandbox container runs with
//! every capability dropped and `no-new-privileges`, so even uid 0 inside
//! lacks `CAP_NET_ADMIN` (rules, routes, addresses, links) and
//! `CAP_NET_RAW` (packet sockets that would skip the IP hooks).
//!
//! Names are resolved by the provider, once per activation (provision ->
//! activate, and every resume): first [`EgressConfig::static_hosts`], then
//! the host's resolver. The resolved addresses are both what the rules
//! allow and what the workload sees in `/etc/hosts`; they are not
//! re-resolved while the instance lives. The provider offers no DNS
//! resolver to the workload: every DNS server, Docker's embedded one
//! included, is outside the allowlist unless listed.
//!
//! What the provider needs to enforce this is probed once at construction
//! ([`EgressSupport::probe`]): `nsenter` and `nft` on the host, and the
//! privilege to enter another namespace and load rules there. Without it
//! the provider does not offer `allowlist` and says why.
//!
//! The decision and the options weighed: `docs/decisions/020-docker-allowlist-egress.md`.

pub use checkfu_sandbox_hostfs::nft;
use checkfu_sandbox_hostfs::{allowlist, host_tools};

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use checkfu_sandbox_contract::NetworkDestination;
use tokio::io::AsyncWriteExt as _;

pub use nft::AllowedEndpoint;

/// Docker's default bridge network: NAT to the host's routes, no embedded
/// DNS resolver, present on every daemon (nothing for the provider to
/// create or sweep).
pub const DEFAULT_EGRESS_NETWORK: &str = "bridge";

/// Bound on each `nsenter`/`nft` invocation.
pub const NFT_TIMEOUT: Duration = Duration::from_secs(10);

/// Where allowlist instances connect and how their names resolve.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EgressConfig {
    /// The Docker network allowlist instances join; [`DEFAULT_EGRESS_NETWORK`]
    /// unless set. It must exist at the daemon; the provider neither creates
    /// nor removes it.
    pub network: String,
    /// Names the provider resolves itself before asking the host's
    /// resolver (for example names of hosts on a private network), each to
    /// one or more addresses.
    pub static_hosts: BTreeMap<String, Vec<IpAddr>>,
}

impl Default for EgressConfig {
    fn default() -> Self {
        EgressConfig {
            network: DEFAULT_EGRESS_NETWORK.to_owned(),
            static_hosts: BTreeMap::new(),
        }
    }
}

/// Whether this host lets the provider enforce an allowlist.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EgressSupport {
    /// The tools are present and a rule set loads: `allowlist` is offered,
    /// graded `enforced`.
    Enforced {
        /// The `nsenter` binary.
        nsenter: PathBuf,
        /// The `nft` binary.
        nft: PathBuf,
    },
    /// `allowlist` is not offered; the reason names what is missing.
    Unavailable(String),
}

impl EgressSupport {
    /// Probes this host once: finds `nsenter` and `nft`
    /// ([`host_tools::find_tool`]), then checks that a rule set loads in a
    /// network namespace entered through `nsenter`
    /// ([`host_tools::check_nft`]). Nothing is changed on the host.
    pub fn probe() -> EgressSupport {
        let Some(nsenter) = host_tools::find_tool("nsenter") else {
            return EgressSupport::Unavailable("nsenter is not installed on the host".into());
        };
        let Some(nft) = host_tools::find_tool("nft") else {
            return EgressSupport::Unavailable(
                "nft (nftables) is not installed on the host".into(),
            );
        };
        match host_tools::check_nft(&nsenter, &nft) {
            Ok(()) => EgressSupport::Enforced { nsenter, nft },
            Err(why) => EgressSupport::Unavailable(why),
        }
    }

    /// [`EgressSupport::probe`], run once per process (the host's tools and
    /// privilege do not change under a running provider) and shared by
    /// every provider object.
    pub fn probe_cached() -> EgressSupport {
        static PROBED: std::sync::OnceLock<EgressSupport> = std::sync::OnceLock::new();
        PROBED.get_or_init(EgressSupport::probe).clone()
    }

    /// Whether `allowlist` is offered.
    pub fn is_enforced(&self) -> bool {
        matches!(self, EgressSupport::Enforced { .. })
    }
}

/// What one activation of an allowlist instance gets: the endpoints the
/// rules allow and the `/etc/hosts` entries (`name:address`) of its names.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct EgressPlan {
    /// Allowed TCP endpoints.
    pub endpoints: Vec<AllowedEndpoint>,
    /// Docker `extra_hosts` entries, `name:address`.
    pub hosts: Vec<String>,
}

/// Resolves `destinations` (IP literals as they are; names through
/// `static_hosts`, then the host's resolver: [`allowlist::plan`], off the
/// executor) into a plan.
///
/// # Errors
/// A line naming the destination that does not resolve to any address.
pub async fn plan(
    config: &EgressConfig,
    destinations: &[NetworkDestination],
) -> Result<EgressPlan, String> {
    let destinations = destinations.to_vec();
    let static_hosts = config.static_hosts.clone();
    let resolved =
        tokio::task::spawn_blocking(move || allowlist::plan(&destinations, &static_hosts))
            .await
            .map_err(|e| format!("resolving the destinations: {e}"))??;
    Ok(EgressPlan {
        endpoints: resolved.endpoints,
        hosts: resolved
            .hosts
            .into_iter()
            .map(|(ip, name)| format!("{name}:{ip}"))
            .collect(),
    })
}

/// Loads the rule set of `endpoints` into the network namespace of
/// process `pid` (a container's init, seen from the host) and reads it
/// back.
///
/// # Errors
/// A line naming the failing step: the namespace is gone, `nft` refused
/// the script, a step outlived [`NFT_TIMEOUT`], or the read-back differs.
pub async fn install(
    nsenter: &Path,
    nft: &Path,
    pid: u32,
    endpoints: &[AllowedEndpoint],
) -> Result<(), String> {
    let script = nft::ruleset(endpoints);
    run_in_netns(nsenter, nft, pid, &["-f", "-"], Some(script.as_bytes())).await?;
    let listing = run_in_netns(
        nsenter,
        nft,
        pid,
        &["list", "table", nft::TABLE_FAMILY, nft::TABLE_NAME],
        None,
    )
    .await?;
    if nft::listing_matches(&listing, endpoints) {
        Ok(())
    } else {
        Err(format!(
            "the rule set read back from the namespace of pid {pid} differs from the one loaded: {listing}"
        ))
    }
}

/// Lists the allowlist table in the namespace of `pid` (`nft list table`),
/// for checks and tests.
///
/// # Errors
/// As [`install`].
pub async fn list(nsenter: &Path, nft: &Path, pid: u32) -> Result<String, String> {
    run_in_netns(
        nsenter,
        nft,
        pid,
        &["list", "table", nft::TABLE_FAMILY, nft::TABLE_NAME],
        None,
    )
    .await
}

async fn run_in_netns(
    nsenter: &Path,
    nft: &Path,
    pid: u32,
    args: &[&str],
    stdin: Option<&[u8]>,
) -> Result<String, String> {
    let mut cmd = tokio::process::Command::new(nsenter);
    cmd.arg(format!("--target={pid}"))
        .arg("--net")
        .arg("--")
        .arg(nft)
        .args(args)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let what = format!("nft {} in the namespace of pid {pid}", args.join(" "));
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("{what}: spawning nsenter: {e}"))?;
    let run = async {
        if let (Some(bytes), Some(mut pipe)) = (stdin, child.stdin.take()) {
            pipe.write_all(bytes)
                .await
                .map_err(|e| format!("{what}: writing the script: {e}"))?;
        }
        child
            .wait_with_output()
            .await
            .map_err(|e| format!("{what}: {e}"))
    };
    let out = tokio::time::timeout(NFT_TIMEOUT, run)
        .await
        .map_err(|_| format!("{what}: no answer within {} s", NFT_TIMEOUT.as_secs()))??;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "{what}: {} {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn static_names_become_extra_hosts_entries_and_missing_ones_are_named() {
        let config = EgressConfig {
            network: "n".into(),
            static_hosts: BTreeMap::from([
                (
                    "allowed.test".to_owned(),
                    vec!["10.0.0.2".parse().unwrap(), "fd00::2".parse().unwrap()],
                ),
                ("empty.test".to_owned(), vec![]),
            ]),
        };
        let allowed = NetworkDestination {
            host: "allowed.test".into(),
            port: 7000,
        };
        let p = plan(&config, std::slice::from_ref(&allowed)).await.unwrap();
        assert_eq!(p.hosts, ["allowed.test:10.0.0.2", "allowed.test:fd00::2"]);
        assert_eq!(p.endpoints.len(), 2);
        let empty = NetworkDestination {
            host: "empty.test".into(),
            port: 1,
        };
        let e = plan(&config, &[allowed, empty]).await.unwrap_err();
        assert!(e.contains("empty.test:1"), "{e}");
    }
}
