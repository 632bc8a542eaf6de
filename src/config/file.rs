//! The configuration file as written: serde types (unknown fields rejected) with their
//! defaults, one a section.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::{
    dataplane::{
        classify::Trust,
        open::Backend,
        sched::{RealtimeMode, DEFAULT_PRIORITY},
        xdp_prog::XdpMode,
    },
    fc::{credit_port::CreditTimers, sfc_guard::SfcSourcePolicy, watchdog::StormAction},
};

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
    /// The stall guard: a worker that makes no loop turn this long while frames wait for it
    /// and arrive gets its PFC priorities paused by a guard thread ("10us".."1s", default
    /// "250us"), or "off".
    #[serde(default = "default_stall_guard")]
    pub stall_guard: String,
}

fn default_stall_guard() -> String {
    "250us".to_string()
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
            stall_guard: default_stall_guard(),
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
    /// XOFF in force at most what each PFC priority's buffer drains in this long at the
    /// measured rate, less recent peaks' excess over XOFF, and the stall guard's wait at most
    /// this ("800us"); default: XOFF in bytes only.
    #[serde(default)]
    pub xoff_time: Option<String>,
    /// Keep a lossless priority's frame that finds its buffer full in a spare frame of the
    /// pool rather than drop it, while the pool has frames to spare.
    #[serde(default = "yes")]
    pub borrow: bool,
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
            xoff_time: None,
            borrow: true,
        }
    }
}

/// `[credit]`: timers of every credit lane.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreditSection {
    /// Advertise credit at least this often, even when it did not grow ("1ms"); it is also
    /// advertised whenever it grew by an eighth of the window.
    #[serde(default = "default_credit_update_interval")]
    pub update_interval: String,
    /// Send our blocks-sent count (FCTBS) at least this often, so the peer repairs its count
    /// after a lost frame ("1ms").
    #[serde(default = "default_credit_resync_interval")]
    pub resync_interval: String,
    /// Re-initialise a lane that heard nothing from its peer for this long ("200ms"; more
    /// than the peer's intervals plus a round trip plus the longest its host's kernel may
    /// keep it off its CPU).
    #[serde(default = "default_credit_timeout")]
    pub timeout: String,
}

/// `ns` as the config file writes it, in whole milliseconds.
fn as_ms(ns: u64) -> String {
    format!("{}ms", ns / 1_000_000)
}

fn default_credit_update_interval() -> String {
    as_ms(CreditTimers::default().update_interval_ns)
}

fn default_credit_resync_interval() -> String {
    as_ms(CreditTimers::default().resync_interval_ns)
}

fn default_credit_timeout() -> String {
    as_ms(CreditTimers::default().timeout_ns)
}

impl Default for CreditSection {
    fn default() -> Self {
        CreditSection {
            update_interval: default_credit_update_interval(),
            resync_interval: default_credit_resync_interval(),
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
