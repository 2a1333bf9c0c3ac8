//! Resource limits of a job's tasks: `attributes.system.shell.options.rlimit`,
//! a map from flux's limit names to values (-1 unlimited), as `flux run
//! --rlimit` and `flux submit` write them.
//!
//! They are set in the task's own process after it has become its owner, so
//! a job can lower its limits but never raise a hard limit above what the
//! node gives its owner.

use fluxgate_shared::Jobspec;
use nix::sys::resource::{RLIM_INFINITY, Resource, getrlimit, setrlimit};
use serde::{Deserialize, Serialize};

/// One limit: flux's name for it and its value (`None` unlimited).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rlimit {
    /// Flux's name, e.g. `nofile`, `core`, `stack`.
    pub name: String,
    /// The limit; `None` for unlimited.
    pub value: Option<u64>,
}

/// The limits a jobspec asks for; entries that are not integers are skipped.
pub fn from_jobspec(jobspec: &Jobspec) -> Vec<Rlimit> {
    let Some(map) = jobspec
        .shell_options()
        .get("rlimit")
        .and_then(|v| v.as_object())
    else {
        return Vec::new();
    };
    map.iter()
        .filter_map(|(name, v)| {
            let value = match (v.as_u64(), v.as_i64()) {
                (Some(n), _) => Some(n),
                (None, Some(n)) if n < 0 => None,
                _ => return None,
            };
            Some(Rlimit {
                name: name.clone(),
                value,
            })
        })
        .collect()
}

/// The resource flux calls `name`.
fn resource(name: &str) -> Option<Resource> {
    Some(match name {
        "as" => Resource::RLIMIT_AS,
        "core" => Resource::RLIMIT_CORE,
        "cpu" => Resource::RLIMIT_CPU,
        "data" => Resource::RLIMIT_DATA,
        "fsize" => Resource::RLIMIT_FSIZE,
        "locks" => Resource::RLIMIT_LOCKS,
        "memlock" => Resource::RLIMIT_MEMLOCK,
        "msgqueue" => Resource::RLIMIT_MSGQUEUE,
        "nice" => Resource::RLIMIT_NICE,
        "nofile" => Resource::RLIMIT_NOFILE,
        "nproc" => Resource::RLIMIT_NPROC,
        "rss" => Resource::RLIMIT_RSS,
        "rtprio" => Resource::RLIMIT_RTPRIO,
        "rttime" => Resource::RLIMIT_RTTIME,
        "sigpending" => Resource::RLIMIT_SIGPENDING,
        "stack" => Resource::RLIMIT_STACK,
        _ => return None,
    })
}

/// Set `limits` on this process; what could not be set comes back as
/// warnings for the task's stderr (as the flux shell logs them, the task
/// still starts).
pub fn apply(limits: &[Rlimit]) -> Vec<String> {
    let mut warnings = Vec::new();
    for limit in limits {
        let Some(res) = resource(&limit.name) else {
            warnings.push(format!("fluxgate-exec: unknown rlimit {}", limit.name));
            continue;
        };
        let want = limit.value.unwrap_or(RLIM_INFINITY);
        let result = getrlimit(res).and_then(|(_, hard)| {
            // Above the hard limit only a privileged process may go; the
            // owner gets as close as the node allows, and a warning.
            match setrlimit(res, want, hard.max(want)) {
                Err(nix::Error::EPERM) if want > hard => {
                    setrlimit(res, hard, hard).and(Err(nix::Error::EPERM))
                }
                other => other,
            }
        });
        if let Err(e) = result {
            warnings.push(format!(
                "fluxgate-exec: cannot set rlimit {} to {}: {}",
                limit.name,
                limit
                    .value
                    .map_or_else(|| "unlimited".to_string(), |v| v.to_string()),
                e.desc()
            ));
        }
    }
    warnings
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_are_read_as_flux_writes_them() {
        let js = Jobspec::parse(
            r#"{"version":1,"resources":[{"type":"slot","count":1,"label":"task","with":[{"type":"core","count":1}]}],"tasks":[{"command":["true"],"slot":"task","count":{"per_slot":1}}],"attributes":{"system":{"duration":0,"shell":{"options":{"rlimit":{"nofile":64,"core":-1,"bad":"x"}}}}}}"#,
        )
        .unwrap();
        let mut got = from_jobspec(&js);
        got.sort_by(|a, b| a.name.cmp(&b.name));
        assert_eq!(
            got,
            [
                Rlimit {
                    name: "core".into(),
                    value: None
                },
                Rlimit {
                    name: "nofile".into(),
                    value: Some(64)
                }
            ]
        );
        assert!(resource("nofile").is_some() && resource("bad").is_none());
    }
}
