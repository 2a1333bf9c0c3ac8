//! Credentials never enter a stored jobspec.
//!
//! A client that copies its whole environment into
//! `attributes.system.environment` (as `flux submit` does) would carry its
//! own token into the job, where the store keeps it for every reader of the
//! database. The services remove these variables at their edge; a job that
//! must call its own instance gets a per-job credential from the exec
//! service when it starts instead.

use serde_json::Value;

use super::Jobspec;

/// Environment variables that hold a credential and are removed from every
/// submitted jobspec.
pub const CREDENTIAL_VARIABLES: &[&str] = &["FLUXGATE_TOKEN"];

/// Remove [`CREDENTIAL_VARIABLES`] from `attributes.system.environment` of a
/// jobspec value, keeping every other key in its place. Returns the names
/// removed. A value without that object is left as it is.
pub fn strip_credentials(value: &mut Value) -> Vec<&'static str> {
    let Some(env) = value
        .pointer_mut("/attributes/system/environment")
        .and_then(Value::as_object_mut)
    else {
        return Vec::new();
    };
    CREDENTIAL_VARIABLES
        .iter()
        // shift_remove keeps the order of the other keys (preserve_order).
        .filter(|name| env.shift_remove(**name).is_some())
        .copied()
        .collect()
}

impl Jobspec {
    /// Remove [`CREDENTIAL_VARIABLES`] from the job's environment, in the
    /// stored JSON and in the typed view alike. Returns the names removed.
    pub fn strip_credentials(&mut self) -> Vec<&'static str> {
        let removed = strip_credentials(&mut self.json);
        for name in &removed {
            for system in [Some(&mut self.system), self.canonical.system.as_mut()]
                .into_iter()
                .flatten()
            {
                if let Some(env) = system.environment.as_mut() {
                    env.remove(*name);
                }
            }
        }
        removed
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn spec(env: Value) -> Value {
        json!({
            "version": 1,
            "resources": [{"type": "slot", "count": 1, "label": "task",
                           "with": [{"type": "core", "count": 1}]}],
            "tasks": [{"command": ["env"], "slot": "task", "count": {"per_slot": 1}}],
            "attributes": {"system": {"duration": 0, "environment": env}}
        })
    }

    #[test]
    fn the_token_is_removed_and_nothing_else_moves() {
        let mut v = spec(json!({"Z": "1", "FLUXGATE_TOKEN": "secret", "A": "2"}));
        let mut want = spec(json!({"Z": "1", "A": "2"}));
        assert_eq!(strip_credentials(&mut v), ["FLUXGATE_TOKEN"]);
        assert_eq!(v.to_string(), want.to_string());
        // Nothing left to remove: a second pass is a no-op.
        assert!(strip_credentials(&mut v).is_empty());
        assert!(strip_credentials(&mut want).is_empty());
        assert_eq!(v, want);
    }

    #[test]
    fn values_without_an_environment_are_left_alone() {
        for mut v in [
            json!(null),
            json!({"attributes": {"system": {"duration": 0}}}),
            json!({"attributes": {"system": {"environment": "FLUXGATE_TOKEN=x"}}}),
            json!({"attributes": {"user": {"environment": {"FLUXGATE_TOKEN": "kept"}}}}),
        ] {
            let before = v.clone();
            assert!(strip_credentials(&mut v).is_empty());
            assert_eq!(v, before);
        }
    }

    #[test]
    fn a_parsed_jobspec_loses_the_token_in_json_and_typed_view() {
        let text = spec(json!({"HOME": "/home/u", "FLUXGATE_TOKEN": "secret"})).to_string();
        let mut js = Jobspec::parse(&text).unwrap();
        assert_eq!(js.strip_credentials(), ["FLUXGATE_TOKEN"]);
        assert!(!js.to_json().contains("secret"));
        assert!(!js.environment().contains_key("FLUXGATE_TOKEN"));
        assert_eq!(
            js.environment().get("HOME").map(String::as_str),
            Some("/home/u")
        );
        let canonical_env = js
            .canonical()
            .system
            .as_ref()
            .and_then(|s| s.environment.as_ref());
        assert!(canonical_env.is_some_and(|e| !e.contains_key("FLUXGATE_TOKEN")));
        // What is stored reads back as the same jobspec.
        assert_eq!(Jobspec::parse(&js.to_json()).unwrap(), js);
    }
}
