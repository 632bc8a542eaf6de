//! PFC watchdog: a priority paused continuously for longer than the detection time is
//! declared stormed; it is restored once no pause has been in force for the restoration time.
//! Sans-I/O: fed the paused mask and `now`, it returns the transitions.

use super::PRIORITIES;

/// What the dataplane does with a stormed priority.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum StormAction {
    /// Ignore the pause and drop the priority's frames (queued and arriving), freeing its buffer.
    #[default]
    Drop,
    /// Ignore the pause and keep forwarding the priority.
    Forward,
    /// Keep obeying the pause; only count and log.
    Alert,
}

/// Watchdog timing and action.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WatchdogConfig {
    /// Continuous pause longer than this is a storm, ns.
    pub detection_ns: u64,
    /// A storm ends after this long with no pause in force, ns.
    pub restoration_ns: u64,
    /// What to do while stormed.
    pub action: StormAction,
}

/// A watchdog transition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchdogEvent {
    /// `priority` has been paused since `paused_since` and is now declared stormed.
    Storm {
        /// The priority.
        priority: usize,
        /// When its continuous pause began.
        paused_since: u64,
    },
    /// `priority`'s storm is over.
    Restored {
        /// The priority.
        priority: usize,
        /// How long the storm lasted, ns.
        lasted_ns: u64,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Not paused.
    Running,
    /// Paused continuously since the given time.
    Paused(u64),
    /// Stormed since `since`; the pause was last seen in force at `last_paused`.
    Stormed { since: u64, last_paused: u64 },
}

/// The watchdog of one egress port.
#[derive(Debug, Clone)]
pub struct PfcWatchdog {
    config: WatchdogConfig,
    state: [State; PRIORITIES],
}

impl PfcWatchdog {
    /// A watchdog with `config`, every priority running.
    pub fn new(config: WatchdogConfig) -> Self {
        PfcWatchdog {
            config,
            state: [State::Running; PRIORITIES],
        }
    }

    /// The configuration.
    pub fn config(&self) -> &WatchdogConfig {
        &self.config
    }

    /// Applies a new configuration (reload), keeping each priority's state and storm count.
    pub fn set_config(&mut self, config: WatchdogConfig) {
        self.config = config;
    }

    /// Advances to `now` given which priorities a received PAUSE/PFC holds paused; calls
    /// `on_event` for each transition.
    pub fn tick(&mut self, now: u64, paused: u8, mut on_event: impl FnMut(WatchdogEvent)) {
        for p in 0..PRIORITIES {
            let is_paused = paused & (1 << p) != 0;
            self.state[p] = match (self.state[p], is_paused) {
                (State::Running, false) => State::Running,
                (State::Running, true) => State::Paused(now),
                (State::Paused(_), false) => State::Running,
                (State::Paused(since), true)
                    if now.saturating_sub(since) >= self.config.detection_ns =>
                {
                    on_event(WatchdogEvent::Storm {
                        priority: p,
                        paused_since: since,
                    });
                    State::Stormed {
                        since: now,
                        last_paused: now,
                    }
                }
                (s @ State::Paused(_), true) => s,
                (State::Stormed { since, .. }, true) => State::Stormed {
                    since,
                    last_paused: now,
                },
                (State::Stormed { since, last_paused }, false) => {
                    if now.saturating_sub(last_paused) >= self.config.restoration_ns {
                        on_event(WatchdogEvent::Restored {
                            priority: p,
                            lasted_ns: now.saturating_sub(since),
                        });
                        State::Running
                    } else {
                        State::Stormed { since, last_paused }
                    }
                }
            };
        }
    }

    /// Bitmask of stormed priorities.
    pub fn stormed(&self) -> u8 {
        (0..PRIORITIES).fold(0, |m, p| {
            m | (u8::from(matches!(self.state[p], State::Stormed { .. })) << p)
        })
    }

    /// Priorities whose pause is overridden now (stormed, with action drop or forward).
    pub fn overridden(&self) -> u8 {
        match self.config.action {
            StormAction::Alert => 0,
            StormAction::Drop | StormAction::Forward => self.stormed(),
        }
    }

    /// Priorities whose frames are dropped now (stormed, with action drop).
    pub fn dropping(&self) -> u8 {
        match self.config.action {
            StormAction::Drop => self.stormed(),
            StormAction::Forward | StormAction::Alert => 0,
        }
    }

