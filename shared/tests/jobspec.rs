//! Jobspec (RFC 14 / RFC 25 v1): flux-core's example files, the golden
//! jobspecs `flux run`/`flux submit` wrote, one pass/fail file per v1 rule,
//! property tests and input limits.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use fluxgate_shared::Jobspec;
use fluxgate_shared::jobspec::{
    CanonicalJobspec, Count, CountOperator, Dependency, DependencyError, DependencyScheme,
    JobspecBuilder, JobspecError, Limits, TaskCount, jj_counts, json_to_value, parse_fsd,
    validate_any, yaml_to_value,
};
use proptest::prelude::*;
use serde_json::{Value, json};

fn data(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/jobspec")
        .join(rel)
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The index of a vector directory, checked to list every YAML file there.
fn index(dir: &str) -> Vec<(String, Value)> {
    let idx: Value = serde_json::from_str(&read(&data(dir).join("index.json"))).unwrap();
    let files = idx["files"].as_object().unwrap();
    let mut on_disk: Vec<String> = fs::read_dir(data(dir))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".yaml"))
        .collect();
    on_disk.sort();
    let mut listed: Vec<String> = files.keys().cloned().collect();
    listed.sort();
    assert_eq!(on_disk, listed, "{dir}: index.json and files differ");
    files.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
}

#[test]
fn valid_any_vectors_pass_rfc14_and_match_the_simple_reader() {
    let files = index("valid/any");
    assert_eq!(files.len(), 20);
    for (name, meta) in files {
        let text = read(&data("valid/any").join(&name));
        let value = yaml_to_value(&text, &Limits::default()).unwrap();
        validate_any(&value).unwrap_or_else(|e| panic!("{name}: {e}"));
        CanonicalJobspec::parse(&text).unwrap();
        match (meta.get("jj_reader"), meta.get("jj_reader_error")) {
            (Some(Value::String(want)), _) => {
                let got = jj_counts(&value).unwrap_or_else(|e| panic!("{name}: {e}"));
                assert_eq!(got.to_string(), *want, "{name}");
            }
            (_, Some(Value::String(want))) => {
                let err = jj_counts(&value).unwrap_err();
                assert_eq!(err.to_string(), *want, "{name}");
            }
            _ => {}
        }
    }
}

