//! The daemon's TOML configuration: raw serde types (unknown fields rejected) and their
//! validation into a typed [`Plan`] whose errors name the file, the field and the reason.

use std::{collections::BTreeMap, path::Path};

use serde::Deserialize;

use crate::{
    dataplane::{
        classify::Trust,
        sched::{RealtimeMode, DEFAULT_PRIORITY, MAX_PRIORITY},
        xdp_prog::XdpMode,
    },
    fc::adaptive::HeadroomSettings,
    fc::credit_port::CreditTimers,
    fc::sfc_guard::{SfcSourcePolicy, MAX_ALLOWED},
    fc::{
        watchdog::{StormAction, WatchdogConfig},
        PfcThresholds, PRIORITIES,
    },
    units,
    wire::MacAddr,
};

/// Default UDP destination port of test traffic.
pub const DEFAULT_TEST_UDP_PORT: u16 = 48879;

/// A configuration error: which file, which field, and why.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("{file}: cannot read: {source}")]
    Read {
        /// File path.
        file: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// TOML syntax or type error (toml names the key and position).
    #[error("{file}: {message}")]
    Parse {
        /// File path.
        file: String,
        /// toml's message.
        message: String,
    },
    /// A value that parses but is not acceptable.
    #[error("{file}: field `{field}`: {reason}")]
    Invalid {
        /// File path.
        file: String,
        /// Dotted field path, e.g. `priority.3.xon`.
        field: String,
        /// Why it was rejected.
        reason: String,
    },
}

/// A byte size written as an integer (bytes) or a string with a unit ("64KiB").
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum SizeValue {
    /// Plain bytes.
    Bytes(u64),
    /// With a unit.
    Text(String),
}

/// `[daemon]`: process-wide settings.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DaemonSection {
    /// Worker threads; worker q owns RX/TX queue q of every port.
    #[serde(default = "one")]
    pub workers: usize,
    /// CPU cores to pin workers to, in worker order (empty: no pinning).
    #[serde(default)]
    pub cores: Vec<usize>,
    /// XDP attach mode.
    #[serde(default)]
    pub xdp_mode: XdpMode,
    /// Packet I/O backend.
    #[serde(default)]
    pub backend: Backend,
    /// Frames in each worker's pool (2 KiB each; over AF_XDP a jumbo frame takes several, and
    /// over AF_PACKET a jumbo `mtu` makes them 10 KiB).
    #[serde(default = "default_frames")]
    pub frames: u32,
    /// Spin instead of sleeping in poll() when idle (lowest latency, burns a core per worker).
    #[serde(default)]
    pub busy_poll: bool,
    /// Seconds between progress lines on stderr (0 = none).
    #[serde(default)]
    pub stats_interval_s: u64,
    /// Log filter, e.g. "info" or "lossless=debug" (`LOSSLESS_LOG` overrides it).
    #[serde(default)]
    pub log: Option<String>,
    /// Run the workers `SCHED_FIFO` with memory locked: `auto` (when permitted), `on` (an
    /// error at start when not permitted) or `off`.
    #[serde(default)]
    pub realtime: RealtimeMode,
    /// `SCHED_FIFO` priority of the workers, 1..=99.
    #[serde(default = "default_realtime_priority")]
    pub realtime_priority: u8,
}

fn one() -> usize {
    1
}

fn default_frames() -> u32 {
    32768
}

fn default_realtime_priority() -> u8 {
    DEFAULT_PRIORITY
}

impl Default for DaemonSection {
    fn default() -> Self {
        DaemonSection {
            workers: 1,
            cores: Vec::new(),
            xdp_mode: XdpMode::Auto,
            backend: Backend::Auto,
            frames: default_frames(),
            busy_poll: false,
            stats_interval_s: 0,
            log: None,
            realtime: RealtimeMode::Auto,
            realtime_priority: DEFAULT_PRIORITY,
        }
    }
}

/// Packet I/O backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Backend {
    /// AF_XDP, falling back to AF_PACKET where AF_XDP is refused.
    #[default]
    Auto,
    /// AF_XDP only.
    AfXdp,
    /// AF_PACKET only (no XDP program; copies every frame).
    AfPacket,
}

/// Bytes a frame has beyond its MTU: the Ethernet header and one 802.1Q tag (the FCS never
/// reaches software).
pub const FRAME_OVERHEAD: u32 = 18;

/// Smallest MTU a port may be configured with (IPv4's minimum).
pub const MIN_MTU: u32 = 68;

impl Backend {
    /// Longest frame (bytes, without FCS) this backend receives whole. `auto` may end up on
    /// either, so it carries what both carry.
    pub fn max_frame(self) -> u32 {
        // AF_XDP through multi-buffer sockets, AF_PACKET through a pool of larger frames.
        crate::dataplane::pool::JUMBO_MAX_FRAME as u32
    }

    /// The largest MTU whose frames this backend carries.
    pub fn max_mtu(self) -> u32 {
        self.max_frame() - FRAME_OVERHEAD
    }

    fn name(self) -> &'static str {
        match self {
            Backend::Auto => "auto (AF_XDP)",
            Backend::AfXdp => "af-xdp",
            Backend::AfPacket => "af-packet",
        }
    }
}

/// `[[port]]`: one interface.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PortSection {
    /// Interface name.
    pub iface: String,
    /// Line rate the egress is shaped to and PFC quanta run at ("1Gbit", "10G").
    pub speed: String,
    /// Classification: `pcp` (802.1Q priority) or `dscp` (IPv4 DSCP class selector).
    #[serde(default)]
    pub trust: Trust,
    /// Pause time sent in each PFC XOFF, in quanta (default 65535).
    #[serde(default = "max_quanta")]
    pub pause_quanta: u16,
    /// Run credit-based flow control on this port for the `credit` priorities (default true;
    /// false for a peer that does not speak credits: those priorities then tail-drop at
    /// their limit on this port and send without credit).
    #[serde(default = "yes")]
    pub credit: bool,
    /// Largest MTU the port takes: frames longer than `mtu` + 18 bytes (Ethernet header and
    /// one 802.1Q tag) are dropped on arrival and counted as `oversize`. Default: the
    /// interface's MTU when the daemon starts.
    #[serde(default)]
    pub mtu: Option<u32>,
}

fn max_quanta() -> u16 {
    u16::MAX
}

/// Flow-control mode of a priority.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, serde::Serialize)]
pub enum PrioMode {
    /// Tail-drops at `limit`.
    #[default]
    #[serde(rename = "lossy")]
    Lossy,
    /// Lossless with 802.1Qbb PFC.
    #[serde(rename = "pfc")]
    Pfc,
    /// Lossless with source flow control.
    #[serde(rename = "sfc")]
    Sfc,
    /// Both PFC and SFC.
    #[serde(rename = "pfc+sfc")]
    PfcSfc,
    /// Lossless with hop-by-hop credits (InfiniBand-style absolute credits).
    #[serde(rename = "credit")]
    Credit,
}

/// `[priority.N]`: per-priority buffer settings.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PrioritySection {
    /// `pfc` or `lossy`.
    #[serde(default)]
    pub mode: PrioMode,
    /// PFC: bytes (per ingress port) at which XOFF is sent.
    pub xoff: Option<SizeValue>,
    /// PFC: bytes at which XON (zero pause time) is sent.
    pub xon: Option<SizeValue>,
    /// PFC: bytes accepted beyond XOFF while the pause takes effect.
    pub headroom: Option<SizeValue>,
    /// Lossy: bytes (per ingress port) beyond which frames are tail-dropped. SFC alone: the
    /// buffer beyond which frames are dropped as an overflow. Credit: the receive buffer per
    /// ingress port, advertised to the peer as credit (at most 128 KiB counts).
    pub limit: Option<SizeValue>,
    /// SFC: egress-queue bytes above which sources get SFC messages.
    pub sfc_threshold: Option<SizeValue>,
}

