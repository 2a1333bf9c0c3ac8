//! The flux-jobs(1) format language of `fluxgate jobs -o` (this crate),
//! tested by tables against what flux-jobs prints: fields,
//! specs, sorting, headers and widths, with no instance.

use fluxgate_jobfmt::*;
use fluxgate_proto::v1 as pb;
use jiff::tz::TimeZone;

use fluxgate_jobfmt::pyfmt::Value;

/// 2023-11-14T22:13:20Z.
const T0: f64 = 1_700_000_000.0;

fn ctx() -> Ctx {
    Ctx::new(TimeZone::UTC)
}

fn rec(j: pb::JobSummary) -> JobRecord {
    let f58 = fluxgate_shared::JobId::from(j.id).to_f58();
    JobRecord::new(j, "alice".into(), f58, T0 + 100.0)
}

fn done(id: u64, name: &str, result: &str, ws: Option<i32>) -> JobRecord {
    rec(pb::JobSummary {
        id,
        userid: 1000,
        name: name.into(),
        state: "INACTIVE".into(),
        result: result.into(),
        urgency: 16,
        priority: 16,
        ntasks: 1,
        nnodes: 1,
        nodelist: "node0".into(),
        t_submit: T0,
        t_run: T0 + 1.0,
        t_inactive: T0 + 3.5,
        waitstatus: ws,
        ..Default::default()
    })
}

fn sched(id: u64, urgency: u32, priority: u64) -> JobRecord {
    rec(pb::JobSummary {
        id,
        userid: 1000,
        name: "sleep".into(),
        state: "SCHED".into(),
        urgency,
        priority,
        ntasks: 2,
        t_submit: T0,
        ..Default::default()
    })
}

fn one(fmt: &str, r: JobRecord) -> Result<String, String> {
    let mut v = vec![r];
    let lines = render(
        fmt,
        &mut v,
        &Layout {
            no_header: true,
            ..Default::default()
        },
        &ctx(),
    )?;
    Ok(lines.into_iter().next().unwrap_or_default())
}