#[test]
fn valid_v1_vectors_parse_and_derive_what_the_simple_reader_does() {
    let files = index("valid/v1");
    assert_eq!(files.len(), 6);
    for (name, _) in files {
        let text = read(&data("valid/v1").join(&name));
        let js = Jobspec::parse(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
        let value = yaml_to_value(&text, &Limits::default()).unwrap();
        assert_eq!(js.as_value(), &value);
        // flux-core's reader refuses gpu count 0, which version 1 allows.
        if name != "gpu_count_zero.yaml" {
            assert_eq!(js.jj_counts(), jj_counts(&value).unwrap(), "{name}");
        }
    }
    let js = Jobspec::parse(&read(&data("valid/v1/use_case_2.4.yaml"))).unwrap();
    assert_eq!(
        (
            js.nnodes(),
            js.nslots(),
            js.cores_per_slot(),
            js.gpus_per_slot()
        ),
        (4, 16, 1, 1)
    );
    assert_eq!(
        (js.ntasks(), js.duration(), js.job_name()),
        (16, 3600.0, "myapp")
    );
    assert_eq!(js.cwd(), Some("/home/flux"));
    assert_eq!(js.environment()["HOME"], "/home/flux");
    let js = Jobspec::parse(&read(&data("valid/v1/use_case_2.3.yaml"))).unwrap();
    assert_eq!((js.nnodes(), js.nslots(), js.exclusive()), (0, 10, false));
    let js = Jobspec::parse(&read(&data("valid/v1/gpu_count_zero.yaml"))).unwrap();
    assert_eq!(js.gpus_per_slot(), 0);
}

#[test]
fn invalid_any_vectors_fail_both_levels() {
    let files = index("invalid/any");
    assert_eq!(files.len(), 42);
    for (name, _) in files {
        let text = read(&data("invalid/any").join(&name));
        let err = Jobspec::parse(&text).expect_err(&name);
        if name == "invalid_yaml1.yaml" {
            assert!(matches!(err, JobspecError::Yaml(_)), "{name}: {err}");
            continue;
        }
        let value = yaml_to_value(&text, &Limits::default()).unwrap();
        let err = validate_any(&value).expect_err(&name);
        assert!(err.path().is_some(), "{name}: {err} names no field");
    }
}

#[test]
fn invalid_v1_vectors_fail_version_1() {
    let files = index("invalid/v1");
    assert_eq!(files.len(), 10);
    for (name, _) in files {
        let text = read(&data("invalid/v1").join(&name));
        let err = Jobspec::parse(&text).expect_err(&name);
        assert!(err.path().is_some(), "{name}: {err}");
    }
}

#[test]
fn invalid_vector_errors_name_the_field() {
    let cases = [
        (
            "any/resource_count_negative.yaml",
            "resources[0].with[0].count",
        ),
        (
            "any/resource_count_max_lessthan_min.yaml",
            "resources[0].count.max",
        ),
        (
            "any/resource_count_bad_mult_operand.yaml",
            "resources[0].count.operand",
        ),
        (
            "any/resource_exclusive_invalid.yaml",
            "resources[0].with[0].exclusive",
        ),
        ("any/resource_slot_not_labelled.yaml", "resources[0].label"),
        ("any/task_command_not_array.yaml", "tasks[0].command"),
        ("any/task_count_total_and_per_slot.yaml", "tasks[0].count"),
        ("any/attributes_bad_entry.yaml", "attributes.foo"),
        (
            "any/dependency_invalid.yaml",
            "attributes.system.dependencies[0].value",
        ),
        ("any/missing_version.yaml", "version"),
        ("any/version_bad_number.yaml", "version"),
        ("v1/node_vertex_zero_count.yaml", "resources[0].count"),
        (
            "v1/gpu_count_invalid.yaml",
            "resources[0].with[0].with[1].count",
        ),
        ("v1/with_whatnow.yaml", "resources[0].with[0].type"),
        ("v1/slot_node.yaml", "resources[0].with[0].type"),
        ("v1/duration_missing.yaml", "attributes.system.duration"),
        ("v1/version_wrong.yaml", "version"),
        (
            "v1/task_count_per_resource.yaml",
            "tasks[0].count.per_resource",
        ),
    ];
    for (file, path) in cases {
        let err = Jobspec::parse(&read(&data(&format!("invalid/{file}")))).unwrap_err();
        assert_eq!(err.path(), Some(path), "{file}: {err}");
        assert!(err.to_string().starts_with(path), "{file}: {err}");
    }
    let err = Jobspec::parse(&read(&data("invalid/any/resource_count_negative.yaml"))).unwrap_err();
    assert_eq!(
        err.to_string(),
        "resources[0].with[0].count: count must not be negative, got -1"
    );
}

#[test]
fn every_v1_rule_has_a_passing_and_a_failing_file() {
    let idx: Value = serde_json::from_str(&read(&data("rules/index.json"))).unwrap();
    let rules = idx["rules"].as_object().unwrap();
    assert!(rules.len() >= 35);
    for (rule, meta) in rules {
        let pass = read(&data(&format!("rules/{rule}.pass.yaml")));
        Jobspec::parse(&pass).unwrap_or_else(|e| panic!("{rule}.pass: {e}"));
        let fail = read(&data(&format!("rules/{rule}.fail.yaml")));
        let err = Jobspec::parse(&fail).expect_err(rule);
        assert_eq!(err.path(), meta["fail_path"].as_str(), "{rule}.fail: {err}");
        // The same rule holds whether the jobspec arrives as YAML or JSON.
        let as_json = yaml_to_value(&fail, &Limits::default())
            .unwrap()
            .to_string();
        assert_eq!(Jobspec::parse(&as_json).unwrap_err(), err, "{rule}");
    }
}

fn golden(name: &str) -> (String, Jobspec) {
    let text = read(&data(&format!("golden/{name}.jobspec.json")));
    let js = Jobspec::from_json(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
    (text, js)
}

#[test]
fn golden_jobspecs_parse_and_derive() {
    let (_, a) = golden("a-normal");
    assert_eq!(
        (a.nnodes(), a.nslots(), a.ntasks(), a.exclusive()),
        (2, 2, 2, true)
    );
    assert_eq!(
        (a.cores_per_slot(), a.gpus_per_slot(), a.duration()),
        (1, 0, 0.0)
    );
    assert_eq!((a.job_name(), a.cwd()), ("hostname", Some("anchors/flux")));
    assert_eq!(a.shell_options()["rlimit"]["nofile"], 20000);
    assert!(a.dependencies().is_empty() && a.queue().is_none());
    let (_, b5) = golden("b5-timelimit");
    assert_eq!((b5.duration(), b5.nnodes(), b5.ntasks()), (2.0, 0, 1));
    assert_eq!(b5.command(), ["sleep", "30"]);
    let (_, child) = golden("b6-dep-child");
    let deps = child.dependencies();
    assert_eq!(deps.len(), 1);
    assert_eq!(deps[0].scheme, DependencyScheme::AfterOk);
    assert_eq!(deps[0].value, "ƒ4JTGFjm");
    assert_eq!(deps[0].check(), Ok(()));
    for name in [
        "b1-false",
        "b2-nocmd",
        "b3-cancel-pending",
        "b4-cancel-running",
        "b6-dep-parent",
    ] {
        let (text, js) = golden(name);
        assert_eq!(
            (js.nslots(), js.ntasks(), js.duration()),
            (1, 1, 0.0),
            "{name}"
        );
        // Re-emitted text is the same JSON with the same key order.
        let reread: Value = serde_json::from_str(&js.to_json()).unwrap();
        assert_same_json(&reread, &serde_json::from_str(text.trim()).unwrap(), name);
    }
}

/// Equal values with keys in the same order, at every level.
fn assert_same_json(got: &Value, want: &Value, at: &str) {
    match (got, want) {
        (Value::Object(g), Value::Object(w)) => {
            let gk: Vec<_> = g.keys().collect();
            let wk: Vec<_> = w.keys().collect();
            assert_eq!(gk, wk, "key order at {at}");
            for (k, v) in w {
                assert_same_json(&g[k], v, &format!("{at}.{k}"));
            }
        }
        (Value::Array(g), Value::Array(w)) => {
            assert_eq!(g.len(), w.len(), "length at {at}");
            for (i, (g, w)) in g.iter().zip(w).enumerate() {
                assert_same_json(g, w, &format!("{at}[{i}]"));
            }
        }
        _ => assert_eq!(got, want, "at {at}"),
    }
}

fn golden_rlimits() -> serde_json::Map<String, Value> {
    json!({"cpu": -1, "fsize": -1, "data": -1, "stack": 8388608, "core": 0,
           "nofile": 20000, "as": -1, "rss": -1, "nproc": 96365})
    .as_object()
    .unwrap()
    .clone()
}

#[test]
fn builder_writes_what_flux_run_and_submit_write() {
    let base = |cmd: &[&str]| {
        JobspecBuilder::new(cmd.iter().copied())
            .cwd("anchors/flux")
            .rlimits(golden_rlimits())
    };
    let cases: Vec<(&str, JobspecBuilder)> = vec![
        ("a-normal", base(&["hostname"]).nodes(2)),
        ("b1-false", base(&["false"])),
        ("b2-nocmd", base(&["nosuchcommand-xyz"])),
        ("b3-cancel-pending", base(&["sleep", "10"])),
        ("b4-cancel-running", base(&["sleep", "100"])),
        (
            "b5-timelimit",
            base(&["sleep", "30"]).duration("2s").unwrap(),
        ),
        (
            "b6-dep-child",
            base(&["true"]).dependency("afterok:ƒ4JTGFjm".parse().unwrap()),
        ),
        ("b6-dep-parent", base(&["sleep", "2"])),
    ];
    for (name, builder) in cases {
        let built = builder.build().unwrap_or_else(|e| panic!("{name}: {e}"));
        let (text, _) = golden(name);
        let want: Value = serde_json::from_str(text.trim()).unwrap();
        assert_same_json(built.as_value(), &want, name);
    }
}

#[test]
fn builder_follows_flux_cli_count_rules() {
    let js = JobspecBuilder::new(["app"])
        .ntasks(4)
        .cores_per_task(2)
        .gpus_per_task(1)
        .build()
        .unwrap();
    assert_eq!(
        js.as_value()["resources"],
        json!([{"type": "slot", "count": 4, "with": [{"type": "core", "count": 2},
                {"type": "gpu", "count": 1}], "label": "task"}])
    );
    assert_eq!(
        (
            js.nslots(),
            js.ntasks(),
            js.cores_per_slot(),
            js.gpus_per_slot()
        ),
        (4, 4, 2, 1)
    );
    // Uneven spread over nodes: slots rounded up, tasks given as a total.
    let js = JobspecBuilder::new(["app"])
        .nodes(2)
        .ntasks(3)
        .build()
        .unwrap();
    assert_eq!(js.as_value()["tasks"][0]["count"], json!({"total": 3}));
    assert_eq!(
        (
            js.nnodes(),
            js.slots_per_node(),
            js.ntasks(),
            js.exclusive()
        ),
        (2, 2, 3, false)
    );
    let js = JobspecBuilder::new(["app"])
        .nodes(2)
        .ntasks(4)
        .exclusive(true)
        .build()
        .unwrap();
    assert!(js.exclusive());
    assert_eq!(js.ntasks(), 4);
    let js = JobspecBuilder::new(["app"])
        .nodes(3)
        .exclusive(false)
        .build()
        .unwrap();
    assert_eq!((js.exclusive(), js.ntasks()), (false, 3));
    let err = JobspecBuilder::new(["app"])
        .exclusive(true)
        .build()
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "exclusive can only be set with a node count"
    );
    let err = JobspecBuilder::new(["app"])
        .nodes(3)
        .ntasks(2)
        .build()
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "node count must not be greater than task count"
    );
    assert!(JobspecBuilder::new(Vec::<String>::new()).build().is_err());
    assert!(JobspecBuilder::new(["app"]).ntasks(0).build().is_err());
    assert!(JobspecBuilder::new(["app"]).duration("soon").is_err());
}

