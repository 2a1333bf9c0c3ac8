//! Event names. The names Flux defines are shared static strings, so reading
//! an eventlog allocates nothing for them; any other name is kept as given.

use std::borrow::{Borrow, Cow};
use std::fmt;
use std::ops::Deref;

use serde::{Serialize, Serializer};

/// An event name, e.g. `submit`; compares and prints as the string it is.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct EventName(Cow<'static, str>);

impl EventName {
    /// The name `name`.
    pub fn new(name: &str) -> Self {
        match known(name) {
            Some(name) => EventName(Cow::Borrowed(name)),
            None => EventName(Cow::Owned(name.to_owned())),
        }
    }

    /// The name as a string slice.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Names of the job (RFC 21), exec (RFC 50), output (RFC 24) and resource
/// (RFC 44) eventlogs.
macro_rules! known_names {
    ($($name:literal),* $(,)?) => {
        /// The static copy of `name`, when it is one Flux defines.
        fn known(name: &str) -> Option<&'static str> {
            match name {
                $($name => Some($name),)*
                _ => None,
            }
        }
    };
}

known_names![
    // RFC 21 job eventlog
    "submit",
    "validate",
    "invalidate",
    "set-flags",
    "jobspec-update",
    "resource-update",
    "dependency-add",
    "dependency-remove",
    "depend",
    "priority",
    "flux-restart",
    "urgency",
    "alloc",
    "prolog-start",
    "prolog-finish",
    "epilog-start",
    "epilog-finish",
    "start",
    "release",
    "finish",
    "free",
    "clean",
    "exception",
    "memo",
    "debug",
    // RFC 50 exec eventlog
    "init",
    "starting",
    "shell.init",
    "shell.start",
    "shell.task-exit",
    "shell-exit",
    "complete",
    "done",
    "reattach",
    "re-starting",
    // RFC 24 output eventlog
    "header",
    "data",
    "redirect",
    "log",
    // RFC 44 resource eventlog
    "restart",
    "resource-define",
    "drain",
    "undrain",
    "online",
    "offline",
    "torpid",
    "lively",
    "truncate",
];

impl Deref for EventName {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for EventName {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl Borrow<str> for EventName {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl From<&str> for EventName {
    fn from(name: &str) -> Self {
        EventName::new(name)
    }
}

impl From<&String> for EventName {
    fn from(name: &String) -> Self {
        EventName::new(name)
    }
}

impl From<String> for EventName {
    fn from(name: String) -> Self {
        match known(&name) {
            Some(name) => EventName(Cow::Borrowed(name)),
            None => EventName(Cow::Owned(name)),
        }
    }
}

impl From<EventName> for String {
    fn from(name: EventName) -> Self {
        name.0.into_owned()
    }
}

impl PartialEq<str> for EventName {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for EventName {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialEq<String> for EventName {
    fn eq(&self, other: &String) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<EventName> for str {
    fn eq(&self, other: &EventName) -> bool {
        self == other.as_str()
    }
}

impl PartialEq<EventName> for &str {
    fn eq(&self, other: &EventName) -> bool {
        *self == other.as_str()
    }
}

impl PartialEq<EventName> for String {
    fn eq(&self, other: &EventName) -> bool {
        self == other.as_str()
    }
}

impl Serialize for EventName {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl fmt::Display for EventName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for EventName {
    /// As the string's own `Debug`, so events print as before.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_names_are_static_and_all_compare_as_strings() {
        let submit = EventName::from("submit");
        assert!(matches!(submit.0, Cow::Borrowed(_)));
        assert!(matches!(
            EventName::from(String::from("clean")).0,
            Cow::Borrowed(_)
        ));
        let other = EventName::new("debug.exec-progress");
        assert!(matches!(other.0, Cow::Owned(_)));
        assert_eq!(submit, "submit");
        assert_eq!("submit", submit);
        assert_eq!(other, String::from("debug.exec-progress"));
        assert_eq!(other.to_string(), "debug.exec-progress");
        assert_eq!(format!("{submit:?}"), "\"submit\"");
        assert_eq!(
            EventName::new("submit"),
            EventName::from(String::from("submit"))
        );
        assert!(other.starts_with("debug."));
    }
}
