//! Placeholder: to be written.

/// Placeholder.
#[derive(Debug)]
pub struct ResourceSet;