/// `[metrics]`: the Prometheus endpoint.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MetricsSection {
    /// Address `/metrics` and `/healthz` are served on ("" disables the endpoint).
    #[serde(default = "default_metrics_listen")]
    pub listen: String,
}

/// Default metrics address: loopback only.
pub const DEFAULT_METRICS_LISTEN: &str = "127.0.0.1:9464";

fn default_metrics_listen() -> String {
    DEFAULT_METRICS_LISTEN.to_string()
}

impl Default for MetricsSection {
    fn default() -> Self {
        MetricsSection {
            listen: default_metrics_listen(),
        }
    }
}

/// `[control]`: the control socket `lossless status` talks to.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ControlSection {
    /// Unix socket path ("" disables it).
    #[serde(default = "default_control_socket")]
    pub socket: String,
}

/// Default control socket path (`[control] socket`, and what `lossless status` asks).
pub const DEFAULT_SOCKET: &str = "/run/lossless/lossless.sock";

fn default_control_socket() -> String {
    DEFAULT_SOCKET.to_string()
}

impl Default for ControlSection {
    fn default() -> Self {
        ControlSection {
            socket: default_control_socket(),
        }
    }
}

/// `[watchdog]`: the PFC watchdog.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WatchdogSection {
    /// Watch lossless priorities for PFC storms.
    #[serde(default = "yes")]
    pub enabled: bool,
    /// A continuous pause longer than this is a storm ("200ms").
    #[serde(default = "default_watchdog_time")]
    pub detection: String,
    /// A storm ends after this long with no pause in force ("200ms").
    #[serde(default = "default_watchdog_time")]
    pub restoration: String,
    /// `drop`, `forward` or `alert`.
    #[serde(default)]
    pub action: StormAction,
}

fn yes() -> bool {
    true
}

fn default_watchdog_time() -> String {
    "200ms".to_string()
}

impl Default for WatchdogSection {
    fn default() -> Self {
        WatchdogSection {
            enabled: true,
            detection: default_watchdog_time(),
            restoration: default_watchdog_time(),
            action: StormAction::Drop,
        }
    }
}

/// How SFC messages travel to sources.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SfcTransport {
    /// EtherType 0x88B5 to the source's MAC (same L2 segment).
    #[default]
    L2,
    /// UDP/IPv4 to the source's IP (beyond this L2 segment); non-IPv4 frames get L2.
    Udp,
}

/// `[sfc]`: settings shared by every SFC priority.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SfcSection {
    /// `l2` or `udp`.
    #[serde(default)]
    pub transport: SfcTransport,
    /// UDP port of SFC messages (both directions).
    #[serde(default = "default_sfc_port")]
    pub udp_port: u16,
    /// IPv4 source address of UDP SFC messages (required with `udp`).
    pub source_ip: Option<String>,
    /// Signal travel time (TTS + TFS) as a percentage of the drain time until link-up measures
    /// it; 0 is conservative.
    #[serde(default)]
    pub reserve_percent: u8,
    /// Longest pause one message asks for.
    #[serde(default = "default_sfc_max_pause")]
    pub max_pause: String,
    /// One message per source per pause interval (unless it extends the pause).
    #[serde(default = "yes")]
    pub filter: bool,
    /// `class` (pause the source's whole priority) or `flow` (only the offending flow).
    #[serde(default)]
    pub scope: crate::wire::sfcm::SfcScope,
    /// As a reaction point, obey SFC messages only from these congestion points (source
    /// MACs, at most 8); empty: from anyone.
    #[serde(default)]
    pub accept_from: Vec<String>,
    /// As a reaction point, SFC messages per second obeyed from one sender (0: no limit).
    #[serde(default = "default_sfc_max_rate")]
    pub max_rate: u32,
}

fn default_sfc_max_rate() -> u32 {
    SfcSourcePolicy::default().max_per_second
}

fn default_sfc_port() -> u16 {
    crate::wire::sfcm::SFCM_UDP_PORT
}

fn default_sfc_max_pause() -> String {
    "10ms".to_string()
}

impl Default for SfcSection {
    fn default() -> Self {
        SfcSection {
            transport: SfcTransport::L2,
            udp_port: default_sfc_port(),
            source_ip: None,
            reserve_percent: 0,
            max_pause: default_sfc_max_pause(),
            filter: true,
            scope: Default::default(),
            accept_from: Vec::new(),
            max_rate: default_sfc_max_rate(),
        }
    }
}

/// `[sfc]`, validated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SfcSettings {
    /// UDP transport: (port, source IPv4), or `None` for L2.
    pub udp: Option<(u16, [u8; 4])>,
    /// Reserve percentage for TTS + TFS.
    pub reserve_percent: u8,
    /// Longest pause, ns.
    pub max_pause_ns: u64,
    /// Filter duplicates.
    pub filter: bool,
    /// Class or flow scope.
    pub scope: crate::wire::sfcm::SfcScope,
    /// Whose SFC messages the reaction point obeys, and how often.
    pub sources: SfcSourcePolicy,
}

impl Default for SfcSettings {
    /// L2 transport, no reserve, 10 ms maximum pause, filtering on, class scope, messages
    /// from anyone up to the default rate.
    fn default() -> Self {
        SfcSettings {
            udp: None,
            reserve_percent: 0,
            max_pause_ns: 10_000_000,
            filter: true,
            scope: crate::wire::sfcm::SfcScope::Class,
            sources: SfcSourcePolicy::default(),
        }
    }
}

/// `[headroom]`: how the PFC headroom in force adapts (see `dataplane::pfc_headroom`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HeadroomSection {
    /// Let the overshoot observed after XOFFs raise the headroom.
    #[serde(default = "yes")]
    pub adaptive: bool,
    /// Never below this; default: each PFC priority's configured headroom.
    #[serde(default)]
    pub min_headroom: Option<SizeValue>,
    /// Headroom from evidence = observed overshoot × margin.
    #[serde(default = "default_margin")]
    pub margin: f64,
    /// The evidence halves every this long ("10min").
    #[serde(default = "default_half_life")]
    pub half_life: String,
    /// Arrivals stopping this long after XOFF mean the pause took effect ("1ms").
    #[serde(default = "default_quiet")]
    pub quiet: String,
}

fn default_margin() -> f64 {
    1.5
}

fn default_half_life() -> String {
    "10min".to_string()
}

fn default_quiet() -> String {
    "1ms".to_string()
}

impl Default for HeadroomSection {
    fn default() -> Self {
        HeadroomSection {
            adaptive: true,
            min_headroom: None,
            margin: default_margin(),
            half_life: default_half_life(),
            quiet: default_quiet(),
        }
    }
}

/// `[credit]`: timers of every credit lane.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreditSection {
    /// Advertise credit at least this often, even when it did not grow ("1ms"); it is also
    /// advertised whenever it grew by an eighth of the window.
    #[serde(default = "default_credit_interval")]
    pub update_interval: String,
    /// Send our blocks-sent count (FCTBS) at least this often, so the peer repairs its count
    /// after a lost frame ("1ms").
    #[serde(default = "default_credit_interval")]
    pub resync_interval: String,
    /// Re-initialise a lane that heard nothing from its peer for this long ("50ms"; more
    /// than the peer's intervals plus a round trip).
    #[serde(default = "default_credit_timeout")]
    pub timeout: String,
}

fn default_credit_interval() -> String {
    "1ms".to_string()
}

fn default_credit_timeout() -> String {
    "50ms".to_string()
}

impl Default for CreditSection {
    fn default() -> Self {
        CreditSection {
            update_interval: default_credit_interval(),
            resync_interval: default_credit_interval(),
            timeout: default_credit_timeout(),
        }
    }
}

