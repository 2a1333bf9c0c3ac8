//! First stage: text (YAML or JSON) to a `serde_json::Value`, within limits.
//!
//! Jobspec is written in YAML but travels as JSON (flux-core's job-ingest
//! takes only JSON), so YAML is turned into the same JSON value Flux would
//! submit and every later rule works on JSON.

use serde_json::Value;

use super::error::JobspecError;

/// Bounds that keep a hostile jobspec from exhausting a service.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest accepted input, in bytes.
    pub max_bytes: usize,
    /// Deepest accepted nesting of arrays and objects (the top object is 1).
    pub max_depth: usize,
}

impl Limits {
    /// Default input size bound: a gRPC message is 4 MiB by default, so a
    /// larger jobspec could not reach the service anyway.
    pub const DEFAULT_MAX_BYTES: usize = 4 * 1024 * 1024;
    /// Default nesting bound: real jobspecs nest about 10 levels (shell
    /// options, resource trees), 64 leaves plenty of room.
    pub const DEFAULT_MAX_DEPTH: usize = 64;
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_bytes: Self::DEFAULT_MAX_BYTES,
            max_depth: Self::DEFAULT_MAX_DEPTH,
        }
    }
}

/// The depth serde_json refuses past on its own (its recursion limit).
const SERDE_JSON_DEPTH: usize = 128;

fn check_size(text: &str, limits: &Limits) -> Result<(), JobspecError> {
    if text.len() > limits.max_bytes {
        return Err(JobspecError::TooLarge {
            size: text.len(),
            limit: limits.max_bytes,
        });
    }
    Ok(())
}

/// Read JSON text into a value.
pub fn json_to_value(text: &str, limits: &Limits) -> Result<Value, JobspecError> {
    check_size(text, limits)?;
    // A cheap bracket scan first: it bounds the depth before serde_json
    // recurses, and turns its fixed recursion limit into our error.
    if bracket_depth(text) > limits.max_depth {
        return Err(JobspecError::TooDeep {
            limit: limits.max_depth,
        });
    }
    let value: Value = serde_json::from_str(text).map_err(|e| {
        if limits.max_depth >= SERDE_JSON_DEPTH && e.to_string().contains("recursion limit") {
            JobspecError::TooDeep {
                limit: SERDE_JSON_DEPTH,
            }
        } else {
            JobspecError::Json(e.to_string())
        }
    })?;
    check_depth(&value, limits)?;
    Ok(value)
}

/// Nodes, events or scalar bytes a YAML document may spend per byte of its
/// own text before any alias is replayed: YAML is terse (`{a,b}` is six
/// events from five bytes, `!!str` counts as its 18-byte expanded tag), so
/// plain text gets this much room and never trips the expansion bound.
const YAML_COST_PER_BYTE: usize = 4;

/// Alias replays (events, and scalar bytes) allowed per byte of input: a
/// real jobspec reuses a vertex or a shell option a few times, far below.
/// A replayed event costs the parser 0.3-1 us (merge keys the most), so
/// this keeps an alias-heavy document within a few us per input byte.
const ALIAS_GROWTH: usize = 2;

/// Alias replays any document may make however short it is, so that a
/// short jobspec may still reuse an anchor freely: a 400-byte bomb then
/// stops after about 1 ms of parsing (release build).
const ALIAS_FLOOR: usize = 4096;

/// The most alias replays (events, and separately scalar bytes) a YAML
/// document of `len` bytes may make: [`ALIAS_GROWTH`] per byte, at least
/// [`ALIAS_FLOOR`], never more than `max_bytes`. Everything the parser builds
/// is then at most `YAML_COST_PER_BYTE * len` plus this, a small multiple of
/// the size limit, and a 400-byte billion-laughs stops after 4096 events
/// instead of the parser's default quarter of a million.
pub fn alias_budget(len: usize, limits: &Limits) -> usize {
    len.saturating_mul(ALIAS_GROWTH)
        .max(ALIAS_FLOOR)
        .min(limits.max_bytes)
}

