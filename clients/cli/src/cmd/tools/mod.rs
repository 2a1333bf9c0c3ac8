//! Tools that need no instance: the data-model commands (`idset`,
//! `hostlist`), scheduler replays (`simulate`), the load generator's entry
//! (`bench`), and shell completions and man pages (`docs`).

pub mod bench;
pub mod docs;
pub mod hostlist;
pub mod idset;
pub mod simulate;
