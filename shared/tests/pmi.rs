//! The PMI-1 simple wire protocol engine: every command, malformed and
//! overlong lines, the barrier as a fence, and the gather of node keys.

use fluxgate_shared::pmi::gather::GatherError;
use fluxgate_shared::pmi::wire::{self, MAX_LINE, Request, WireError};
use fluxgate_shared::pmi::{Dict, Gather, Output, Setup, SimpleServer};

fn server(local: u32) -> SimpleServer {
    SimpleServer::new(Setup {
        kvsname: "1234".into(),
        universe_size: 4,
        local_size: local,
    })
}

/// The answers to one request of task `rank`.
fn ask(s: &mut SimpleServer, rank: u32, line: &str) -> Vec<Output> {
    let mut out = Vec::new();
    s.request(rank, line.as_bytes(), &mut out).unwrap();
    out
}

fn reply(rank: u32, line: &str) -> Output {
    Output::Reply {
        rank,
        line: line.to_string(),
    }
}

#[test]
fn every_simple_command_has_flux_core_s_answer() {
    let mut s = server(1);
    let table = [
        (
            "cmd=init pmi_version=1 pmi_subversion=1\n",
            "cmd=response_to_init rc=0 pmi_version=1 pmi_subversion=1\n",
        ),
        (
            "cmd=get_maxes\n",
            "cmd=maxes rc=0 kvsname_max=64 keylen_max=64 vallen_max=1024\n",
        ),
        ("cmd=get_appnum\n", "cmd=appnum rc=0 appnum=0\n"),
        ("cmd=get_universe_size\n", "cmd=universe_size rc=0 size=4\n"),
        ("cmd=get_my_kvsname\n", "cmd=my_kvsname rc=0 kvsname=1234\n"),
        (
            "cmd=put kvsname=1234 key=a value=one two\n",
            "cmd=put_result rc=0\n",
        ),
        (
            "cmd=publish_name service=x port=y\n",
            "cmd=publish_result rc=-1 msg=command not implemented\n",
        ),
        (
            "cmd=unpublish_name service=x\n",
            "cmd=unpublish_result rc=-1 msg=command not implemented\n",
        ),
        (
            "cmd=lookup_name service=x\n",
            "cmd=lookup_result rc=-1 msg=command not implemented\n",
        ),
        ("cmd=finalize\n", "cmd=finalize_ack rc=0\n"),
    ];
    for (request, answer) in table {
        assert_eq!(ask(&mut s, 0, request), vec![reply(0, answer)], "{request}");
    }
    let c = s.client(0);
    assert!(c.initialized && c.finalized);
}

#[test]
fn other_versions_are_refused() {
    let mut s = server(1);
    for line in [
        "cmd=init pmi_version=2 pmi_subversion=0",
        "cmd=init pmi_version=1 pmi_subversion=0",
    ] {
        assert_eq!(
            ask(&mut s, 0, line),
            vec![reply(0, "cmd=response_to_init rc=-1\n")]
        );
    }
}

#[test]
fn puts_are_seen_only_after_the_barrier() {
    let mut s = server(2);
    s.preset("PMI_process_mapping", "(vector,(0,1,2))");
    ask(&mut s, 0, "cmd=put kvsname=1234 key=bc-0 value=addr0\n");
    assert_eq!(
        ask(&mut s, 1, "cmd=get kvsname=1234 key=bc-0\n"),
        vec![reply(1, "cmd=get_result rc=4 msg=key_not_found\n")]
    );
    assert_eq!(
        ask(&mut s, 1, "cmd=get kvsname=1234 key=PMI_process_mapping\n"),
        vec![reply(1, "cmd=get_result rc=0 value=(vector,(0,1,2))\n")]
    );
    ask(&mut s, 1, "cmd=put kvsname=1234 key=local::x value=here\n");
    assert!(ask(&mut s, 0, "cmd=barrier_in\n").is_empty());
    assert!(s.in_barrier());
    let fence = ask(&mut s, 1, "cmd=barrier_in\n");
    let mut pending = Dict::new();
    pending.insert("bc-0".into(), "addr0".into());
    // local:: keys stay on the node.
    assert_eq!(fence, vec![Output::Fence(pending.clone())]);
    pending.insert("bc-9".into(), "addr9".into());
    let mut out = Vec::new();
    s.fence_done(Ok(pending), &mut out);
    assert_eq!(
        out,
        vec![
            reply(0, "cmd=barrier_out rc=0\n"),
            reply(1, "cmd=barrier_out rc=0\n")
        ]
    );
    assert!(!s.in_barrier());
    assert_eq!(
        ask(&mut s, 0, "cmd=get kvsname=1234 key=bc-9\n"),
        vec![reply(0, "cmd=get_result rc=0 value=addr9\n")]
    );
    assert_eq!(
        ask(&mut s, 0, "cmd=get kvsname=1234 key=local::x\n"),
        vec![reply(0, "cmd=get_result rc=0 value=here\n")]
    );
}

