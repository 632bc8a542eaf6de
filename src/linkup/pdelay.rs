//! IEEE 1588 peer delay as sans-I/O state machines: the initiator, which sends Pdelay_Req and
//! turns the answers into samples of the link round trip, and the responder, which answers.
//!
//! ```text
//! initiator                       responder
//!   T1  ── Pdelay_Req ──────────►  T2
//!   T4  ◄────────── Pdelay_Resp ─  T3        (carries T2)
//!       ◄── Pdelay_Resp_Follow_Up ─          (carries T3)
//! X = (T4 − T1) − (T3 − T2) − correctionField(Resp) − correctionField(Follow_Up)
//! ```
//! X is the link's round trip with the responder's turnaround removed (twice the mean path
//! delay that `ptp4l` reports). T1, T4 are on the initiator's clock, T2, T3 on the
//! responder's; only the two differences are used, so the clocks need no common epoch.
//! The caller supplies every time: RX times from the frame's RX stamp, TX times read just
//! before the send that kicks the frame (see [`crate::linkup`] for the clock domain). A
//! one-step responder (twoStepFlag clear) puts its turnaround in the Resp's correctionField
//! and sends no Follow_Up; that is handled too.

use serde::Serialize;

use super::Measurement;
use crate::wire::ptp::{PdelayBody, PdelayMessage, PortIdentity, PtpTimestamp, FLAG_TWO_STEP};

/// One completed exchange. Times in ns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Sample {
    /// The exchange's sequenceId.
    pub sequence_id: u16,
    /// The responder's port identity.
    pub responder: PortIdentity,
    /// T1: our Pdelay_Req left (our clock).
    pub t1_ns: u64,
    /// T2: the request reached the responder (its clock; zero from a one-step responder).
    pub t2: PtpTimestamp,
    /// T3: the response left the responder (its clock; zero from a one-step responder).
    pub t3: PtpTimestamp,
    /// T4: the response reached us (our clock).
    pub t4_ns: u64,
    /// Sum of the Resp's and Follow_Up's correctionFields, ns.
    pub correction_ns: i64,
    /// The responder's turnaround (T3 − T2) + corrections, ns.
    pub turnaround_ns: i64,
    /// X = (T4 − T1) − turnaround, ns.
    pub round_trip_ns: i64,
}

/// How the initiator runs a measurement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InitiatorConfig {
    /// Samples wanted per measurement.
    pub samples: u32,
    /// Time between requests, ns.
    pub interval_ns: u64,
    /// An exchange not complete this long after its request is lost, ns.
    pub timeout_ns: u64,
    /// Requests sent at most per measurement (lost ones are retried up to this).
    pub max_requests: u32,
    /// PTP domainNumber of our requests.
    pub domain: u8,
}

impl InitiatorConfig {
    /// `samples` samples `interval_ns` apart, a 100 ms timeout, and up to three requests per
    /// sample.
    pub fn new(samples: u32, interval_ns: u64) -> Self {
        InitiatorConfig {
            samples,
            interval_ns,
            timeout_ns: 100_000_000,
            max_requests: samples.saturating_mul(3).max(1),
            domain: 0,
        }
    }
}

/// Why a measurement produced no result.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MeasureError {
    /// No request was answered.
    #[error("no answer to {requests} Pdelay_Req (timeout {timeout_ms} ms each): is the peer a peer-delay responder?")]
    NoResponse {
        /// Requests sent.
        requests: u32,
        /// The timeout, ms.
        timeout_ms: u64,
    },
    /// Fewer than half the wanted samples completed.
    #[error(
        "only {got} of {wanted} samples after {requests} Pdelay_Req ({lost} lost, {rejected} \
         rejected for an implausible responder turnaround)"
    )]
    TooFewSamples {
        /// Samples completed.
        got: u32,
        /// Samples wanted.
        wanted: u32,
        /// Requests sent.
        requests: u32,
        /// Requests lost.
        lost: u32,
        /// Complete exchanges rejected ([`Implausible`]).
        rejected: u32,
    },
}

#[derive(Debug, Clone, Copy)]
struct Resp {
    source: PortIdentity,
    t2: PtpTimestamp,
    t4_ns: u64,
    correction_ns: i64,
    two_step: bool,
}