#[test]
fn fields_and_specs() {
    let cd = || done(1234, "hostname", "COMPLETED", Some(0));
    let f58 = fluxgate_shared::JobId::from(1234).to_f58();
    let cases: &[(&str, JobRecord, String)] = &[
        ("{id}", cd(), f58.clone()),
        ("{id:>6}", cd(), "  1234".into()),
        ("{id.dec}", cd(), "1234".into()),
        ("{id.hex}", cd(), "0x4d2".into()),
        ("{id.f58:>8}", cd(), format!("{f58:>8}")),
        ("{username} {userid}", cd(), "alice 1000".into()),
        ("{name:<6.6+}|", cd(), "hostn+|".into()),
        ("{name:<10.10+}|", cd(), "hostname  |".into()),
        ("{name:>4.4}|", cd(), "host|".into()),
        (
            "{state} {state_single} {status} {status_abbrev}",
            cd(),
            "INACTIVE I COMPLETED CD".into(),
        ),
        (
            "{result} {result_abbrev} {success}",
            cd(),
            "COMPLETED CD True".into(),
        ),
        ("{urgency:<3}|{priority:<4}|", cd(), "16 |16  |".into()),
        ("{ntasks:>6}{nnodes:>6h}", cd(), "     1     1".into()),
        ("{nodelist}", cd(), "node0".into()),
        ("{t_submit}", cd(), "1700000000.0".into()),
        ("{t_run},{t_run!D}", sched(1, 16, 16), "0.0,".into()),
        ("{t_inactive!D}", cd(), "2023-11-14T22:13:23".into()),
        ("{t_inactive!d:%b%d %R::>12}", cd(), " Nov14 22:13".into()),
        ("{t_inactive!d:%H:%M:%S}", cd(), "22:13:23".into()),
        (
            "{t_inactive!d:%b%d %R::>12h}",
            sched(1, 16, 16),
            "           -".into(),
        ),
        ("{t_inactive!d}", cd(), "2023-11-14T22:13:23".into()),
        ("{runtime!F}", cd(), "2.500s".into()),
        ("{runtime!H}", cd(), "0:00:02".into()),
        ("{runtime:.1f}", cd(), "2.5".into()),
        ("{runtime!F:h} {runtime!F}", sched(1, 16, 16), "- 0s".into()),
        (
            "{contextual_time!F:>8h}",
            sched(1, 16, 16),
            "       -".into(),
        ),
        ("{nnodes:h}|{nodelist:h}", sched(1, 16, 16), "-|-".into()),
        (
            "{waitstatus} {returncode}",
            done(1, "x", "FAILED", Some(256 * 42)),
            "10752 42".into(),
        ),
        ("{returncode:h}", sched(1, 16, 16), "-".into()),
        (
            "{returncode}",
            done(1, "x", "FAILED", Some(15)),
            "-15".into(),
        ),
        (
            "{returncode}",
            done(1, "x", "CANCELED", None),
            "-128".into(),
        ),
        ("{contextual_info}", sched(1, 0, 0), "held".into()),
        ("{contextual_info}", sched(1, 16, 0), "priority-hold".into()),
        ("{contextual_info:h}", sched(1, 16, 16), "-".into()),
        (
            "{inactive_reason}",
            done(1, "x", "COMPLETED", Some(0)),
            "Exit 0".into(),
        ),
        (
            "{inactive_reason}",
            done(1, "x", "FAILED", Some(256 * 3)),
            "Exit 3".into(),
        ),
        (
            "{inactive_reason}",
            done(1, "x", "FAILED", Some(256 * 137)),
            "Killed".into(),
        ),
        (
            "{inactive_reason}",
            done(1, "x", "FAILED", Some(256 * 127)),
            "command not found".into(),
        ),
        (
            "{inactive_reason}",
            done(1, "x", "TIMEOUT", Some(9)),
            "Timeout".into(),
        ),
        (
            "{exception.occurred} {exception.type}",
            cd(),
            "False ".into(),
        ),
        ("{{literal}} {id.dec}", cd(), "{literal} 1234".into()),
        ("{ncores:h} {cwd:h} {dependencies:h}", cd(), "- - -".into()),
    ];
    for (fmt, r, want) in cases {
        assert_eq!(
            one(fmt, r.clone()).as_deref(),
            Ok(want.as_str()),
            "format {fmt:?}"
        );
    }
}