/// The parser options for a document of `len` bytes: depth from `limits`,
/// every count and size that aliases can multiply tied to [`alias_budget`].
fn yaml_options(len: usize, limits: &Limits) -> serde_saphyr::Options {
    let replay = alias_budget(len, limits);
    // What the text itself may cost, plus what its aliases may add.
    let total = len
        .saturating_mul(YAML_COST_PER_BYTE)
        .saturating_add(replay);
    let mut budget = serde_saphyr::Budget::default();
    budget.max_depth = limits.max_depth;
    budget.flow_nesting_limit = limits.max_depth;
    budget.max_events = total;
    budget.max_nodes = total;
    budget.max_total_scalar_bytes = total;
    budget.max_aliases = replay;
    budget.max_anchors = replay;
    budget.max_merge_keys = replay;
    budget.max_recorded_anchor_events = replay;
    budget.max_recorded_anchor_bytes = replay;
    // The absolute bounds above stop every bomb; the ratio heuristic would
    // only refuse harmless documents that use one anchor many times.
    budget.enforce_alias_anchor_ratio = false;
    let mut options = serde_saphyr::Options::default();
    options.budget = Some(budget);
    options.alias_limits.max_total_replayed_events = replay;
    options.alias_limits.max_replay_stack_depth = limits.max_depth;
    options
}

/// What a YAML parse error means for the submitter.
enum YamlFailure {
    /// Nested past the depth limit.
    Deep,
    /// Aliases expanded past [`alias_budget`].
    Expansion,
    /// Anything else: the message is the parser's.
    Other,
}

/// Classify a parser error by its kind, looking through the wrappers that
/// add source snippets and alias locations.
fn classify(err: &serde_saphyr::Error) -> YamlFailure {
    use serde_saphyr::Error as E;
    use serde_saphyr::budget::BudgetBreach as B;
    let mut err = err;
    while let E::AliasError { error, .. } | E::WithSnippet { error, .. } = err {
        err = error;
    }
    match err {
        E::Budget {
            breach: B::Depth { .. },
            ..
        } => YamlFailure::Deep,
        E::Budget { .. }
        | E::AliasReplayLimitExceeded { .. }
        | E::AliasExpansionLimitExceeded { .. }
        | E::AliasReplayStackDepthExceeded { .. }
        | E::AliasReplayCounterOverflow { .. } => YamlFailure::Expansion,
        // The parser's own nesting guard reports a recursion limit.
        other if other.to_string().contains("recursion limit") => YamlFailure::Deep,
        _ => YamlFailure::Other,
    }
}

/// Read YAML text into the JSON value Flux would submit for it.
///
/// Anchors and aliases are bounded by [`alias_budget`]: an alias bomb fails
/// with [`JobspecError::AliasExpansion`] after a few thousand events.
pub fn yaml_to_value(text: &str, limits: &Limits) -> Result<Value, JobspecError> {
    check_size(text, limits)?;
    // The YAML parser keeps its own depth budget, so deep input fails there
    // without recursing; the bracket scan is not usable on YAML.
    let options = yaml_options(text.len(), limits);
    let value: Value =
        serde_saphyr::from_str_with_options(text, options).map_err(|e| match classify(&e) {
            YamlFailure::Deep => JobspecError::TooDeep {
                limit: limits.max_depth,
            },
            YamlFailure::Expansion => JobspecError::AliasExpansion {
                limit: alias_budget(text.len(), limits),
                size: text.len(),
            },
            YamlFailure::Other => JobspecError::Yaml(e.to_string()),
        })?;
    check_depth(&value, limits)?;
    Ok(value)
}

/// Read a jobspec in either form: JSON when it starts with `{`, else YAML.
pub fn text_to_value(text: &str, limits: &Limits) -> Result<Value, JobspecError> {
    if text.trim_start().starts_with('{') {
        json_to_value(text, limits)
    } else {
        yaml_to_value(text, limits)
    }
}