#[derive(Debug, Clone, Copy)]
struct FollowUp {
    source: PortIdentity,
    t3: PtpTimestamp,
    correction_ns: i64,
}

#[derive(Debug, Clone, Copy)]
struct Outstanding {
    seq: u16,
    t1_ns: Option<u64>,
    deadline_ns: u64,
    resp: Option<Resp>,
    fup: Option<FollowUp>,
}

#[derive(Debug, Clone)]
struct Run {
    next_req_ns: u64,
    requests: u32,
    lost: u32,
    late: u32,
    rejected: u32,
    samples: Vec<Sample>,
    outstanding: Option<Outstanding>,
}

/// The peer-delay initiator of one port.
#[derive(Debug, Clone)]
pub struct PdelayInitiator {
    cfg: InitiatorConfig,
    identity: PortIdentity,
    next_seq: u16,
    run: Option<Run>,
    result: Option<Result<Measurement, MeasureError>>,
}

impl PdelayInitiator {
    /// An idle initiator whose requests carry `identity`.
    pub fn new(cfg: InitiatorConfig, identity: PortIdentity) -> Self {
        PdelayInitiator {
            cfg,
            identity,
            next_seq: 0,
            run: None,
            result: None,
        }
    }

    /// Starts a measurement at `now` (abandoning one in progress).
    pub fn start(&mut self, now: u64) {
        self.result = None;
        self.run = Some(Run {
            next_req_ns: now,
            requests: 0,
            lost: 0,
            late: 0,
            rejected: 0,
            samples: Vec::with_capacity(self.cfg.samples as usize),
            outstanding: None,
        });
    }

    /// True while a measurement is in progress.
    pub fn running(&self) -> bool {
        self.run.is_some()
    }

    /// Samples completed so far in the current measurement.
    pub fn samples_so_far(&self) -> usize {
        self.run.as_ref().map_or(0, |r| r.samples.len())
    }

    /// The finished measurement, once (then `None` until the next one finishes).
    pub fn take_result(&mut self) -> Option<Result<Measurement, MeasureError>> {
        self.result.take()
    }

    /// Times out an outstanding exchange and finishes the measurement when it is complete.
    pub fn poll(&mut self, now: u64) {
        let Some(run) = &mut self.run else { return };
        if run.outstanding.is_some_and(|o| now >= o.deadline_ns) {
            run.outstanding = None;
            run.lost += 1;
        }
        let done = run.samples.len() as u32 >= self.cfg.samples
            || (run.requests >= self.cfg.max_requests && run.outstanding.is_none());
        if done {
            let run = self.run.take().expect("checked above");
            let got = run.samples.len() as u32;
            self.result = Some(if got == 0 && run.rejected == 0 {
                Err(MeasureError::NoResponse {
                    requests: run.requests,
                    timeout_ms: self.cfg.timeout_ns / 1_000_000,
                })
            } else if 2 * got < self.cfg.samples {
                Err(MeasureError::TooFewSamples {
                    got,
                    wanted: self.cfg.samples,
                    requests: run.requests,
                    lost: run.lost,
                    rejected: run.rejected,
                })
            } else {
                let m = Measurement::from_samples(run.samples, run.requests, run.lost, run.late)
                    .expect("at least one sample");
                Ok(Measurement {
                    rejected: run.rejected,
                    ..m
                })
            });
        }
    }

    /// The Pdelay_Req to send at `now`, if one is due. Call [`PdelayInitiator::on_sent`] with
    /// its TX time once it has been handed to the port.
    pub fn poll_transmit(&mut self, now: u64) -> Option<PdelayMessage> {
        self.poll(now);
        let run = self.run.as_mut()?;
        if run.outstanding.is_some()
            || now < run.next_req_ns
            || run.requests >= self.cfg.max_requests
        {
            return None;
        }
        let seq = self.next_seq;
        self.next_seq = self.next_seq.wrapping_add(1);
        run.requests += 1;
        run.next_req_ns = now + self.cfg.interval_ns;
        run.outstanding = Some(Outstanding {
            seq,
            t1_ns: None,
            deadline_ns: now + self.cfg.timeout_ns,
            resp: None,
            fup: None,
        });
        Some(PdelayMessage {
            transport_specific: 0,
            minor_version: 0,
            domain: self.cfg.domain,
            flags: 0,
            correction: 0,
            source: self.identity,
            sequence_id: seq,
            log_interval: crate::wire::ptp::LOG_INTERVAL_UNUSED,
            body: PdelayBody::Req {
                origin: PtpTimestamp::default(),
            },
        })
    }