/// `[linkup]`: LLDP and peer-delay measurement on every port.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkupSection {
    /// Send LLDP, answer and initiate peer-delay measurements, apply measured headroom.
    #[serde(default = "yes")]
    pub enabled: bool,
    /// Round-trip samples per measurement.
    #[serde(default = "default_samples")]
    pub samples: u32,
    /// Time between samples ("10ms").
    #[serde(default = "default_sample_interval")]
    pub sample_interval: String,
    /// Measure again this often to track drift ("60s"; "0s": only at start and link-up).
    #[serde(default = "default_remeasure")]
    pub interval: String,
    /// Largest frame on lossless priorities, octets (for the headroom).
    #[serde(default = "default_max_frame")]
    pub max_frame: u64,
    /// How long the peer takes to obey a PFC frame beyond the measured round trip, added to
    /// the headroom ("0s" uses the 802.3 allowance of the port speed; software peers need
    /// more, e.g. "1ms").
    #[serde(default = "default_peer_response")]
    pub peer_response: String,
}

fn default_peer_response() -> String {
    "0s".to_string()
}

fn default_samples() -> u32 {
    16
}

fn default_sample_interval() -> String {
    "10ms".to_string()
}

fn default_remeasure() -> String {
    "60s".to_string()
}

fn default_max_frame() -> u64 {
    1518
}

impl Default for LinkupSection {
    fn default() -> Self {
        LinkupSection {
            enabled: true,
            samples: default_samples(),
            sample_interval: default_sample_interval(),
            interval: default_remeasure(),
            max_frame: default_max_frame(),
            peer_response: default_peer_response(),
        }
    }
}

/// `[linkup]`, validated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinkupSettings {
    /// Samples per measurement.
    pub samples: u32,
    /// Time between samples, ns.
    pub sample_interval_ns: u64,
    /// Re-measurement period, ns (0 = none).
    pub interval_ns: u64,
    /// Largest frame, octets.
    pub max_frame: u64,
    /// Peer response time beyond the 802.3 allowance, ns (0 = the allowance only).
    pub peer_response_ns: u64,
}

/// The whole file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigFile {
    /// `[daemon]`.
    #[serde(default)]
    pub daemon: DaemonSection,
    /// `[metrics]`.
    #[serde(default)]
    pub metrics: MetricsSection,
    /// `[control]`.
    #[serde(default)]
    pub control: ControlSection,
    /// `[watchdog]`.
    #[serde(default)]
    pub watchdog: WatchdogSection,
    /// `[sfc]`.
    #[serde(default)]
    pub sfc: SfcSection,
    /// `[linkup]`.
    #[serde(default)]
    pub linkup: LinkupSection,
    /// `[credit]`.
    #[serde(default)]
    pub credit: CreditSection,
    /// `[headroom]`.
    #[serde(default)]
    pub headroom: HeadroomSection,
    /// `[[port]]`: exactly two in wire mode.
    #[serde(default)]
    pub port: Vec<PortSection>,
    /// `[priority.N]`, N in 0..=7.
    #[serde(default)]
    pub priority: BTreeMap<String, PrioritySection>,
}

/// Default lossy limit per (ingress port, priority).
pub const DEFAULT_LOSSY_LIMIT: u64 = 512 * 1024;
/// Default PFC XOFF threshold.
pub const DEFAULT_XOFF: u64 = 128 * 1024;
/// Default PFC XON threshold.
pub const DEFAULT_XON: u64 = 64 * 1024;
/// Default PFC headroom.
pub const DEFAULT_HEADROOM: u64 = 256 * 1024;
/// Default SFC threshold on an egress queue.
pub const DEFAULT_SFC_THRESHOLD: u64 = 32 * 1024;
/// Default buffer of an SFC-only priority.
pub const DEFAULT_SFC_LIMIT: u64 = 1024 * 1024;
/// Default receive buffer of a credit priority.
pub const DEFAULT_CREDIT_LIMIT: u64 = 64 * 1024;
/// Largest buffer credits can advertise: 2048 blocks of 64 bytes.
pub const MAX_CREDIT_BUFFER: u64 = 2048 * 64;
/// Largest byte size a priority setting may have (256 TiB): far beyond any host's memory, and
/// small enough that sums of thresholds (XOFF + headroom, the buffer of all priorities times
/// the ports) and frame counts added to them cannot overflow.
pub const MAX_BUFFER_BYTES: u64 = 1 << 48;
/// Longest duration a setting may have (2^62 ns, about 146 years), so that a deadline computed
/// as a clock reading plus the setting cannot overflow.
pub const MAX_DURATION_NS: u64 = 1 << 62;

/// PFC settings of a lossless priority.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct PfcPlan {
    /// Bytes (per ingress port) at which XOFF is sent.
    pub xoff: u64,
    /// Bytes at which XON is sent.
    pub xon: u64,
    /// Bytes accepted beyond XOFF while the pause takes effect.
    pub headroom: u64,
}

/// SFC settings of a priority.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct SfcPlan {
    /// Egress-queue bytes above which each arriving frame's source gets an SFCM.
    pub threshold: u64,
}

/// What a priority does with its buffer, validated. PFC and SFC are independent: a priority
/// may use either, both, or neither (lossy).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct PrioPlan {
    /// PFC, if the priority uses it.
    pub pfc: Option<PfcPlan>,
    /// SFC, if the priority uses it.
    pub sfc: Option<SfcPlan>,
    /// Credit-based flow control (never combined with PFC or SFC); `limit` is the buffer.
    pub credit: bool,
    /// Bytes (per ingress port) above which an arriving frame is dropped: the tail-drop limit
    /// of a lossy priority; for a lossless one an overflow that means the buffer was too small
    /// (XOFF + headroom with PFC); for a credit priority the receive buffer.
    pub limit: u64,
}

impl PrioPlan {
    /// A lossy priority that tail-drops above `limit`.
    pub const fn lossy(limit: u64) -> Self {
        PrioPlan {
            pfc: None,
            sfc: None,
            credit: false,
            limit,
        }
    }

    /// A credit priority with a receive buffer of `buffer` bytes per ingress port.
    pub const fn credit(buffer: u64) -> Self {
        PrioPlan {
            pfc: None,
            sfc: None,
            credit: true,
            limit: buffer,
        }
    }

    /// A PFC priority.
    pub const fn pfc(xoff: u64, xon: u64, headroom: u64) -> Self {
        PrioPlan {
            pfc: Some(PfcPlan {
                xoff,
                xon,
                headroom,
            }),
            sfc: None,
            credit: false,
            limit: xoff + headroom,
        }
    }

    /// True if the priority never tail-drops (PFC, SFC or credits).
    pub fn lossless(&self) -> bool {
        self.pfc.is_some() || self.sfc.is_some() || self.credit
    }

    /// The mode's name: `lossy`, `pfc`, `sfc`, `pfc+sfc` or `credit`.
    pub fn mode(&self) -> &'static str {
        match (self.pfc.is_some(), self.sfc.is_some()) {
            _ if self.credit => "credit",
            (false, false) => "lossy",
            (true, false) => "pfc",
            (false, true) => "sfc",
            (true, true) => "pfc+sfc",
        }
    }

    /// PFC thresholds, for PFC priorities.
    pub fn thresholds(&self) -> Option<PfcThresholds> {
        self.pfc.map(|p| PfcThresholds {
            xoff: p.xoff,
            xon: p.xon,
        })
    }

    /// Bytes above which an arriving frame is dropped.
    pub fn admit_limit(&self) -> u64 {
        self.limit
    }
}