#[test]
fn exceptions_and_annotations() {
    let mut j = done(7, "x", "CANCELED", None).job;
    j.exception_type = "cancel".into();
    j.exception_note = "by admin".into();
    j.annotations =
        r#"{"sched":{"reason_pending":"no nodes","t_estimate":1.5},"user":{"n":[1,"a"]}}"#.into();
    let r = rec(j);
    let cases = [
        (
            "{exception.occurred} {exception.severity} {exception.type}",
            "True 0 cancel",
        ),
        ("{exception.note}", "by admin"),
        ("{inactive_reason}", "Canceled: by admin"),
        ("{annotations.sched.reason_pending}", "no nodes"),
        ("{sched.reason_pending:>9}", " no nodes"),
        ("{sched.t_estimate}", "1.5"),
        ("{user.n}", "[1, 'a']"),
        ("{user.missing.deeper:h}", "-"),
        ("{user}", r#"{"n": [1, "a"]}"#),
    ];
    for (fmt, want) in cases {
        assert_eq!(one(fmt, r.clone()).as_deref(), Ok(want), "format {fmt:?}");
    }
}

#[test]
fn conversions() {
    let num = |v: f64| {
        let mut j = sched(1, 16, 16).job;
        j.annotations = format!(r#"{{"user":{{"v":{v}}}}}"#);
        rec(j)
    };
    let cases = [
        ("{user.v!P}", 0.5, "50%"),
        ("{user.v!P}", 0.015, "1.5%"),
        ("{user.v!P}", 0.000_5, "0.05%"),
        ("{user.v!P:>6}", 1.0, "  100%"),
        ("{user.v!H}", 0.4, "0:00:01"),
        ("{user.v!H}", 3725.0, "1:02:05"),
        ("{user.v!H}", 90061.0, "1 day, 1:01:01"),
        ("{user.v!F}", 90.0, "1.5m"),
        ("{user.v!F}", 59.9, "59.9s"),
        ("{user.v!F}", 7200.0, "2h"),
        ("{user.v!D}", 0.0, ""),
        ("{user.v!D:h}", 0.0, "-"),
        ("{user.v!s:>4}", 2.5, " 2.5"),
    ];
    for (fmt, v, want) in cases {
        assert_eq!(
            one(fmt, num(v)).as_deref(),
            Ok(want),
            "format {fmt:?} value {v}"
        );
    }
}

#[test]
fn errors_read_as_flux() {
    let r = || sched(1, 16, 16);
    let cases = [
        (
            "{nosuch}",
            "Error in user format: Unknown format field: nosuch",
        ),
        (
            "{id",
            "Error in user format: expected '}' before end of string",
        ),
        (
            "id}",
            "Error in user format: Single '}' encountered in format string",
        ),
        (
            "{id!x}",
            "Error in user format: Unknown conversion specifier x",
        ),
        (
            "{id!FF}",
            "Error in user format: expected ':' after conversion specifier",
        ),
        (
            "sort:bogus {id}",
            "Error in user format: Invalid sort key: bogus",
        ),
        (
            "{name:d}",
            "Unknown format code 'd' for object of type 'str'",
        ),
    ];
    for (fmt, want) in cases {
        assert_eq!(one(fmt, r()), Err(want.to_string()), "format {fmt:?}");
    }
    let mut v = vec![r()];
    let bad = Layout {
        sort: Some("-nope"),
        ..Default::default()
    };
    assert_eq!(
        render("{id}", &mut v, &bad, &ctx()),
        Err("Invalid sort key: nope".into())
    );
}

fn table(fmt: &str, items: &mut [JobRecord], layout: Layout) -> Vec<String> {
    render(fmt, items, &layout, &ctx()).expect("render")
}

#[test]
fn column_prefixes() {
    let mut jobs = vec![
        done(1, "a", "COMPLETED", Some(0)),
        done(2, "b", "FAILED", Some(256)),
    ];
    // ?: drops an all-empty column, with the text before it.
    let t = table(
        "{id.dec:>4} ?:{queue:<8} {name}",
        &mut jobs,
        Layout::default(),
    );
    assert_eq!(t, ["JOBID NAME", "   1 a", "   2 b"]);
    // +: widens to the widest value, and to the header.
    jobs[1].job.name = "a-long-name".into();
    let t = table("+:{name:<2.2} {id.dec}", &mut jobs, Layout::default());
    assert_eq!(t, ["NAME        JOBID", "a           1", "a-long-name 2"]);
    let t = table(
        "+:{username:<3}|",
        &mut jobs,
        Layout {
            no_header: true,
            ..Default::default()
        },
    );
    assert_eq!(t, ["alice|", "alice|"]);
    // ?+: keeps a non-empty column and widens it.
    jobs[0].job.queue = "batch".into();
    let t = table("{id.dec} ?+:{queue:>2}|", &mut jobs, Layout::default());
    assert_eq!(t, ["JOBID QUEUE|", "1 batch|", "2      |"]);
    // A `?:` on a column empty in all rows also goes from the header.
    let t = table("{id.dec}?:{exception.type}|", &mut jobs, Layout::default());
    assert_eq!(t, ["JOBID|", "1|", "2|"]);
}

#[test]
fn headers_keep_align_and_width_only() {
    let mut jobs = vec![done(1, "a", "COMPLETED", Some(0))];
    let t = table(
        "{id.f58:>12} {ntasks:>6d} {runtime!F:>8h} {t_inactive!d:%R::<7} {status:^10.3}|",
        &mut jobs,
        Layout::default(),
    );
    assert_eq!(t[0], "       JOBID NTASKS  RUNTIME T_INACTIVE   STATUS  |");
}

#[test]
fn sort_prefix_and_option() {
    let mut jobs = vec![
        done(3, "c", "COMPLETED", Some(0)),
        done(1, "a", "FAILED", Some(256)),
        sched(2, 16, 16),
    ];
    let ids = |t: Vec<String>| t.into_iter().collect::<Vec<_>>().join(",");
    let nh = || Layout {
        no_header: true,
        ..Default::default()
    };
    assert_eq!(ids(table("sort:id {id.dec}", &mut jobs, nh())), "1,2,3");
    assert_eq!(ids(table("sort:-id {id.dec}", &mut jobs, nh())), "3,2,1");
    // Unset values ("" nnodes) sort first, then numbers.
    assert_eq!(
        ids(table("sort:nnodes,-id {id.dec}", &mut jobs, nh())),
        "2,3,1"
    );
    // --sort overrides the prefix.
    let l = Layout {
        sort: Some("name"),
        no_header: true,
        ..Default::default()
    };
    assert_eq!(ids(table("sort:-id {id.dec}", &mut jobs, l)), "1,3,2");
    // The prefix is not printed, nor the space after it.
    assert_eq!(
        table("sort:id {id.dec}", &mut jobs, Layout::default())[0],
        "JOBID"
    );
}

#[test]
fn builtin_formats_render() {
    let mut jobs = vec![done(1, "hostname", "COMPLETED", Some(0)), sched(2, 0, 0)];
    let fmt = |n: &str| {
        named::BUILTIN
            .iter()
            .find(|b| b.0 == n)
            .map(|b| b.2)
            .unwrap_or("")
    };
    let t = table(fmt("default"), &mut jobs, Layout::default());
    assert_eq!(
        t[0],
        "       JOBID USER     NAME       ST NTASKS NNODES     TIME INFO"
    );
    assert!(
        t[1].ends_with(" hostname   CD      1      1   2.500s node0"),
        "{:?}",
        t[1]
    );
    assert!(
        t[2].ends_with(" sleep       S      2      -        - held"),
        "{:?}",
        t[2]
    );
    let t = table(fmt("long"), &mut jobs, Layout::default());
    assert_eq!(
        t[0],
        "       JOBID USER     NAME          STATUS NTASKS NNODES     T_SUBMIT  T_REMAINING     TIME INFO"
    );
    assert!(
        t[1].contains(" COMPLETED      1      1  Nov14 22:13            -   2.500s node0"),
        "{:?}",
        t[1]
    );
    let t = table(fmt("deps"), &mut jobs, Layout::default());
    assert_eq!(
        t[0],
        "       JOBID NAME       URG PRI          STATE    DEPENDENCIES"
    );
    assert!(
        t[2].ends_with(" sleep      0   0            SCHED    "),
        "{:?}",
        t[2]
    );
    let t = table(fmt("endreason"), &mut jobs, Layout::default());
    assert_eq!(
        t[0],
        "       JOBID USER     NAME       ST   T_INACTIVE INACTIVE-REASON"
    );
    assert!(
        t[1].ends_with(" hostname   CD  Nov14 22:13 Exit 0"),
        "{:?}",
        t[1]
    );
    assert!(t[2].ends_with(" sleep       S            - "), "{:?}", t[2]);
}

#[test]
fn long_user_names_widen_the_default_user_column() {
    let mut jobs = vec![done(1, "a", "COMPLETED", Some(0))];
    jobs[0].username = "a-very-long-user".into();
    let t = table(named::BUILTIN[0].2, &mut jobs, Layout::default());
    assert_eq!(
        t[0],
        "       JOBID USER             NAME       ST NTASKS NNODES     TIME INFO"
    );
}

#[test]
fn width_cuts_lines_and_blank_rows_are_skipped() {
    let mut jobs = vec![done(1, "hostname", "COMPLETED", Some(0)), sched(2, 16, 16)];
    let l = Layout {
        width: Some(8),
        ..Default::default()
    };
    assert_eq!(
        table("{id.dec:<4} {name}", &mut jobs, l),
        ["JOBID N+", "1    ho+", "2    sl+"]
    );
    let l = Layout {
        no_header: true,
        ..Default::default()
    };
    assert_eq!(table("{result}", &mut jobs, l), ["COMPLETED"]);
}

#[test]
fn raw_value_types() {
    let r = done(1, "x", "COMPLETED", Some(0));
    assert_eq!(r.field("success"), Value::Bool(true));
    assert_eq!(r.field("nnodes"), Value::Int(1));
    assert_eq!(sched(1, 16, 16).field("nnodes"), Value::empty());
}
