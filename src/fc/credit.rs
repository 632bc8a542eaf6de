//! Credit-based flow control with InfiniBand-style absolute credits, per virtual lane
//! (VL = priority) of one link. Sans-I/O: every method takes `now` (ns) and the caller moves
//! the frames; the wire format is [`crate::wire::credit`].
//!
//! # Accounting (all counters modulo 4096, in 64-byte blocks)
//! - **Transmitter** ([`CreditTx`]): FCTBS counts blocks sent (a frame of L bytes is
//!   ⌈L/64⌉ blocks). FCCL is the last credit limit received. A frame of n blocks may be sent
//!   only if `(FCCL − (FCTBS + n)) mod 4096 ≤ 2048`. A frame larger than the peer's window
//!   (or than 2047 blocks, see [`MAX_FRAME_BLOCKS`]) can never be sent: that is
//!   [`CreditError::NeverFits`], not a stall.
//! - **Receiver** ([`CreditRx`]): ABR counts blocks received (every data frame, stored or
//!   not). It advertises `FCCL = ABR + free blocks`, with free = window − blocks held, the
//!   window being at most 2048 blocks. Because FCCL is absolute, a lost update is repaired
//!   by the next one. An update goes out when FCCL has grown by `update_blocks` since the last
//!   one, and at least every `update_interval_ns`, whichever comes first.
//! - **Resync**: every entry carries the sender's FCTBS and the receiver overwrites ABR with
//!   it. The link is in order, so when the entry arrives every block counted in it has arrived
//!   or been lost: a lost data frame leaks credit only until the next entry. The transmitter
//!   sends an entry at least every `resync_interval_ns`.
//!
//! One entry serves both directions of the lane: its FCTBS is the sender's transmitter state
//! (data going out), its FCCL the sender's receiver state (data coming in). [`CreditLane`]
//! owns one [`CreditTx`] and one [`CreditRx`] and builds the entries.
//!
//! # Fail-safes
//! - **Update timeout** (transmitter): no entry heard for `update_timeout_ns` while running or
//!   armed → re-initialise ([`ReinitReason::UpdateTimeout`]).
//! - **Overrun** (receiver): a data frame that would take the buffer beyond window +
//!   `overrun_threshold_blocks` is rejected (the caller drops it) and the lane re-initialises
//!   ([`ReinitReason::Overrun`]). A frame that only reaches into the threshold is stored and
//!   counted as an overrun. With a correct peer neither happens; the threshold absorbs, for
//!   instance, one frame reordered behind a credit update (set it to one maximum frame if the
//!   link may reorder).
//!
//! # Re-initialisation handshake (per lane, both directions at once)
//! States: **Init** → **Armed** → **Active**. A lane starts in Init.
//! - In Init and Armed the transmitter is *quiesced*: it holds no credit and sends no data,
//!   so its FCTBS is final. Init sends `Init` entries, Armed sends `InitAck` entries,
//!   Active sends `Normal` entries; Init and Armed repeat theirs every `resync_interval_ns`.
//! - Every received entry, whatever its op, sets ABR := FCTBS (the sender's count is
//!   authoritative).
//! - `Init` received: in Init → Armed; in Armed → stay, answer with an `InitAck` at once;
//!   in Active → Armed (the peer re-initialises: drop credit, answer; [`ReinitReason::PeerInit`]).
//! - `InitAck` received: in Init or Armed → Active with FCCL as credit; in Active → FCCL is a
//!   credit.
//! - `Normal` received: in Armed or Active → FCCL is a credit (Armed → Active); in **Init it is
//!   not**: it may have been computed before the peer saw our Init, against counters of an
//!   earlier life of this lane.
//!
//! Why it is safe: a peer sends `InitAck` or `Normal` only after it has received our `Init`
//! (Armed is entered only on an `Init`, Active only on an `InitAck`/`Normal` sent after one),
//! and the link keeps order, so the FCCL in it was computed from an ABR resynced to our
//! quiesced FCTBS. Why it terminates: `Init` is only sent from Init and answered with
//! `InitAck`, which never triggers an answer, so replies cannot ping-pong; a stale `Init`
//! reaching an Active lane costs one extra Armed round trip and nothing else.
//!
//! **No frame is lost or duplicated across it**: re-initialisation never resets FCTBS, the
//! blocks held or the frames queued. The transmitter only stops sending (its queue waits,
//! nothing is dropped, nothing is sent twice); frames already in flight arrive and are counted
//! as usual; afterwards ABR equals the peer's FCTBS exactly and FCCL covers the frames still
//! held. The only frame ever dropped is one the receiver has no room for
//! ([`RxVerdict::Rejected`]), which is what triggers the overrun fail-safe.
//!
//! Assumptions: the link delivers in order and does not duplicate (an Ethernet hop does);
//! the caller processes data and credit frames of one port in arrival order and queues an
//! entry behind the data frames already counted in its FCTBS; a restarted daemon stays down
//! longer than one link round trip.

use crate::wire::credit::{CreditEntry, CreditOp, VL_MAX};

/// Bytes per credit block.
pub const BLOCK_BYTES: u64 = 64;
/// The counters' modulus (12-bit fields).
pub const COUNTER_MODULUS: u16 = 4096;
/// Most blocks a receiver may advertise beyond ABR: the `≤ 2048` of the send rule.
pub const MAX_WINDOW_BLOCKS: u16 = 2048;
/// Largest frame credits can carry, in blocks. At 2048 blocks the send rule would pass with no
/// credit at all (`(FCCL − (FCCL + 2048)) mod 4096 = 2048`), so the limit is one less.
pub const MAX_FRAME_BLOCKS: u32 = 2047;

const MASK: u16 = COUNTER_MODULUS - 1;

/// log2 of [`BLOCK_BYTES`], a power of two: blocks are counted by add and shift, on every
/// data frame sent and received.
const BLOCK_SHIFT: u32 = BLOCK_BYTES.trailing_zeros();
const _: () = assert!(BLOCK_BYTES.is_power_of_two());

/// Blocks a frame of `len` bytes occupies (rounded up). A `u32` length makes at most 2^26
/// blocks, so neither the sum nor the result can overflow.
#[inline]
pub fn blocks_for_len(len: u32) -> u32 {
    ((u64::from(len) + BLOCK_BYTES - 1) >> BLOCK_SHIFT) as u32
}

fn mod_add(a: u16, b: u32) -> u16 {
    ((u32::from(a) + b) % u32::from(COUNTER_MODULUS)) as u16
}

fn mod_sub(a: u16, b: u16) -> u16 {
    a.wrapping_sub(b) & MASK
}

/// The InfiniBand send rule: may a frame of `blocks` blocks go out with credit limit `fccl`
/// after `fctbs` blocks? True iff `(FCCL − (FCTBS + blocks)) mod 4096 ≤ 2048`.
pub fn credit_allows(fccl: u16, fctbs: u16, blocks: u16) -> bool {
    mod_sub(fccl, mod_add(fctbs, u32::from(blocks))) <= MAX_WINDOW_BLOCKS
}