/// One port, validated.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct PortPlan {
    /// Interface.
    pub iface: String,
    /// Line rate in bit/s.
    pub speed_bps: u64,
    /// Classification.
    pub trust: Trust,
    /// PFC XOFF pause time in quanta.
    pub pause_quanta: u16,
    /// Credit-based flow control runs on this port (for the `credit` priorities).
    pub credit: bool,
    /// MTU as configured (`None`: the interface's MTU at start, see [`PortPlan::max_frame`]).
    pub mtu: Option<u32>,
}

impl PortPlan {
    /// The longest frame (bytes, without FCS) port `index` takes: its configured MTU, else
    /// `iface_mtu` (the interface's, read at start), plus [`FRAME_OVERHEAD`]; an error naming
    /// `port[index].mtu` when `backend` cannot carry frames that long (`None`: the
    /// interface's MTU is unknown, so the backend's largest is taken).
    pub fn max_frame(
        &self,
        index: usize,
        iface_mtu: Option<u32>,
        backend: Backend,
        file: &str,
    ) -> Result<u32, ConfigError> {
        let Some(mtu) = self.mtu.or(iface_mtu) else {
            return Ok(backend.max_frame());
        };
        let frame = mtu.saturating_add(FRAME_OVERHEAD);
        if frame <= backend.max_frame() {
            return Ok(frame);
        }
        let (whose, or) = if self.mtu.is_some() {
            (format!("{mtu}"), "")
        } else {
            (
                format!("not set, so {}'s MTU {mtu} applies, which", self.iface),
                " or lower the interface's MTU",
            )
        };
        Err(ConfigError::Invalid {
            file: file.to_string(),
            field: format!("port[{index}].mtu"),
            reason: format!(
                "{whose} means frames of up to {frame} bytes; the {} backend carries frames of \
                 at most {} bytes (mtu <= {}): set port[{index}].mtu to at most {} (longer \
                 frames are then dropped and counted as oversize){or}",
                backend.name(),
                backend.max_frame(),
                backend.max_mtu(),
                backend.max_mtu(),
            ),
        })
    }
}

/// The validated configuration the daemon runs.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// `[daemon]` as given.
    pub daemon: DaemonSection,
    /// The two ports of the wire.
    pub ports: Vec<PortPlan>,
    /// Per priority.
    pub prios: [PrioPlan; PRIORITIES],
    /// Where to serve metrics, if anywhere.
    pub metrics_listen: Option<std::net::SocketAddr>,
    /// Control socket path, if any.
    pub control_socket: Option<std::path::PathBuf>,
    /// PFC watchdog, if enabled.
    pub watchdog: Option<WatchdogConfig>,
    /// SFC settings.
    pub sfc: SfcSettings,
    /// Link-up measurement, if enabled.
    pub linkup: Option<LinkupSettings>,
    /// Credit lane timers.
    pub credit: CreditTimers,
    /// How the PFC headroom adapts.
    pub headroom: HeadroomSettings,
}

impl Plan {
    /// The settings that differ between `self` and `new` but only take effect after a restart
    /// (SIGHUP applies priorities, thresholds, pause times, the watchdog and the log filter).
    pub fn restart_only_changes(&self, new: &Plan) -> Vec<&'static str> {
        let mut out = Vec::new();
        let (a, b) = (&self.daemon, &new.daemon);
        let credit_prios = |plan: &Plan| plan.prios.map(|p| p.credit.then_some(p.limit));
        let checks: [(&'static str, bool); 15] = [
            ("daemon.workers", a.workers != b.workers),
            ("daemon.cores", a.cores != b.cores),
            ("daemon.xdp_mode", a.xdp_mode != b.xdp_mode),
            ("daemon.backend", a.backend != b.backend),
            ("daemon.frames", a.frames != b.frames),
            ("daemon.busy_poll", a.busy_poll != b.busy_poll),
            ("daemon.realtime", a.realtime != b.realtime),
            (
                "daemon.realtime_priority",
                a.realtime_priority != b.realtime_priority,
            ),
            ("metrics.listen", self.metrics_listen != new.metrics_listen),
            ("control.socket", self.control_socket != new.control_socket),
            (
                "port (iface, speed, trust, mtu)",
                self.ports.len() != new.ports.len()
                    || self.ports.iter().zip(&new.ports).any(|(x, y)| {
                        x.iface != y.iface
                            || x.speed_bps != y.speed_bps
                            || x.trust != y.trust
                            || x.mtu != y.mtu
                    }),
            ),
            (
                "daemon.stats_interval_s",
                a.stats_interval_s != b.stats_interval_s,
            ),
            (
                "priority.N (credit mode and buffer)",
                credit_prios(self) != credit_prios(new),
            ),
            (
                "port.credit",
                self.ports
                    .iter()
                    .map(|p| p.credit)
                    .ne(new.ports.iter().map(|p| p.credit)),
            ),
            ("credit", self.credit != new.credit),
        ];
        for (name, changed) in checks {
            if changed {
                out.push(name);
            }
        }
        out
    }

    /// Reads and validates `path`.
    pub fn load(path: &Path) -> Result<Plan, ConfigError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            file: file.clone(),
            source,
        })?;
        Self::parse(&text, &file)
    }

    /// Parses and validates TOML `text` (named `file` in errors).
    pub fn parse(text: &str, file: &str) -> Result<Plan, ConfigError> {
        let raw: ConfigFile = toml::from_str(text).map_err(|e| ConfigError::Parse {
            file: file.to_string(),
            message: e.to_string(),
        })?;
        validate(raw, file)
    }
}

/// Smallest Ethernet frame the dataplane carries (without FCS), for the frame-count sizing.
const MIN_FRAME: u64 = 60;
/// Largest standard frame (1,500-byte payload, 802.1Q tag, no FCS).
const MAX_STD_FRAME: u64 = 1518;

/// What each worker's frame pool must hold for the configuration to be stored as written,
/// counted in frames (a pool frame holds one Ethernet frame whatever its size): the buffers
/// every AF_XDP socket keeps in its fill ring, the control frames the daemon must always be
/// able to build (PFC, SFCM, credit updates), and XOFF + headroom (the limit) of every
/// lossless priority of one ingress port. Returns the frames needed with frames of `frame`
/// bytes, and the lossless priorities.
fn pool_needed(prios: &[PrioPlan; PRIORITIES], ports: usize, frames: u32, frame: u64) -> u64 {
    use crate::dataplane::{af_xdp::fill_target, pool::control_reserve};
    let fixed = ports as u64 * fill_target(frames) as u64 + control_reserve(frames) as u64;
    fixed
        + prios
            .iter()
            .filter(|p| p.lossless())
            .map(|p| p.limit.div_ceil(frame))
            .sum::<u64>()
}

/// Warns when the pool cannot hold XOFF + headroom as configured. Never refused: a pool
/// running short pauses upstream by itself (fill-ring starvation is congestion), so such a
/// configuration stays lossless, with less buffer in bytes than the numbers say; the warning
/// names the fields and what `daemon.frames` would hold it all.
fn check_pool(prios: &[PrioPlan; PRIORITIES], ports: usize, frames: u32) {
    let names = (0..PRIORITIES)
        .filter(|&p| prios[p].lossless())
        .map(|p| format!("priority.{p}"))
        .collect::<Vec<_>>();
    if names.is_empty() {
        return;
    }
    let (large, small) = (
        pool_needed(prios, ports, frames, MAX_STD_FRAME),
        pool_needed(prios, ports, frames, MIN_FRAME),
    );
    let frames = u64::from(frames);
    if large > frames {
        tracing::warn!(
            frames,
            needed = large,
            priorities = %names.join(", "),
            "daemon.frames cannot hold XOFF + headroom of {} even in {MAX_STD_FRAME}-byte frames: \
             the fill ring will pause upstream before the configured bytes are reached \
             (still lossless); daemon.frames = {large} would hold them",
            names.join(", ")
        );
    } else if small > frames {
        tracing::warn!(
            frames,
            needed = small,
            priorities = %names.join(", "),
            "daemon.frames holds XOFF + headroom of {} only in frames above {} bytes: smaller \
             frames are paused by fill-ring starvation first (still lossless); \
             daemon.frames = {small} would hold {MIN_FRAME}-byte frames",
            names.join(", "),
            prios.iter().filter(|p| p.lossless()).map(|p| p.limit).sum::<u64>()
                / frames.saturating_sub(pool_needed(prios, ports, frames as u32, u64::MAX)).max(1)
        );
    }
}

