//! Which SFC messages a reaction point obeys: an optional allow-list of congestion points
//! (by source MAC) and a per-source rate limit, so a host that is not a congestion point, or
//! one that floods, cannot hold a class paused. Sans-I/O: time is an argument.

use crate::wire::MacAddr;

/// Most congestion points an allow-list names.
pub const MAX_ALLOWED: usize = 8;
/// Sources whose rate is tracked at once; the least recently seen is forgotten first.
const TRACKED: usize = 16;
const SECOND_NS: u64 = 1_000_000_000;

/// The policy: whom to obey and how often.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SfcSourcePolicy {
    /// Obey only these senders (`None` slots are unused); all `None`: anyone.
    pub allow: [Option<MacAddr>; MAX_ALLOWED],
    /// SFC messages per second obeyed from one sender (0: no limit).
    pub max_per_second: u32,
}

impl Default for SfcSourcePolicy {
    /// Anyone, at most 100,000 messages per second per sender.
    fn default() -> Self {
        SfcSourcePolicy {
            allow: [None; MAX_ALLOWED],
            max_per_second: 100_000,
        }
    }
}

/// Why a message was not obeyed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The sender is not on the allow-list.
    NotAllowed,
    /// The sender exceeded its rate.
    RateLimited,
}

#[derive(Debug, Clone, Copy, Default)]
struct Bucket {
    source: MacAddr,
    /// Messages the sender may still send (scaled by 1e9 to stay in integers).
    tokens: u64,
    last_ns: u64,
}

/// Applies an [`SfcSourcePolicy`] to each received message.
#[derive(Debug, Clone)]
pub struct SfcGuard {
    policy: SfcSourcePolicy,
    buckets: [Bucket; TRACKED],
    used: usize,
}

impl SfcGuard {
    /// A guard enforcing `policy`.
    pub fn new(policy: SfcSourcePolicy) -> Self {
        SfcGuard {
            policy,
            buckets: [Bucket::default(); TRACKED],
            used: 0,
        }
    }

    /// Whether to obey a message from `source` received at `now`.
    pub fn admit(&mut self, source: MacAddr, now: u64) -> Result<(), Refusal> {
        let listed = self.policy.allow.iter().flatten().count();
        if listed > 0 && !self.policy.allow.iter().flatten().any(|&m| m == source) {
            return Err(Refusal::NotAllowed);
        }
        let rate = u64::from(self.policy.max_per_second);
        if rate == 0 {
            return Ok(());
        }
        // A bucket of one second's worth, refilled at `rate` per second.
        let full = rate * SECOND_NS;
        let i = match self.buckets[..self.used]
            .iter()
            .position(|b| b.source == source)
        {
            Some(i) => i,
            None => {
                let i = if self.used < TRACKED {
                    self.used += 1;
                    self.used - 1
                } else {
                    (0..TRACKED)
                        .min_by_key(|&i| self.buckets[i].last_ns)
                        .unwrap_or(0)
                };
                self.buckets[i] = Bucket {
                    source,
                    tokens: full,
                    last_ns: now,
                };
                i
            }
        };
        let b = &mut self.buckets[i];
        let refill = now.saturating_sub(b.last_ns).saturating_mul(rate);
        b.tokens = b.tokens.saturating_add(refill).min(full);
        b.last_ns = now;
        if b.tokens < SECOND_NS {
            return Err(Refusal::RateLimited);
        }
        b.tokens -= SECOND_NS;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: MacAddr = MacAddr([2, 0, 0, 0, 0, 1]);
    const B: MacAddr = MacAddr([2, 0, 0, 0, 0, 2]);

    #[test]
    fn an_allow_list_refuses_everyone_else() {
        let mut allow = [None; MAX_ALLOWED];
        allow[0] = Some(A);
        let mut g = SfcGuard::new(SfcSourcePolicy {
            allow,
            max_per_second: 0,
        });
        assert_eq!(g.admit(A, 0), Ok(()));
        assert_eq!(g.admit(B, 0), Err(Refusal::NotAllowed));
        let mut open = SfcGuard::new(SfcSourcePolicy {
            allow: [None; MAX_ALLOWED],
            max_per_second: 0,
        });
        assert_eq!(open.admit(B, 0), Ok(()));
    }

    #[test]
    fn a_flooding_source_is_limited_and_others_are_not() {
        let mut g = SfcGuard::new(SfcSourcePolicy {
            allow: [None; MAX_ALLOWED],
            max_per_second: 10,
        });
        // A burst of one second's worth, then refusals, all at the same instant.
        let ok = (0..100).filter(|_| g.admit(A, 1_000).is_ok()).count();
        assert_eq!(ok, 10);
        assert_eq!(g.admit(A, 1_000), Err(Refusal::RateLimited));
        assert_eq!(
            g.admit(B, 1_000),
            Ok(()),
            "another source has its own budget"
        );
        // 100 ms later one more message has been earned.
        assert_eq!(g.admit(A, 1_000 + 100_000_000), Ok(()));
        assert_eq!(g.admit(A, 1_000 + 100_000_000), Err(Refusal::RateLimited));
    }

    #[test]
    fn many_sources_reuse_the_least_recent_slot() {
        let mut g = SfcGuard::new(SfcSourcePolicy {
            allow: [None; MAX_ALLOWED],
            max_per_second: 1,
        });
        for i in 0..(TRACKED as u8 + 4) {
            assert_eq!(g.admit(MacAddr([2, 0, 0, 0, 1, i]), u64::from(i)), Ok(()));
        }
        assert_eq!(g.used, TRACKED);
        // The newest sources are still tracked (and out of budget), absurd times do not
        // overflow.
        let last = MacAddr([2, 0, 0, 0, 1, TRACKED as u8 + 3]);
        assert_eq!(g.admit(last, 100), Err(Refusal::RateLimited));
        assert_eq!(g.admit(last, u64::MAX), Ok(()));
    }
}