#[test]
fn builder_sets_attributes_options_and_environment() {
    let env = BTreeMap::from([("PATH".to_string(), "/bin".to_string())]);
    let js = JobspecBuilder::new(["/usr/bin/app", "x"])
        .environment(env)
        .cwd("/work")
        .name("nightly")
        .queue("batch")
        .output("out.log")
        .setattr_kv("user.tag=\"blue\"")
        .setattr_kv("exec.test.run_duration=1.5s")
        .setattr_kv("system.color=red")
        .setopt_kv("verbose")
        .setopt_kv("output.batch-timeout=0.5")
        .build()
        .unwrap();
    let sys = &js.as_value()["attributes"]["system"];
    let keys: Vec<&String> = sys.as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        [
            "duration",
            "environment",
            "cwd",
            "job",
            "shell",
            "queue",
            "exec",
            "color"
        ]
    );
    assert_eq!(js.job_name(), "nightly");
    assert_eq!(js.queue(), Some("batch"));
    assert_eq!(js.environment()["PATH"], "/bin");
    assert_eq!(js.test_run_duration(), Some(1.5));
    assert_eq!(sys["color"], "red");
    assert_eq!(js.user().unwrap()["tag"], "blue");
    assert_eq!(js.shell_options()["verbose"], 1);
    assert_eq!(
        js.shell_options()["output"],
        json!({"stdout": {"type": "file", "path": "out.log"}, "batch-timeout": 0.5})
    );
    let err = JobspecBuilder::new(["a"])
        .setattr_kv("cwd=/x")
        .setattr_kv("cwd.sub=1")
        .build()
        .unwrap_err();
    assert!(
        err.to_string()
            .starts_with("cannot set attributes.system.cwd.sub"),
        "{err}"
    );
}

