//! `fluxgate R` against the expectations of flux-core's t/t0026-flux-R.t.

use std::process::Command;

use fluxgate_integration_tests::output_with_stdin;

struct Out {
    code: i32,
    stdout: String,
    stderr: String,
}

fn r(args: &[&str], stdin: &str) -> Out {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_fluxgate"));
    let out = output_with_stdin(cmd.arg("R").args(args), stdin);
    Out {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8(out.stdout).unwrap(),
        stderr: String::from_utf8(out.stderr).unwrap(),
    }
}

/// Run and require success; returns stdout.
fn ok(args: &[&str], stdin: &str) -> String {
    let o = r(args, stdin);
    assert_eq!(o.code, 0, "R {args:?} failed: {}", o.stderr);
    o.stdout
}

fn encode(args: &[&str]) -> String {
    let mut a = vec!["encode"];
    a.extend_from_slice(args);
    ok(&a, "")
}

fn decode(stdin: &str, args: &[&str]) -> String {
    let mut a = vec!["decode"];
    a.extend_from_slice(args);
    ok(&a, stdin).trim_end_matches('\n').to_owned()
}

#[test]
fn encode_output_is_byte_exact() {
    assert_eq!(
        encode(&["-r", "0-1", "-c", "0-3", "-H", "foo[0-1]"]),
        "{\"version\": 1, \"execution\": {\"R_lite\": [{\"rank\": \"0-1\", \"children\": \
         {\"core\": \"0-3\"}}], \"starttime\": 0.0, \"expiration\": 0.0, \"nodelist\": \
         [\"foo[0-1]\"]}}\n"
    );
    assert_eq!(
        encode(&[
            "-r", "0-1", "-c", "0-1", "-g", "0", "-H", "foo[0-1]", "-p", "xx:1"
        ]),
        "{\"version\": 1, \"execution\": {\"R_lite\": [{\"rank\": \"0-1\", \"children\": \
         {\"core\": \"0-1\", \"gpu\": \"0\"}}], \"starttime\": 0.0, \"expiration\": 0.0, \
         \"nodelist\": [\"foo[0-1]\"], \"properties\": {\"xx\": \"1\"}}}\n"
    );
}

#[test]
fn decode_fails_on_invalid_r() {
    for bad in [
        "",
        "{}",
        "{\"version\": 1}",
        "{\"version\": 1, \"execution\": {}}",
    ] {
        let o = r(&["decode"], bad);
        assert_eq!(o.code, 1, "{bad:?} must fail");
        assert!(o.stderr.starts_with("fluxgate-R: "), "{}", o.stderr);
    }
}

#[test]
fn decode_empty_r_lite_object() {
    let empty = ok(
        &["decode"],
        "{\"version\": 1, \"execution\": {\"R_lite\": {}}}",
    );
    assert_eq!(decode(&empty, &["--count", "core"]), "0");
}

#[test]
fn encode_defaults_and_options() {
    let one = encode(&[]);
    assert_eq!(decode(&one, &["--count", "node"]), "1");
    assert_eq!(decode(&one, &["--count", "core"]), "1");
    assert_eq!(decode(&one, &["--count", "gpu"]), "0");
    assert_eq!(decode(&one, &["--short"]), "rank0/core0");

    assert_eq!(
        decode(&encode(&["--ranks", "0-1"]), &["--count", "node"]),
        "2"
    );
    let r02 = encode(&["--ranks", "0,2"]);
    assert_eq!(decode(&r02, &["--count", "node"]), "2");
    assert_eq!(decode(&r02, &["--count", "core"]), "2");
    assert_eq!(decode(&r02, &["--ranks"]), "0,2");

    assert_eq!(
        decode(&encode(&["--cores", "0-1"]), &["--count", "core"]),
        "2"
    );
    assert_eq!(
        decode(&encode(&["-c", "0-1", "-r", "0-1"]), &["-c", "core"]),
        "4"
    );

    let g = encode(&["--gpus", "0"]);
    assert_eq!(decode(&g, &["--count", "node"]), "1");
    assert_eq!(decode(&g, &["--count", "gpu"]), "1");
    assert_eq!(decode(&g, &["--count", "core"]), "0");
    let cg = encode(&["--cores", "0-1", "-g", "0"]);
    assert_eq!(decode(&cg, &["--count", "core"]), "2");
    assert_eq!(decode(&cg, &["--count", "gpu"]), "1");

    let h = encode(&["--hosts=foo[0-1]"]);
    assert_eq!(decode(&h, &["-c", "node"]), "2");
    assert_eq!(decode(&h, &["--nodelist"]), "foo[0-1]");
}

