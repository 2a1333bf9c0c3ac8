//! `fluxgate top`: a live view of an instance, as flux-top(1).
//!
//! Each screen is fed by one task ([`feed`]): an instance's by a listing of
//! every job, then the job journal (`JobManager.Journal`: a snapshot of the
//! active jobs, then every job's events as they commit), so that the list
//! follows the instance without asking about any job.
//!
//! Enter on a running job that runs an instance (a batch or alloc job, its
//! `uri` memo) opens top on that instance; on any other job it follows the
//! job's eventlog (`WatchEventlog`). Esc or `q` goes back up; `q` at the
//! top, Ctrl-C anywhere, SIGTERM or SIGHUP quit, and the terminal is always
//! given back as it was (raw mode off, main screen, cursor shown).

mod feed;
mod model;
mod view;

use std::cell::RefCell;
use std::collections::HashMap;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use fluxgate_shared::JobId;
use fluxgate_shared::job::JobState;
use ratatui::DefaultTerminal;
use ratatui::crossterm::event::{self, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use self::feed::{Update, follow_eventlog, follow_instance};
use self::model::Model;
use self::view::Context;
use crate::client::{self, Instance};
use crate::cmd::instance::nested::connect_inside;

/// Updates buffered per screen; a screen not shown (one below an open
/// one) stops its feed here, and its journal resyncs when it is back.
const FEED_CAPACITY: usize = 1024;

/// Eventlog lines kept on screen; older ones are dropped (a main eventlog
/// rarely has more than a few dozen).
const MAX_LOG_LINES: usize = 10_000;

/// Keys buffered between the terminal reader and the screen.
const KEY_CAPACITY: usize = 64;

/// How often the screen is redrawn with nothing new (run times move).
const TICK: Duration = Duration::from_secs(1);

/// Arguments of `fluxgate top`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Run `fluxgate top` on the instance of `FLUXGATE_URI`.
pub fn run(_args: Args) -> anyhow::Result<ExitCode> {
    client::block_on(async {
        let uri = client::uri()?;
        let inst = client::connect().await?;
        let mut screen = Screen::enter()?;
        let result = App::new(inst, uri).run(&mut screen.terminal).await;
        // Give the terminal back before any error is printed.
        drop(screen);
        result.map(|()| ExitCode::SUCCESS)
    })?
}

/// The terminal in raw mode on the alternate screen, given back on drop
/// (also when an error or a panic ends top: ratatui's panic hook restores
/// it too).
struct Screen {
    terminal: DefaultTerminal,
}

impl Screen {
    fn enter() -> anyhow::Result<Screen> {
        let terminal = ratatui::try_init().context("fluxgate top needs a terminal")?;
        Ok(Screen { terminal })
    }
}

impl Drop for Screen {
    fn drop(&mut self) {
        // Nothing is left to tell if this fails: the process is ending.
        let _ = self.terminal.show_cursor();
        ratatui::restore();
    }
}

/// A task feeding one screen; it ends with the screen.
#[derive(Debug)]
struct Feed {
    rx: mpsc::Receiver<Update>,
    task: JoinHandle<()>,
    /// The task has ended and everything it sent was read.
    done: bool,
}

impl Drop for Feed {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// What a screen shows.
#[derive(Debug)]
enum Kind {
    /// An instance: its jobs and resources (boxed: its clients are large).
    Instance { inst: Box<Instance>, model: Model },
    /// A job's eventlog.
    Eventlog { lines: Vec<String> },
}

/// One screen of the stack: the instance at the bottom, what was opened
/// from it above.
#[derive(Debug)]
struct Level {
    title: String,
    kind: Kind,
    status: Option<String>,
    feed: Feed,
}

/// What one turn of the loop got.
enum Step {
    Key(Option<event::Event>),
    Update(Option<Update>),
    Tick,
    Quit,
}

/// What a key asks for.
enum Action {
    None,
    Quit,
    Back,
    Open(u64),
}

struct App {
    levels: Vec<Level>,
    users: RefCell<HashMap<u32, String>>,
}

impl App {
    fn new(inst: Instance, uri: String) -> App {
        let level = instance_level(inst, uri);
        App {
            levels: vec![level],
            users: RefCell::default(),
        }
    }

    async fn run(mut self, terminal: &mut DefaultTerminal) -> anyhow::Result<()> {
        let (key_tx, mut keys) = mpsc::channel(KEY_CAPACITY);
        std::thread::spawn(move || read_keys(&key_tx));
        let mut term = signal(SignalKind::terminate())?;
        let mut hangup = signal(SignalKind::hangup())?;
        let mut tick = tokio::time::interval(TICK);
        loop {
            terminal.draw(|f| self.draw(f))?;
            let step = {
                let Some(level) = self.levels.last_mut() else {
                    return Ok(());
                };
                tokio::select! {
                    k = keys.recv() => Step::Key(k),
                    u = level.feed.rx.recv(), if !level.feed.done => Step::Update(u),
                    _ = tick.tick() => Step::Tick,
                    _ = term.recv() => Step::Quit,
                    _ = hangup.recv() => Step::Quit,
                }
            };
            match step {
                // The reader stopped: the terminal is gone.
                Step::Key(None) | Step::Quit => return Ok(()),
                Step::Key(Some(event::Event::Key(key))) => match self.on_key(key) {
                    Action::None => {}
                    Action::Quit => return Ok(()),
                    Action::Back => {
                        self.levels.pop();
                        if self.levels.is_empty() {
                            return Ok(());
                        }
                    }
                    Action::Open(id) => self.open(id).await,
                },
                // A resize is drawn at the top of the loop.
                Step::Key(Some(_)) | Step::Tick => {}
                Step::Update(Some(u)) => self.on_update(u),
                Step::Update(None) => {
                    if let Some(level) = self.levels.last_mut() {
                        level.feed.done = true;
                    }
                }
            }
        }
    }

    fn draw(&self, frame: &mut ratatui::Frame<'_>) {
        let Some(level) = self.levels.last() else {
            return;
        };
        let now = client::now();
        let status = level.status.as_deref();
        match &level.kind {
            Kind::Instance { model, .. } => {
                let ctx = Context {
                    title: &level.title,
                    now,
                    status,
                };
                view::draw_instance(frame, model, &ctx, &|uid| self.user(uid));
            }
            Kind::Eventlog { lines } => view::draw_eventlog(frame, &level.title, lines, status),
        }
    }

    /// A user's name, looked up once.
    fn user(&self, uid: u32) -> String {
        self.users
            .borrow_mut()
            .entry(uid)
            .or_insert_with(
                || match nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid)) {
                    Ok(Some(u)) => u.name,
                    _ => uid.to_string(),
                },
            )
            .clone()
    }

    fn on_key(&mut self, key: KeyEvent) -> Action {
        if key.kind != KeyEventKind::Press {
            return Action::None;
        }
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        let nested = self.levels.len() > 1;
        let Some(level) = self.levels.last_mut() else {
            return Action::Quit;
        };
        match key.code {
            KeyCode::Char('c') if ctrl => Action::Quit,
            KeyCode::Char('q') if !nested => Action::Quit,
            KeyCode::Char('q') | KeyCode::Esc if nested => Action::Back,
            KeyCode::Up | KeyCode::Char('k') => select(level, -1),
            KeyCode::Down | KeyCode::Char('j') => select(level, 1),
            KeyCode::PageUp => select(level, -10),
            KeyCode::PageDown => select(level, 10),
            KeyCode::Enter => match &level.kind {
                Kind::Instance { model, .. } => model.selected.map_or(Action::None, Action::Open),
                Kind::Eventlog { .. } => Action::None,
            },
            _ => Action::None,
        }
    }

    fn on_update(&mut self, u: Update) {
        let Some(level) = self.levels.last_mut() else {
            return;
        };
        match (&mut level.kind, u) {
            (_, Update::Status(s)) => level.status = Some(s),
            (Kind::Instance { model, .. }, Update::Listing(rows)) => {
                level.status = None;
                model.relist(&rows);
            }
            (Kind::Instance { model, .. }, Update::Entry(e)) => model.apply(&e),
            (Kind::Instance { model, .. }, Update::Resources(r)) => model.resources = Some(r),
            (Kind::Instance { model, .. }, Update::Started(t)) => model.started = Some(t),
            (Kind::Eventlog { lines }, Update::Line(l)) => {
                if lines.len() == MAX_LOG_LINES {
                    lines.remove(0);
                }
                lines.push(l);
            }
            _ => {}
        }
    }

    /// Open job `id`: top on its instance when it runs one, else its eventlog.
    async fn open(&mut self, id: u64) {
        let Some(level) = self.levels.last_mut() else {
            return;
        };
        let Kind::Instance { inst, model } = &mut level.kind else {
            return;
        };
        let job = client::f58(JobId::from(id));
        let running = model
            .jobs
            .get(&id)
            .is_some_and(|j| j.state == JobState::Run);
        let title = format!("{} > {job}", level.title);
        // Only a running job's instance answers; a finished one's memo stays.
        if running && let Ok(Some((child, _uri))) = connect_inside(inst, JobId::from(id)).await {
            self.levels.push(instance_level(child, title));
            return;
        }
        let feed = spawn_feed(|tx| follow_eventlog(Instance::clone(inst), id, tx));
        self.levels.push(Level {
            title: format!("{title} eventlog"),
            kind: Kind::Eventlog { lines: Vec::new() },
            status: None,
            feed,
        });
    }
}

