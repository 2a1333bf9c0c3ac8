//! Any string: id parsing never panics, and a parsed id round-trips through every
//! encoding.
#![no_main]

use fluxgate_shared::JobId;
use fluxgate_shared::jobid::Encoding;
use libfuzzer_sys::fuzz_target;

const ALL: [Encoding; 8] = [
    Encoding::Dec,
    Encoding::Hex,
    Encoding::Dothex,
    Encoding::Kvs,
    Encoding::Words,
    Encoding::F58,
    Encoding::F58Plain,
    Encoding::Emoji,
];

fuzz_target!(|data: &[u8]| {
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    let Ok(s) = std::str::from_utf8(rest) else {
        return;
    };
    let _ = JobId::decode(s, ALL[usize::from(pick) % ALL.len()]);
    if let Ok(id) = JobId::parse(s) {
        for enc in ALL {
            let text = id.encode(enc);
            assert_eq!(JobId::decode(&text, enc), Ok(id), "{enc:?} {text}");
            assert_eq!(JobId::parse(&text), Ok(id), "{enc:?} {text}");
        }
    }
});