#[test]
fn job_name_defaults_to_the_command_basename() {
    let js = JobspecBuilder::new(["/usr/local/bin/mpi-app", "-v"])
        .build()
        .unwrap();
    assert_eq!(js.job_name(), "mpi-app");
}

#[test]
fn dependencies_typed_and_checked() {
    let err = JobspecBuilder::new(["a"])
        .setattr("constraints", json!({"color": []}))
        .build()
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "attributes.system.constraints.color: unknown constraint operator \"color\""
    );
    let err = JobspecBuilder::new(["a"])
        .setattr("constraints", json!({"ranks": ["3-1"]}))
        .build()
        .unwrap_err();
    assert!(
        err.to_string()
            .starts_with("attributes.system.constraints.ranks[0]: "),
        "{err}"
    );
    let d: Dependency = "afterany:f1234?type=out&n=2&n=3".parse().unwrap();
    assert_eq!(d.scheme, DependencyScheme::AfterAny);
    assert_eq!(d.value, "f1234");
    assert_eq!(
        d.to_value(),
        json!({"scheme": "afterany", "value": "f1234", "type": "out", "n": [2, 3]})
    );
    let d: Dependency = "begin-time:1700000000.5".parse().unwrap();
    assert_eq!(d.begin_time(), Ok(1_700_000_000.5));
    let d: Dependency = "after:f1".parse().unwrap();
    assert_eq!(d.scheme, DependencyScheme::AfterStart);
    let d: Dependency = "afterfoo:f1".parse().unwrap();
    assert_eq!(
        d.check(),
        Err(DependencyError::UnsupportedScheme("afterfoo".into()))
    );
    assert_eq!(
        d.check().unwrap_err().to_string(),
        "dependency scheme \"afterfoo\" not supported"
    );
    let d: Dependency = "begin-time:tomorrow".parse().unwrap();
    assert!(d.check().is_err());
    // As flux's URIArg: a bare word is a scheme with an empty value.
    let d: Dependency = "singleton".parse().unwrap();
    assert_eq!(
        (d.scheme, d.value.as_str()),
        (DependencyScheme::Singleton, "")
    );
    let d: Dependency = "nocolon".parse().unwrap();
    assert!(d.check().is_err());
    assert!(":x".parse::<Dependency>().is_err());
    // An unknown scheme is valid jobspec: the job manager refuses it.
    let js = JobspecBuilder::new(["a"])
        .dependency("string:foo?type=out".parse().unwrap())
        .build()
        .unwrap();
    assert_eq!(
        js.dependencies()[0].scheme,
        DependencyScheme::Unknown("string".into())
    );
}