/// Move an instance screen's selection.
fn select(level: &mut Level, by: isize) -> Action {
    if let Kind::Instance { model, .. } = &mut level.kind {
        model.select(by);
    }
    Action::None
}

/// The screen of an instance, its feed started.
fn instance_level(inst: Instance, title: String) -> Level {
    let feed = spawn_feed(|tx| follow_instance(inst.clone(), tx));
    Level {
        title,
        kind: Kind::Instance {
            inst: Box::new(inst),
            model: Model::default(),
        },
        status: Some("listing jobs…".into()),
        feed,
    }
}

fn spawn_feed<F: Future<Output = ()> + Send + 'static>(
    make: impl FnOnce(mpsc::Sender<Update>) -> F,
) -> Feed {
    let (tx, rx) = mpsc::channel(FEED_CAPACITY);
    Feed {
        rx,
        task: tokio::spawn(make(tx)),
        done: false,
    }
}

/// Read the terminal's keys and resizes on a thread of their own
/// (crossterm reads block); the thread ends once top stops listening.
fn read_keys(tx: &mpsc::Sender<event::Event>) {
    while !tx.is_closed() {
        // A bound on each wait, so that a closed channel is noticed.
        match event::poll(Duration::from_millis(200)) {
            Ok(false) => {}
            Ok(true) => match event::read() {
                Ok(e @ (event::Event::Key(_) | event::Event::Resize(..))) => {
                    if tx.blocking_send(e).is_err() {
                        return;
                    }
                }
                Ok(_) => {}
                Err(_) => return,
            },
            Err(_) => return,
        }
    }
}