/// Errors of the credit state machines.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CreditError {
    /// The frame is larger than any credit the peer can ever grant.
    #[error(
        "a frame of {blocks} blocks can never be sent: the most credit can cover is {limit} blocks"
    )]
    NeverFits {
        /// Blocks the frame needs.
        blocks: u32,
        /// Largest frame, in blocks, that can ever be sent on this lane.
        limit: u32,
    },
    /// A configuration value is out of range.
    #[error("credit configuration: {field} {reason}")]
    BadConfig {
        /// The setting.
        field: &'static str,
        /// What is wrong with it.
        reason: &'static str,
    },
}

/// The initial credit window derived from a configured receive buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CreditWindow {
    /// The configured buffer, blocks.
    pub buffer_blocks: u64,
    /// Blocks the receiver advertises: the buffer, at most [`MAX_WINDOW_BLOCKS`].
    pub window_blocks: u16,
    /// True if the buffer was larger than the protocol can advertise (the rest is unused).
    pub capped: bool,
    /// The bandwidth-delay product, blocks (rounded up).
    pub bdp_blocks: u64,
    /// True if the window is smaller than one BDP: full rate is impossible.
    pub below_bdp: bool,
}

impl CreditWindow {
    /// Sizes the window for a buffer of `buffer_blocks` and a link whose bandwidth-delay
    /// product (rate × round trip of a credit and the data it releases) is `bdp_bytes`.
    pub fn from_buffer(buffer_blocks: u64, bdp_bytes: u64) -> Result<Self, CreditError> {
        if buffer_blocks == 0 {
            return Err(CreditError::BadConfig {
                field: "credit buffer",
                reason: "must be at least one 64-byte block",
            });
        }
        let window_blocks = buffer_blocks.min(u64::from(MAX_WINDOW_BLOCKS)) as u16;
        let bdp_blocks = bdp_bytes.div_ceil(BLOCK_BYTES);
        Ok(CreditWindow {
            buffer_blocks,
            window_blocks,
            capped: buffer_blocks > u64::from(MAX_WINDOW_BLOCKS),
            bdp_blocks,
            below_bdp: u64::from(window_blocks) < bdp_blocks,
        })
    }

    /// The largest share of the line rate this window can sustain: window / BDP, at most 1.
    pub fn max_rate_fraction(&self) -> f64 {
        if self.bdp_blocks == 0 {
            1.0
        } else {
            (f64::from(self.window_blocks) / self.bdp_blocks as f64).min(1.0)
        }
    }
}

/// Settings of one lane (one VL of one port, both directions).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CreditConfig {
    /// Virtual lane (= priority), 0..=15.
    pub vl: u8,
    /// Blocks our receiver advertises (its buffer for this lane), 1..=2048.
    pub rx_window_blocks: u16,
    /// Blocks beyond the window the receiver tolerates before it rejects and re-initialises.
    pub overrun_threshold_blocks: u16,
    /// The peer receiver's window, 1..=2048: larger frames can never be sent.
    pub peer_window_blocks: u16,
    /// Send an update once FCCL has grown by this many blocks, 1..=window.
    pub update_blocks: u16,
    /// Send an update at least this often, ns.
    pub update_interval_ns: u64,
    /// Send our FCTBS (and repeat Init/InitAck) at least this often, ns.
    pub resync_interval_ns: u64,
    /// Re-initialise after hearing nothing for this long, ns; more than both intervals
    /// (the peer's, plus a round trip, in practice: three intervals is a sound default).
    pub update_timeout_ns: u64,
}

impl CreditConfig {
    /// A lane on `vl` with the same window on both ends and default timers: an update every
    /// eighth of the window or 20 µs, a resync every 100 µs, a 5 ms update timeout, no
    /// overrun tolerance.
    pub fn new(vl: u8, window: &CreditWindow) -> Self {
        CreditConfig {
            vl,
            rx_window_blocks: window.window_blocks,
            overrun_threshold_blocks: 0,
            peer_window_blocks: window.window_blocks,
            update_blocks: (window.window_blocks / 8).max(1),
            update_interval_ns: 20_000,
            resync_interval_ns: 100_000,
            update_timeout_ns: 5_000_000,
        }
    }

    /// Checks every setting's range.
    pub fn validate(&self) -> Result<(), CreditError> {
        let bad = |field, reason| Err(CreditError::BadConfig { field, reason });
        if self.vl > VL_MAX {
            return bad("vl", "must be 0..=15");
        }
        if self.rx_window_blocks == 0 || self.rx_window_blocks > MAX_WINDOW_BLOCKS {
            return bad("rx_window_blocks", "must be 1..=2048");
        }
        if self.peer_window_blocks == 0 || self.peer_window_blocks > MAX_WINDOW_BLOCKS {
            return bad("peer_window_blocks", "must be 1..=2048");
        }
        if self.update_blocks == 0 || self.update_blocks > self.rx_window_blocks {
            return bad("update_blocks", "must be 1..=rx_window_blocks");
        }
        if self.update_interval_ns == 0 || self.resync_interval_ns == 0 {
            return bad("update/resync interval", "must be positive");
        }
        if self.update_timeout_ns <= self.update_interval_ns.max(self.resync_interval_ns) {
            return bad(
                "update_timeout_ns",
                "must exceed the update and resync intervals",
            );
        }
        Ok(())
    }
}

/// Transmit side of a lane: FCTBS, the credit limit, the resync timer and the update timeout.
#[derive(Debug, Clone)]
pub struct CreditTx {
    fctbs: u16,
    fccl: Option<u16>,
    frame_limit: u32,
    resync_interval_ns: u64,
    resync_at: u64,
    update_timeout_ns: u64,
    last_heard: u64,
    blocks_sent: u64,
}

impl CreditTx {
    /// A quiesced transmitter (no credit) at FCTBS 0, created at `now`.
    pub fn new(
        peer_window_blocks: u16,
        resync_interval_ns: u64,
        update_timeout_ns: u64,
        now: u64,
    ) -> Self {
        CreditTx {
            fctbs: 0,
            fccl: None,
            frame_limit: u32::from(peer_window_blocks).min(MAX_FRAME_BLOCKS),
            resync_interval_ns,
            resync_at: now,
            update_timeout_ns,
            last_heard: now,
            blocks_sent: 0,
        }
    }

    /// Flow-control total blocks sent, modulo 4096.
    pub fn fctbs(&self) -> u16 {
        self.fctbs
    }

    /// The credit limit in force, or `None` while quiesced.
    pub fn fccl(&self) -> Option<u16> {
        self.fccl
    }

    /// The credit left, `(FCCL − FCTBS) mod 4096`, or 0 while quiesced or when that exceeds
    /// 2048 (FCCL is then behind FCTBS: no receiver advertises more than 2048 blocks).
    pub fn available_blocks(&self) -> u16 {
        match self.fccl {
            Some(fccl) => {
                let d = mod_sub(fccl, self.fctbs);
                if d <= MAX_WINDOW_BLOCKS {
                    d
                } else {
                    0
                }
            }
            None => 0,
        }
    }

    /// Total blocks sent since creation (not wrapped), for metrics.
    pub fn blocks_sent(&self) -> u64 {
        self.blocks_sent
    }