#[test]
fn count_forms_are_typed() {
    let yaml = |count: &str| {
        format!(
            "version: 999\nresources:\n  - type: slot\n    label: s\n    count: {count}\n    with:\n      - type: core\n        count: 1\ntasks:\n  - command: [a]\n    slot: s\n    count: {{per_slot: 1}}\nattributes: {{}}\n"
        )
    };
    let count_of =
        |c: &str| CanonicalJobspec::parse(&yaml(c)).map(|j| j.resources[0].count.clone());
    assert_eq!(count_of("3").unwrap(), Count::Fixed(3));
    let Count::Range(r) = count_of("\"2-32:2:*\"").unwrap() else {
        panic!()
    };
    assert_eq!(
        (r.min, r.max, r.operator, r.operand),
        (2, Some(32), CountOperator::Multiply, 2)
    );
    let Count::Range(r) = count_of("\"3+\"").unwrap() else {
        panic!()
    };
    assert_eq!(
        (r.min, r.max, r.operator, r.operand),
        (3, None, CountOperator::Add, 1)
    );
    let Count::Range(r) = count_of("{min: 2, max: 16, operator: \"^\", operand: 2}").unwrap()
    else {
        panic!()
    };
    assert_eq!(r.operator, CountOperator::Power);
    assert!(matches!(count_of("\"4,9,16\"").unwrap(), Count::Set(s) if s.count() == 3));
    for bad in [
        "0",
        "\"bar\"",
        "{min: 1, operator: \"^\", operand: 2}",
        "{min: 1, max: 3, color: 1}",
        "1.5",
        "true",
    ] {
        let err = count_of(bad).unwrap_err();
        assert_eq!(
            err.path().map(|p| p.starts_with("resources[0].count")),
            Some(true),
            "{bad}: {err}"
        );
    }
}