#[test]
fn a_failed_exchange_releases_with_an_error() {
    let mut s = server(1);
    ask(&mut s, 0, "cmd=barrier_in\n");
    let mut out = Vec::new();
    s.fence_done(Err(()), &mut out);
    assert_eq!(out, vec![reply(0, "cmd=barrier_out rc=-1\n")]);
}

#[test]
fn entering_the_barrier_twice_breaks_the_protocol() {
    let mut s = server(2);
    ask(&mut s, 0, "cmd=barrier_in\n");
    let mut out = Vec::new();
    let e = s.request(0, b"cmd=barrier_in\n", &mut out).unwrap_err();
    assert!(matches!(e, WireError::OutOfOrder(_)), "{e}");
}

#[test]
fn abort_carries_code_and_message() {
    let mut s = server(1);
    assert_eq!(
        ask(&mut s, 2, "cmd=abort exitcode=7\n"),
        vec![Output::Abort {
            rank: 2,
            code: 7,
            message: "aborted".into()
        }]
    );
    assert_eq!(
        ask(&mut s, 2, "cmd=abort exit_code=3 error_msg=out of memory\n"),
        vec![Output::Abort {
            rank: 2,
            code: 3,
            message: "out of memory".into()
        }]
    );
}

#[test]
fn spawn_is_read_to_its_end_and_refused() {
    let mut s = server(1);
    assert!(ask(&mut s, 0, "mcmd=spawn\n").is_empty());
    assert!(ask(&mut s, 0, "nprocs=2\n").is_empty());
    assert_eq!(
        ask(&mut s, 0, "endcmd\n"),
        vec![reply(0, "cmd=spawn_result rc=-1\n")]
    );
    // The conversation goes on afterwards.
    assert_eq!(
        ask(&mut s, 0, "cmd=get_appnum\n"),
        vec![reply(0, "cmd=appnum rc=0 appnum=0\n")]
    );
}

#[test]
fn malformed_lines_break_the_protocol() {
    let table: [(&[u8], &str); 6] = [
        (b"hello\n", "without cmd="),
        (b"cmd=frobnicate\n", "unknown command"),
        (b"cmd=init pmi_version=x pmi_subversion=1\n", "pmi_version"),
        (b"cmd=put kvsname=1234 value=v\n", "key"),
        (b"cmd=get key=k\n", "kvsname"),
        (b"cmd=put \xff\xfe\n", "UTF-8"),
    ];
    for (line, words) in table {
        let mut out = Vec::new();
        let e = server(1).request(0, line, &mut out).unwrap_err();
        assert!(e.to_string().contains(words), "{e} for {line:?}");
        assert!(out.is_empty());
    }
}

#[test]
fn overlong_lines_and_fields() {
    let long = format!(
        "cmd=put kvsname=1234 key=k value={}\n",
        "v".repeat(MAX_LINE)
    );
    assert_eq!(wire::parse(long.as_bytes()), Err(WireError::TooLong));
    let mut s = server(1);
    let key = format!("cmd=put kvsname=1234 key={} value=v\n", "k".repeat(64));
    assert_eq!(
        ask(&mut s, 0, &key),
        vec![reply(0, "cmd=put_result rc=5\n")]
    );
    let value = format!("cmd=put kvsname=1234 key=k value={}\n", "v".repeat(1024));
    assert_eq!(
        ask(&mut s, 0, &value),
        vec![reply(0, "cmd=put_result rc=7\n")]
    );
    let name = format!("cmd=get kvsname={} key=k\n", "n".repeat(64));
    assert_eq!(
        ask(&mut s, 0, &name),
        vec![reply(0, "cmd=get_result rc=8\n")]
    );
    // The largest value that fits is stored whole.
    let fits = format!("cmd=put kvsname=1234 key=k value={}\n", "v".repeat(1023));
    assert_eq!(
        ask(&mut s, 0, &fits),
        vec![reply(0, "cmd=put_result rc=0\n")]
    );
}

#[test]
fn values_run_to_the_end_of_the_line() {
    assert_eq!(
        wire::parse(b"cmd=put kvsname=j key=k value=a b=c  d\n"),
        Ok(Request::Put(Ok(("k".into(), "a b=c  d".into()))))
    );
    // A word that merely ends in the field's name is not the field.
    assert_eq!(
        wire::parse(b"cmd=get xkvsname=q kvsname=j key=k"),
        Ok(Request::Get(Ok("k".into())))
    );
}

#[test]
fn the_gather_unites_each_member_once_per_barrier() {
    let mut g = Gather::new(3);
    let dict = |k: &str| Dict::from([(k.to_string(), "v".to_string())]);
    assert_eq!(g.add(0, dict("a")), Ok(None));
    assert_eq!(g.add(0, dict("a")), Err(GatherError::Twice(0)));
    assert_eq!(g.add(5, dict("x")), Err(GatherError::UnknownNode(5, 3)));
    assert_eq!(g.add(2, dict("c")), Ok(None));
    let union = g.add(1, dict("b")).unwrap().unwrap();
    assert_eq!(union.keys().collect::<Vec<_>>(), ["a", "b", "c"]);
    // The next barrier starts afresh.
    assert_eq!(g.add(0, dict("d")), Ok(None));
}
