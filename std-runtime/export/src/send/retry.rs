//! When to try a request again: exponential backoff, bounded in attempts and in time, with the
//! server's `Retry-After` honoured. Pure functions of the attempt count, the time spent and the
//! server's answer, so the schedule is tested without a network or a clock.
//!
//! There is no jitter: one `waffle-decode` sends one stream of requests, and there is no crowd
//! of clients to spread out.

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// How hard to try each request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Policy {
    /// Attempts per request, the first included (at least 1).
    pub attempts: u32,
    /// The wait before the second attempt; it doubles for each one after.
    pub backoff: Duration,
    /// The longest wait between two attempts of our own choosing (a server's `Retry-After` may
    /// ask for more, within the budget).
    pub max_backoff: Duration,
    /// The time one request may take over all its attempts and waits. An attempt whose wait
    /// would end past it is not made, and each attempt's timeout ends with it.
    pub budget: Duration,
    /// The longest one attempt may take (connecting, sending, reading the answer).
    pub timeout: Duration,
}

impl Default for Policy {
    /// 5 attempts, waits of 0.5, 1, 2 and 4 s (at most 8 s), 30 s in all, 10 s per attempt.
    fn default() -> Self {
        Policy {
            attempts: 5,
            backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(8),
            budget: Duration::from_secs(30),
            timeout: Duration::from_secs(10),
        }
    }
}

/// Why no further attempt is made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GiveUp {
    /// Every attempt the policy allows was made.
    Attempts,
    /// The next attempt would start after the time budget: after `wait` more, of which the
    /// server asked for `asked` (its `Retry-After`), if it asked.
    Budget {
        /// The wait before the attempt that was not made.
        wait: Duration,
        /// What the server asked for.
        asked: Option<Duration>,
    },
}

impl fmt::Display for GiveUp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GiveUp::Attempts => f.write_str("no attempts left"),
            GiveUp::Budget { asked: Some(asked), .. } => {
                write!(f, "the server asked to retry after {}, past the time budget", secs(*asked))
            }
            GiveUp::Budget { wait, asked: None } => {
                write!(f, "the next attempt (in {}) would end past the time budget", secs(*wait))
            }
        }
    }
}

impl Policy {
    /// The wait before attempt `made + 1`, after `made` failed attempts (1 or more) and
    /// `elapsed` since the first began; `retry_after` is what the last answer asked for.
    ///
    /// The wait is `backoff · 2^(made−1)`, at most `max_backoff`, or the server's
    /// `Retry-After` when that is longer. No attempt is made once `attempts` were, or when the
    /// wait would end past `budget`.
    pub fn delay(
        &self,
        made: u32,
        elapsed: Duration,
        retry_after: Option<Duration>,
    ) -> Result<Duration, GiveUp> {
        if made >= self.attempts {
            return Err(GiveUp::Attempts);
        }
        let doubling = 1u32.checked_shl(made.saturating_sub(1)).unwrap_or(u32::MAX);
        let backoff = self.backoff.saturating_mul(doubling).min(self.max_backoff);
        let wait = retry_after.map_or(backoff, |asked| asked.max(backoff));
        if elapsed.saturating_add(wait) >= self.budget {
            return Err(GiveUp::Budget { wait, asked: retry_after.filter(|&asked| asked >= backoff) });
        }
        Ok(wait)
    }

    /// The timeout of an attempt starting `elapsed` into the request: [`Policy::timeout`], cut
    /// to what is left of the budget (but never under 100 ms, so that a last attempt can be
    /// made at all).
    pub(crate) fn attempt_timeout(&self, elapsed: Duration) -> Duration {
        let left = self.budget.saturating_sub(elapsed);
        self.timeout.min(left).max(Duration::from_millis(100))
    }
}

/// A `Retry-After` header's value as a wait from `now`: delay-seconds (`120`) or an HTTP date
/// (`Sun, 06 Nov 1994 08:49:37 GMT`, a date already past being no wait). `None` when it is
/// neither; the caller then keeps to its own backoff.
pub fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) {
        return Some(Duration::from_secs(value.parse().unwrap_or(u64::MAX)));
    }
    let at = UNIX_EPOCH + Duration::from_secs(parse_http_date(value)?);
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

/// An IMF-fixdate (RFC 9110 §5.6.7), the form servers send, as seconds since the Unix epoch.
fn parse_http_date(value: &str) -> Option<u64> {
    // "Sun, 06 Nov 1994 08:49:37 GMT"
    let (_weekday, rest) = value.split_once(", ")?;
    let parts: Vec<&str> = rest.split(' ').collect();
    let [day, month, year, time, "GMT"] = parts[..] else { return None };
    const MONTHS: [&str; 12] =
        ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
    let month = MONTHS.iter().position(|&m| m == month)? as u64 + 1;
    let number = |s: &str, digits: usize| (s.len() == digits).then(|| s.parse::<u64>().ok()).flatten();
    let (day, year) = (number(day, 2)?, number(year, 4)?);
    let hms: Vec<u64> = time.split(':').map(|t| number(t, 2)).collect::<Option<_>>()?;
    let [h, m, s] = hms[..] else { return None };
    if !(1..=31).contains(&day) || year < 1970 || h > 23 || m > 59 || s > 60 {
        return None;
    }
    Some(days_from_civil(year, month, day) * 86_400 + h * 3600 + m * 60 + s)
}