#[test]
fn rfc14_task_and_attribute_forms() {
    let c = CanonicalJobspec::parse(&read(&data("valid/any/use_case_1.7.yaml"))).unwrap();
    assert_eq!(
        c.tasks[0].count,
        TaskCount::PerResource {
            kind: "node".into(),
            count: 1
        }
    );
    let c = CanonicalJobspec::parse(&read(&data("valid/any/use_case_2.7.yaml"))).unwrap();
    assert_eq!(
        c.tasks[1].attributes.as_ref().unwrap()["environment"]["FOO"],
        Value::Null
    );
    let c = CanonicalJobspec::parse(&read(&data("valid/any/attributes_user.yaml"))).unwrap();
    assert_eq!(c.user.unwrap()["c"], json!([1, 2, 3]));
    assert!(c.system.is_none());
    // RFC 14 is fine with version 999; version 1 is not.
    let err = Jobspec::parse(&read(&data("valid/any/use_case_2.3.yaml"))).unwrap_err();
    assert_eq!(err.path(), Some("version"));
}

#[test]
fn fsd_durations() {
    for (s, want) in [
        ("30s", 30.0),
        ("2m", 120.0),
        ("1.5h", 5400.0),
        ("10ms", 0.01),
        ("2d", 172800.0),
        ("42", 42.0),
        ("0", 0.0),
    ] {
        assert!((parse_fsd(s).unwrap() - want).abs() < 1e-9, "{s}");
    }
    assert_eq!(parse_fsd("inf").unwrap(), f64::INFINITY);
    for bad in ["", "-1s", "5x", "s", "1.2.3m", "nan"] {
        assert!(parse_fsd(bad).is_err(), "{bad}");
    }
}

#[test]
fn jj_reader_errors_follow_flux_core() {
    let jj = |v: Value| jj_counts(&v).unwrap_err().to_string();
    assert_eq!(jj(json!([])), "at top level: Expected object, got array");
    assert_eq!(
        jj(json!({"resources": []})),
        "at top level: Object item not found: version"
    );
    assert_eq!(
        jj(json!({"version": 1, "resources": {}, "attributes": {"system": {"duration": 1}}})),
        "level 0: must be an array"
    );
    assert_eq!(
        jj(
            json!({"version": 1, "resources": [{"type": "node", "count": 0}], "attributes": {"system": {"duration": 1}}})
        ),
        "Invalid count 0 for type 'node'"
    );
    assert_eq!(
        jj(
            json!({"version": 1, "resources": [{"type": "node", "count": 1}], "attributes": {"system": {"duration": "1h"}}})
        ),
        "at top level: getting duration: Expected real or integer, got string"
    );
    assert_eq!(
        jj(
            json!({"version": 1, "resources": [{"type": "node", "count": 1}], "attributes": {"system": {"duration": 1}}})
        ),
        "Unable to determine slot count"
    );
}

#[test]
fn limits_refuse_deep_nesting() {
    let deep = 10_000;
    let json_text = format!("{}{}", "[".repeat(deep), "]".repeat(deep));
    assert_eq!(
        Jobspec::parse(&json_text).unwrap_err(),
        JobspecError::TooDeep { limit: 64 }
    );
    let obj_text = format!("{}1{}", "{\"a\":".repeat(deep), "}".repeat(deep));
    assert!(matches!(
        json_to_value(&obj_text, &Limits::default()),
        Err(JobspecError::TooDeep { .. })
    ));
    let flow_yaml = format!("version: {}{}", "[".repeat(deep), "]".repeat(deep));
    assert_eq!(
        Jobspec::parse(&flow_yaml),
        Err(JobspecError::TooDeep { limit: 64 })
    );
    // Compact block sequences: one level per "- ", all on one line.
    let block_yaml = format!("{}1\n", "- ".repeat(deep));
    assert_eq!(
        yaml_to_value(&block_yaml, &Limits::default()),
        Err(JobspecError::TooDeep { limit: 64 })
    );
    // Within a raised limit the same shape is accepted up to it.
    let limits = Limits {
        max_depth: 100,
        ..Limits::default()
    };
    let ok = format!("{}{}", "[".repeat(100), "]".repeat(100));
    assert!(json_to_value(&ok, &limits).is_ok());
    let too = format!("{}{}", "[".repeat(101), "]".repeat(101));
    assert_eq!(
        json_to_value(&too, &limits).unwrap_err(),
        JobspecError::TooDeep { limit: 100 }
    );
    let limits = Limits {
        max_depth: 5000,
        ..Limits::default()
    };
    assert!(matches!(
        json_to_value(&json_text, &limits),
        Err(JobspecError::TooDeep { .. })
    ));
}

