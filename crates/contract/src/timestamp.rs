//! Canonical UTC timestamps (spec "Bounds": timestamps are canonical UTC
//! ISO-8601 that round-trip byte-identically; DESIGN D3).

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use time::format_description::FormatItem;
use time::macros::format_description;
use time::{Duration, OffsetDateTime, PrimitiveDateTime, UtcOffset};

/// The one accepted shape: `YYYY-MM-DDTHH:MM:SS.mmmZ` (UTC, exactly three
/// fraction digits, upper-case `Z`).
const CANONICAL: &[FormatItem<'static>] =
    format_description!("[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z");

/// A regular expression that accepts exactly the canonical timestamps: real
/// calendar dates (leap years included), hours 00-23, seconds 00-59, three
/// fraction digits and `Z`. Published in the author kit's schemas.
pub const TIMESTAMP_PATTERN: &str = concat!(
    "^(?:[0-9]{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])",
    "|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)",
    "|02-(?:0[1-9]|1[0-9]|2[0-8]))",
    "|(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:[02468][048]|[13579][26])00)-02-29)",
    "T(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]\\.[0-9]{3}Z$"
);

/// A canonical UTC instant with millisecond precision.
///
/// Wire form: a JSON string `YYYY-MM-DDTHH:MM:SS.mmmZ`, for example
/// `2026-11-30T07:30:00.000Z`. Parsing accepts a string only when it
/// re-formats to exactly the same bytes, so offsets (`+00:00`), a missing or
/// longer fraction, a lower-case `z`, and leap-second forms (`:60`) are all
/// refused. Ordering is chronological.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(OffsetDateTime);

/// Why a string is not a canonical timestamp.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("expected a canonical UTC timestamp YYYY-MM-DDTHH:MM:SS.mmmZ, actual {actual:?}")]
pub struct TimestampError {
    /// The refused input, verbatim.
    pub actual: String,
}

impl Timestamp {
    /// Parses a canonical timestamp.
    ///
    /// # Errors
    /// [`TimestampError`] when `text` is not exactly the canonical form of
    /// the instant it denotes.
    pub fn parse(text: &str) -> Result<Self, TimestampError> {
        let err = || TimestampError {
            actual: text.to_owned(),
        };
        let parsed = PrimitiveDateTime::parse(text, CANONICAL).map_err(|_| err())?;
        let ts = Timestamp(parsed.assume_utc());
        if ts.to_string() != text {
            return Err(err());
        }
        Ok(ts)
    }

    /// The instant `unix_millis` milliseconds after the Unix epoch.
    ///
    /// # Errors
    /// [`TimestampError`] when the instant is outside years 0000..=9999.
    pub fn from_unix_millis(unix_millis: i64) -> Result<Self, TimestampError> {
        let nanos = i128::from(unix_millis) * 1_000_000;
        let dt = OffsetDateTime::from_unix_timestamp_nanos(nanos).map_err(|_| TimestampError {
            actual: format!("unix millis {unix_millis}"),
        })?;
        if !(0..=9999).contains(&dt.year()) {
            return Err(TimestampError {
                actual: format!("unix millis {unix_millis}"),
            });
        }
        Ok(Timestamp(dt))
    }

    /// The current wall-clock instant, truncated to milliseconds.
    pub fn now() -> Self {
        let now = OffsetDateTime::now_utc();
        Self::from_unix_millis((now.unix_timestamp_nanos() / 1_000_000) as i64)
            .unwrap_or(Timestamp(OffsetDateTime::UNIX_EPOCH))
    }

    /// Milliseconds since the Unix epoch.
    pub fn unix_millis(&self) -> i64 {
        (self.0.unix_timestamp_nanos() / 1_000_000) as i64
    }

    /// This instant moved by `millis` milliseconds (negative moves back),
    /// saturating at the representable range.
    pub fn add_millis(&self, millis: i64) -> Self {
        let moved = self.0.saturating_add(Duration::milliseconds(millis));
        Self::from_unix_millis((moved.unix_timestamp_nanos() / 1_000_000) as i64).unwrap_or(*self)
    }

    /// This instant moved by `seconds` seconds.
    pub fn add_seconds(&self, seconds: i64) -> Self {
        self.add_millis(seconds.saturating_mul(1000))
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let utc = self.0.to_offset(UtcOffset::UTC);
        match utc.format(CANONICAL) {
            Ok(s) => f.write_str(&s),
            Err(_) => Err(fmt::Error),
        }
    }
}

impl fmt::Debug for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Timestamp({self})")
    }
}

impl std::str::FromStr for Timestamp {
    type Err = TimestampError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        Timestamp::parse(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(feature = "schema")]
impl schemars::JsonSchema for Timestamp {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Timestamp".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "description": "Canonical UTC instant YYYY-MM-DDTHH:MM:SS.mmmZ; must round-trip byte-identically (no offsets, exactly three fraction digits, upper-case Z, no leap second, real calendar dates).",
            "pattern": TIMESTAMP_PATTERN
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_round_trips() {
        let t = Timestamp::parse("2026-11-30T07:30:00.123Z").unwrap();
        assert_eq!(t.to_string(), "2026-11-30T07:30:00.123Z");
        assert_eq!(Timestamp::from_unix_millis(t.unix_millis()).unwrap(), t);
    }

    #[test]
    fn non_canonical_forms_are_refused() {
        for bad in [
            "2026-11-30T07:30:00Z",
            "2026-11-30T07:30:00.12Z",
            "2026-11-30T07:30:00.1234Z",
            "2026-11-30T07:30:00.000z",
            "2026-11-30T07:30:00.000+00:00",
            "2026-11-30 07:30:00.000Z",
            "2026-11-30T23:59:60.000Z",
            "2026-02-30T00:00:00.000Z",
            "2026-11-30T7:30:00.000Z",
            " 2026-11-30T07:30:00.000Z",
            "",
        ] {
            assert!(Timestamp::parse(bad).is_err(), "{bad} was accepted");
        }
    }

    #[test]
    fn arithmetic_moves_by_milliseconds() {
        let t = Timestamp::parse("2026-11-30T07:30:00.000Z").unwrap();
        assert_eq!(t.add_seconds(90).to_string(), "2026-11-30T07:31:30.000Z");
        assert_eq!(t.add_millis(-1).to_string(), "2026-11-30T07:29:59.999Z");
        assert!(t < t.add_millis(1));
    }
}