    /// May a frame of `blocks` blocks be sent now? `Ok(false)` means wait for credit;
    /// [`CreditError::NeverFits`] means it never will.
    pub fn can_send(&self, blocks: u32) -> Result<bool, CreditError> {
        if blocks > self.frame_limit {
            return Err(CreditError::NeverFits {
                blocks,
                limit: self.frame_limit,
            });
        }
        Ok(self
            .fccl
            .is_some_and(|fccl| credit_allows(fccl, self.fctbs, blocks as u16)))
    }

    /// Counts a frame of `blocks` blocks as sent (call only after [`CreditTx::can_send`]
    /// said yes, once the frame is handed to the port).
    pub fn on_sent(&mut self, blocks: u32) {
        self.fctbs = mod_add(self.fctbs, blocks);
        self.blocks_sent += u64::from(blocks);
    }

    /// Takes `fccl` as the credit limit (absolute: it replaces the previous one).
    pub fn on_credit(&mut self, fccl: u16) {
        self.fccl = Some(fccl & MASK);
    }

    /// Drops the credit: nothing may be sent until [`CreditTx::on_credit`].
    pub fn quiesce(&mut self) {
        self.fccl = None;
    }

    /// Notes that an entry from the peer arrived at `now` (restarts the update timeout).
    pub fn on_heard(&mut self, now: u64) {
        self.last_heard = self.last_heard.max(now);
    }

    /// True once nothing has been heard for the update timeout.
    pub fn timed_out(&self, now: u64) -> bool {
        now >= self.timeout_at()
    }

    /// When the update timeout expires if nothing is heard.
    pub fn timeout_at(&self) -> u64 {
        self.last_heard.saturating_add(self.update_timeout_ns)
    }

    /// True when FCTBS is due to be sent again.
    pub fn resync_due(&self, now: u64) -> bool {
        now >= self.resync_at
    }

    /// When FCTBS is next due.
    pub fn resync_at(&self) -> u64 {
        self.resync_at
    }

    /// Notes that an entry carrying our FCTBS left at `now`.
    pub fn on_entry_sent(&mut self, now: u64) {
        self.resync_at = now.saturating_add(self.resync_interval_ns);
    }
}

/// What the receiver did with a data frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RxVerdict {
    /// Stored within the window.
    Accepted,
    /// Stored, but beyond the window (within the overrun threshold); counted.
    Overrun,
    /// No room even within the threshold: the caller must drop the frame. The lane
    /// re-initialises.
    Rejected,
}

/// Receive side of a lane: ABR, the buffer held and the advertisement timer.
#[derive(Debug, Clone)]
pub struct CreditRx {
    abr: u16,
    window_blocks: u16,
    overrun_threshold_blocks: u16,
    held_blocks: u32,
    update_blocks: u16,
    update_interval_ns: u64,
    advertised: u16,
    update_at: u64,
}

impl CreditRx {
    /// An empty receiver with ABR 0, created at `now`.
    pub fn new(
        window_blocks: u16,
        overrun_threshold_blocks: u16,
        update_blocks: u16,
        update_interval_ns: u64,
        now: u64,
    ) -> Self {
        let window_blocks = window_blocks.min(MAX_WINDOW_BLOCKS);
        CreditRx {
            abr: 0,
            window_blocks,
            overrun_threshold_blocks,
            held_blocks: 0,
            update_blocks,
            update_interval_ns,
            advertised: window_blocks,
            update_at: now,
        }
    }

    /// Adjusted blocks received, modulo 4096.
    pub fn abr(&self) -> u16 {
        self.abr
    }

    /// Blocks of received frames still held (not yet drained).
    pub fn held_blocks(&self) -> u32 {
        self.held_blocks
    }

    /// The advertised window (buffer), blocks.
    pub fn window_blocks(&self) -> u16 {
        self.window_blocks
    }

    /// Free blocks of the window.
    pub fn free_blocks(&self) -> u16 {
        u32::from(self.window_blocks).saturating_sub(self.held_blocks) as u16
    }

    /// The credit limit to advertise: ABR + free blocks, modulo 4096.
    pub fn fccl(&self) -> u16 {
        mod_add(self.abr, u32::from(self.free_blocks()))
    }

    /// The FCCL last advertised.
    pub fn advertised(&self) -> u16 {
        self.advertised
    }

    /// Accounts a data frame of `blocks` blocks. ABR always advances (the frame was sent
    /// whether or not it is kept); the frame is held unless [`RxVerdict::Rejected`].
    pub fn on_data(&mut self, blocks: u32) -> RxVerdict {
        self.abr = mod_add(self.abr, blocks);
        let after = self.held_blocks.saturating_add(blocks);
        let limit = u32::from(self.window_blocks) + u32::from(self.overrun_threshold_blocks);
        if after > limit {
            return RxVerdict::Rejected;
        }
        self.held_blocks = after;
        if after > u32::from(self.window_blocks) {
            RxVerdict::Overrun
        } else {
            RxVerdict::Accepted
        }
    }

    /// Releases `blocks` blocks of held frames (they left the buffer).
    pub fn on_drain(&mut self, blocks: u32) {
        self.held_blocks = self.held_blocks.saturating_sub(blocks);
    }

    /// Overwrites ABR with the peer's FCTBS; returns how far ABR moved forward (the blocks
    /// of data frames lost since the last resync), or 0 if it did not move.
    pub fn on_fctbs(&mut self, fctbs: u16) -> u16 {
        let moved = mod_sub(fctbs, self.abr);
        self.abr = fctbs & MASK;
        moved
    }

    /// True if an update is due: FCCL grew by `update_blocks` since the last one (or moved
    /// back), or the update interval has run out.
    pub fn update_due(&self, now: u64) -> bool {
        now >= self.update_at || mod_sub(self.fccl(), self.advertised) >= self.update_blocks
    }

    /// When the update interval runs out.
    pub fn update_at(&self) -> u64 {
        self.update_at
    }

    /// Notes that `fccl` was advertised at `now`.
    pub fn on_advertised(&mut self, fccl: u16, now: u64) {
        self.advertised = fccl & MASK;
        self.update_at = now.saturating_add(self.update_interval_ns);
    }
}

/// Handshake state of a lane.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LaneState {
    /// Sending `Init`; transmitter quiesced; waiting for the peer's `Init` or `InitAck`.
    Init,
    /// Saw the peer's `Init`; sending `InitAck`; transmitter quiesced until the peer's
    /// `InitAck` or `Normal`.
    Armed,
    /// Running: data flows under credit; sending `Normal`.
    Active,
}

/// Why a lane re-initialised.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReinitReason {
    /// Our transmitter heard no entry for the update timeout.
    UpdateTimeout,
    /// Our receiver rejected a frame beyond window + overrun threshold.
    Overrun,
    /// The peer sent `Init` while we were running.
    PeerInit,
    /// The caller asked ([`CreditLane::reinit`]), for instance after link down/up.
    Requested,
}

