//! Ctrl-C and Ctrl-Z while `run` or `job attach` follows a job, as
//! flux-core's `flux job attach` handles them (`attach_signal_cb`): the
//! first Ctrl-C only says that a second one within 2 s cancels the job, and
//! the job runs on; a second within 2 s cancels it ("interrupted by
//! ctrl-C"); Ctrl-Z within 2 s of a Ctrl-C detaches, leaving the job
//! running; a Ctrl-Z otherwise asks for one more, which suspends.

use std::time::{Duration, Instant};

use tokio::signal::unix::{Signal, SignalKind, signal};

/// How long a first Ctrl-C arms the second.
pub const WINDOW: Duration = Duration::from_secs(2);

/// The cancel note flux writes.
pub const CANCEL_NOTE: &str = "interrupted by ctrl-C";

/// What the follower is to do after a signal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Nothing more than the message already printed.
    Warned,
    /// Cancel the job.
    Cancel,
    /// Stop following; the job runs on.
    Detach,
    /// Suspend this process (a second Ctrl-Z).
    Suspend,
}

/// Which key the user pressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Key {
    /// SIGINT.
    CtrlC,
    /// SIGTSTP.
    CtrlZ,
}

/// The two-key state machine, with time as an argument.
#[derive(Debug, Default)]
pub struct Keys {
    last_ctrl_c: Option<Instant>,
    ctrl_z_armed: bool,
}

impl Keys {
    /// The action for `key` pressed at `now`, and what to print first.
    pub fn press(&mut self, key: Key, now: Instant) -> (Action, Option<&'static str>) {
        let recent = self
            .last_ctrl_c
            .is_some_and(|t| now.duration_since(t) <= WINDOW);
        match key {
            Key::CtrlC if recent => (Action::Cancel, None),
            Key::CtrlC => {
                self.last_ctrl_c = Some(now);
                self.ctrl_z_armed = false;
                (
                    Action::Warned,
                    Some("one more ctrl-C within 2s to cancel or ctrl-Z to detach"),
                )
            }
            Key::CtrlZ if recent => (Action::Detach, Some("detaching...")),
            Key::CtrlZ if self.ctrl_z_armed => {
                self.ctrl_z_armed = false;
                (Action::Suspend, None)
            }
            Key::CtrlZ => {
                self.ctrl_z_armed = true;
                (Action::Warned, Some("one more ctrl-Z to suspend"))
            }
        }
    }
}

/// The signals of the terminal, caught while a job is followed.
#[derive(Debug)]
pub struct Interrupts {
    int: Signal,
    tstp: Signal,
}

impl Interrupts {
    /// Catch SIGINT and SIGTSTP from now on.
    pub fn catch() -> std::io::Result<Interrupts> {
        Ok(Interrupts {
            int: signal(SignalKind::interrupt())?,
            tstp: signal(SignalKind::from_raw(nix::libc::SIGTSTP))?,
        })
    }

    /// The next key pressed.
    pub async fn next(&mut self) -> Key {
        tokio::select! {
            _ = self.int.recv() => Key::CtrlC,
            _ = self.tstp.recv() => Key::CtrlZ,
        }
    }
}

/// Stop this process as the terminal's Ctrl-Z would have.
pub fn suspend() {
    let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGSTOP);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_ctrl_c_within_the_window_cancel() {
        let t0 = Instant::now();
        let mut k = Keys::default();
        assert_eq!(k.press(Key::CtrlC, t0).0, Action::Warned);
        assert_eq!(
            k.press(Key::CtrlC, t0 + Duration::from_millis(1500)).0,
            Action::Cancel
        );
    }

    #[test]
    fn a_late_second_ctrl_c_warns_again() {
        let t0 = Instant::now();
        let mut k = Keys::default();
        k.press(Key::CtrlC, t0);
        assert_eq!(
            k.press(Key::CtrlC, t0 + Duration::from_secs(3)).0,
            Action::Warned
        );
    }

    #[test]
    fn ctrl_z_after_ctrl_c_detaches_else_needs_two() {
        let t0 = Instant::now();
        let mut k = Keys::default();
        k.press(Key::CtrlC, t0);
        assert_eq!(
            k.press(Key::CtrlZ, t0 + Duration::from_millis(10)),
            (Action::Detach, Some("detaching..."))
        );
        let mut k = Keys::default();
        assert_eq!(k.press(Key::CtrlZ, t0).0, Action::Warned);
        assert_eq!(k.press(Key::CtrlZ, t0).0, Action::Suspend);
    }
}
