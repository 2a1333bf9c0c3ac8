//! The stored summary of an inactive job: what listing, `Wait` and
//! dependencies need, written once when the job becomes inactive so that a
//! restart reads one short row per inactive job instead of replaying its
//! eventlog and parsing its jobspec. The eventlogs stay the canonical record;
//! a summary that cannot be read is rebuilt from them.

use fluxgate_shared::job::JobResult;
use fluxgate_shared::job::usage::Total;
use serde_json::{Value, json};

use super::Inactive;
use crate::store::Write;

impl Inactive {
    /// The store write that records this summary for job `id`.
    pub(super) fn summary_write(&self, id: fluxgate_shared::JobId) -> Write {
        Write::Summary {
            id: id.into(),
            summary: self.to_summary(),
        }
    }

    /// The summary as stored (JSON text).
    pub fn to_summary(&self) -> String {
        let mut v = json!({
            "userid": self.userid,
            "name": &*self.name,
            "result": self.result.name(),
            "t_submit": self.t_submit,
            "t_inactive": self.t_inactive,
            "urgency": self.urgency,
            "ntasks": self.ntasks,
            "nnodes": self.nnodes,
            "nodelist": &*self.nodelist,
            "waitable": self.waitable,
        });
        if let Some(ws) = self.waitstatus {
            v["waitstatus"] = json!(ws);
        }
        if let Some(t) = self.t_run {
            v["t_run"] = json!(t);
        }
        if let Some(e) = &self.exception {
            v["exception"] = json!({"type": e.0, "note": e.1});
        }
        if let Some(q) = &self.queue {
            v["queue"] = json!(&**q);
        }
        if let Some(u) = &self.usage {
            v["usage"] = json!(u);
        }
        v.to_string()
    }

    /// Read a stored summary.
    pub(super) fn from_summary(text: &str) -> Result<Inactive, SummaryError> {
        let v: Value = serde_json::from_str(text)?;
        let field = |k: &'static str| v.get(k).ok_or(SummaryError::Missing(k));
        let bad = |key: &'static str, want: &'static str| SummaryError::Bad { key, want };
        let num = |k| field(k)?.as_f64().ok_or(bad(k, "a number"));
        let small = |k| {
            field(k)?
                .as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .ok_or(bad(k, "an unsigned 32-bit integer"))
        };
        let text = |k| field(k)?.as_str().ok_or(bad(k, "a string"));
        let result_name = text("result")?;
        let result = JobResult::ALL
            .into_iter()
            .find(|r| r.name() == result_name)
            .ok_or_else(|| SummaryError::UnknownResult(result_name.to_string()))?;
        let exception = match v.get("exception") {
            None => None,
            Some(e) => {
                let part = |k: &str| e.get(k).and_then(Value::as_str).map(str::to_string);
                match (part("type"), part("note")) {
                    (Some(t), Some(n)) => Some(Box::new((t, n))),
                    _ => return Err(bad("exception", "an object with a type and a note")),
                }
            }
        };
        let waitstatus = match v.get("waitstatus") {
            None => None,
            Some(w) => Some(
                w.as_i64()
                    .and_then(|w| i32::try_from(w).ok())
                    .ok_or(bad("waitstatus", "a 32-bit integer"))?,
            ),
        };
        Ok(Inactive {
            userid: small("userid")?,
            name: text("name")?.into(),
            result,
            waitstatus,
            t_submit: num("t_submit")?,
            t_run: v.get("t_run").and_then(Value::as_f64),
            t_inactive: num("t_inactive")?,
            urgency: field("urgency")?
                .as_u64()
                .and_then(|u| u8::try_from(u).ok())
                .ok_or(bad("urgency", "an urgency (0-31)"))?,
            ntasks: small("ntasks")?,
            nnodes: small("nnodes")?,
            nodelist: text("nodelist")?.into(),
            exception,
            waitable: field("waitable")?
                .as_bool()
                .ok_or(bad("waitable", "a boolean"))?,
            queue: v.get("queue").and_then(Value::as_str).map(Box::from),
            // Summaries older than usage have none; a bad one is dropped, not fatal.
            usage: v
                .get("usage")
                .and_then(|u| serde_json::from_value::<Total>(u.clone()).ok()),
        })
    }
}

/// Why a stored summary cannot be read (it is then rebuilt from the eventlog).
#[derive(Debug, thiserror::Error)]
pub(super) enum SummaryError {
    /// Not JSON.
    #[error("summary: {0}")]
    Json(#[from] serde_json::Error),
    /// A key is missing.
    #[error("summary: no {0:?}")]
    Missing(&'static str),
    /// A key holds the wrong kind of value.
    #[error("summary: {key:?} is not {want}")]
    Bad {
        key: &'static str,
        want: &'static str,
    },
    /// The result is none that RFC 21 names.
    #[error("summary: unknown result {0:?}")]
    UnknownResult(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Inactive {
        Inactive {
            userid: 1000,
            name: "sleep \"x\"".into(),
            result: JobResult::Canceled,
            waitstatus: Some(15),
            t_submit: 1_700_000_000.123_456,
            t_run: Some(1_700_000_001.5),
            t_inactive: 1_700_000_002.25,
            urgency: 16,
            ntasks: 4,
            nnodes: 2,
            nodelist: "node[0-1]".into(),
            exception: Some(Box::new(("cancel".into(), "by user".into()))),
            waitable: true,
            queue: Some("batch".into()),
            usage: Some(Total {
                user: 1.5,
                system: 0.25,
                max_rss: 1 << 20,
            }),
        }
    }

    fn same(a: &Inactive, b: &Inactive) -> bool {
        format!("{a:?}") == format!("{b:?}")
    }

    #[test]
    fn summaries_round_trip() {
        let a = sample();
        assert!(same(&Inactive::from_summary(&a.to_summary()).unwrap(), &a));
        let b = Inactive {
            waitstatus: None,
            t_run: None,
            exception: None,
            usage: None,
            result: JobResult::Completed,
            ..sample()
        };
        assert!(same(&Inactive::from_summary(&b.to_summary()).unwrap(), &b));
    }

    #[test]
    fn a_bad_summary_says_what_is_wrong() {
        let e = Inactive::from_summary(r#"{"userid":1}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("result"), "{e}");
        let e = Inactive::from_summary("not json").unwrap_err().to_string();
        assert!(e.starts_with("summary:"), "{e}");
    }
}
