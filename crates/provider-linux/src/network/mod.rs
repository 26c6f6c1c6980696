//! Allowlist egress for instances of the linux provider (decision
//! 031 in `docs/decisions/`).
//!
//! An instance whose profile asks for `allowlist` gets, after its init
//! started and before it is handed out:
//!
//! * one end of a veth pair, named `eth0` inside its network namespace,
//!   with an address of the scope's subnet and a default route through
//!   the scope's **bridge**; the host end (`cflv` + 11 hex digits of the
//!   scope and instance id) is a port of that bridge;
//! * the nftables table of [`checkfu_sandbox_hostfs::nft`] in its network
//!   namespace, loaded from the host (`nsenter --target PID --net nft -f
//!   -`) and read back: TCP to the listed endpoints only;
//! * `/etc/hosts` in its writable layer, pinning every listed name to the
//!   addresses the provider resolved (written before the init starts).
//!
//! The workload cannot change any of it: every command runs with empty
//! capability sets and `no_new_privs` (no `CAP_NET_ADMIN`, no
//! `CAP_NET_RAW`).
//!
//! The bridge (`cflb` + 11 hex digits of the scope, with an address `.1`
//! of a `/24` chosen in `100.64.0.0/10` that no host address overlaps) is
//! the only host-global object. Every link the provider creates carries
//! the alias `checkfu-linux:<scope>[:<instance>]`, and nothing without it
//! is ever removed. Instance addresses are leases (files
//! `net/leases/<host octet>` in the state directory holding the instance
//! id). All changes to the bridge and the leases happen under an
//! exclusive `flock` of `net/lock`. The bridge is removed when the last
//! lease of the scope is returned (destroy, release, rollback) and by
//! cleanup; a veth pair dies with its instance's network namespace, and
//! cleanup removes any host end whose instance has no directory.
//!
//! The bridge's gateway address belongs to the host: destinations on the
//! host (listeners bound on the gateway address) are reachable; routed
//! destinations beyond the host are not (the provider installs no NAT and
//! changes no forwarding setting), so an allowlist to an address off the
//! host is enforced but unreachable.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::net::Ipv4Addr;
use std::os::fd::AsFd as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use checkfu_sandbox_contained as contained;
use checkfu_sandbox_contract::NetworkDestination;
use checkfu_sandbox_hostfs::nft;
use checkfu_sandbox_hostfs::{allowlist, host_tools};

pub use checkfu_sandbox_hostfs::allowlist::EgressPlan;
use sha2::{Digest as _, Sha256};

/// The prefix of the alias of every link the provider creates.
pub const LINK_ALIAS_PREFIX: &str = "checkfu-linux:";
/// The prefix of a scope's bridge name (then 11 hex digits).
pub const BRIDGE_PREFIX: &str = "cflb";
/// The prefix of an instance's host-end veth name (then 11 hex digits).
pub const VETH_PREFIX: &str = "cflv";
/// The interface name of the instance end inside its network namespace.
pub const INSTANCE_IFNAME: &str = "eth0";
/// The prefix length of a scope's subnet.
pub const SUBNET_PREFIX_LEN: u8 = 24;

/// Whether this host lets the provider enforce an allowlist.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EgressSupport {
    /// The tools are present and a rule set checks: `allowlist` is
    /// offered, graded `enforced`.
    Enforced {
        /// The `ip` binary (iproute2).
        ip: PathBuf,
        /// The `nsenter` binary.
        nsenter: PathBuf,
        /// The `nft` binary.
        nft: PathBuf,
    },
    /// `allowlist` is not offered; the reason names what is missing.
    Unavailable(String),
}

impl EgressSupport {
    /// Probes this host once: finds `ip`, `nsenter` and `nft`
    /// ([`host_tools::find_tool`]), then checks that a rule set loads in a
    /// network namespace entered through `nsenter`
    /// ([`host_tools::check_nft`]). Nothing is changed on the host.
    pub fn probe() -> EgressSupport {
        let mut tools = Vec::new();
        for name in ["ip", "nsenter", "nft"] {
            match host_tools::find_tool(name) {
                Some(p) => tools.push(p),
                None => {
                    return EgressSupport::Unavailable(format!(
                        "{name} is not installed on the host"
                    ))
                }
            }
        }
        let (ip, nsenter, nft) = (tools[0].clone(), tools[1].clone(), tools[2].clone());
        match host_tools::check_nft(&nsenter, &nft) {
            Ok(()) => EgressSupport::Enforced { ip, nsenter, nft },
            Err(why) => EgressSupport::Unavailable(why),
        }
    }

    /// [`EgressSupport::probe`], run once per process (the host's tools and
    /// privilege do not change under a running provider).
    pub fn probe_cached() -> EgressSupport {
        static PROBED: std::sync::OnceLock<EgressSupport> = std::sync::OnceLock::new();
        PROBED.get_or_init(EgressSupport::probe).clone()
    }

    /// Whether `allowlist` is offered.
    pub fn is_enforced(&self) -> bool {
        matches!(self, EgressSupport::Enforced { .. })
    }
}

fn path_str(p: &Path) -> &str {
    p.to_str().unwrap_or("")
}

/// Runs `program args`, feeding `stdin`; its stdout, or a line naming the
/// command, its status and its stderr.
fn run(program: &Path, args: &[&str], stdin: Option<&[u8]>) -> Result<String, String> {
    let what = format!("{} {}", program.display(), args.join(" "));
    let mut child = Command::new(program)
        .args(args)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("{what}: {e}"))?;
    if let (Some(bytes), Some(mut pipe)) = (stdin, child.stdin.take()) {
        pipe.write_all(bytes)
            .map_err(|e| format!("{what}: writing stdin: {e}"))?;
    }
    let out = child
        .wait_with_output()
        .map_err(|e| format!("{what}: {e}"))?;
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