#[test]
fn limits_refuse_huge_input() {
    let mut value: Value =
        serde_json::from_str(&read(&data("golden/a-normal.jobspec.json"))).unwrap();
    let env: serde_json::Map<String, Value> = (0..120_000)
        .map(|i| (format!("VAR_{i:06}"), json!("x".repeat(80))))
        .collect();
    value["attributes"]["system"]["environment"] = Value::Object(env);
    let text = value.to_string();
    assert!(text.len() > 10_000_000);
    let err = Jobspec::parse(&text).unwrap_err();
    assert_eq!(
        err,
        JobspecError::TooLarge {
            size: text.len(),
            limit: Limits::DEFAULT_MAX_BYTES
        }
    );
    assert!(err.to_string().contains("more than the limit"));
    let limits = Limits {
        max_bytes: 16 << 20,
        ..Limits::default()
    };
    let js = Jobspec::parse_with(&text, &limits).unwrap();
    assert_eq!(js.environment().len(), 120_000);
}

#[test]
fn yaml_and_json_give_the_same_jobspec() {
    let yaml = read(&data("valid/v1/example1.yaml"));
    let from_yaml = Jobspec::from_yaml(&yaml).unwrap();
    let from_json = Jobspec::from_json(&from_yaml.to_json()).unwrap();
    assert_eq!(from_yaml, from_json);
    assert!(matches!(
        Jobspec::from_json(&yaml),
        Err(JobspecError::Json(_))
    ));
    let js: Jobspec = from_yaml.to_json().parse().unwrap();
    assert_eq!(serde_json::to_value(&js).unwrap(), *from_yaml.as_value());
    assert_eq!(
        Jobspec::try_from(from_yaml.as_value().clone()).unwrap(),
        from_yaml
    );
}

fn arb_builder() -> impl Strategy<Value = JobspecBuilder> {
    (
        prop::collection::vec("[a-z/._-]{1,12}", 1..4),
        prop::option::of(1u64..16),
        prop::option::of(1u64..64),
        1u64..8,
        prop::option::of(0u64..4),
        any::<bool>(),
        // Whole milliseconds, as `-t` gives them: serde_json without its
        // float_roundtrip feature may read a 17-digit float back 1 ulp off.
        prop::option::of((0u64..1_000_000_000).prop_map(|ms| ms as f64 / 1000.0)),
        prop::collection::btree_map("[A-Z_]{1,8}", "[ -~]{0,16}", 0..4),
        prop::option::of("[ -~]{1,20}"),
        prop::collection::vec(
            (
                "(afterok|afterany|begin-time|singleton)",
                "[a-zA-Z0-9.]{1,10}",
            ),
            0..3,
        ),
    )
        .prop_map(
            |(cmd, nodes, ntasks, cores, gpus, excl, dur, env, cwd, deps)| {
                let ntasks = match (nodes, ntasks) {
                    (Some(n), Some(t)) => Some(t.max(n)),
                    (_, t) => t,
                };
                let mut b = JobspecBuilder::new(cmd)
                    .cores_per_task(cores)
                    .environment(env);
                if let Some(n) = nodes {
                    b = b.nodes(n).exclusive(excl);
                }
                if let Some(t) = ntasks {
                    b = b.ntasks(t);
                }
                if let Some(g) = gpus {
                    b = b.gpus_per_task(g);
                }
                if let Some(d) = dur {
                    b = b.duration_secs(d);
                }
                if let Some(c) = cwd {
                    b = b.cwd(c);
                }
                for (scheme, value) in deps {
                    b = b.dependency(format!("{scheme}:{value}").parse().unwrap());
                }
                b
            },
        )
}

