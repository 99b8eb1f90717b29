//! A queued job: why it waits, when it should start, where it could run now
//! (`slurmwatch JOB` refreshes it on screen; `--once --json` prints it and exits 1).

use std::io::Write;
use std::time::{Duration, Instant};

use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
use ratatui::layout::{Constraint, Layout};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Padding, Paragraph, Wrap};

use slurmwatch_core::queue::gather::{self, Gathered};
use slurmwatch_core::queue::history_hint::History;
use slurmwatch_core::queue::{self, render, Analysis};
use slurmwatch_core::slurm::squeue::QueueEntry;

use super::{signals, Outcome, WatchArgs};

/// How often the screen asks Slurm again by default: four commands a refresh, and a queue
/// rarely changes faster than the scheduler's cycle.
const REFRESH_SECONDS: f64 = 10.0;
/// Never more often than this, whatever --interval says (the controller is shared).
const MIN_REFRESH_SECONDS: f64 = 2.0;

/// The one-sentence failure every non-screen mode ends with (exit 1: nothing live).
fn pending_outcome(e: &QueueEntry, a: Option<&Analysis>) -> Outcome {
    let why = if e.reason.is_empty() || e.reason == "None" {
        String::new()
    } else {
        format!(" (reason: {})", e.reason)
    };
    Outcome::fail(
        1,
        format!(
            "job {} is pending{why}: it has not started, so there is nothing live to show yet.",
            e.display_id
        ),
        match a {
            Some(a) => a.advice.clone(),
            None => "squeue --start -j ID shows Slurm's estimate of when it starts; run slurmwatch again once it runs.".into(),
        },
    )
}

/// The workload's past runs, from sacct and the spool's recorded files.
fn history_of(e: &QueueEntry) -> History {
    let now = slurmwatch_core::sys::now_unix_s();
    let dirs = slurmwatch_core::locate::site_places(None, &[]);
    gather::history(&e.user, &e.name, &dirs, now)
}

/// One refresh. `history` is looked up on the first call only (beside the four queue
/// commands, so the wait is the slower of the two), then reused: the past does not change
/// between refreshes and sacct is the slowest thing asked.
fn ask(e: &QueueEntry, history: &mut Option<History>) -> Result<(Gathered, Analysis), String> {
    let (g, looked_up) = match history {
        Some(_) => (gather::gather(e.job_id), None),
        None => std::thread::scope(|s| {
            let h = s.spawn(|| history_of(e));
            let g = gather::gather(e.job_id);
            let h = h
                .join()
                .unwrap_or_else(|_| History::Unavailable("the history lookup stopped".into()));
            (g, Some(h))
        }),
    };
    let asked_sacct = looked_up.is_some();
    if let Some(h) = looked_up {
        *history = Some(h);
    }
    let mut g = g.map_err(|err| err.to_string())?;
    if asked_sacct {
        g.commands += gather::HISTORY_SACCT_CALLS;
    }
    g.inputs.history = history.clone().unwrap_or_default();
    let a = queue::analyse(&g.inputs);
    Ok((g, a))
}

/// `--once --json`: the analysis as JSON on stdout, the sentence on stderr, exit 1.
pub fn json(e: &QueueEntry) -> Result<i32, Outcome> {
    let (g, a) = match ask(e, &mut None) {
        Ok(x) => x,
        Err(err) => {
            eprintln!("slurmwatch: note: cannot analyse the queue: {err}");
            return Err(pending_outcome(e, None));
        }
    };
    for n in &g.notes {
        eprintln!("slurmwatch: note: {n}");
    }
    let v = render::to_value(&a, g.commands, g.elapsed.as_secs_f64());
    let text = format!("{v}\n");
    crate::output::print(&text).map_err(|e| Outcome::fail(2, e, ""))?;
    Err(pending_outcome(e, Some(&a)))
}

/// CSV and `--log`: nothing to write yet; the why, when and where go to stderr.
pub fn explain(e: &QueueEntry) -> Outcome {
    // No history here: these modes end at once, and the why and where are what they need.
    match ask(e, &mut Some(History::NotAsked)) {
        Ok((_, a)) => {
            let mut err = std::io::stderr().lock();
            for l in render::lines(&a) {
                let _ = writeln!(err, "{l}");
            }
            pending_outcome(e, Some(&a))
        }
        Err(_) => pending_outcome(e, None),
    }
}

/// How the pending screen ended.
pub enum End {
    Code(i32),
    /// The job started: the caller switches to the live dashboard.
    Started,
}

/// The frame's title: the job, and what this refresh cost Slurm.
fn title(e: &QueueEntry, g: &Gathered, a: &Analysis) -> String {
    format!(
        " job {} · {} · PENDING · {} Slurm commands, {:.2} s · q quits ",
        e.display_id,
        a.job_name,
        g.commands,
        g.elapsed.as_secs_f64()
    )
}