    /// Records T1 of request `seq`: the time it was kicked onto the wire.
    pub fn on_sent(&mut self, seq: u16, tx_ns: u64) {
        if let Some(o) = self
            .run
            .as_mut()
            .and_then(|r| r.outstanding.as_mut())
            .filter(|o| o.seq == seq)
        {
            o.t1_ns = Some(tx_ns);
            o.deadline_ns = tx_ns + self.cfg.timeout_ns;
        }
    }

    /// Takes in a Pdelay_Resp or Pdelay_Resp_Follow_Up received at `rx_ns` (T4 for a Resp).
    /// Messages for another requester are ignored; answers to a timed-out request count as
    /// late.
    pub fn handle(&mut self, rx_ns: u64, msg: &PdelayMessage) {
        let (requesting, resp, fup) = match msg.body {
            PdelayBody::Resp {
                request_receipt,
                requesting,
            } => (
                requesting,
                Some(Resp {
                    source: msg.source,
                    t2: request_receipt,
                    t4_ns: rx_ns,
                    correction_ns: msg.correction_ns(),
                    two_step: msg.flags & FLAG_TWO_STEP != 0,
                }),
                None,
            ),
            PdelayBody::RespFollowUp {
                response_origin,
                requesting,
            } => (
                requesting,
                None,
                Some(FollowUp {
                    source: msg.source,
                    t3: response_origin,
                    correction_ns: msg.correction_ns(),
                }),
            ),
            PdelayBody::Req { .. } => return,
        };
        if requesting != self.identity {
            return;
        }
        let Some(run) = &mut self.run else { return };
        let Some(o) = run
            .outstanding
            .as_mut()
            .filter(|o| o.seq == msg.sequence_id)
        else {
            run.late += 1;
            return;
        };
        // The first responder to answer owns the exchange; a Follow_Up must come from it. One
        // that comes before any response is kept until a response says whose exchange it is
        // (another responder's, on a segment with two, is then let go, not left to block the
        // right one).
        match (resp, fup) {
            (Some(r), _) if o.resp.is_none() => {
                if o.fup.as_ref().is_some_and(|f| f.source != r.source) {
                    o.fup = None;
                }
                o.resp = Some(r);
            }
            (_, Some(f)) if o.resp.as_ref().is_none_or(|r| r.source == f.source) => {
                o.fup = Some(f);
            }
            _ => return,
        }
        let Some(sample) = complete(o) else { return };
        run.outstanding = None;
        match implausible(&sample, self.cfg.timeout_ns) {
            None => run.samples.push(sample),
            Some(why) => {
                tracing::debug!(?why, ?sample, "peer-delay sample rejected");
                run.rejected += 1;
            }
        }
        self.poll(rx_ns);
    }

    /// The next time [`PdelayInitiator::poll_transmit`] or [`PdelayInitiator::poll`] has
    /// work, if a measurement is running.
    pub fn next_deadline(&self) -> Option<u64> {
        let run = self.run.as_ref()?;
        Some(match run.outstanding {
            Some(o) => o.deadline_ns,
            None => run.next_req_ns,
        })
    }
}

/// Why a complete exchange cannot be a measurement of the link: the responder's turnaround
/// (T3 − T2 plus corrections, on its clock) contradicts what the initiator saw. Such samples
/// are rejected and counted, never averaged in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Implausible {
    /// The response left before the request arrived (T3 < T2).
    NegativeTurnaround,
    /// The responder says it held the request longer than the whole exchange took here
    /// (X = (T4 − T1) − turnaround < 0).
    TurnaroundExceedsExchange,
    /// The responder says it held the request longer than the initiator waits for an answer.
    TurnaroundExceedsTimeout,
}