proptest! {
    #[test]
    fn built_jobspecs_roundtrip_through_json_and_yaml(b in arb_builder()) {
        let js = b.build().unwrap();
        let again = Jobspec::from_json(&js.to_json()).unwrap();
        prop_assert_eq!(&again, &js);
        prop_assert_eq!(again.jj_counts(), jj_counts(js.as_value()).unwrap());
        prop_assert_eq!(again.ntasks(), js.ntasks());
        prop_assert!(again.ntasks() >= again.nnodes());
        // JSON is YAML: the YAML reader gives the same jobspec.
        let via_yaml = Jobspec::from_yaml(&js.to_json()).unwrap();
        prop_assert_eq!(via_yaml.as_value(), js.as_value());
    }

    #[test]
    fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        let text = String::from_utf8_lossy(&bytes);
        let _ = Jobspec::parse(&text);
        let _ = CanonicalJobspec::parse(&text);
    }

    #[test]
    fn random_yamlish_text_never_panics(text in "[-\\[\\]{}:,\"' \\nA-Za-z0-9#&*!|>]{0,200}") {
        let _ = Jobspec::parse(&text);
        let _ = Jobspec::from_json(&text);
    }

    #[test]
    fn mutated_jobspecs_never_panic(path in prop::collection::vec(0usize..8, 1..6), repl in prop_oneof![
        Just(Value::Null), Just(json!(-1)), Just(json!(0)), Just(json!("x")), Just(json!([])),
        Just(json!({})), Just(json!(1.5)), Just(json!(true)), Just(json!([{"type": "core", "count": 1}]))
    ]) {
        let mut v: Value = serde_json::from_str(&read(&data("golden/b6-dep-child.jobspec.json"))).unwrap();
        let mut pointer = String::new();
        for step in path {
            let cur = v.pointer(&pointer).unwrap();
            let next = match cur {
                Value::Object(o) if !o.is_empty() => o.keys().nth(step % o.len()).unwrap().replace('~', "~0").replace('/', "~1"),
                Value::Array(a) if !a.is_empty() => (step % a.len()).to_string(),
                _ => break,
            };
            pointer = format!("{pointer}/{next}");
        }
        *v.pointer_mut(&pointer).unwrap() = repl;
        let _ = Jobspec::from_value(v.clone()).map(|j| (j.ntasks(), j.job_name().len(), j.jj_counts()));
        let _ = jj_counts(&v);
    }
}

/// The alias-heavy seeds of the jobspec fuzz target.
fn fuzz_seeds() -> Vec<(String, String)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/seeds/jobspec");
    let mut seeds: Vec<(String, String)> = fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, read(&p))
        })
        .collect();
    seeds.sort();
    seeds
}

#[test]
fn alias_bomb_seeds_fail_with_the_alias_error() {
    let bombs: Vec<_> = fuzz_seeds()
        .into_iter()
        .filter(|(name, _)| name.starts_with("bomb-"))
        .collect();
    assert!(
        bombs.len() >= 10,
        "expected the bomb seeds, found {}",
        bombs.len()
    );
    for (name, text) in bombs {
        match Jobspec::parse(&text) {
            Err(JobspecError::AliasExpansion { size, .. }) => assert_eq!(size, text.len()),
            other => panic!("{name}: expected an alias expansion error, got {other:?}"),
        }
    }
}

#[test]
fn a_jobspec_with_a_few_anchors_parses() {
    let yaml = fuzz_seeds()
        .into_iter()
        .find(|(name, _)| name == "anchors-real.yaml")
        .map(|(_, text)| text)
        .expect("anchors-real.yaml seed");
    let js = Jobspec::parse(&yaml).unwrap();
    assert_eq!(js.command(), ["hostname"]);
    assert_eq!(
        js.environment().get("PATH").map(String::as_str),
        Some("/usr/bin")
    );
    let user = &js.as_value()["attributes"]["user"];
    assert_eq!(user["copy"]["HOME"], "/root");
    assert_eq!(
        user["again"],
        json!({"cpu-affinity": "per-task", "verbose": 2})
    );
    // The same document as JSON, with every alias written out, is the same jobspec.
    assert_eq!(Jobspec::from_json(&js.to_json()).unwrap(), js);
}
