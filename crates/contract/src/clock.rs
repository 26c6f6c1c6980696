//! An injectable clock, so providers and the runtime are deterministic in
//! tests (DESIGN D17, issue "Runtime": an injectable clock).

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use crate::timestamp::Timestamp;

/// A source of the current instant.
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// The current instant, millisecond precision.
    fn now(&self) -> Timestamp;
}

/// The system's wall clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        Timestamp::now()
    }
}

/// A clock that moves only when told to. Clones share one instant.
#[derive(Debug, Clone)]
pub struct ManualClock {
    unix_millis: Arc<AtomicI64>,
}

impl ManualClock {
    /// A clock standing at `start`.
    pub fn new(start: Timestamp) -> Self {
        ManualClock {
            unix_millis: Arc::new(AtomicI64::new(start.unix_millis())),
        }
    }

    /// Moves the clock forward by `millis` milliseconds (never backward).
    pub fn advance_millis(&self, millis: u64) {
        let step = i64::try_from(millis).unwrap_or(i64::MAX);
        self.unix_millis.fetch_add(step, Ordering::SeqCst);
    }

    /// Moves the clock forward by `seconds` seconds.
    pub fn advance_seconds(&self, seconds: u64) {
        self.advance_millis(seconds.saturating_mul(1000));
    }

    /// Sets the clock to `at` (tests only move it forward).
    pub fn set(&self, at: Timestamp) {
        self.unix_millis.store(at.unix_millis(), Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Timestamp {
        let ms = self.unix_millis.load(Ordering::SeqCst);
        Timestamp::from_unix_millis(ms).unwrap_or_else(|_| Timestamp::now())
    }
}