    /// The earliest time a tick could change something (detection or restoration due).
    pub fn next_deadline(&self) -> Option<u64> {
        self.state
            .iter()
            .filter_map(|s| match *s {
                State::Running => None,
                State::Paused(since) => Some(since.saturating_add(self.config.detection_ns)),
                State::Stormed { last_paused, .. } => {
                    Some(last_paused.saturating_add(self.config.restoration_ns))
                }
            })
            .min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn wd(action: StormAction) -> PfcWatchdog {
        PfcWatchdog::new(WatchdogConfig {
            detection_ns: 200 * MS,
            restoration_ns: 100 * MS,
            action,
        })
    }

    /// Ticks every `step` ns from `from` to `to` with `paused`, collecting events.
    fn run(
        w: &mut PfcWatchdog,
        from: u64,
        to: u64,
        step: u64,
        paused: u8,
    ) -> Vec<(u64, WatchdogEvent)> {
        let mut ev = Vec::new();
        let mut t = from;
        while t < to {
            w.tick(t, paused, |e| ev.push((t, e)));
            t += step;
        }
        ev
    }

    #[test]
    fn storm_detected_within_detection_time_plus_one_poll() {
        let mut w = wd(StormAction::Drop);
        let poll = MS;
        let ev = run(&mut w, 0, 400 * MS, poll, 1 << 3);
        assert_eq!(ev.len(), 1);
        let (t, e) = ev[0];
        assert_eq!(
            e,
            WatchdogEvent::Storm {
                priority: 3,
                paused_since: 0
            }
        );
        assert!(t >= 200 * MS && t <= 200 * MS + poll, "detected at {t}");
        assert_eq!(w.stormed(), 1 << 3);
        assert_eq!(w.overridden(), 1 << 3);
        assert_eq!(w.dropping(), 1 << 3);
    }

    /// A clock read that steps back (injected time, a shard read late) is no storm, and
    /// deadlines near the end of time stay there rather than wrap to the start.
    #[test]
    fn time_that_steps_back_or_runs_out_does_not_wrap() {
        let mut w = wd(StormAction::Drop);
        w.tick(1_000, 1 << 3, |e| panic!("{e:?}"));
        w.tick(999, 1 << 3, |e| panic!("{e:?}"));
        assert_eq!(w.stormed(), 0);
        let mut w = wd(StormAction::Drop);
        w.tick(u64::MAX - 1, 1 << 3, |_| {});
        assert_eq!(w.next_deadline(), Some(u64::MAX));
    }

    #[test]
    fn short_pauses_are_not_storms() {
        let mut w = wd(StormAction::Drop);
        // 150 ms paused, 1 ms resumed, 150 ms paused: never 200 ms continuously.
        let mut ev = run(&mut w, 0, 150 * MS, MS, 1);
        ev.extend(run(&mut w, 150 * MS, 151 * MS, MS, 0));
        ev.extend(run(&mut w, 151 * MS, 301 * MS, MS, 1));
        assert!(ev.is_empty(), "{ev:?}");
        assert_eq!(w.next_deadline(), Some(151 * MS + 200 * MS));
    }

    #[test]
    fn restored_after_restoration_time_without_pause() {
        let mut w = wd(StormAction::Forward);
        run(&mut w, 0, 300 * MS, MS, 1 << 5);
        // The storm goes on until 500 ms, then stops.
        assert!(run(&mut w, 300 * MS, 500 * MS, MS, 1 << 5).is_empty());
        let ev = run(&mut w, 500 * MS, 700 * MS, MS, 0);
        assert_eq!(ev.len(), 1);
        let (t, e) = ev[0];
        assert!(matches!(e, WatchdogEvent::Restored { priority: 5, .. }));
        // Last seen paused at 499 ms; restored 100 ms later.
        assert_eq!(t, 599 * MS);
        assert_eq!(w.stormed(), 0);
        assert_eq!(w.dropping(), 0, "forward never drops");
    }

    #[test]
    fn alert_keeps_obeying_the_pause() {
        let mut w = wd(StormAction::Alert);
        run(&mut w, 0, 300 * MS, MS, 1);
        assert_eq!(w.stormed(), 1);
        assert_eq!(w.overridden(), 0);
        assert_eq!(w.dropping(), 0);
    }
}