/// Checks `s` against what a real link and responder can produce.
pub fn implausible(s: &Sample, timeout_ns: u64) -> Option<Implausible> {
    if s.turnaround_ns < 0 {
        Some(Implausible::NegativeTurnaround)
    } else if s.turnaround_ns as u64 > timeout_ns {
        Some(Implausible::TurnaroundExceedsTimeout)
    } else if s.round_trip_ns < 0 {
        Some(Implausible::TurnaroundExceedsExchange)
    } else {
        None
    }
}

/// The sample of an exchange whose answers are all in, if they are.
fn complete(o: &Outstanding) -> Option<Sample> {
    let t1 = o.t1_ns?;
    let r = o.resp?;
    let (t3, fup_corr) = if r.two_step {
        let f = o.fup.filter(|f| f.source == r.source)?;
        (f.t3, f.correction_ns)
    } else {
        (r.t2, 0)
    };
    // In i128, then held to i64: the wire's 48-bit seconds allow a T3 − T2 beyond i64, which
    // truncated would wrap to a plausible figure; held, it is as implausible as it is.
    let turnaround = if r.two_step {
        t3.as_ns() - r.t2.as_ns()
    } else {
        0
    } + i128::from(r.correction_ns)
        + i128::from(fup_corr);
    let outer = i128::from(r.t4_ns) - i128::from(t1);
    let held = |ns: i128| ns.clamp(i64::MIN.into(), i64::MAX.into()) as i64;
    let (turnaround, round_trip) = (held(turnaround), held(outer - turnaround));
    Some(Sample {
        sequence_id: o.seq,
        responder: r.source,
        t1_ns: t1,
        t2: r.t2,
        t3,
        t4_ns: r.t4_ns,
        correction_ns: r.correction_ns.saturating_add(fup_corr),
        turnaround_ns: turnaround,
        round_trip_ns: round_trip,
    })
}

/// A Pdelay_Resp to send, and the Follow_Up that goes after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Response {
    /// The Pdelay_Resp (carries T2).
    pub resp: PdelayMessage,
    req_correction: i64,
}

impl Response {
    /// The Pdelay_Resp_Follow_Up carrying T3 = `tx_ns`, the time the Resp was kicked.
    pub fn follow_up(&self, tx_ns: u64) -> PdelayMessage {
        let PdelayBody::Resp { requesting, .. } = self.resp.body else {
            unreachable!("a Response always holds a Pdelay_Resp")
        };
        PdelayMessage {
            flags: 0,
            correction: self.req_correction,
            body: PdelayBody::RespFollowUp {
                response_origin: PtpTimestamp::from_ns(tx_ns),
                requesting,
            },
            ..self.resp
        }
    }
}

/// The peer-delay responder of one port (two-step).
#[derive(Debug, Clone)]
pub struct PdelayResponder {
    identity: PortIdentity,
    answered: u64,
}

impl PdelayResponder {
    /// A responder whose answers carry `identity`.
    pub fn new(identity: PortIdentity) -> Self {
        PdelayResponder {
            identity,
            answered: 0,
        }
    }

    /// Answers a Pdelay_Req received at `rx_ns` (T2): the Pdelay_Resp to send now. The
    /// request's domain, transportSpecific and sequenceId are copied; its correctionField
    /// goes into the Follow_Up, as 1588's two-step rules say. Requests from our own identity
    /// (a loop) and other message types get no answer.
    pub fn handle_request(&mut self, rx_ns: u64, req: &PdelayMessage) -> Option<Response> {
        if !matches!(req.body, PdelayBody::Req { .. }) || req.source == self.identity {
            return None;
        }
        self.answered += 1;
        Some(Response {
            resp: PdelayMessage {
                transport_specific: req.transport_specific,
                minor_version: 0,
                domain: req.domain,
                flags: FLAG_TWO_STEP,
                correction: 0,
                source: self.identity,
                sequence_id: req.sequence_id,
                log_interval: crate::wire::ptp::LOG_INTERVAL_UNUSED,
                body: PdelayBody::Resp {
                    request_receipt: PtpTimestamp::from_ns(rx_ns),
                    requesting: req.source,
                },
            },
            req_correction: req.correction,
        })
    }