/// Counters of one lane since creation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CreditCounters {
    /// Entries sent.
    pub updates_sent: u64,
    /// Entries received for this lane.
    pub updates_received: u64,
    /// Entries whose FCTBS moved ABR forward by at most a window (data frames were lost).
    pub resyncs: u64,
    /// Blocks ABR moved forward by resyncs (blocks of lost data frames).
    pub resync_blocks: u64,
    /// Frames stored beyond the window (within the overrun threshold).
    pub overrun_frames: u64,
    /// Frames rejected for lack of room (dropped by the caller).
    pub rejected_frames: u64,
    /// Re-initialisations after an update timeout.
    pub reinit_timeout: u64,
    /// Re-initialisations after an overrun.
    pub reinit_overrun: u64,
    /// Re-initialisations started by the peer's `Init`.
    pub reinit_peer: u64,
    /// Re-initialisations the caller requested.
    pub reinit_requested: u64,
}

/// One virtual lane of one link: a [`CreditTx`], a [`CreditRx`] and the re-initialisation
/// handshake. Starts in [`LaneState::Init`].
#[derive(Debug, Clone)]
pub struct CreditLane {
    vl: u8,
    state: LaneState,
    tx: CreditTx,
    rx: CreditRx,
    send_now: bool,
    unreported: Option<ReinitReason>,
    counters: CreditCounters,
}

impl CreditLane {
    /// A lane configured by `config`, created at `now`, in Init (its first `Init` entry is
    /// due at once).
    pub fn new(config: &CreditConfig, now: u64) -> Result<Self, CreditError> {
        config.validate()?;
        Ok(CreditLane {
            vl: config.vl,
            state: LaneState::Init,
            tx: CreditTx::new(
                config.peer_window_blocks,
                config.resync_interval_ns,
                config.update_timeout_ns,
                now,
            ),
            rx: CreditRx::new(
                config.rx_window_blocks,
                config.overrun_threshold_blocks,
                config.update_blocks,
                config.update_interval_ns,
                now,
            ),
            send_now: true,
            unreported: None,
            counters: CreditCounters::default(),
        })
    }

    /// The lane's VL.
    pub fn vl(&self) -> u8 {
        self.vl
    }

    /// The handshake state.
    pub fn state(&self) -> LaneState {
        self.state
    }

    /// The transmit side.
    pub fn tx(&self) -> &CreditTx {
        &self.tx
    }

    /// The receive side.
    pub fn rx(&self) -> &CreditRx {
        &self.rx
    }

    /// Counters since creation.
    pub fn counters(&self) -> &CreditCounters {
        &self.counters
    }

    /// The last re-initialisation not yet reported, if any (for logging; clears it).
    pub fn take_reinit(&mut self) -> Option<ReinitReason> {
        self.unreported.take()
    }

    /// May a frame of `blocks` blocks be sent now? See [`CreditTx::can_send`].
    pub fn can_send(&self, blocks: u32) -> Result<bool, CreditError> {
        let fits = self.tx.can_send(blocks)?;
        Ok(fits && self.state == LaneState::Active)
    }

    /// Counts a frame sent after [`CreditLane::can_send`] said yes.
    pub fn on_sent(&mut self, blocks: u32) {
        self.tx.on_sent(blocks);
    }

    /// Accounts a received data frame of `blocks` blocks at `now`. On
    /// [`RxVerdict::Rejected`] the caller drops the frame and the lane re-initialises.
    pub fn on_data(&mut self, now: u64, blocks: u32) -> RxVerdict {
        let verdict = self.rx.on_data(blocks);
        match verdict {
            RxVerdict::Accepted => {}
            RxVerdict::Overrun => self.counters.overrun_frames += 1,
            RxVerdict::Rejected => {
                self.counters.rejected_frames += 1;
                if self.state != LaneState::Init {
                    self.enter_init(ReinitReason::Overrun, now);
                }
            }
        }
        verdict
    }

    /// Releases `blocks` blocks of received frames that left the buffer.
    pub fn on_drain(&mut self, blocks: u32) {
        self.rx.on_drain(blocks);
    }

    /// Applies an entry received from the peer at `now`. Entries for another VL are ignored.
    pub fn on_entry(&mut self, now: u64, entry: &CreditEntry) {
        if entry.vl != self.vl {
            return;
        }
        self.counters.updates_received += 1;
        self.tx.on_heard(now);
        let moved = self.rx.on_fctbs(entry.fctbs);
        if moved != 0 && moved <= MAX_WINDOW_BLOCKS {
            self.counters.resyncs += 1;
            self.counters.resync_blocks += u64::from(moved);
        }
        match (self.state, entry.op) {
            (LaneState::Init, CreditOp::Init) => {
                self.state = LaneState::Armed;
                self.send_now = true;
            }
            (LaneState::Armed, CreditOp::Init) => self.send_now = true,
            (LaneState::Active, CreditOp::Init) => {
                self.tx.quiesce();
                self.state = LaneState::Armed;
                self.send_now = true;
                self.counters.reinit_peer += 1;
                self.unreported = Some(ReinitReason::PeerInit);
            }
            (LaneState::Init, CreditOp::InitAck)
            | (LaneState::Armed, CreditOp::InitAck)
            | (LaneState::Armed, CreditOp::Normal) => {
                self.tx.on_credit(entry.fccl);
                self.state = LaneState::Active;
                self.send_now = true;
            }
            (LaneState::Active, CreditOp::InitAck) | (LaneState::Active, CreditOp::Normal) => {
                self.tx.on_credit(entry.fccl);
            }
            (LaneState::Init, CreditOp::Normal) => {}
        }
    }

    /// Re-initialises the lane now (for instance after the link went down and up).
    pub fn reinit(&mut self, now: u64) {
        self.enter_init(ReinitReason::Requested, now);
    }

    fn enter_init(&mut self, reason: ReinitReason, now: u64) {
        self.tx.quiesce();
        self.state = LaneState::Init;
        self.send_now = true;
        // The timeout restarts so the handshake gets a full period before it counts again.
        self.tx.on_heard(now);
        match reason {
            ReinitReason::UpdateTimeout => self.counters.reinit_timeout += 1,
            ReinitReason::Overrun => self.counters.reinit_overrun += 1,
            ReinitReason::PeerInit => self.counters.reinit_peer += 1,
            ReinitReason::Requested => self.counters.reinit_requested += 1,
        }
        self.unreported = Some(reason);
    }

    /// The entry to send at `now`, if one is due (call after every event and at
    /// [`CreditLane::next_deadline`]); checks the update timeout first.
    pub fn poll(&mut self, now: u64) -> Option<CreditEntry> {
        if self.state != LaneState::Init && self.tx.timed_out(now) {
            self.enter_init(ReinitReason::UpdateTimeout, now);
        }
        let due = self.send_now
            || self.tx.resync_due(now)
            || (self.state == LaneState::Active && self.rx.update_due(now));
        if !due {
            return None;
        }
        let op = match self.state {
            LaneState::Init => CreditOp::Init,
            LaneState::Armed => CreditOp::InitAck,
            LaneState::Active => CreditOp::Normal,
        };
        let fccl = self.rx.fccl();
        self.send_now = false;
        self.tx.on_entry_sent(now);
        self.rx.on_advertised(fccl, now);
        self.counters.updates_sent += 1;
        Some(CreditEntry {
            op,
            fctbs: self.tx.fctbs(),
            vl: self.vl,
            fccl,
        })
    }