fn validate(raw: ConfigFile, file: &str) -> Result<Plan, ConfigError> {
    let invalid = |field: String, reason: String| ConfigError::Invalid {
        file: file.to_string(),
        field,
        reason,
    };
    // A duration in ns, bounded so that the daemon can add it to a clock reading.
    let duration_ns = |field: String, v: &str| {
        let d = units::parse_duration(v).map_err(|e| invalid(field.clone(), e.to_string()))?;
        u64::try_from(d.as_nanos())
            .ok()
            .filter(|&ns| ns <= MAX_DURATION_NS)
            .ok_or_else(|| {
                invalid(
                    field,
                    format!("{v:?} is longer than the longest duration, 2^62 ns (146 years)"),
                )
            })
    };
    let d = &raw.daemon;
    if d.workers == 0 || d.workers > 64 {
        return Err(invalid(
            "daemon.workers".into(),
            format!("{} is not in 1..=64", d.workers),
        ));
    }
    if !d.cores.is_empty() && d.cores.len() < d.workers {
        return Err(invalid(
            "daemon.cores".into(),
            format!("{} cores listed for {} workers", d.cores.len(), d.workers),
        ));
    }
    if let Some(l) = &d.log {
        tracing_subscriber::EnvFilter::try_new(l)
            .map_err(|e| invalid("daemon.log".into(), format!("{l:?}: {e}")))?;
    }
    if !(1..=MAX_PRIORITY).contains(&d.realtime_priority) {
        return Err(invalid(
            "daemon.realtime_priority".into(),
            format!(
                "{} is not a SCHED_FIFO priority (1..={MAX_PRIORITY})",
                d.realtime_priority
            ),
        ));
    }
    if d.frames < 4096 {
        return Err(invalid(
            "daemon.frames".into(),
            format!("{} is below the minimum of 4096", d.frames),
        ));
    }
    if raw.port.len() != 2 {
        return Err(invalid(
            "port".into(),
            format!(
                "wire mode forwards between exactly 2 ports, {} given",
                raw.port.len()
            ),
        ));
    }
    let mut ports = Vec::new();
    for (i, p) in raw.port.iter().enumerate() {
        if p.iface.is_empty() || p.iface.len() > 15 {
            return Err(invalid(
                format!("port[{i}].iface"),
                format!("{:?} is not an interface name", p.iface),
            ));
        }
        if raw.port[..i].iter().any(|q| q.iface == p.iface) {
            return Err(invalid(
                format!("port[{i}].iface"),
                format!("{} is listed twice", p.iface),
            ));
        }
        let speed_bps = units::parse_rate(&p.speed)
            .map_err(|e| invalid(format!("port[{i}].speed"), e.to_string()))?;
        if p.pause_quanta == 0 {
            return Err(invalid(
                format!("port[{i}].pause_quanta"),
                "must be at least 1".into(),
            ));
        }
        let port = PortPlan {
            iface: p.iface.clone(),
            speed_bps,
            trust: p.trust,
            pause_quanta: p.pause_quanta,
            credit: p.credit,
            mtu: p.mtu,
        };
        if let Some(mtu) = p.mtu {
            if mtu < MIN_MTU {
                return Err(invalid(
                    format!("port[{i}].mtu"),
                    format!("{mtu} is below the minimum MTU, {MIN_MTU}"),
                ));
            }
            // The configured MTU is checked now; the interface's (the default) at start.
            port.max_frame(i, None, d.backend, file)?;
        }
        ports.push(port);
    }
    let mut prios = [PrioPlan::lossy(DEFAULT_LOSSY_LIMIT); PRIORITIES];
    for (key, s) in &raw.priority {
        let p: usize = key
            .parse()
            .ok()
            .filter(|p| *p < PRIORITIES)
            .ok_or_else(|| invalid(format!("priority.{key}"), "priority must be 0..=7".into()))?;
        let size = |name: &str, v: &Option<SizeValue>, default: u64| -> Result<u64, ConfigError> {
            match v {
                None => Ok(default),
                Some(SizeValue::Bytes(b)) => Ok(*b),
                Some(SizeValue::Text(t)) => units::parse_size(t)
                    .map_err(|e| invalid(format!("priority.{key}.{name}"), e.to_string())),
            }
            .and_then(|b| {
                if b > MAX_BUFFER_BYTES {
                    Err(invalid(
                        format!("priority.{key}.{name}"),
                        format!(
                            "{b} bytes is above the largest buffer, {MAX_BUFFER_BYTES} (256 TiB)"
                        ),
                    ))
                } else {
                    Ok(b)
                }
            })
        };
        let uses_pfc = matches!(s.mode, PrioMode::Pfc | PrioMode::PfcSfc);
        let uses_sfc = matches!(s.mode, PrioMode::Sfc | PrioMode::PfcSfc);
        let only = |name: &str, v: &Option<SizeValue>, ok: bool, what: &str| {
            if v.is_some() && !ok {
                Err(invalid(
                    format!("priority.{key}.{name}"),
                    format!("only applies to {what}"),
                ))
            } else {
                Ok(())
            }
        };
        for (name, v) in [
            ("xoff", &s.xoff),
            ("xon", &s.xon),
            ("headroom", &s.headroom),
        ] {
            only(name, v, uses_pfc, "mode = \"pfc\" or \"pfc+sfc\"")?;
        }
        only(
            "sfc_threshold",
            &s.sfc_threshold,
            uses_sfc,
            "mode = \"sfc\" or \"pfc+sfc\"",
        )?;
        if uses_pfc && s.limit.is_some() {
            return Err(invalid(
                format!("priority.{key}.limit"),
                "a PFC priority never tail-drops; size it with xoff/headroom".into(),
            ));
        }
        let pfc = if uses_pfc {
            let xoff = size("xoff", &s.xoff, DEFAULT_XOFF)?;
            let xon = size("xon", &s.xon, DEFAULT_XON)?;
            let headroom = size("headroom", &s.headroom, DEFAULT_HEADROOM)?;
            if xon >= xoff {
                return Err(invalid(
                    format!("priority.{key}.xon"),
                    format!("xon ({xon}) must be below xoff ({xoff})"),
                ));
            }
            if headroom < 2 * 1522 {
                return Err(invalid(
                    format!("priority.{key}.headroom"),
                    format!("{headroom} bytes cannot absorb even two in-flight frames"),
                ));
            }
            Some(PfcPlan {
                xoff,
                xon,
                headroom,
            })
        } else {
            None
        };
        let sfc = if uses_sfc {
            let threshold = size("sfc_threshold", &s.sfc_threshold, DEFAULT_SFC_THRESHOLD)?;
            if threshold < 1522 {
                return Err(invalid(
                    format!("priority.{key}.sfc_threshold"),
                    format!("{threshold} bytes is below one frame"),
                ));
            }
            Some(SfcPlan { threshold })
        } else {
            None
        };
        let credit = s.mode == PrioMode::Credit;
        let limit = match (pfc, sfc) {
            _ if credit => {
                let l = size("limit", &s.limit, DEFAULT_CREDIT_LIMIT)?;
                if l < 2 * 1536 {
                    return Err(invalid(
                        format!("priority.{key}.limit"),
                        format!("{l} bytes of credit cannot hold two full-size frames"),
                    ));
                }
                if l > MAX_CREDIT_BUFFER {
                    tracing::warn!(
                        priority = p,
                        limit = l,
                        usable = MAX_CREDIT_BUFFER,
                        "a credit window is at most 2048 blocks of 64 bytes; the rest of the buffer is never advertised"
                    );
                }
                l
            }
            (Some(p), _) => p.xoff + p.headroom,
            (None, Some(f)) => {
                let l = size("limit", &s.limit, DEFAULT_SFC_LIMIT)?;
                if l <= f.threshold {
                    return Err(invalid(
                        format!("priority.{key}.limit"),
                        format!("limit ({l}) must be above sfc_threshold ({})", f.threshold),
                    ));
                }
                l
            }
            (None, None) => size("limit", &s.limit, DEFAULT_LOSSY_LIMIT)?,
        };
        prios[p] = PrioPlan {
            pfc,
            sfc,
            credit,
            limit,
        };
    }
    check_pool(&prios, ports.len(), d.frames);
    let metrics_listen = match raw.metrics.listen.trim() {
        "" => None,
        a => Some(a.parse().map_err(|e| {
            invalid(
                "metrics.listen".into(),
                format!("{a:?} is not an address:port ({e})"),
            )
        })?),
    };
    let control_socket = match raw.control.socket.trim() {
        "" => None,
        p if p.starts_with('/') => Some(std::path::PathBuf::from(p)),
        p => {
            return Err(invalid(
                "control.socket".into(),
                format!("{p:?} must be an absolute path (or \"\" to disable)"),
            ))
        }
    };
    let w = &raw.watchdog;
    let time = |field: &str, v: &str| {
        duration_ns(format!("watchdog.{field}"), v).and_then(|ns| {
            if ns == 0 {
                Err(invalid(
                    format!("watchdog.{field}"),
                    "must be above 0".into(),
                ))
            } else {
                Ok(ns)
            }
        })
    };
    let watchdog = if w.enabled {
        Some(WatchdogConfig {
            detection_ns: time("detection", &w.detection)?,
            restoration_ns: time("restoration", &w.restoration)?,
            action: w.action,
        })
    } else {
        None
    };
    let f = &raw.sfc;
    let udp = match (f.transport, &f.source_ip) {
        (SfcTransport::L2, _) => None,
        (SfcTransport::Udp, None) => {
            return Err(invalid(
                "sfc.source_ip".into(),
                "transport = \"udp\" needs the IPv4 address SFC messages come from".into(),
            ))
        }
        (SfcTransport::Udp, Some(ip)) => {
            let ip: std::net::Ipv4Addr = ip
                .parse()
                .map_err(|e| invalid("sfc.source_ip".into(), format!("{ip:?}: {e}")))?;
            Some((f.udp_port, ip.octets()))
        }
    };
    if f.reserve_percent >= 100 {
        return Err(invalid(
            "sfc.reserve_percent".into(),
            format!("{} leaves no pause at all; use 0..=99", f.reserve_percent),
        ));
    }
    let max_pause_ns = duration_ns("sfc.max_pause".into(), &f.max_pause)?;
    if max_pause_ns == 0 {
        return Err(invalid("sfc.max_pause".into(), "must be above 0".into()));
    }
    if f.accept_from.len() > MAX_ALLOWED {
        return Err(invalid(
            "sfc.accept_from".into(),
            format!(
                "{} congestion points listed; at most {MAX_ALLOWED}",
                f.accept_from.len()
            ),
        ));
    }
    let mut allow = [None; MAX_ALLOWED];
    for (i, m) in f.accept_from.iter().enumerate() {
        allow[i] = Some(
            m.parse::<MacAddr>()
                .map_err(|e| invalid(format!("sfc.accept_from[{i}]"), format!("{m:?}: {e}")))?,
        );
    }
    let sfc = SfcSettings {
        udp,
        reserve_percent: f.reserve_percent,
        max_pause_ns,
        filter: f.filter,
        scope: f.scope,
        sources: SfcSourcePolicy {
            allow,
            max_per_second: f.max_rate,
        },
    };
    let l = &raw.linkup;
    let dur = |field: &str, v: &str| duration_ns(format!("linkup.{field}"), v);
    let linkup = if l.enabled {
        if !(2..=1024).contains(&l.samples) {
            return Err(invalid(
                "linkup.samples".into(),
                format!("{} is not in 2..=1024", l.samples),
            ));
        }
        if !(64..=9216).contains(&l.max_frame) {
            return Err(invalid(
                "linkup.max_frame".into(),
                format!("{} is not in 64..=9216", l.max_frame),
            ));
        }
        Some(LinkupSettings {
            samples: l.samples,
            sample_interval_ns: dur("sample_interval", &l.sample_interval)?.max(1),
            interval_ns: dur("interval", &l.interval)?,
            max_frame: l.max_frame,
            peer_response_ns: dur("peer_response", &l.peer_response)?,
        })
    } else {
        None
    };
    let c = &raw.credit;
    let positive = |field: &str, v: &str| match duration_ns(format!("credit.{field}"), v)? {
        0 => Err(invalid(format!("credit.{field}"), "must be above 0".into())),
        ns => Ok(ns),
    };
    let credit = CreditTimers {
        update_interval_ns: positive("update_interval", &c.update_interval)?,
        resync_interval_ns: positive("resync_interval", &c.resync_interval)?,
        timeout_ns: positive("timeout", &c.timeout)?,
    };
    if credit.timeout_ns <= credit.update_interval_ns.max(credit.resync_interval_ns) {
        return Err(invalid(
            "credit.timeout".into(),
            format!("{} must exceed the update and resync intervals", c.timeout),
        ));
    }
    if let Some(p) = prios.iter().position(|p| p.credit) {
        if raw.daemon.workers != 1 {
            return Err(invalid(
                format!("priority.{p}.mode"),
                format!(
                    "credit lanes count every block of a link in one place: it needs daemon.workers = 1, not {}",
                    raw.daemon.workers
                ),
            ));
        }
    }
    let h = &raw.headroom;
    if !(1.0..=100.0).contains(&h.margin) {
        return Err(invalid(
            "headroom.margin".into(),
            format!("{} is not in 1..=100", h.margin),
        ));
    }
    let headroom = HeadroomSettings {
        adaptive: h.adaptive,
        min_headroom: match &h.min_headroom {
            None => None,
            Some(SizeValue::Bytes(b)) => Some(*b),
            Some(SizeValue::Text(t)) => Some(
                units::parse_size(t)
                    .map_err(|e| invalid("headroom.min_headroom".into(), e.to_string()))?,
            ),
        },
        margin: h.margin,
        half_life_ns: duration_ns("headroom.half_life".into(), &h.half_life)?.max(1),
        quiet_ns: duration_ns("headroom.quiet".into(), &h.quiet)?.max(1),
    };
    Ok(Plan {
        daemon: raw.daemon,
        ports,
        prios,
        metrics_listen,
        control_socket,
        watchdog,
        sfc,
        linkup,
        credit,
        headroom,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
[daemon]
workers = 1

[[port]]
iface = "veth0"
speed = "1Gbit"

[[port]]
iface = "veth1"
speed = "10G"
trust = "dscp"

[priority.3]
mode = "pfc"
xoff = "64KiB"
xon = 32768
headroom = "128KiB"

[priority.0]
limit = "1MB"
"#;

    fn err(text: &str) -> String {
        Plan::parse(text, "test.toml").unwrap_err().to_string()
    }

    #[test]
    fn good_config() {
        let p = Plan::parse(GOOD, "x").unwrap();
        assert_eq!(p.ports[1].speed_bps, 10_000_000_000);
        assert_eq!(p.ports[1].trust, Trust::Dscp);
        assert_eq!(p.prios[3], PrioPlan::pfc(65536, 32768, 131072));
        assert_eq!(p.prios[0], PrioPlan::lossy(1_000_000));
        assert_eq!(p.prios[5], PrioPlan::lossy(DEFAULT_LOSSY_LIMIT));
        assert_eq!(p.prios[3].admit_limit(), 65536 + 131072);
        assert_eq!(p.prios[3].mode(), "pfc");
    }

    #[test]
    fn port_mtu_is_checked_against_what_the_backend_carries() {
        let with_mtu = |mtu: &str, backend: &str| {
            GOOD.replace(
                "workers = 1",
                &format!("workers = 1\nbackend = \"{backend}\""),
            )
            .replace(
                "iface = \"veth1\"",
                &format!("iface = \"veth1\"\nmtu = {mtu}"),
            )
        };
        let p = Plan::parse(GOOD, "x").unwrap();
        assert_eq!(p.ports[1].mtu, None);
        let q = Plan::parse(&with_mtu("1500", "af-xdp"), "x").unwrap();
        assert_eq!(q.ports[1].mtu, Some(1500));
        assert_eq!(
            q.ports[1]
                .max_frame(1, Some(9000), Backend::AfXdp, "x")
                .unwrap(),
            1518,
            "the configured MTU wins over the interface's"
        );
        assert_eq!(
            p.restart_only_changes(&q),
            ["daemon.backend", "port (iface, speed, trust, mtu)"]
        );
        // Jumbo frames: multi-buffer AF_XDP sockets, larger AF_PACKET frames.
        assert_eq!(Backend::AfXdp.max_frame(), 9216);
        assert_eq!(Backend::Auto.max_frame(), 9216);
        assert_eq!(Backend::AfPacket.max_frame(), 9216);
        for backend in ["af-xdp", "af-packet", "auto"] {
            Plan::parse(&with_mtu("9000", backend), "x").unwrap();
            Plan::parse(&with_mtu("9198", backend), "x").unwrap();
            let e = err(&with_mtu("9199", backend));
            assert!(e.contains("port[1].mtu"), "{e}");
            assert!(e.contains("9217 bytes") && e.contains("mtu <= 9198"), "{e}");
        }
        assert!(err(&with_mtu("67", "auto")).contains("below the minimum MTU"));
        // Unset, the interface's MTU applies, checked at start.
        assert_eq!(
            p.ports[0]
                .max_frame(0, Some(1500), Backend::Auto, "x")
                .unwrap(),
            1518
        );
        assert_eq!(
            p.ports[0]
                .max_frame(0, Some(9000), Backend::Auto, "x")
                .unwrap(),
            9018
        );
        let e = p.ports[0]
            .max_frame(0, Some(16000), Backend::Auto, "x")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("port[0].mtu") && e.contains("veth0's MTU 16000") && e.contains("16018"),
            "{e}"
        );
        assert_eq!(
            p.ports[0].max_frame(0, None, Backend::AfXdp, "x").unwrap(),
            9216,
            "interface unknown: what the backend carries"
        );
    }

    #[test]
    fn realtime_settings() {
        let p = Plan::parse(GOOD, "x").unwrap();
        assert_eq!(p.daemon.realtime, RealtimeMode::Auto);
        assert_eq!(p.daemon.realtime_priority, DEFAULT_PRIORITY);
        for (text, mode) in [("on", RealtimeMode::On), ("off", RealtimeMode::Off)] {
            let q = Plan::parse(
                &GOOD.replace(
                    "workers = 1",
                    &format!("workers = 1\nrealtime = \"{text}\"\nrealtime_priority = 99"),
                ),
                "x",
            )
            .unwrap();
            assert_eq!((q.daemon.realtime, q.daemon.realtime_priority), (mode, 99));
            assert_eq!(
                p.restart_only_changes(&q),
                ["daemon.realtime", "daemon.realtime_priority"]
            );
        }
    }

    #[test]
    fn sfc_modes() {
        let p = Plan::parse(
            &format!("{GOOD}\n[priority.4]\nmode = \"sfc\"\nsfc_threshold = \"16KiB\"\nlimit = \"2MiB\"\n[priority.5]\nmode = \"pfc+sfc\"\n"),
            "x",
        )
        .unwrap();
        assert_eq!(p.prios[4].mode(), "sfc");
        assert_eq!(p.prios[4].sfc, Some(SfcPlan { threshold: 16384 }));
        assert_eq!(p.prios[4].limit, 2 * 1024 * 1024);
        assert!(p.prios[4].lossless() && p.prios[4].thresholds().is_none());
        assert_eq!(p.prios[5].mode(), "pfc+sfc");
        assert_eq!(
            p.prios[5].sfc,
            Some(SfcPlan {
                threshold: DEFAULT_SFC_THRESHOLD
            })
        );
        assert_eq!(p.prios[5].limit, DEFAULT_XOFF + DEFAULT_HEADROOM);
        let e = err(&format!(
            "{GOOD}\n[priority.4]\nmode = \"sfc\"\nsfc_threshold = 5000\nlimit = 4000\n"
        ));
        assert!(e.contains("priority.4.limit"), "{e}");
        let e = err(&format!(
            "{GOOD}\n[priority.4]\nmode = \"pfc\"\nsfc_threshold = 5000\n"
        ));
        assert!(e.contains("priority.4.sfc_threshold"), "{e}");
    }

    #[test]
    fn credit_mode() {
        let p = Plan::parse(
            &format!("{GOOD}\n[priority.4]\nmode = \"credit\"\n[priority.5]\nmode = \"credit\"\nlimit = \"32KiB\"\n[credit]\ntimeout = \"20ms\"\n"),
            "x",
        )
        .unwrap();
        assert_eq!(p.prios[4], PrioPlan::credit(DEFAULT_CREDIT_LIMIT));
        assert_eq!(p.prios[5], PrioPlan::credit(32 * 1024));
        assert!(p.prios[5].lossless() && p.prios[5].thresholds().is_none());
        assert_eq!(p.prios[5].mode(), "credit");
        assert!(p.ports.iter().all(|port| port.credit));
        assert_eq!(p.credit.timeout_ns, 20_000_000);
        assert_eq!(p.credit.update_interval_ns, 1_000_000);
        let mut other = p.clone();
        other.prios[5] = PrioPlan::credit(64 * 1024);
        assert!(p
            .restart_only_changes(&other)
            .contains(&"priority.N (credit mode and buffer)"));
    }

    #[test]
    fn errors_name_file_field_and_reason() {
        let e = err(&GOOD.replace("xon = 32768", "xon = 99999"));
        assert!(
            e.contains("test.toml") && e.contains("priority.3.xon") && e.contains("below xoff"),
            "{e}"
        );
        let e = err(&GOOD.replace("speed = \"10G\"", "speed = \"fast\""));
        assert!(e.contains("port[1].speed"), "{e}");
        let e = err(&GOOD.replace("workers = 1", "workers = 1\nworkerz = 2"));
        assert!(e.contains("unknown field") && e.contains("workerz"), "{e}");
        let e = err(&GOOD.replace("[priority.0]", "[priority.9]"));
        assert!(e.contains("priority.9"), "{e}");
        let e = err(&GOOD.replace("limit = \"1MB\"", "limit = \"1MB\"\nxoff = 5"));
        assert!(e.contains("priority.0.xoff"), "{e}");
        let e = err(&GOOD.replace("iface = \"veth1\"", "iface = \"veth0\""));
        assert!(e.contains("listed twice"), "{e}");
        let e = err("[[port]]\niface = \"a\"\nspeed = \"1G\"\n");
        assert!(e.contains("exactly 2 ports"), "{e}");
        let e = err(&format!("{GOOD}\n[sfc]\ntransport = \"udp\"\n"));
        assert!(e.contains("sfc.source_ip"), "{e}");
        let e = err(&format!("{GOOD}\n[sfc]\nreserve_percent = 100\n"));
        assert!(e.contains("sfc.reserve_percent"), "{e}");
        let ok = Plan::parse(
            &format!(
                "{GOOD}\n[sfc]\ntransport = \"udp\"\nsource_ip = \"192.0.2.1\"\nscope = \"flow\"\n"
            ),
            "x",
        )
        .unwrap();
        assert_eq!(
            ok.sfc.udp,
            Some((crate::wire::sfcm::SFCM_UDP_PORT, [192, 0, 2, 1]))
        );
        let e = err(&format!("{GOOD}\n[watchdog]\ndetection = \"0s\"\n"));
        assert!(e.contains("watchdog.detection"), "{e}");
        let e = err(&format!("{GOOD}\n[watchdog]\naction = \"panic\"\n"));
        assert!(e.contains("action") || e.contains("panic"), "{e}");
        let e = err(&format!("{GOOD}\n[metrics]\nlisten = \"localhost\"\n"));
        assert!(e.contains("metrics.listen"), "{e}");
        let e = err(&GOOD.replace("trust = \"dscp\"", "trust = \"vibes\""));
        assert!(e.contains("trust") || e.contains("vibes"), "{e}");
    }

    /// Every invalid setting gets an error that names its field.
    /// The largest sizes and durations that are accepted, and the sum of all priorities'
    /// buffers at those sizes, stay clear of overflow.
    #[test]
    fn largest_sizes_and_durations_are_accepted() {
        let text = format!(
            "{GOOD}\n[priority.4]\nmode = \"pfc\"\nxoff = {m}\nxon = 0\nheadroom = {m}\n\
             [priority.5]\nlimit = {m}\n[watchdog]\ndetection = \"{d}ns\"\n",
            m = MAX_BUFFER_BYTES,
            d = MAX_DURATION_NS
        );
        let p = Plan::parse(&text, "x").unwrap();
        assert_eq!(p.prios[4].limit, 2 * MAX_BUFFER_BYTES);
        assert_eq!(p.prios[5].limit, MAX_BUFFER_BYTES);
        assert_eq!(p.watchdog.unwrap().detection_ns, MAX_DURATION_NS);
    }

    #[test]
    fn invalid_configs_name_their_field() {
        let two_ports =
            "[[port]]\niface = \"a\"\nspeed = \"1G\"\n[[port]]\niface = \"b\"\nspeed = \"1G\"\n";
        let cases: &[(&str, &str)] = &[
            ("[daemon]\nworkers = 0\n", "daemon.workers"),
            ("[daemon]\nworkers = 2\ncores = [1]\n", "daemon.cores"),
            ("[daemon]\nframes = 100\n", "daemon.frames"),
            ("[daemon]\nlog = \"lossless=loud\"\n", "daemon.log"),
            (
                "[daemon]\nrealtime_priority = 0\n",
                "daemon.realtime_priority",
            ),
            (
                "[daemon]\nrealtime_priority = 100\n",
                "daemon.realtime_priority",
            ),
            ("[daemon]\nrealtime_priority = 300\n", "realtime_priority"),
            ("[daemon]\nrealtime = \"yes\"\n", "realtime"),
            ("[daemon]\nbackend = \"dpdk\"\n", "backend"),
            ("[daemon]\nxdp_mode = \"offload\"\n", "xdp_mode"),
            ("[metrics]\nlisten = \"nowhere\"\n", "metrics.listen"),
            ("[control]\nsocket = \"relative.sock\"\n", "control.socket"),
            (
                "[watchdog]\nrestoration = \"soon\"\n",
                "watchdog.restoration",
            ),
            ("[sfc]\nmax_pause = \"0s\"\n", "sfc.max_pause"),
            (
                "[sfc]\naccept_from = [\"02:00:00:00:00:01\", \"nope\"]\n",
                "sfc.accept_from[1]",
            ),
            (
                "[sfc]\ntransport = \"udp\"\nsource_ip = \"1.2.3\"\n",
                "sfc.source_ip",
            ),
            ("[linkup]\nsamples = 1\n", "linkup.samples"),
            ("[linkup]\nmax_frame = 10\n", "linkup.max_frame"),
            ("[linkup]\ninterval = \"often\"\n", "linkup.interval"),
            (
                "[priority.3]\nmode = \"pfc\"\nheadroom = 100\n",
                "priority.3.headroom",
            ),
            (
                "[priority.3]\nmode = \"pfc\"\nxoff = \"lots\"\n",
                "priority.3.xoff",
            ),
            (
                "[priority.3]\nmode = \"sfc\"\nsfc_threshold = 10\n",
                "priority.3.sfc_threshold",
            ),
            ("[priority.3]\nmode = \"sfc\"\nxon = 10\n", "priority.3.xon"),
            (
                "[priority.3]\nmode = \"pfc\"\nlimit = 10\n",
                "priority.3.limit",
            ),
            // Sizes beyond MAX_BUFFER_BYTES and durations beyond MAX_DURATION_NS: the first
            // two made validation overflow (found while writing the config fuzz target).
            (
                "[priority.3]\nmode = \"pfc\"\nxoff = \"10000000000000000000\"\nheadroom = \"10000000000000000000\"\n",
                "priority.3.xoff",
            ),
            (
                "[priority.3]\nlimit = 9223372036854775807\n",
                "priority.3.limit",
            ),
            (
                "[priority.3]\nmode = \"pfc\"\nheadroom = \"300000GiB\"\n",
                "priority.3.headroom",
            ),
            (
                "[watchdog]\ndetection = \"18000000000s\"\n",
                "watchdog.detection",
            ),
            ("[sfc]\nmax_pause = \"5000000000s\"\n", "sfc.max_pause"),
            (
                "[linkup]\npeer_response = \"18446744073s\"\n",
                "linkup.peer_response",
            ),
            ("[priority.x]\nmode = \"pfc\"\n", "priority.x"),
            ("[priority.3]\nmode = \"bogus\"\n", "mode"),
            (
                "[priority.3]\nmode = \"credit\"\nlimit = 1000\n",
                "priority.3.limit",
            ),
            (
                "[priority.3]\nmode = \"credit\"\nxoff = 5000\n",
                "priority.3.xoff",
            ),
            (
                "[daemon]\nworkers = 2\n[priority.3]\nmode = \"credit\"\n",
                "priority.3.mode",
            ),
            ("[credit]\ntimeout = \"1ms\"\n", "credit.timeout"),
            (
                "[credit]\nupdate_interval = \"0s\"\n",
                "credit.update_interval",
            ),
            (
                "[credit]\nresync_interval = \"x\"\n",
                "credit.resync_interval",
            ),
            ("[priority.3]\ncolour = \"red\"\n", "colour"),
        ];
        for (snippet, field) in cases {
            let e = err(&format!("{two_ports}{snippet}"));
            assert!(e.contains(field), "{snippet:?} should name {field}: {e}");
        }
        for (ports, field) in [
            ("[[port]]\niface = \"a\"\nspeed = \"1G\"\n", "port"),
            (
                "[[port]]\niface = \"\"\nspeed = \"1G\"\n[[port]]\niface = \"b\"\nspeed = \"1G\"\n",
                "port[0].iface",
            ),
            (
                "[[port]]\niface = \"a\"\nspeed = \"0\"\n[[port]]\niface = \"b\"\nspeed = \"1G\"\n",
                "port[0].speed",
            ),
            (
                "[[port]]\niface = \"a\"\nspeed = \"1G\"\npause_quanta = 0\n[[port]]\niface = \"b\"\nspeed = \"1G\"\n",
                "port[0].pause_quanta",
            ),
        ] {
            let e = err(ports);
            assert!(e.contains(field), "should name {field}: {e}");
        }
    }
}