/// Check the nesting depth of a value without recursion.
pub fn check_depth(value: &Value, limits: &Limits) -> Result<(), JobspecError> {
    let mut stack: Vec<(&Value, usize)> = vec![(value, 1)];
    while let Some((v, depth)) = stack.pop() {
        let children: Box<dyn Iterator<Item = &Value>> = match v {
            Value::Array(a) => Box::new(a.iter()),
            Value::Object(o) => Box::new(o.values()),
            _ => continue,
        };
        if depth > limits.max_depth {
            return Err(JobspecError::TooDeep {
                limit: limits.max_depth,
            });
        }
        stack.extend(children.map(|c| (c, depth + 1)));
    }
    Ok(())
}

/// Deepest bracket nesting in JSON text, skipping strings.
fn bracket_depth(text: &str) -> usize {
    let (mut depth, mut max) = (0usize, 0usize);
    let (mut in_string, mut escaped) = (false, false);
    for b in text.bytes() {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                max = max.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    max
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The classic billion laughs: each level a list of `width` aliases of
    /// the level before, `levels` deep.
    fn nested_sequences(levels: usize, width: usize) -> String {
        let mut s = String::from("a0: &a0 [lol]\n");
        for i in 1..levels {
            let items = vec![format!("*a{}", i - 1); width].join(",");
            s.push_str(&format!("a{i}: &a{i} [{items}]\n"));
        }
        s
    }

    /// The same with mappings: each level a mapping of `width` keys whose
    /// values alias the level before.
    fn nested_mappings(levels: usize, width: usize) -> String {
        let mut s = String::from("a0: &a0 {k: lol}\n");
        for i in 1..levels {
            let items: Vec<String> = (0..width).map(|j| format!("k{j}: *a{}", i - 1)).collect();
            s.push_str(&format!("a{i}: &a{i} {{{}}}\n", items.join(", ")));
        }
        s
    }

    /// Merge keys: each level merges `width` copies of the level before and
    /// keeps three more as values.
    fn nested_merges(levels: usize, width: usize) -> String {
        let mut s = String::from("a0: &a0 {k0: v, k1: v, k2: v, k3: v}\n");
        for i in 1..levels {
            let merged = vec![format!("*a{}", i - 1); width].join(", ");
            let kept: Vec<String> = (0..3).map(|j| format!("x{j}: *a{}", i - 1)).collect();
            s.push_str(&format!(
                "a{i}: &a{i} {{<<: [{merged}], {}}}\n",
                kept.join(", ")
            ));
        }
        s
    }

    /// One long string, aliased `count` times in one flat list.
    fn long_string_aliases(len: usize, count: usize) -> String {
        format!(
            "s: &s \"{}\"\nl: [{}]\n",
            "x".repeat(len),
            vec!["*s"; count].join(",")
        )
    }

    /// A long string, then levels of lists of aliases of it.
    fn nested_long_strings(len: usize, levels: usize, width: usize) -> String {
        let mut s = format!("s0: &s0 \"{}\"\n", "y".repeat(len));
        for i in 1..levels {
            let items = vec![format!("*s{}", i - 1); width].join(",");
            s.push_str(&format!("s{i}: &s{i} [{items}]\n"));
        }
        s
    }

    fn assert_bomb(name: &str, text: &str) {
        let limits = Limits::default();
        match yaml_to_value(text, &limits) {
            Err(JobspecError::AliasExpansion { limit, size }) => {
                assert_eq!(size, text.len(), "{name}");
                assert_eq!(limit, alias_budget(text.len(), &limits), "{name}");
            }
            other => panic!(
                "{name} ({} bytes): expected an alias error, got {other:?}",
                text.len()
            ),
        }
    }

    #[test]
    fn alias_bombs_fail_with_a_clear_error() {
        let bombs = [
            ("nested sequences 9x9", nested_sequences(9, 9)),
            ("nested sequences 6x10", nested_sequences(6, 10)),
            ("nested sequences 4x30", nested_sequences(4, 30)),
            ("nested mappings 9x9", nested_mappings(9, 9)),
            ("nested mappings 5x16", nested_mappings(5, 16)),
            ("nested merge keys 9x9", nested_merges(9, 9)),
            ("nested merge keys 6x4", nested_merges(6, 4)),
            (
                "long string aliased 1000 times",
                long_string_aliases(4000, 1000),
            ),
            ("nested long strings", nested_long_strings(300, 6, 8)),
        ];
        for (name, text) in &bombs {
            assert_bomb(name, text);
        }
        // Inside an otherwise valid jobspec, where the service first reads it.
        let wrapped = format!(
            "version: 1\nresources: [{{type: slot, count: 1, label: task, with: [{{type: core, count: 1}}]}}]\n\
             tasks: [{{command: [\"true\"], slot: task, count: {{per_slot: 1}}}}]\n\
             attributes:\n  system: {{duration: 0}}\n  user:\n{}",
            nested_sequences(9, 9)
                .lines()
                .map(|l| format!("    {l}\n"))
                .collect::<String>()
        );
        assert_bomb("bomb in attributes.user", &wrapped);
    }

    #[test]
    fn the_message_names_the_bound() {
        let text = nested_sequences(9, 9);
        let err = yaml_to_value(&text, &Limits::default()).unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains("expands aliases past 4096"),
            "unexpected message: {msg}"
        );
    }

    #[test]
    fn the_alias_budget_grows_with_the_text_up_to_the_size_limit() {
        let limits = Limits::default();
        assert_eq!(alias_budget(100, &limits), ALIAS_FLOOR);
        assert_eq!(alias_budget(1 << 20, &limits), 2 << 20);
        assert_eq!(alias_budget(limits.max_bytes, &limits), limits.max_bytes);
        let small = Limits {
            max_bytes: 1000,
            ..limits
        };
        assert_eq!(alias_budget(100, &small), 1000);
    }

    #[test]
    fn modest_alias_use_is_accepted() {
        // Under the bound: a few levels of small fan-out, and one anchor
        // used many times (the ratio heuristic would refuse this).
        let v = yaml_to_value(&nested_sequences(4, 5), &Limits::default()).unwrap();
        assert_eq!(v["a3"].as_array().map(Vec::len), Some(5));
        let many = format!("a: &a {{x: 1}}\nl: [{}]\n", vec!["*a"; 500].join(","));
        let v = yaml_to_value(&many, &Limits::default()).unwrap();
        assert_eq!(v["l"].as_array().map(Vec::len), Some(500));
        assert_eq!(v["l"][499]["x"], 1);
        let merged = "base: &base {a: 1, b: 2}\nm: {<<: *base, b: 3}\n";
        let v = yaml_to_value(merged, &Limits::default()).unwrap();
        assert_eq!(v["m"], serde_json::json!({"a": 1, "b": 3}));
    }

    #[test]
    fn a_large_plain_document_is_not_taken_for_a_bomb() {
        // Terse YAML with implicit nulls and explicit tags costs more events
        // and bytes than it has characters; no alias, so no alias error.
        let items = vec!["!!str a"; 100_000].join(", ");
        let text = format!("l: [{items}]\n");
        let v = yaml_to_value(&text, &Limits::default()).unwrap();
        assert_eq!(v["l"].as_array().map(Vec::len), Some(100_000));
        let keys: Vec<String> = (0..50_000).map(|i| format!("k{i}")).collect();
        let text = format!("m: {{{}}}\n", keys.join(","));
        let v = yaml_to_value(&text, &Limits::default()).unwrap();
        assert_eq!(v["m"].as_object().map(|m| m.len()), Some(50_000));
    }
}