/// Days from 1970-01-01 to a date of the proleptic Gregorian calendar (year ≥ 1970), after
/// Howard Hinnant's `days_from_civil`.
fn days_from_civil(year: u64, month: u64, day: u64) -> u64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y / 400;
    let yoe = y - era * 400;
    let doy = (153 * ((month + 9) % 12) + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// A duration as seconds for people: `0.25 s`, `12.0 s`.
pub(super) fn secs(d: Duration) -> String {
    if d < Duration::from_secs(10) {
        format!("{:.2} s", d.as_secs_f64())
    } else {
        format!("{:.1} s", d.as_secs_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: fn(u64) -> Duration = Duration::from_millis;

    #[test]
    fn default_schedule_doubles_then_stops_after_five_attempts() {
        let p = Policy::default();
        let waits: Vec<_> = (1..=4).map(|made| p.delay(made, Duration::ZERO, None)).collect();
        assert_eq!(waits, [Ok(MS(500)), Ok(MS(1000)), Ok(MS(2000)), Ok(MS(4000))]);
        assert_eq!(p.delay(5, Duration::ZERO, None), Err(GiveUp::Attempts));
    }

    #[test]
    fn backoff_is_capped() {
        let p = Policy { attempts: 40, max_backoff: MS(3000), ..Policy::default() };
        assert_eq!(p.delay(3, Duration::ZERO, None), Ok(MS(2000)));
        assert_eq!(p.delay(4, Duration::ZERO, None), Ok(MS(3000)));
        // No overflow however many attempts were made.
        assert_eq!(p.delay(39, Duration::ZERO, None), Ok(MS(3000)));
        let huge = Policy { attempts: u32::MAX, budget: Duration::MAX, ..p };
        assert_eq!(huge.delay(u32::MAX - 1, Duration::ZERO, None), Ok(MS(3000)));
    }

    #[test]
    fn retry_after_is_honoured_when_longer() {
        let p = Policy::default();
        assert_eq!(p.delay(1, Duration::ZERO, Some(MS(3000))), Ok(MS(3000)));
        // A shorter (or zero) Retry-After does not hurry us.
        assert_eq!(p.delay(2, Duration::ZERO, Some(Duration::ZERO)), Ok(MS(1000)));
        // Beyond the cap of our own backoff, but within the budget: honoured.
        assert_eq!(p.delay(1, Duration::ZERO, Some(Duration::from_secs(20))), Ok(Duration::from_secs(20)));
    }

    #[test]
    fn budget_bounds_the_waits() {
        let p = Policy { budget: MS(1000), ..Policy::default() };
        assert_eq!(p.delay(1, MS(400), None), Ok(MS(500)));
        assert_eq!(p.delay(1, MS(500), None), Err(GiveUp::Budget { wait: MS(500), asked: None }));
        let asked = Some(Duration::from_secs(120));
        let err = p.delay(1, Duration::ZERO, asked).unwrap_err();
        assert_eq!(err, GiveUp::Budget { wait: Duration::from_secs(120), asked });
        assert_eq!(err.to_string(), "the server asked to retry after 120.0 s, past the time budget");
    }

    #[test]
    fn attempt_timeout_ends_with_the_budget() {
        let p = Policy { timeout: MS(10_000), budget: MS(30_000), ..Policy::default() };
        assert_eq!(p.attempt_timeout(Duration::ZERO), MS(10_000));
        assert_eq!(p.attempt_timeout(MS(25_000)), MS(5_000));
        assert_eq!(p.attempt_timeout(MS(40_000)), MS(100));
    }

    #[test]
    fn retry_after_values() {
        let now = UNIX_EPOCH + Duration::from_secs(784_111_770); // Sun, 06 Nov 1994 08:49:30 GMT
        assert_eq!(parse_retry_after("120", now), Some(Duration::from_secs(120)));
        assert_eq!(parse_retry_after(" 0 ", now), Some(Duration::ZERO));
        assert_eq!(parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT", now), Some(Duration::from_secs(7)));
        assert_eq!(parse_retry_after("Sun, 06 Nov 1994 08:49:00 GMT", now), Some(Duration::ZERO));
        assert_eq!(parse_http_date("Thu, 01 Jan 1970 00:00:00 GMT"), Some(0));
        assert_eq!(parse_http_date("Tue, 29 Feb 2028 12:00:00 GMT"), Some(1_835_438_400));
        for bad in ["", "-1", "1.5", "soon", "Sun, 06 Nov 1994 08:49:37 PST", "Sun, 6 Nov 1994 08:49:37 GMT"]
        {
            assert_eq!(parse_retry_after(bad, now), None, "{bad:?}");
        }
        assert_eq!(parse_retry_after("99999999999999999999999", now), Some(Duration::from_secs(u64::MAX)));
    }
}