fn hex11(input: &str) -> String {
    let d = Sha256::digest(input.as_bytes());
    checkfu_sandbox_hostfs::rootfs::hex(&d)[..11].to_owned()
}

/// The bridge of `scope` (15 characters, the kernel's limit).
pub fn bridge_name(scope: &str) -> String {
    format!("{BRIDGE_PREFIX}{}", hex11(&format!("bridge/{scope}")))
}

/// The host end of `instance_id`'s veth pair (15 characters).
pub fn veth_name(scope: &str, instance_id: &str) -> String {
    format!(
        "{VETH_PREFIX}{}",
        hex11(&format!("veth/{scope}/{instance_id}"))
    )
}

/// The alias of `scope`'s bridge.
pub fn bridge_alias(scope: &str) -> String {
    format!("{LINK_ALIAS_PREFIX}{scope}")
}

/// The alias of `instance_id`'s host-end veth.
pub fn veth_alias(scope: &str, instance_id: &str) -> String {
    format!("{LINK_ALIAS_PREFIX}{scope}:{instance_id}")
}

/// The `n`th candidate `/24` of `scope` in `100.64.0.0/10` (its network
/// address).
fn candidate_subnet(scope: &str, n: u32) -> Ipv4Addr {
    let d = Sha256::digest(format!("subnet/{scope}/{n}").as_bytes());
    Ipv4Addr::new(100, 64 + (d[0] & 63), d[1], 0)
}

fn mask(len: u8) -> u32 {
    if len == 0 {
        0
    } else {
        u32::MAX << (32 - u32::from(len.min(32)))
    }
}

/// Whether the prefixes `a/alen` and `b/blen` share an address.
fn overlaps(a: Ipv4Addr, alen: u8, b: Ipv4Addr, blen: u8) -> bool {
    let m = mask(alen.min(blen));
    u32::from(a) & m == u32::from(b) & m
}

/// Resolves `destinations`: IP literals (bracketed IPv6 too) as they are,
/// names through the host's resolver, once ([`allowlist::plan`]).
///
/// # Errors
/// A line naming the destination that does not resolve.
pub fn plan(destinations: &[NetworkDestination]) -> Result<EgressPlan, String> {
    allowlist::plan(destinations, &BTreeMap::new())
}

/// The `/etc/hosts` of an allowlist instance.
pub fn hosts_file(plan: &EgressPlan) -> String {
    let mut s = String::from("127.0.0.1\tlocalhost\n::1\tlocalhost\n");
    for (ip, name) in &plan.hosts {
        s.push_str(&format!("{ip}\t{name}\n"));
    }
    s
}

/// Writes [`hosts_file`] as `etc/hosts` (root, 0644) beneath `layer`, the
/// instance's writable root layer, through `contained`.
///
/// # Errors
/// A line naming the step.
pub fn write_hosts(layer: &Path, plan: &EgressPlan) -> Result<(), String> {
    let root = contained::open_root(layer).map_err(|e| format!("opening the layer: {e}"))?;
    contained::create_dirs_beneath(root.as_fd(), Path::new("etc"), None)
        .map_err(|e| format!("creating /etc: {e}"))?;
    contained::replace_beneath_mode(
        root.as_fd(),
        Path::new("etc/hosts"),
        hosts_file(plan).as_bytes(),
        None,
        0o644,
    )
    .map_err(|e| format!("writing /etc/hosts: {e}"))
}

mod plumbing;
pub use plumbing::Plumbing;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_fit_the_kernel_limit_and_differ_by_scope_and_instance() {
        let b = bridge_name("conf-1-0");
        assert_eq!(b.len(), 15);
        assert!(b.starts_with(BRIDGE_PREFIX));
        assert_ne!(b, bridge_name("conf-1-1"));
        let v = veth_name("conf-1-0", "i-abc");
        assert_eq!(v.len(), 15);
        assert_ne!(v, veth_name("conf-1-0", "i-abd"));
        assert_ne!(v, veth_name("conf-1-1", "i-abc"));
        assert_eq!(veth_alias("s", "i-1"), "checkfu-linux:s:i-1");
    }

    #[test]
    fn candidate_subnets_are_in_the_shared_space() {
        for n in 0..64 {
            let s = candidate_subnet("scope", n);
            assert!(overlaps(s, 24, Ipv4Addr::new(100, 64, 0, 0), 10), "{s}");
            assert_eq!(s.octets()[3], 0);
        }
    }

    #[test]
    fn overlap_is_prefix_containment() {
        let a = Ipv4Addr::new(100, 70, 3, 0);
        assert!(overlaps(a, 24, Ipv4Addr::new(100, 70, 3, 9), 32));
        assert!(overlaps(a, 24, Ipv4Addr::new(100, 64, 0, 1), 10));
        assert!(!overlaps(a, 24, Ipv4Addr::new(100, 70, 4, 1), 24));
        assert!(!overlaps(a, 24, Ipv4Addr::new(172, 17, 0, 1), 16));
    }

    #[test]
    fn the_hosts_file_pins_every_resolved_name() {
        let to = |host: &str| {
            [NetworkDestination {
                host: host.into(),
                port: 80,
            }]
        };
        let empty = plan(&to("10.0.0.9")).unwrap();
        assert_eq!(hosts_file(&empty), "127.0.0.1\tlocalhost\n::1\tlocalhost\n");
        // `localhost` resolves through the host's own files, no query leaves.
        let p = plan(&to("localhost")).unwrap();
        assert!(!p.hosts.is_empty());
        for (ip, name) in &p.hosts {
            assert!(hosts_file(&p).contains(&format!("{ip}\t{name}\n")));
        }
    }
}