#[test]
fn encode_decode_properties() {
    let p = encode(&[
        "--hosts=foo[0-1]",
        "--gpus",
        "0",
        "--cores",
        "0-1",
        "--property",
        "xx:0",
        "--property",
        "yy:1",
        "--property",
        "all",
    ]);
    check_properties(&p);
}

fn check_properties(p: &str) {
    assert_eq!(decode(p, &["-c", "node"]), "2");
    assert_eq!(decode(p, &["-c", "node", "--properties", "all"]), "2");
    assert_eq!(decode(p, &["-c", "node", "--properties", "xx"]), "1");
    assert_eq!(decode(p, &["-c", "node", "--properties", "yy"]), "1");
    assert_eq!(decode(p, &["-c", "node", "--properties", "^all"]), "0");
    assert_eq!(decode(p, &["-c", "node", "--properties", "all,yy"]), "1");
    assert_eq!(decode(p, &["--nodelist", "--properties", "xx"]), "foo0");
    assert_eq!(decode(p, &["--nodelist", "--properties", "yy"]), "foo1");
    assert_eq!(decode(p, &["--nodelist", "--properties", "^yy"]), "foo0");
}

#[test]
fn encode_property_with_unknown_rank_fails() {
    let o = r(&["encode", "-r", "0-3", "-p", "xx:3-5"], "");
    assert_eq!(o.code, 1);
    assert_eq!(
        o.stderr,
        "fluxgate-R: failed to assign properties: ranks 4-5 not found in target resource list\n"
    );
}

#[test]
fn encode_local_needs_topology() {
    let o = r(&["encode", "--local"], "");
    assert_eq!(o.code, 1);
    assert!(o.stderr.contains("--local"), "{}", o.stderr);
    let o = r(&["encode", "--local", "-c", "0-1"], "");
    assert_eq!(
        o.stderr,
        "fluxgate-R: do not specify --cores or --gpus with --local or --xml\n"
    );
}

#[test]
fn decode_include_exclude() {
    assert_eq!(
        decode(&encode(&["-r", "0-1023"]), &["--include", "5-7", "--short"]),
        "rank[5-7]/core0"
    );
    assert_eq!(
        decode(&encode(&["-r", "1-10"]), &["--exclude", "5-7", "--short"]),
        "rank[1-4,8-10]/core0"
    );
}

#[test]
fn append() {
    let two = encode(&["-r", "0-1"]) + &encode(&["-r", "1-2"]);
    let o = r(&["append"], &two);
    assert_eq!(o.code, 1);
    assert_eq!(
        o.stderr,
        "fluxgate-R: R objects 'rank[0-1]/core0' and 'rank[1-2]/core0' overlap\n"
    );
    let gpu = encode(&["-r", "0-1", "-c", "0-1", "-g", "0"])
        + &encode(&["-r", "1", "-c", "2-3", "-g", "0"]);
    assert_eq!(r(&["append"], &gpu).code, 1);

    let ok2 = encode(&["-r", "0-1", "-c", "0-1"]) + &encode(&["-r", "1-2", "-c", "2-3"]);
    let out = ok(&["append"], &ok2);
    assert_eq!(
        decode(&out, &["--short"]),
        "rank0/core[0-1] rank1/core[0-3] rank2/core[2-3]"
    );
    let some_gpus =
        encode(&["-r", "0-1", "-c", "0-1"]) + &encode(&["-r", "2-3", "-c", "0-1", "-g", "0-1"]);
    let out = ok(&["append"], &some_gpus);
    assert_eq!(
        decode(&out, &["--short"]),
        "rank[0-1]/core[0-1] rank[2-3]/core[0-1],gpu[0-1]"
    );
}

