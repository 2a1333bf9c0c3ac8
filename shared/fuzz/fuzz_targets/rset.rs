//! Any string: R parsing never panics; what parses re-emits to an equal R, and
//! allocation from it never panics.
#![no_main]

use fluxgate_shared::ResourceSet;
use fluxgate_shared::rset::{AllocRequest, Pool};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(r) = ResourceSet::parse(s) else {
        return;
    };
    let again = ResourceSet::parse(&r.to_json_string()).expect("emitted R parses");
    assert_eq!(again, r);
    let _ = r.dumps();
    if r.ncores() <= 4096 {
        let mut pool = Pool::new(r);
        if let Ok(got) = pool.alloc(&AllocRequest::slots(1, 1)) {
            pool.free(&got).expect("allocated R frees");
        }
    }
});