    /// Requests answered so far.
    pub fn answered(&self) -> u64 {
        self.answered
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::MacAddr;

    const MS: u64 = 1_000_000;

    fn ids() -> (PortIdentity, PortIdentity) {
        (
            PortIdentity::from_mac(MacAddr([2, 0, 0, 0, 0, 1]), 1),
            PortIdentity::from_mac(MacAddr([2, 0, 0, 0, 0, 2]), 1),
        )
    }

    /// Runs exchanges over a simulated link with one-way delay `d`, responder turnaround
    /// `turn` and the responder's clock offset by 1,000 s, returning the measurement.
    fn simulate(samples: u32, d: u64, turn: u64, drop: impl Fn(u16) -> bool) -> Measurement {
        let (a, b) = ids();
        let mut ini = PdelayInitiator::new(InitiatorConfig::new(samples, 10 * MS), a);
        let mut rsp = PdelayResponder::new(b);
        let offset = 1_000_000_000_000;
        let mut now = 5 * MS;
        ini.start(now);
        loop {
            if let Some(req) = ini.poll_transmit(now) {
                let t1 = now + 3; // the kick, a moment after the decision
                ini.on_sent(req.sequence_id, t1);
                if !drop(req.sequence_id) {
                    let r = rsp.handle_request(t1 + d + offset, &req).unwrap();
                    let t3 = t1 + d + turn + offset;
                    let t4 = t3 - offset + d;
                    ini.handle(t4, &r.resp);
                    ini.handle(t4 + 50, &r.follow_up(t3));
                }
            }
            if let Some(res) = ini.take_result() {
                return res.unwrap();
            }
            now = ini.next_deadline().expect("running");
        }
    }

    #[test]
    fn measures_the_round_trip_and_removes_the_turnaround() {
        let m = simulate(10, 50_000, 7_777, |_| false);
        assert_eq!(m.samples.len(), 10);
        assert_eq!(m.requests, 10);
        assert_eq!(m.lost, 0);
        for s in &m.samples {
            assert_eq!(s.round_trip_ns, 100_000);
            assert_eq!(s.turnaround_ns, 7_777);
        }
        assert_eq!(
            (m.estimate_ns, m.min_ns, m.spread_ns),
            (100_000, 100_000, 0)
        );
        assert_eq!(m.responder, Some(ids().1));
    }

    /// On a segment with two responders, a Follow_Up of the other one that arrives first does
    /// not take the slot of the one whose response came first.
    #[test]
    fn another_responders_follow_up_does_not_block_the_exchange() {
        let (a, b) = ids();
        let c = PortIdentity::from_mac(MacAddr([2, 0, 0, 0, 0, 3]), 1);
        let mut ini = PdelayInitiator::new(InitiatorConfig::new(2, 10 * MS), a);
        let (mut rb, mut rc) = (PdelayResponder::new(b), PdelayResponder::new(c));
        let mut now = 5 * MS;
        ini.start(now);
        let req = ini.poll_transmit(now).expect("a request");
        ini.on_sent(req.sequence_id, now);
        let (from_b, from_c) = (
            rb.handle_request(now + 10_000, &req).unwrap(),
            rc.handle_request(now + 10_000, &req).unwrap(),
        );
        now += 40_000;
        ini.handle(now, &from_c.follow_up(now - 25_000));
        ini.handle(now + 10_000, &from_b.resp);
        ini.handle(now + 20_000, &from_b.follow_up(now - 30_000));
        ini.handle(now + 30_000, &from_c.resp);
        assert_eq!(ini.samples_so_far(), 1, "b's exchange completed");
    }

    #[test]
    fn implausible_turnarounds_are_rejected_and_counted() {
        let (a, b) = ids();
        let mut ini = PdelayInitiator::new(InitiatorConfig::new(6, 10 * MS), a);
        let mut rsp = PdelayResponder::new(b);
        let (d, turn) = (50_000u64, 10_000u64);
        let mut now = 5 * MS;
        ini.start(now);
        loop {
            if let Some(req) = ini.poll_transmit(now) {
                let t1 = now + 3;
                ini.on_sent(req.sequence_id, t1);
                let t2 = t1 + d;
                let r = rsp.handle_request(t2, &req).unwrap();
                let t4 = t2 + turn + d;
                // The Follow_Up's T3, as the responder claims it.
                let t3 = match req.sequence_id {
                    0 => t2 - 1_000,            // left before the request arrived
                    1 => t2 + 2 * d + 2 * turn, // held longer than the whole exchange
                    2 => t2 + 200 * MS,         // held longer than the timeout
                    _ => t2 + turn,
                };
                let mut fup = r.follow_up(t3);
                if req.sequence_id == 3 {
                    // 2^64 ns + turn after T2, which the wire's 48-bit seconds can say and
                    // an i64 cannot: it must not wrap to the plausible `turn`.
                    let far = PtpTimestamp::from_ns(t2 + turn).as_ns() + (1i128 << 64);
                    fup.body = PdelayBody::RespFollowUp {
                        response_origin: PtpTimestamp {
                            seconds: (far / 1_000_000_000) as u64,
                            nanoseconds: (far % 1_000_000_000) as u32,
                        },
                        requesting: req.source,
                    };
                }
                ini.handle(t4, &r.resp);
                ini.handle(t4 + 50, &fup);
            }
            if let Some(res) = ini.take_result() {
                let m = res.unwrap();
                assert_eq!(m.rejected, 4, "{m:?}");
                assert_eq!((m.samples.len(), m.requests, m.lost), (6, 10, 0));
                assert!(m.samples.iter().all(|s| s.round_trip_ns == 2 * d as i64));
                return;
            }
            now = ini.next_deadline().expect("running");
        }
    }

    #[test]
    fn implausible_names_the_contradiction() {
        let s = |turnaround_ns: i64, round_trip_ns: i64| Sample {
            sequence_id: 0,
            responder: ids().1,
            t1_ns: 0,
            t2: PtpTimestamp::from_ns(0),
            t3: PtpTimestamp::from_ns(0),
            t4_ns: 0,
            correction_ns: 0,
            turnaround_ns,
            round_trip_ns,
        };
        assert_eq!(implausible(&s(10, 100), MS), None);
        assert_eq!(
            implausible(&s(-1, 100), MS),
            Some(Implausible::NegativeTurnaround)
        );
        assert_eq!(
            implausible(&s(10, -1), MS),
            Some(Implausible::TurnaroundExceedsExchange)
        );
        assert_eq!(
            implausible(&s(2 * MS as i64, 100), MS),
            Some(Implausible::TurnaroundExceedsTimeout)
        );
    }

    #[test]
    fn lost_answers_time_out_and_are_retried() {
        // Every third request is lost: 10 samples take 14 requests.
        let m = simulate(10, 1_000, 500, |seq| seq % 3 == 2);
        assert_eq!(m.samples.len(), 10);
        assert_eq!(m.lost, 4);
        assert_eq!(m.requests, 14);
        assert!(m.samples.iter().all(|s| s.round_trip_ns == 2_000));
    }

    #[test]
    fn no_responder_and_too_few_samples_are_errors() {
        let (a, _) = ids();
        let mut ini = PdelayInitiator::new(InitiatorConfig::new(4, MS), a);
        ini.start(0);
        let mut now = 0;
        while ini.running() {
            if let Some(req) = ini.poll_transmit(now) {
                ini.on_sent(req.sequence_id, now);
            }
            now = ini.next_deadline().unwrap_or(now);
        }
        assert_eq!(
            ini.take_result(),
            Some(Err(MeasureError::NoResponse {
                requests: 12,
                timeout_ms: 100
            }))
        );
        assert_eq!(ini.take_result(), None);
        // Three of ten answered: an error, not a measurement built on three samples.
        let (a, b) = ids();
        let mut ini = PdelayInitiator::new(InitiatorConfig::new(10, MS), a);
        let mut rsp = PdelayResponder::new(b);
        ini.start(0);
        let mut now = 0;
        while ini.running() {
            if let Some(req) = ini.poll_transmit(now) {
                ini.on_sent(req.sequence_id, now);
                if req.sequence_id < 3 {
                    let r = rsp.handle_request(now + 10, &req).unwrap();
                    ini.handle(now + 30, &r.resp);
                    ini.handle(now + 31, &r.follow_up(now + 20));
                }
            }
            now = ini.next_deadline().unwrap_or(now);
        }
        assert!(matches!(
            ini.take_result(),
            Some(Err(MeasureError::TooFewSamples {
                got: 3,
                wanted: 10,
                requests: 30,
                lost: 27,
                rejected: 0
            }))
        ));
    }

    #[test]
    fn late_foreign_and_reordered_answers() {
        let (a, b) = ids();
        let mut ini = PdelayInitiator::new(InitiatorConfig::new(2, MS), a);
        let mut rsp = PdelayResponder::new(b);
        ini.start(0);
        let req0 = ini.poll_transmit(0).unwrap();
        ini.on_sent(0, 0);
        // Request 0 times out; its answer arrives later and counts as late.
        ini.poll(100 * MS);
        let r0 = rsp.handle_request(10, &req0).unwrap();
        ini.handle(100 * MS + 1, &r0.resp);
        let req1 = ini.poll_transmit(100 * MS).unwrap();
        ini.on_sent(1, 100 * MS);
        // An answer to someone else's request is ignored.
        let other = PortIdentity::from_mac(MacAddr([2, 0, 0, 0, 0, 9]), 1);
        let foreign = PdelayMessage {
            source: other,
            ..req1
        };
        let rf = rsp.handle_request(5, &foreign).unwrap();
        ini.handle(100 * MS + 2, &rf.resp);
        // Follow_Up before Resp still completes the exchange.
        let r1 = rsp.handle_request(1_000, &req1).unwrap();
        ini.handle(100 * MS + 900, &r1.follow_up(1_400));
        ini.handle(100 * MS + 800, &r1.resp);
        assert_eq!(ini.samples_so_far(), 1);
        let req2 = ini.poll_transmit(101 * MS).unwrap();
        ini.on_sent(2, 101 * MS);
        // A one-step responder: turnaround in the Resp's correctionField, no Follow_Up.
        let mut one = rsp.handle_request(0, &req2).unwrap().resp;
        one.flags = 0;
        one.correction = 300 * 65_536;
        ini.handle(101 * MS + 1_000, &one);
        let m = ini.take_result().unwrap().unwrap();
        assert_eq!(m.late, 1);
        assert_eq!(m.lost, 1);
        assert_eq!(m.samples[0].round_trip_ns, 800 - 400);
        assert_eq!(m.samples[1].round_trip_ns, 700);
    }

    #[test]
    fn responder_answers_like_ptp4l() {
        let (a, b) = ids();
        let mut rsp = PdelayResponder::new(b);
        let mut req = PdelayInitiator::new(InitiatorConfig::new(1, MS), a);
        req.start(0);
        let mut r = req.poll_transmit(0).unwrap();
        r.correction = 12 << 16;
        r.domain = 3;
        let ans = rsp.handle_request(7_000_000_123, &r).unwrap();
        assert!(ans.resp.two_step());
        assert_eq!(ans.resp.sequence_id, r.sequence_id);
        assert_eq!(ans.resp.domain, 3);
        assert_eq!(ans.resp.correction, 0);
        assert_eq!(
            ans.resp.body,
            PdelayBody::Resp {
                request_receipt: PtpTimestamp {
                    seconds: 7,
                    nanoseconds: 123
                },
                requesting: a
            }
        );
        let f = ans.follow_up(7_000_050_000);
        assert_eq!(f.source, b);
        assert_eq!(f.correction, 12 << 16);
        assert!(!f.two_step());
        assert_eq!(
            f.body,
            PdelayBody::RespFollowUp {
                response_origin: PtpTimestamp::from_ns(7_000_050_000),
                requesting: a
            }
        );
        // Its own request (a loop) and non-requests get no answer.
        let looped = PdelayMessage { source: b, ..r };
        assert!(rsp.handle_request(0, &looped).is_none());
        assert!(rsp.handle_request(0, &ans.resp).is_none());
        assert_eq!(rsp.answered(), 1);
    }
}