#[test]
fn diff_intersect_remap_rerank() {
    let d = ok(
        &["diff"],
        &(encode(&["-r", "0-1", "-c", "0-1"]) + &encode(&["-r", "0-1", "-c", "0"])),
    );
    assert_eq!(decode(&d, &["--short"]), "rank[0-1]/core1");

    let i = ok(
        &["intersect"],
        &(encode(&["-r", "0-3", "-c", "0-1"]) + &encode(&["-r", "1-5", "-c", "0"])),
    );
    assert_eq!(decode(&i, &["--short"]), "rank[1-3]/core0");
    let i = ok(
        &["intersect"],
        &(encode(&["-r", "0-3", "-c", "0-1"]) + &encode(&["-r", "4-5", "-c", "0"])),
    );
    assert_eq!(decode(&i, &["--short"]), "");

    let m = ok(&["remap"], &encode(&["-r", "5,99,1000"]));
    assert_eq!(decode(&m, &["-s"]), "rank[0-2]/core0");

    let rr = ok(
        &["rerank", "foo[3,2,1,0]"],
        &encode(&["-r", "0-3", "-H", "foo[0-3]"]),
    );
    assert_eq!(decode(&rr, &["--nodelist"]), "foo[3,2,1,0]");
    let o = r(
        &["rerank", "foo[0-4]"],
        &encode(&["-r", "0-3", "-H", "foo[0-3]"]),
    );
    assert_eq!(
        o.stderr,
        "fluxgate-R: Too many hosts specified (expected 4)\n"
    );
    let o = r(
        &["rerank", "foo[0-2]"],
        &encode(&["-r", "0-3", "-H", "foo[0-3]"]),
    );
    assert_eq!(
        o.stderr,
        "fluxgate-R: Too few hosts specified (expected 4)\n"
    );
    let o = r(
        &["rerank", "bar[0-3]"],
        &encode(&["-r", "0-3", "-H", "foo[0-3]"]),
    );
    assert_eq!(
        o.stderr,
        "fluxgate-R: failed to find one or more provided hosts in R\n"
    );
    let o = r(&["diff"], &encode(&[]));
    assert_eq!(
        o.stderr,
        "fluxgate-R: diff requires at least 2 resource sets\n"
    );
}

#[test]
fn verify() {
    let h = encode(&["-r", "1-10", "-c", "0-3"]);
    assert_eq!(
        r(
            &["verify"],
            &(h.clone() + &encode(&["-r", "1", "-c", "0-3"]))
        )
        .code,
        0
    );
    let o = r(&["verify"], &(h + &encode(&["-r", "0", "-c", "0-3"])));
    assert_eq!(o.code, 1);
    assert_eq!(o.stderr, "fluxgate-R: rank 0 not found in expected ranks\n");
    let o = r(
        &["verify"],
        &(encode(&["-r", "1", "-c", "0-3", "-H", "foo1"])
            + &encode(&["-r", "1", "-c", "0-3", "-H", "foo12"])),
    );
    assert_eq!(o.code, 1);
    assert_eq!(
        o.stderr,
        "fluxgate-R: rank 1 got hostname 'foo12', expected 'foo1'\n"
    );
    let o = r(
        &["verify"],
        &(encode(&["-r", "1", "-c", "0-3", "-H", "foo1"])
            + &encode(&["-r", "1", "-c", "0-2", "-H", "foo1"])),
    );
    assert_eq!(o.code, 1);
    assert_eq!(
        o.stderr,
        "fluxgate-R: rank 1 (foo1) missing resources: core3\n"
    );
    let o = r(
        &["verify"],
        &(encode(&["-r", "1", "-c", "0-3", "-H", "foo1"])
            + &encode(&["-r", "1", "-c", "0-7", "-g", "1", "-H", "foo1"])),
    );
    assert_eq!(o.code, 0);
    assert_eq!(
        o.stderr,
        "fluxgate-R: rank 1 (foo1) has extra resources: core[4-7],gpu1\n"
    );
}

#[test]
fn set_property() {
    let base = encode(&["-r", "0-1", "-c", "0-3", "-H", "foo[0-1]"]);
    let all = ok(&["set-property", "all"], &base);
    let p = ok(&["set-property", "xx:0", "yy:1"], &all);
    check_properties(&p);
    assert_eq!(
        r(&["set-property", "foo:1-2"], &encode(&["-r", "0-1"])).code,
        1
    );
    let o = r(&["set-property", "fo^o"], &base);
    assert_eq!(
        o.stderr,
        "fluxgate-R: failed to assign properties: invalid character '^' in property \"fo^o\"\n"
    );
}

#[test]
fn scheduling_key_is_carried() {
    let orig = encode(&["-r", "0-3", "-c", "0-3", "-g", "0", "-H", "foo[0-3]"]);
    let mut v: serde_json::Value = serde_json::from_str(&orig).unwrap();
    v["scheduling"] = serde_json::json!(42);
    let orig = v.to_string();
    let sched = |text: &str| -> serde_json::Value {
        serde_json::from_str::<serde_json::Value>(text).unwrap()["scheduling"].clone()
    };
    assert_eq!(sched(&ok(&["decode"], &orig)), 42);
    assert_eq!(sched(&ok(&["decode", "--include", "0"], &orig)), 42);
    assert_eq!(sched(&ok(&["decode", "--exclude", "0"], &orig)), 42);
    assert_eq!(
        sched(&ok(&["append"], &(orig.clone() + &encode(&["-r", "4"])))),
        42
    );
    assert_eq!(sched(&ok(&["remap"], &orig)), 42);
    assert_eq!(
        sched(&ok(&["diff"], &(orig.clone() + &encode(&["-r", "1"])))),
        42
    );
    assert_eq!(
        sched(&ok(
            &["intersect"],
            &(orig + &encode(&["-r", "1", "-H", "foo1"]))
        )),
        42
    );
}