/// The answer's lines, its "So:" line bold where colour is allowed, and the note (a failed
/// refresh) below them.
fn answer_lines(a: &Analysis, color: bool, note: Option<&str>) -> Vec<Line<'static>> {
    let mut lines: Vec<Line> = render::lines(a)
        .into_iter()
        .map(|l| {
            let bold = l.starts_with("So:");
            let style = if bold && color {
                Style::new().add_modifier(Modifier::BOLD)
            } else {
                Style::new()
            };
            Line::from(Span::styled(l, style))
        })
        .collect();
    if let Some(n) = note {
        lines.push(Line::from(n.to_string()));
    }
    lines
}

/// One frame: the lines in a bordered, titled box filling the terminal.
fn draw(
    terminal: &mut ratatui::DefaultTerminal,
    title: &str,
    lines: &[Line<'static>],
) -> std::io::Result<()> {
    terminal.draw(|f| {
        let [area] = Layout::vertical([Constraint::Fill(1)]).areas(f.area());
        let block = Block::bordered()
            .title(title.to_string())
            .padding(Padding::horizontal(1));
        f.render_widget(
            Paragraph::new(lines.to_vec())
                .block(block)
                .wrap(Wrap { trim: false }),
            area,
        );
    })?;
    Ok(())
}

/// What the user did in the last 250 ms (the wait between checks for a due refresh).
enum Input {
    Nothing,
    Resized,
    Quit(End),
}

/// q, Q or Esc quits (0), Ctrl-C as the signal would (128 + SIGINT), a lost terminal with 2.
fn poll_input() -> Input {
    match event::poll(Duration::from_millis(250)) {
        Ok(true) => match event::read() {
            Ok(Event::Key(k)) if k.kind == KeyEventKind::Press => match k.code {
                KeyCode::Char('q') | KeyCode::Char('Q') | KeyCode::Esc => Input::Quit(End::Code(0)),
                KeyCode::Char('c') if k.modifiers.contains(KeyModifiers::CONTROL) => {
                    Input::Quit(End::Code(128 + libc::SIGINT))
                }
                _ => Input::Nothing,
            },
            Ok(Event::Resize(..)) => Input::Resized,
            _ => Input::Nothing,
        },
        Ok(false) => Input::Nothing,
        Err(_) => Input::Quit(End::Code(2)),
    }
}

/// The refreshing view, until the job starts, leaves the queue, or the user quits.
pub fn screen(args: &WatchArgs, e: &QueueEntry) -> Result<End, Outcome> {
    // First answer before taking the terminal, so a failure is a plain message.
    let mut history = None;
    let first = ask(e, &mut history)
        .map_err(|err| Outcome::fail(2, format!("cannot ask Slurm about the queue: {err}."), ""))?;
    let refresh = args
        .interval
        .unwrap_or(REFRESH_SECONDS)
        .max(MIN_REFRESH_SECONDS);
    signals::install();
    let mut terminal = ratatui::try_init().map_err(|err| {
        Outcome::fail(
            2,
            format!("cannot use this terminal: {err}."),
            "Use --once --json where there is no terminal.",
        )
    })?;
    let color = slurmwatch_core::sys::colour_allowed();
    let mut current = Some(first);
    let mut note: Option<String> = None;
    let mut next = Instant::now();
    let end = loop {
        if let Some(c) = signals::caught() {
            break End::Code(c);
        }
        if Instant::now() >= next {
            if current.is_none() {
                match ask(e, &mut history) {
                    Ok(x) => {
                        note = None;
                        current = Some(x);
                    }
                    // Slurm busy for a moment: keep the last answer, say so.
                    Err(err) => note = Some(format!("last refresh failed: {err}")),
                }
            }
            if let Some((g, a)) = &current {
                let job = &g.inputs.job;
                if !job.is_pending() {
                    break if matches!(job.state.as_str(), "RUNNING" | "CONFIGURING") {
                        End::Started
                    } else {
                        End::Code(1)
                    };
                }
                let lines = answer_lines(a, color, note.as_deref());
                if draw(&mut terminal, &title(e, g, a), &lines).is_err() {
                    break End::Code(2);
                }
            }
            current = None;
            next = Instant::now() + Duration::from_secs_f64(refresh);
        }
        match poll_input() {
            Input::Quit(end) => break end,
            Input::Resized => next = Instant::now(),
            Input::Nothing => {}
        }
    };
    ratatui::restore();
    if let End::Code(1) = end {
        eprintln!(
            "slurmwatch: job {} left the queue without starting.",
            e.display_id
        );
    }
    Ok(end)
}
