//! R exactly as flux-core 0.88 wrote it reads back and re-encodes to the
//! same bytes (key order, `", "` separators, 17-digit reals).

use fluxgate_shared::ResourceSet;

#[test]
fn flux_written_r_reencodes_byte_for_byte() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/rset/golden");
    let mut n = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        let text = text.trim_end();
        let rs = ResourceSet::parse(text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert_eq!(rs.encode_flux(), text, "{}", path.display());
        n += 1;
    }
    assert!(n >= 8);
}

#[test]
fn allocation_r_fields() {
    let rs = ResourceSet::parse(include_str!("data/rset/golden/b5-timelimit.R.json")).unwrap();
    assert_eq!(rs.starttime(), Some(1795326935.1585605));
    assert_eq!(rs.expiration(), Some(1795326937.1585605));
    assert_eq!(rs.slot_count(), Some(1));
    assert_eq!(rs.dumps(), "rank0/core0");
    // The compact form a scheduler stores differs only in separators.
    assert_eq!(
        rs.to_json_string(),
        "{\"version\":1,\"execution\":{\"R_lite\":[{\"rank\":\"0\",\"children\":{\"core\":\"0\"}}],\
         \"starttime\":1795326935.1585605,\"expiration\":1795326937.1585605,\"nslots\":1,\
         \"nodelist\":[\"vm\"]}}"
    );
}