fn conf_dir(name: &str, toml: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("fluxgate-r-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("resource.toml"), toml).unwrap();
    dir
}

#[test]
fn parse_config() {
    let d = conf_dir(
        "one",
        "[[resource.config]]\nhosts = \"foo\"\ncores = \"0-1\"\ngpus = \"0\"\n",
    );
    let c = ok(&["parse-config", d.to_str().unwrap()], "");
    assert_eq!(decode(&c, &["-c", "node"]), "1");
    assert_eq!(decode(&c, &["-c", "core"]), "2");
    assert_eq!(decode(&c, &["-c", "gpu"]), "1");
    assert_eq!(decode(&c, &["--nodelist"]), "foo");

    let d = conf_dir(
        "multi",
        "[[resource.config]]\nhosts = \"foo[0-2]\"\ncores = \"0-1\"\n\
         [[resource.config]]\nhosts = \"foo2\"\ngpus = \"0\"\n\
         [[resource.config]]\nhosts = \"foo0\"\nproperties = [\"login\"]\n",
    );
    let c = ok(&["parse-config", d.to_str().unwrap()], "");
    assert_eq!(decode(&c, &["-c", "node"]), "3");
    assert_eq!(decode(&c, &["-c", "core"]), "6");
    assert_eq!(decode(&c, &["-c", "gpu"]), "1");
    assert_eq!(decode(&c, &["--nodelist"]), "foo[0-2]");
    assert_eq!(decode(&c, &["-p", "login", "--nodelist"]), "foo0");

    for (name, bad) in [
        ("empty", "[[resource.config]]\n"),
        ("noconfig", "[resource]\nnoverify = true\n"),
        (
            "emptyhosts",
            "[[resource.config]]\nhosts = \"foo\"\ncores = \"0-1\"\n[[resource.config]]\nhosts = \"\"\ncores = \"0-3\"\n",
        ),
        (
            "badhosts",
            "[[resource.config]]\nhosts = \"foo[p]\"\ncores = \"0-1\"\n",
        ),
        (
            "badcores",
            "[[resource.config]]\nhosts = \"foo0\"\ncores = \"0-\"\n",
        ),
        (
            "badgpus",
            "[[resource.config]]\nhosts = \"foo0\"\ngpus = \"2,1\"\n",
        ),
        (
            "nores",
            "[[resource.config]]\nhosts = \"foo[0-10]\"\ncores = \"0-1\"\n[[resource.config]]\nhosts = \"foo11\"\n",
        ),
        (
            "nohosts",
            "[[resource.config]]\nhosts = \"foo[0-10]\"\ncores = \"0-1\"\n[[resource.config]]\ncores = \"0-1\"\n",
        ),
        (
            "junk",
            "[[resource.config]]\nhosts = \"foo11\"\ncores = \"0-3\"\njunk = 5\n",
        ),
        (
            "badprop",
            "[[resource.config]]\nhosts = \"foo[0-10]\"\ncores = \"0-1\"\n[[resource.config]]\nhosts = \"foo1\"\nproperties = [\"de^bug\"]\n",
        ),
        (
            "intprop",
            "[[resource.config]]\nhosts = \"foo1\"\ncores = \"0-1\"\nproperties = [1]\n",
        ),
        (
            "strprop",
            "[[resource.config]]\nhosts = \"foo11\"\ncores = \"0-3\"\nproperties = \"foo\"\n",
        ),
    ] {
        let d = conf_dir(name, bad);
        let o = r(&["parse-config", d.to_str().unwrap()], "");
        assert_eq!(o.code, 1, "{name}: {}", o.stdout);
        assert!(o.stderr.starts_with("fluxgate-R: "), "{name}: {}", o.stderr);
    }

    // resource.path names an R file.
    let d = conf_dir("path", "");
    let rpath = d.join("R.path");
    std::fs::write(&rpath, encode(&["-r", "0-1"])).unwrap();
    std::fs::write(
        d.join("resource.toml"),
        format!("resource.path = \"{}\"\n", rpath.display()),
    )
    .unwrap();
    assert_eq!(
        decode(
            &ok(&["parse-config", d.to_str().unwrap()], ""),
            &["-c", "node"]
        ),
        "2"
    );
    std::fs::write(&rpath, "bad json").unwrap();
    assert_eq!(r(&["parse-config", d.to_str().unwrap()], "").code, 1);
    std::fs::remove_file(&rpath).unwrap();
    assert_eq!(r(&["parse-config", d.to_str().unwrap()], "").code, 1);
}