    /// The next time [`CreditLane::poll`] has something to do without a new event.
    pub fn next_deadline(&self) -> u64 {
        let mut at = self.tx.resync_at();
        if self.state == LaneState::Active {
            at = at.min(self.rx.update_at());
        }
        if self.state != LaneState::Init {
            at = at.min(self.tx.timeout_at());
        }
        at
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::credit::CreditUpdate;
    use crate::wire::MacAddr;
    use proptest::prelude::*;
    use std::collections::VecDeque;

    const VL: u8 = 3;
    const WINDOW: u16 = 64;
    const DELAY: u64 = 2_000;

    fn config() -> CreditConfig {
        CreditConfig {
            vl: VL,
            rx_window_blocks: WINDOW,
            overrun_threshold_blocks: 0,
            peer_window_blocks: WINDOW,
            update_blocks: 8,
            update_interval_ns: 3_000,
            resync_interval_ns: 5_000,
            update_timeout_ns: 40_000,
        }
    }

    /// A frame on the simulated wire.
    #[derive(Debug, Clone)]
    enum Frame {
        Data(u32),
        /// A credit update as the bytes of a whole Ethernet frame.
        Credit(Vec<u8>),
    }

    /// One node: a lane plus the frames it still has to send.
    struct Node {
        lane: CreditLane,
        queue: VecDeque<u32>,
        sent_frames: u64,
        delivered_frames: u64,
        peak_held: u32,
    }

    impl Node {
        fn new(config: &CreditConfig, now: u64) -> Self {
            Node {
                lane: CreditLane::new(config, now).unwrap(),
                queue: VecDeque::new(),
                sent_frames: 0,
                delivered_frames: 0,
                peak_held: 0,
            }
        }
    }

    /// Two nodes joined by an in-order wire with a fixed one-way delay; each direction can
    /// be told to lose data or credit frames.
    struct Sim {
        now: u64,
        nodes: [Node; 2],
        wires: [VecDeque<(u64, Frame)>; 2],
        lose_data: [u32; 2],
        lose_credit: [u32; 2],
    }

    impl Sim {
        fn new(a: &CreditConfig, b: &CreditConfig) -> Self {
            Sim {
                now: 0,
                nodes: [Node::new(a, 0), Node::new(b, 0)],
                wires: [VecDeque::new(), VecDeque::new()],
                lose_data: [0; 2],
                lose_credit: [0; 2],
            }
        }

        fn pair() -> Self {
            Sim::new(&config(), &config())
        }

        /// A pair that has completed the handshake.
        fn up() -> Self {
            let mut s = Sim::pair();
            s.run_for(20_000, 500);
            assert_eq!(s.nodes[0].lane.state(), LaneState::Active);
            assert_eq!(s.nodes[1].lane.state(), LaneState::Active);
            s
        }

        fn transmit(&mut self, from: usize, frame: Frame) {
            let lose = match frame {
                Frame::Data(_) => &mut self.lose_data[from],
                Frame::Credit(_) => &mut self.lose_credit[from],
            };
            if *lose > 0 {
                *lose -= 1;
                return;
            }
            self.wires[from].push_back((self.now + DELAY, frame));
        }

        /// Delivers what has arrived, sends what credit allows, and polls both lanes.
        fn step(&mut self) {
            for to in 0..2 {
                let from = 1 - to;
                while self.wires[from]
                    .front()
                    .is_some_and(|(t, _)| *t <= self.now)
                {
                    let (_, frame) = self.wires[from].pop_front().unwrap();
                    let node = &mut self.nodes[to];
                    match frame {
                        Frame::Data(blocks) => {
                            let v = node.lane.on_data(self.now, blocks);
                            assert_eq!(v, RxVerdict::Accepted, "receiver {to} overran");
                            node.delivered_frames += 1;
                            node.peak_held = node.peak_held.max(node.lane.rx().held_blocks());
                        }
                        Frame::Credit(bytes) => {
                            let update = CreditUpdate::parse_frame(&bytes).unwrap();
                            for e in update.entries() {
                                node.lane.on_entry(self.now, e);
                            }
                        }
                    }
                }
            }
            for from in 0..2 {
                while let Some(&blocks) = self.nodes[from].queue.front() {
                    if !self.nodes[from].lane.can_send(blocks).unwrap() {
                        break;
                    }
                    self.nodes[from].queue.pop_front();
                    self.nodes[from].lane.on_sent(blocks);
                    self.nodes[from].sent_frames += 1;
                    self.transmit(from, Frame::Data(blocks));
                }
                while let Some(entry) = self.nodes[from].lane.poll(self.now) {
                    let mut update = CreditUpdate::new();
                    update.push(entry).unwrap();
                    let mut buf = vec![0u8; update.frame_len()];
                    update
                        .emit_frame(
                            MacAddr([2, 0, 0, 0, 0, 2]),
                            MacAddr([2, 0, 0, 0, 0, 1]),
                            &mut buf,
                        )
                        .unwrap();
                    self.transmit(from, Frame::Credit(buf));
                }
            }
        }

        fn advance(&mut self, dt: u64) {
            self.now += dt;
            self.step();
        }

        fn run_for(&mut self, duration: u64, dt: u64) {
            let end = self.now + duration;
            while self.now < end {
                self.advance(dt);
            }
        }

        /// Runs for `duration`, draining both receivers completely before every step.
        fn run_draining(&mut self, duration: u64, dt: u64) {
            let end = self.now + duration;
            while self.now < end {
                self.drain_all(0);
                self.drain_all(1);
                self.advance(dt);
            }
        }

        fn drain_all(&mut self, node: usize) {
            let held = self.nodes[node].lane.rx().held_blocks();
            self.nodes[node].lane.on_drain(held);
        }

        fn lane(&self, node: usize) -> &CreditLane {
            &self.nodes[node].lane
        }
    }

    #[test]
    fn blocks_and_the_send_rule_at_its_boundary() {
        assert_eq!(blocks_for_len(0), 0);
        assert_eq!(blocks_for_len(1), 1);
        assert_eq!(blocks_for_len(64), 1);
        assert_eq!(blocks_for_len(65), 2);
        assert_eq!(blocks_for_len(1518), 24);
        // (FCCL − (FCTBS + n)) mod 4096 = 2048 passes, 2049 does not, across the wrap.
        assert!(credit_allows(1953, 4000, 1));
        assert!(!credit_allows(1954, 4000, 1));
        // Exact fit passes; one block short is "behind" (4095) and fails.
        assert!(credit_allows(5, 4090, 11));
        assert!(!credit_allows(4, 4090, 11));
        // Zero credit, one block.
        assert!(!credit_allows(100, 100, 1));
        // Why frames stop at 2047 blocks: 2048 would pass with no credit at all.
        assert!(credit_allows(100, 100, 2048));
        assert!(!credit_allows(100, 100, 2047));

        let mut tx = CreditTx::new(MAX_WINDOW_BLOCKS, 1, 2, 0);
        tx.on_sent(4000);
        tx.on_credit(1953); // 2049 blocks ahead: more than a window, taken as "behind"
        assert_eq!(tx.available_blocks(), 0);
        assert!(tx.can_send(1).unwrap());
        tx.on_credit(1952); // exactly 2048 ahead
        assert_eq!(tx.available_blocks(), 2048);
        assert!(tx.can_send(MAX_FRAME_BLOCKS).unwrap());
        assert_eq!(
            tx.can_send(2048),
            Err(CreditError::NeverFits {
                blocks: 2048,
                limit: 2047
            })
        );
    }

    #[test]
    fn handshake_brings_both_sides_up_with_full_windows() {
        let mut s = Sim::pair();
        assert_eq!(s.lane(0).state(), LaneState::Init);
        assert!(
            !s.lane(0).can_send(1).unwrap(),
            "no data before the handshake"
        );
        s.advance(0); // both send Init
        s.advance(DELAY); // both receive Init → Armed, send InitAck
        assert_eq!(s.lane(0).state(), LaneState::Armed);
        assert!(!s.lane(0).can_send(1).unwrap());
        s.advance(DELAY); // both receive InitAck → Active
        for n in 0..2 {
            assert_eq!(s.lane(n).state(), LaneState::Active);
            assert_eq!(s.lane(n).tx().available_blocks(), WINDOW);
            assert_eq!(s.lane(n).counters().reinit_timeout, 0);
        }
    }

    #[test]
    fn handshake_survives_a_lost_init_and_a_lost_ack() {
        let mut s = Sim::pair();
        s.lose_credit[0] = 1; // A's first Init is lost
        s.advance(0);
        s.advance(DELAY); // A gets B's Init → Armed; B still in Init
        assert_eq!(s.lane(0).state(), LaneState::Armed);
        assert_eq!(s.lane(1).state(), LaneState::Init);
        s.advance(DELAY); // B gets A's InitAck → Active (it is proof A saw B's Init)
        assert_eq!(s.lane(1).state(), LaneState::Active);
        s.advance(DELAY); // A gets B's Normal → Active
        assert_eq!(s.lane(0).state(), LaneState::Active);

        let mut s = Sim::pair();
        s.lose_credit[1] = 2; // B's Init and its InitAck are lost
        s.run_for(30_000, 500);
        assert_eq!(s.lane(0).state(), LaneState::Active);
        assert_eq!(s.lane(1).state(), LaneState::Active);
    }

    #[test]
    fn counters_wrap_at_4096() {
        let mut s = Sim::up();
        for _ in 0..400 {
            s.nodes[0].queue.push_back(20); // 8000 blocks in all: FCTBS wraps once
        }
        let mut wraps_seen = false;
        let mut last = s.lane(0).tx().fctbs();
        for _ in 0..2_000 {
            s.advance(500);
            s.drain_all(1);
            let f = s.lane(0).tx().fctbs();
            wraps_seen |= f < last;
            last = f;
            if s.nodes[0].queue.is_empty() && s.wires[0].is_empty() {
                break;
            }
        }
        s.run_draining(10_000, 500);
        assert!(wraps_seen);
        assert!(s.nodes[0].queue.is_empty());
        assert_eq!(s.lane(0).tx().blocks_sent(), 8_000);
        assert_eq!(s.lane(0).tx().fctbs(), (8_000 % 4096) as u16);
        assert_eq!(s.lane(1).rx().abr(), s.lane(0).tx().fctbs());
        assert_eq!(s.nodes[1].delivered_frames, 400);
        assert!(s.nodes[1].peak_held <= u32::from(WINDOW));
        // After the wrap the full window is available again.
        assert_eq!(s.lane(0).tx().available_blocks(), WINDOW);
        assert_eq!(s.lane(0).counters().reinit_timeout, 0);
    }

    #[test]
    fn a_lost_credit_update_is_repaired_by_the_next() {
        let mut s = Sim::up();
        s.nodes[0].queue.extend([32, 32]); // fills B's 64-block window
        s.advance(0);
        assert_eq!(s.lane(0).tx().available_blocks(), 0);
        s.advance(DELAY);
        assert_eq!(s.lane(1).rx().held_blocks(), 64);
        // B drains everything; the update that says so is lost.
        s.drain_all(1);
        s.lose_credit[1] = 1;
        let sent = s.lane(1).counters().updates_sent;
        s.advance(0);
        assert_eq!(
            s.lane(1).counters().updates_sent,
            sent + 1,
            "sent, and lost"
        );
        s.advance(DELAY);
        assert_eq!(s.lane(0).tx().available_blocks(), 0, "still no credit");
        // The next periodic update carries the same absolute FCCL.
        s.run_for(config().update_interval_ns + DELAY, 250);
        assert_eq!(s.lane(0).tx().available_blocks(), WINDOW);
        assert_eq!(s.lane(0).state(), LaneState::Active);
    }

    #[test]
    fn a_lost_data_frame_is_repaired_by_the_resync() {
        // Slow timers, so the only entries in the window of interest are the ones we cause.
        let slow = CreditConfig {
            update_interval_ns: 30_000,
            resync_interval_ns: 30_000,
            update_timeout_ns: 100_000,
            ..config()
        };
        let mut s = Sim::new(&slow, &slow);
        s.run_for(10_000, 500); // handshake done at 4 µs; next timed entries at 34 µs
        assert_eq!(s.lane(0).state(), LaneState::Active);
        s.lose_data[0] = 1;
        s.nodes[0].queue.extend([10, 8]); // the 10-block frame is lost
        s.advance(0);
        s.advance(DELAY);
        assert_eq!(s.lane(1).rx().held_blocks(), 8);
        assert_eq!(s.lane(1).rx().abr(), 8);
        assert_eq!(s.lane(0).tx().fctbs(), 18);
        // Until the resync the lost blocks look like used credit.
        s.drain_all(1);
        s.advance(0); // FCCL grew by 8 = update_blocks: an update goes out
        s.advance(DELAY);
        assert_eq!(s.lane(0).tx().available_blocks(), WINDOW - 10);
        assert_eq!(s.lane(1).counters().resyncs, 0);
        // The transmitter's periodic FCTBS overwrites ABR, and FCCL follows.
        s.run_for(slow.resync_interval_ns, 250);
        assert_eq!(s.lane(1).rx().abr(), 18);
        assert_eq!(s.lane(1).counters().resyncs, 1);
        assert_eq!(s.lane(1).counters().resync_blocks, 10);
        assert_eq!(s.lane(0).tx().available_blocks(), WINDOW);
    }

    #[test]
    fn never_fitting_frames_are_errors_not_stalls() {
        let s = Sim::up();
        assert_eq!(
            s.lane(0).can_send(u32::from(WINDOW) + 1),
            Err(CreditError::NeverFits {
                blocks: 65,
                limit: 64
            })
        );
        assert!(s.lane(0).can_send(u32::from(WINDOW)).unwrap());
        // Also while quiesced: the answer does not depend on the state.
        let quiet = Sim::pair();
        assert!(quiet.lane(0).can_send(u32::from(WINDOW) + 1).is_err());
        assert!(!quiet.lane(0).can_send(1).unwrap());
        let err = s.lane(0).can_send(blocks_for_len(9000)).unwrap_err();
        assert!(err.to_string().contains("141 blocks"), "{err}");
    }

    #[test]
    fn receiver_updates_every_n_blocks_or_t_ns() {
        let mut rx = CreditRx::new(64, 0, 8, 3_000, 0);
        assert!(rx.update_due(0));
        rx.on_advertised(rx.fccl(), 0);
        assert!(!rx.update_due(1));
        assert_eq!(rx.on_data(20), RxVerdict::Accepted);
        assert!(!rx.update_due(1), "receiving does not move FCCL");
        rx.on_drain(7);
        assert!(!rx.update_due(1));
        rx.on_drain(1);
        assert!(rx.update_due(1), "8 blocks freed");
        rx.on_advertised(rx.fccl(), 1);
        assert_eq!(rx.fccl(), 20 + 64 - 12);
        assert!(!rx.update_due(3_000));
        assert!(rx.update_due(3_001), "interval");
        // A resync that jumps ABR forward moves FCCL too.
        rx.on_advertised(rx.fccl(), 3_001);
        assert_eq!(rx.on_fctbs(30), 10);
        assert!(rx.update_due(3_002));
    }

    #[test]
    fn overrun_rejects_reinitialises_and_loses_nothing_else() {
        let mut cfg = config();
        cfg.overrun_threshold_blocks = 4;
        let mut s = Sim::new(&config(), &cfg);
        s.run_for(20_000, 500);
        // A peer that ignores credit (modelled by delivering behind the state machine's back).
        let now = s.now;
        let b = &mut s.nodes[1].lane;
        assert_eq!(b.on_data(now, 62), RxVerdict::Accepted);
        assert_eq!(b.on_data(now, 4), RxVerdict::Overrun);
        assert_eq!(b.counters().overrun_frames, 1);
        assert_eq!(b.state(), LaneState::Active, "within the threshold");
        assert_eq!(b.on_data(now, 3), RxVerdict::Rejected);
        assert_eq!(b.state(), LaneState::Init);
        assert_eq!(b.counters().reinit_overrun, 1);
        assert_eq!(b.take_reinit(), Some(ReinitReason::Overrun));
        assert_eq!(b.take_reinit(), None);
        assert_eq!(b.rx().held_blocks(), 66, "frames already held stay held");
        // They leave the buffer (forwarded); A queues frames meanwhile.
        s.drain_all(1);
        s.nodes[0].queue.extend([8; 10]);
        s.advance(0);
        s.advance(DELAY);
        assert_eq!(
            s.lane(0).state(),
            LaneState::Armed,
            "A quiesced by B's Init"
        );
        assert_eq!(s.lane(0).counters().reinit_peer, 1);
        s.run_for(4 * DELAY, 250);
        assert_eq!(s.lane(1).rx().abr(), s.lane(0).tx().fctbs(), "ABR exact");
        s.run_draining(50_000, 500);
        assert_eq!(s.nodes[0].sent_frames, 10);
        assert_eq!(s.nodes[1].delivered_frames, 10, "none lost, none twice");
        assert_eq!(s.lane(0).state(), LaneState::Active);
        assert_eq!(s.lane(1).state(), LaneState::Active);
    }

    #[test]
    fn update_timeout_reinitialises_and_recovers() {
        let mut s = Sim::up();
        // Every credit frame B sends is lost for a while.
        s.lose_credit[1] = u32::MAX;
        s.run_for(config().update_timeout_ns + 2 * DELAY + 1_000, 500);
        assert_eq!(s.lane(0).counters().reinit_timeout, 1);
        assert_eq!(
            s.nodes[0].lane.take_reinit(),
            Some(ReinitReason::UpdateTimeout)
        );
        assert_eq!(s.lane(0).state(), LaneState::Init);
        assert!(!s.lane(0).can_send(1).unwrap());
        // B was pulled into the handshake by A's Init and holds its InitAck.
        assert_eq!(s.lane(1).state(), LaneState::Armed);
        // A stays in Init without counting again while nothing comes back.
        s.run_for(3 * config().update_timeout_ns, 500);
        assert_eq!(s.lane(0).counters().reinit_timeout, 1);
        // The path heals: the next InitAck completes the handshake.
        s.lose_credit[1] = 0;
        s.nodes[0].queue.extend([16, 16]);
        s.run_for(config().resync_interval_ns + 3 * DELAY, 250);
        assert_eq!(s.lane(0).state(), LaneState::Active);
        assert_eq!(s.lane(1).state(), LaneState::Active);
        assert_eq!(s.nodes[0].sent_frames, 2);
    }

    #[test]
    fn restarts_resynchronise_and_stale_credit_is_not_trusted() {
        let mut s = Sim::up();
        s.nodes[0].queue.extend([40; 30]);
        s.run_draining(300_000, 500);
        assert_eq!(s.lane(0).tx().fctbs(), 1200);
        // B restarts: fresh counters, empty buffer. A's old credit still fits that buffer,
        // B's Init quiesces A, and B's ABR is resynced to A's FCTBS by A's InitAck.
        s.nodes[1] = Node::new(&config(), s.now);
        s.nodes[0].queue.extend([4; 20]); // 80 blocks; B never drains here
        s.run_for(50_000, 250); // panics if B overruns
        assert_eq!(s.lane(0).state(), LaneState::Active);
        assert_eq!(s.lane(1).state(), LaneState::Active);
        assert_eq!(s.lane(0).counters().reinit_peer, 1);
        assert_eq!(s.lane(1).rx().abr(), s.lane(0).tx().fctbs());
        assert_eq!(s.lane(1).rx().held_blocks(), 64);
        assert_eq!(s.nodes[0].queue.len(), 4);
        // A restarts at FCTBS 0 while B, running, advertises FCCL = 1280 + 64 for A's old
        // life: taken at face value that would allow 1344 blocks into a 64-block buffer.
        // A, fresh in Init, ignores those Normal entries and waits for B's InitAck.
        s.drain_all(1);
        s.nodes[0] = Node::new(&config(), s.now);
        s.nodes[0].queue.extend([4; 40]);
        s.run_for(50_000, 250); // panics if B overruns
        assert_eq!(s.lane(0).state(), LaneState::Active);
        assert_eq!(s.lane(1).rx().held_blocks(), 64);
        assert_eq!(s.nodes[0].queue.len(), 24);
        assert_eq!(s.lane(1).rx().abr(), 64);
        s.run_draining(100_000, 500);
        assert!(s.nodes[0].queue.is_empty());
    }

    #[test]
    fn requested_reinit_with_frames_in_flight_loses_and_duplicates_nothing() {
        let mut s = Sim::up();
        s.nodes[0].queue.extend([5; 40]);
        s.nodes[1].queue.extend([7; 40]);
        for i in 0..400 {
            if i % 37 == 5 {
                let now = s.now;
                s.nodes[i % 2].lane.reinit(now);
            }
            s.drain_all(i % 2);
            s.advance(300);
        }
        s.run_draining(100_000, 500);
        for n in 0..2 {
            assert_eq!(s.nodes[n].sent_frames, 40, "node {n}");
            assert_eq!(s.nodes[1 - n].delivered_frames, 40, "node {n}");
            assert_eq!(s.lane(1 - n).rx().abr(), s.lane(n).tx().fctbs());
            assert_eq!(s.lane(n).state(), LaneState::Active);
        }
        let requested: u64 = (0..2).map(|n| s.lane(n).counters().reinit_requested).sum();
        assert_eq!(requested, 11);
    }

    #[test]
    fn deadlines_and_ignored_entries() {
        let mut lane = CreditLane::new(&config(), 0).unwrap();
        assert_eq!(lane.poll(0).map(|e| e.op), Some(CreditOp::Init));
        assert_eq!(lane.poll(0), None);
        assert_eq!(
            lane.next_deadline(),
            5_000,
            "Init repeats every resync interval"
        );
        assert_eq!(lane.poll(5_000).map(|e| e.op), Some(CreditOp::Init));
        // An entry for another VL changes nothing.
        lane.on_entry(
            5_000,
            &CreditEntry {
                op: CreditOp::Init,
                fctbs: 9,
                vl: VL + 1,
                fccl: 0,
            },
        );
        assert_eq!(lane.state(), LaneState::Init);
        assert_eq!(lane.counters().updates_received, 0);
        // A Normal entry while in Init resyncs ABR but grants nothing.
        lane.on_entry(
            5_100,
            &CreditEntry {
                op: CreditOp::Normal,
                fctbs: 9,
                vl: VL,
                fccl: 200,
            },
        );
        assert_eq!(lane.state(), LaneState::Init);
        assert_eq!(lane.rx().abr(), 9);
        assert_eq!(lane.tx().fccl(), None);
        lane.on_entry(
            5_200,
            &CreditEntry {
                op: CreditOp::InitAck,
                fctbs: 9,
                vl: VL,
                fccl: 30,
            },
        );
        assert_eq!(lane.state(), LaneState::Active);
        assert_eq!(lane.tx().available_blocks(), 30);
        let e = lane.poll(5_200).unwrap();
        assert_eq!((e.op, e.fctbs, e.fccl), (CreditOp::Normal, 0, 9 + WINDOW));
        assert_eq!(lane.next_deadline(), 5_200 + 3_000, "update interval first");
        assert!(CreditLane::new(
            &CreditConfig {
                update_timeout_ns: 5_000,
                ..config()
            },
            0
        )
        .is_err());
    }

    #[test]
    fn window_sizing_against_the_bdp() {
        // 10 Gbit/s × 50 µs = 62,500 bytes = 977 blocks.
        let w = CreditWindow::from_buffer(1_000, 62_500).unwrap();
        assert_eq!((w.window_blocks, w.bdp_blocks), (1_000, 977));
        assert!(!w.below_bdp && !w.capped);
        assert_eq!(w.max_rate_fraction(), 1.0);
        let half = CreditWindow::from_buffer(489, 62_500).unwrap();
        assert!(half.below_bdp);
        assert!((half.max_rate_fraction() - 0.5005).abs() < 1e-3);
        // 1 MiB is more than 12-bit credits can advertise.
        let big = CreditWindow::from_buffer(16_384, 2_000_000).unwrap();
        assert_eq!(big.window_blocks, MAX_WINDOW_BLOCKS);
        assert!(
            big.capped && big.below_bdp,
            "the cap, not the buffer, is below the BDP"
        );
        assert!(CreditWindow::from_buffer(0, 1).is_err());
        let cfg = CreditConfig::new(5, &w);
        assert_eq!(cfg.update_blocks, 125);
        assert!(cfg.validate().is_ok());
        assert!(CreditConfig { vl: 16, ..cfg }.validate().is_err());
        assert!(CreditConfig {
            rx_window_blocks: 2049,
            ..cfg
        }
        .validate()
        .is_err());
        assert!(CreditConfig {
            peer_window_blocks: 0,
            ..cfg
        }
        .validate()
        .is_err());
        assert!(CreditConfig {
            update_blocks: 1_001,
            ..cfg
        }
        .validate()
        .is_err());
        assert!(CreditConfig {
            resync_interval_ns: 0,
            ..cfg
        }
        .validate()
        .is_err());
    }

    /// One step of the random scenario.
    #[derive(Debug, Clone)]
    struct Step {
        dt: u64,
        enqueue: [Option<u32>; 2],
        drain: [u32; 2],
        lose_data: [bool; 2],
        lose_credit: [bool; 2],
    }

    fn step_strategy() -> impl Strategy<Value = Step> {
        (
            1u64..4_000,
            [
                proptest::option::of(1u32..=24),
                proptest::option::of(1u32..=24),
            ],
            [0u32..40, 0u32..40],
            [
                proptest::bool::weighted(0.15),
                proptest::bool::weighted(0.15),
            ],
            [proptest::bool::weighted(0.3), proptest::bool::weighted(0.3)],
        )
            .prop_map(|(dt, enqueue, drain, lose_data, lose_credit)| Step {
                dt,
                enqueue,
                drain,
                lose_data,
                lose_credit,
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Random sends, drains, lost updates and lost data frames never overrun a receiver,
        /// and once the losses stop every queued frame is eventually sent.
        #[test]
        fn never_overruns_and_eventually_sends_everything(
            steps in proptest::collection::vec(step_strategy(), 1..300),
        ) {
            let mut s = Sim::pair();
            let mut queued = [0u64; 2];
            for st in &steps {
                for (n, node) in s.nodes.iter_mut().enumerate() {
                    if let Some(blocks) = st.enqueue[n] {
                        node.queue.push_back(blocks);
                        queued[n] += 1;
                    }
                    let held = node.lane.rx().held_blocks();
                    node.lane.on_drain(st.drain[n].min(held));
                    s.lose_data[n] = u32::from(st.lose_data[n]);
                    s.lose_credit[n] = u32::from(st.lose_credit[n]);
                }
                s.advance(st.dt); // asserts every data frame is Accepted
                for node in &s.nodes {
                    prop_assert!(node.lane.rx().held_blocks() <= u32::from(WINDOW));
                }
            }
            s.lose_data = [0; 2];
            s.lose_credit = [0; 2];
            for _ in 0..2_000 {
                s.drain_all(0);
                s.drain_all(1);
                s.advance(1_000);
                if s.nodes.iter().all(|n| n.queue.is_empty()) {
                    break;
                }
            }
            for (node, &given) in s.nodes.iter().zip(&queued) {
                prop_assert!(node.queue.is_empty(), "frames left: {}", node.queue.len());
                prop_assert_eq!(node.sent_frames, given);
                prop_assert!(node.peak_held <= u32::from(WINDOW));
                prop_assert_eq!(node.lane.counters().rejected_frames, 0);
                prop_assert_eq!(node.lane.counters().overrun_frames, 0);
            }
        }
    }
}
