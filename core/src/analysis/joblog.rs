//! What the job's own output says: Slurm's file-name patterns, and a scan of the log's tail
//! for what explains a failure (docs/design.md §8, "From the job's log"). Pure functions over
//! text, no I/O: the report reads the (bounded) tail and hands it here.
//!
//! Codes (stable): `cuda_oom`, `nccl_error`, `module_not_found`, `traceback`,
//! `command_not_found`. Each finding carries the log lines it rests on.

use serde_json::{json, Value};

use super::Finding;

/// How much of each log is read: its last 64 KiB (the end explains the failure).
pub const LOG_TAIL_BYTES: u64 = 64 * 1024;
/// Longest log line quoted in a finding (characters); longer ones are cut with `…`.
pub const MAX_QUOTED_CHARS: usize = 240;
/// Frames of the last traceback kept (the innermost ones).
pub const TRACEBACK_FRAMES: usize = 2;
/// Most distinct names (modules, commands) listed per finding.
pub const MAX_NAMES: usize = 10;
/// Slurm's `%a` for a job that is not an array task (`NO_VAL - 1`, as Slurm prints it).
pub const NO_ARRAY_TASK: &str = "4294967294";

/// What Slurm substitutes into `--output`/`--error` patterns for the batch step.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PatternVars {
    /// `%j`: the job's own id (an array task's raw id).
    pub job_id: u32,
    /// `%A`: the array's master id (the job id when not an array).
    pub array_job_id: Option<u32>,
    /// `%a`: the array task id.
    pub array_task_id: Option<u32>,
    /// `%x`
    pub job_name: String,
    /// `%N`: the node that ran the batch script (short name).
    pub node: String,
    /// `%u`
    pub user: String,
}

/// Slurm's default output name when no `--output` was given (relative to the work dir).
pub fn default_pattern(array: bool) -> &'static str {
    if array {
        "slurm-%A_%a.out"
    } else {
        "slurm-%j.out"
    }
}

/// Expands a file-name pattern as slurmstepd does for the batch step: `%%`, `%A`, `%a`, `%j`,
/// `%J` (the job id: the batch step adds no `.step`), `%x`, `%N`, `%u`, `%n`/`%t` (0 for the
/// batch script), with an optional zero-padding width (`%4a`). A backslash anywhere turns
/// expansion off (Slurm's rule) and is removed. Unknown specifiers are left as written.
pub fn expand(pattern: &str, v: &PatternVars) -> String {
    if pattern.contains('\\') {
        return pattern.replace('\\', "");
    }
    let mut out = String::with_capacity(pattern.len() + 16);
    let mut chars = pattern.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let mut width = String::new();
        while let Some(d) = chars.peek().filter(|d| d.is_ascii_digit()) {
            width.push(*d);
            chars.next();
        }
        let w: usize = width.parse().unwrap_or(0).min(10);
        let num = |n: u32| format!("{n:0w$}");
        match chars.next() {
            Some('%') => out.push('%'),
            Some('j' | 'J') => out.push_str(&num(v.job_id)),
            Some('A') => out.push_str(&num(v.array_job_id.unwrap_or(v.job_id))),
            Some('a') => match v.array_task_id {
                Some(t) => out.push_str(&num(t)),
                None => out.push_str(NO_ARRAY_TASK),
            },
            Some('b') => out.push_str(&num(v.array_task_id.map_or(0, |t| t % 10))),
            Some('n' | 't') => out.push_str(&num(0)),
            Some('x') => out.push_str(&v.job_name),
            Some('N') => out.push_str(&v.node),
            Some('u') => out.push_str(&v.user),
            Some(other) => {
                out.push('%');
                out.push_str(&width);
                out.push(other);
            }
            None => {
                out.push('%');
                out.push_str(&width);
            }
        }
    }
    out
}

/// `-o FILE`, `--output=FILE`, `-e`, `--error`, `-D`/`--chdir` from an sbatch command line as
/// sacct's `SubmitLine` keeps it (whitespace-split: quoting is not recorded). Options after
/// the script name belong to the script and are ignored. `None` unless it is an sbatch line.
pub fn parse_submit_line(line: &str) -> Option<SubmitOptions> {
    let mut words = line.split_whitespace();
    let prog = words.next()?;
    if prog.rsplit('/').next() != Some("sbatch") {
        return None;
    }
    let words: Vec<&str> = words.collect();
    let mut o = SubmitOptions::default();
    let mut i = 0;
    while i < words.len() {
        let w = words[i];
        if !w.starts_with('-') {
            break; // the script: what follows is its arguments
        }
        let (name, inline) = match w.split_once('=') {
            Some((n, v)) if w.starts_with("--") => (n, Some(v.to_string())),
            _ => (w, None),
        };
        let short_val = |flag: &str| -> Option<Option<String>> {
            (name.len() > 2 && name.starts_with(flag) && !name.starts_with("--"))
                .then(|| Some(name[2..].to_string()))
        };
        let (slot, val): (Option<&mut Option<String>>, Option<String>) = match name {
            "-o" | "--output" => (Some(&mut o.output), inline.clone()),
            "-e" | "--error" => (Some(&mut o.error), inline.clone()),
            "-D" | "--chdir" => (Some(&mut o.chdir), inline.clone()),
            "--wrap" => {
                o.wrap = true;
                break;
            }
            _ => match (short_val("-o"), short_val("-e"), short_val("-D")) {
                (Some(v), _, _) => (Some(&mut o.output), v),
                (_, Some(v), _) => (Some(&mut o.error), v),
                (_, _, Some(v)) => (Some(&mut o.chdir), v),
                _ => (None, None),
            },
        };
        if let Some(slot) = slot {
            match val {
                Some(v) => *slot = Some(v),
                None => {
                    i += 1;
                    *slot = words.get(i).map(|s| s.to_string());
                }
            }
        } else if inline.is_none() && takes_value(name) {
            i += 1; // skip the option's separate value
        }
        i += 1;
    }
    Some(o)
}

/// Long sbatch options (and short ones) that take a separate value, so the value is not
/// mistaken for the script. Unknown options are assumed to be flags.
fn takes_value(name: &str) -> bool {
    matches!(
        name,
        "-A" | "-a"
            | "-b"
            | "-c"
            | "-C"
            | "-d"
            | "-F"
            | "-G"
            | "-i"
            | "-J"
            | "-L"
            | "-M"
            | "-m"
            | "-n"
            | "-N"
            | "-p"
            | "-q"
            | "-S"
            | "-t"
            | "-w"
            | "-x"
            | "--account"
            | "--array"
            | "--begin"
            | "--cpus-per-task"
            | "--constraint"
            | "--dependency"
            | "--job-name"
            | "--mem"
            | "--mem-per-cpu"
            | "--mem-per-gpu"
            | "--nodes"
            | "--ntasks"
            | "--partition"
            | "--qos"
            | "--time"
            | "--nodelist"
            | "--exclude"
            | "--gres"
            | "--gpus"
            | "--licenses"
            | "--input"
            | "--export"
            | "--mail-type"
            | "--mail-user"
            | "--comment"
            | "--reservation"
    )
}

/// What an sbatch command line said about the job's files.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SubmitOptions {
    pub output: Option<String>,
    pub error: Option<String>,
    pub chdir: Option<String>,
    /// `--wrap`: no script, so no `#SBATCH` lines could have changed the files.
    pub wrap: bool,
}

/// The last Python traceback: the exception and the innermost frames.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Traceback {
    /// `ModuleNotFoundError`, `torch.OutOfMemoryError`, …
    pub exception: String,
    pub message: String,
    /// The innermost frame: file, line, function.
    pub file: Option<String>,
    pub line: Option<u64>,
    pub function: Option<String>,
    /// The header, the last [`TRACEBACK_FRAMES`] frames and the exception line, as printed.
    pub lines: Vec<String>,
}

/// What one log (or several, merged) shows. Each list holds quoted lines, in log order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Scan {
    pub cuda_oom: Vec<String>,
    /// `Tried to allocate 2.00 GiB` → `2.00 GiB` (the last one seen).
    pub cuda_tried_to_allocate: Option<String>,
    pub nccl_errors: Vec<String>,
    pub nccl_timeouts: Vec<String>,
    /// `OpType=ALLREDUCE`, `Timeout(ms)=600000` of the last watchdog timeout.
    pub nccl_op: Option<String>,
    pub nccl_timeout_ms: Option<u64>,
    /// Python modules that could not be imported.
    pub python_modules: Vec<String>,
    /// Environment modules (Lmod / Tcl modules) that do not exist.
    pub env_modules: Vec<String>,
    /// The `module` command itself is missing in the job's shell.
    pub module_command_missing: bool,
    pub module_lines: Vec<String>,
    /// Commands the shell could not find, and the lines that said so.
    pub commands: Vec<String>,
    pub command_lines: Vec<String>,
    pub traceback: Option<Traceback>,
}

/// Cuts a quoted line to [`MAX_QUOTED_CHARS`] and drops terminal escapes and control bytes.
pub fn quote(line: &str) -> String {
    let mut out = String::new();
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // CSI: ESC [ params final-byte
            if chars.peek() == Some(&'[') {
                chars.next();
                for d in chars.by_ref() {
                    if ('@'..='~').contains(&d) {
                        break;
                    }
                }
            }
            continue;
        }
        if c.is_control() && c != '\t' {
            continue;
        }
        out.push(c);
    }
    let out = out.trim();
    if out.chars().count() > MAX_QUOTED_CHARS {
        let mut s: String = out.chars().take(MAX_QUOTED_CHARS).collect();
        s.push('…');
        s
    } else {
        out.to_string()
    }
}

/// PyTorch ≥ 2.2 prefixes each rank's error lines with `[rank0]: `; srun `--label` with `0: `
/// is not stripped (too easily confused with text).
fn strip_rank(line: &str) -> &str {
    if let Some(rest) = line.strip_prefix("[rank") {
        if let Some((n, tail)) = rest.split_once("]:") {
            if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) {
                return tail.strip_prefix(' ').unwrap_or(tail);
            }
        }
    }
    line
}

fn push_unique(v: &mut Vec<String>, s: String) {
    if !s.is_empty() && !v.contains(&s) && v.len() < MAX_NAMES {
        v.push(s);
    }
}

fn push_line(v: &mut Vec<String>, line: &str) {
    // Keep the first and the latest lines: the first names the cause, the last the end.
    let q = quote(line);
    if v.len() < MAX_NAMES {
        v.push(q);
    } else if let Some(last) = v.last_mut() {
        *last = q;
    }
}

/// The text between the first pair of `q` quotes after `from`.
fn quoted(s: &str, q: char) -> Option<&str> {
    let a = s.find(q)? + q.len_utf8();
    let b = s[a..].find(q)? + a;
    Some(&s[a..b])
}

/// Every `"…"` in a line.
fn all_double_quoted(s: &str) -> Vec<String> {
    s.split('"')
        .skip(1)
        .step_by(2)
        .map(|x| x.trim().to_string())
        .filter(|x| !x.is_empty())
        .collect()
}

/// `No module named 'torch'` / `No module named torch` → `torch`.
fn python_module(line: &str) -> Option<String> {
    let i = line.find("No module named ")?;
    let rest = &line[i + "No module named ".len()..];
    let name = match rest.chars().next()? {
        '\'' | '"' => quoted(rest, rest.chars().next()?)?.to_string(),
        _ => rest.split_whitespace().next()?.to_string(),
    };
    let name = name.trim_end_matches(['.', ',', ';']).to_string();
    (!name.is_empty()).then_some(name)
}

/// A shell's "command not found" line → (command, line number in the script).
fn missing_command(line: &str) -> Option<(String, Option<u64>)> {
    let l = line.trim_end();
    // zsh: `zsh: command not found: foo`
    if let Some(i) = l.find("command not found: ") {
        let cmd = l[i + "command not found: ".len()..].trim();
        return (!cmd.is_empty() && !cmd.contains(' ')).then(|| (cmd.to_string(), None));
    }
    // bash: `…/slurm_script: line 7: foo: command not found`, `bash: foo: command not found`
    // dash: `/…/slurm_script: 7: foo: not found`
    let (head, dash) = if let Some(h) = l.strip_suffix(": command not found") {
        (h, false)
    } else if let Some(h) = l.strip_suffix(": not found") {
        (h, true)
    } else {
        // srun: `slurmstepd: error: execve(): foo: No such file or directory`
        let h = l.strip_suffix(": No such file or directory")?;
        let i = h.find("execve(): ")?;
        let cmd = &h[i + "execve(): ".len()..];
        return (!cmd.is_empty()).then(|| (cmd.to_string(), None));
    };
    let (before, cmd) = head.rsplit_once(": ")?;
    let cmd = cmd.trim();
    if cmd.is_empty() || cmd.contains(' ') {
        return None;
    }
    let lineno = before.rsplit_once(": ").map_or(before, |(_, n)| n).trim();
    let n = lineno
        .strip_prefix("line ")
        .unwrap_or(lineno)
        .parse::<u64>()
        .ok();
    if dash && n.is_none() {
        return None; // `x: not found` without a script line number is not a shell's word
    }
    if !dash && n.is_none() && !before.ends_with("sh") && !before.contains("sh: ") {
        // `bash: foo: command not found` (no line): the prefix names the shell.
        let prog = before.rsplit('/').next().unwrap_or(before);
        if !prog.ends_with("sh") && !prog.ends_with("slurm_script") {
            return None;
        }
    }
    Some((cmd.to_string(), n))
}

fn after<'a>(s: &'a str, key: &str) -> Option<&'a str> {
    let i = s.find(key)?;
    Some(&s[i + key.len()..])
}

/// Scans one log's text (its tail). Lines may end in `\n`, `\r\n` or `\r` (progress bars).
pub fn scan(text: &str) -> Scan {
    let mut s = Scan::default();
    let lines: Vec<&str> = text
        .split(['\n', '\r'])
        .map(strip_rank)
        .filter(|l| !l.trim().is_empty())
        .collect();
    for (i, line) in lines.iter().copied().enumerate() {
        let low = line.to_ascii_lowercase();
        scan_cuda_oom(&mut s, line, &low);
        scan_nccl(&mut s, line, &low);
        scan_modules(&mut s, &lines, i);
        scan_missing_command(&mut s, line);
        // The last traceback wins.
        if line
            .trim_start()
            .starts_with("Traceback (most recent call last):")
        {
            // The block's own lines are scanned too (they hold the errors above): no skip.
            if let Some(tb) = traceback_at(&lines, i) {
                s.traceback = Some(tb);
            }
        }
    }
    s
}

/// CUDA out of memory (PyTorch, CUDA runtime/driver, TensorFlow on a GPU, JAX/XLA), and how
/// much PyTorch tried to allocate. `low`: `line` in lower case.
fn scan_cuda_oom(s: &mut Scan, line: &str, low: &str) {
    if low.contains("cuda out of memory")
        || low.contains("cuda error: out of memory")
        || low.contains("cuda_error_out_of_memory")
        || low.contains("cudaerrormemoryallocation")
        || (low.contains("oom when allocating tensor") && low.contains("gpu"))
        || low.contains("resource_exhausted: out of memory")
    {
        push_line(&mut s.cuda_oom, line);
        if let Some(rest) = after(line, "Tried to allocate ") {
            let mut w = rest.split_whitespace();
            if let (Some(n), Some(u)) = (w.next(), w.next()) {
                let u = u.trim_end_matches(['.', ',', ';', ')']);
                s.cuda_tried_to_allocate = Some(format!("{n} {u}"));
            }
        }
    }
}

/// NCCL: errors, and the watchdog's collective timeouts with their op and timeout (ms).
fn scan_nccl(s: &mut Scan, line: &str, low: &str) {
    let watchdog = (low.contains("watchdog") && low.contains("timeout"))
        || low.contains("watchdog got stuck")
        || (low.contains("nccl") && low.contains("timed out"));
    if watchdog && (low.contains("nccl") || low.contains("collective")) {
        push_line(&mut s.nccl_timeouts, line);
        if let Some(op) = after(line, "OpType=") {
            let op: String = op
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if !op.is_empty() {
                s.nccl_op = Some(op);
            }
        }
        if let Some(t) = after(line, "Timeout(ms)=") {
            let t: String = t.chars().take_while(char::is_ascii_digit).collect();
            s.nccl_timeout_ms = t.parse().ok().or(s.nccl_timeout_ms);
        }
    } else if low.contains("nccl error")
        || low.contains("ncclsystemerror")
        || low.contains("ncclinternalerror")
        || low.contains("ncclunhandledcudaerror")
        || low.contains("ncclremoteerror")
        || low.contains("ncclinvalidusage")
        || low.contains("ncclinvalidargument")
        || line.contains(" NCCL WARN ")
    {
        push_line(&mut s.nccl_errors, line);
    }
}

/// Missing modules: Python imports, Lmod and Tcl modules (whose names may be on the next
/// line, `lines[i + 1]`).
fn scan_modules(s: &mut Scan, lines: &[&str], i: usize) {
    let line = lines[i];
    if line.contains("No module named ") {
        if let Some(m) = python_module(line) {
            push_unique(&mut s.python_modules, m);
            push_line(&mut s.module_lines, line);
        }
    }
    if line.contains("The following module(s) are unknown") {
        let mut names = all_double_quoted(after(line, "are unknown").unwrap_or_default());
        if names.is_empty() {
            if let Some(next) = lines.get(i + 1) {
                names = all_double_quoted(next);
            }
        }
        for n in names {
            push_unique(&mut s.env_modules, n);
        }
        push_line(&mut s.module_lines, line);
    }
    if let Some(rest) = after(line, "Unable to locate a modulefile for ") {
        let name = quoted(rest, '\'')
            .or_else(|| quoted(rest, '"'))
            .map(str::to_string)
            .unwrap_or_else(|| rest.trim().to_string());
        push_unique(&mut s.env_modules, name);
        push_line(&mut s.module_lines, line);
    }
}

/// A command the shell could not find; the `module` command itself is a module problem.
fn scan_missing_command(s: &mut Scan, line: &str) {
    if let Some((cmd, _)) = missing_command(line) {
        if matches!(cmd.as_str(), "module" | "ml") {
            s.module_command_missing = true;
            push_line(&mut s.module_lines, line);
        } else {
            push_unique(&mut s.commands, cmd);
            push_line(&mut s.command_lines, line);
        }
    }
}

/// Reads the traceback whose header is `lines[start]`: indented frame lines, then the first
/// unindented line is the exception. `None` when the log ends before the exception.
fn traceback_at(lines: &[&str], start: usize) -> Option<Traceback> {
    let indent = lines[start].len() - lines[start].trim_start().len();
    let mut frames: Vec<Vec<&str>> = Vec::new();
    let mut j = start + 1;
    while j < lines.len() {
        let l = lines[j];
        let ind = l.len() - l.trim_start().len();
        if ind <= indent {
            break;
        }
        if l.trim_start().starts_with("File \"") {
            frames.push(vec![l]);
        } else if let Some(f) = frames.last_mut() {
            f.push(l);
        }
        j += 1;
    }
    let exc_line = *lines.get(j)?;
    let t = exc_line.trim();
    let (exception, message) = match t.split_once(':') {
        Some((e, m)) if is_exception_name(e) => (e.to_string(), m.trim().to_string()),
        _ if is_exception_name(t) => (t.to_string(), String::new()),
        _ => return None,
    };
    let mut kept: Vec<String> = vec![quote(lines[start])];
    let skip = frames.len().saturating_sub(TRACEBACK_FRAMES);
    if skip > 0 {
        kept.push(format!("  … {skip} more frame(s)"));
    }
    for f in &frames[skip..] {
        // The `File` line and the source line; drop 3.11's `^^^^` markers.
        for l in f
            .iter()
            .filter(|l| !l.trim().chars().all(|c| "^~ ".contains(c)))
            .take(2)
        {
            kept.push(quote_keep_indent(l));
        }
    }
    kept.push(quote(exc_line));
    let (file, line, function) = frames
        .last()
        .and_then(|f| frame_location(f[0]))
        .map_or((None, None, None), |(a, b, c)| (Some(a), b, c));
    Some(Traceback {
        exception,
        message: quote(&message),
        file,
        line,
        function,
        lines: kept,
    })
}

fn quote_keep_indent(l: &str) -> String {
    let ind = (l.len() - l.trim_start().len()).min(8);
    format!("{}{}", " ".repeat(ind), quote(l))
}

/// `ValueError`, `torch.cuda.OutOfMemoryError`, `KeyboardInterrupt`.
fn is_exception_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 120
        && s.split('.').all(|p| {
            !p.is_empty()
                && p.chars()
                    .next()
                    .is_some_and(|c| c.is_alphabetic() || c == '_')
                && p.chars().all(|c| c.is_alphanumeric() || c == '_')
        })
        && s.rsplit('.').next().is_some_and(|last| {
            last.chars().next().is_some_and(char::is_uppercase)
                || last.ends_with("Error")
                || last.ends_with("Exception")
        })
}

/// `  File "/a/b.py", line 12, in main` → (`/a/b.py`, 12, `main`).
fn frame_location(l: &str) -> Option<(String, Option<u64>, Option<String>)> {
    let rest = l.trim_start().strip_prefix("File \"")?;
    let (file, rest) = rest.split_once('"')?;
    let line = after(rest, "line ").and_then(|r| {
        r.chars()
            .take_while(char::is_ascii_digit)
            .collect::<String>()
            .parse()
            .ok()
    });
    let func = after(rest, ", in ").map(|f| f.trim().to_string());
    Some((file.to_string(), line, func))
}

impl Scan {
    /// Adds a later log's scan (stderr after stdout): lists are joined, the later traceback
    /// wins.
    pub fn merge(&mut self, other: Scan) {
        let lines =
            |a: &mut Vec<String>, b: Vec<String>| b.into_iter().for_each(|l| push_line(a, &l));
        let names =
            |a: &mut Vec<String>, b: Vec<String>| b.into_iter().for_each(|n| push_unique(a, n));
        lines(&mut self.cuda_oom, other.cuda_oom);
        self.cuda_tried_to_allocate = other
            .cuda_tried_to_allocate
            .or(self.cuda_tried_to_allocate.take());
        lines(&mut self.nccl_errors, other.nccl_errors);
        lines(&mut self.nccl_timeouts, other.nccl_timeouts);
        self.nccl_op = other.nccl_op.or(self.nccl_op.take());
        self.nccl_timeout_ms = other.nccl_timeout_ms.or(self.nccl_timeout_ms);
        names(&mut self.python_modules, other.python_modules);
        names(&mut self.env_modules, other.env_modules);
        self.module_command_missing |= other.module_command_missing;
        lines(&mut self.module_lines, other.module_lines);
        names(&mut self.commands, other.commands);
        lines(&mut self.command_lines, other.command_lines);
        if other.traceback.is_some() {
            self.traceback = other.traceback;
        }
    }

    /// The findings, in a fixed order (`LOG_RULES`). Facts carry the lines quoted from the
    /// log.
    pub fn findings(&self) -> Vec<Finding> {
        LOG_RULES
            .iter()
            .filter_map(|&(code, rule)| {
                let (facts, sentence) = rule(self)?;
                let Value::Object(facts) = facts else {
                    return None;
                };
                Some(Finding {
                    code,
                    facts,
                    sentence,
                    site_note: None,
                })
            })
            .collect()
    }

    fn cuda_oom(&self) -> Option<(Value, String)> {
        let first = self.cuda_oom.first()?;
        let facts = json!({
            "source": "log",
            "count": self.cuda_oom.len(),
            "tried_to_allocate": self.cuda_tried_to_allocate,
            "lines": self.cuda_oom,
        });
        let sentence = format!(
            "The job's log shows the GPU ran out of memory{}: \"{}\".",
            self.cuda_tried_to_allocate
                .as_deref()
                .map(|t| format!(" (it tried to allocate {t} more)"))
                .unwrap_or_default(),
            first
        );
        Some((facts, sentence))
    }

    fn nccl_error(&self) -> Option<(Value, String)> {
        if self.nccl_errors.is_empty() && self.nccl_timeouts.is_empty() {
            return None;
        }
        let sentence = match (self.nccl_timeouts.first(), self.nccl_errors.first()) {
            (Some(_), _) => format!(
                "The job's log shows an NCCL collective{} timed out{} in the watchdog: a rank stopped, hung or lost its network.",
                self.nccl_op.as_deref().map(|o| format!(" ({o})")).unwrap_or_default(),
                self.nccl_timeout_ms
                    .map(|t| format!(" after {} s", t / 1000))
                    .unwrap_or_default()
            ),
            (None, Some(e)) => format!("The job's log shows NCCL errors: \"{e}\"."),
            (None, None) => String::new(),
        };
        let facts = json!({
            "source": "log",
            "errors": self.nccl_errors.len(),
            "watchdog_timeouts": self.nccl_timeouts.len(),
            "op_type": self.nccl_op,
            "timeout_ms": self.nccl_timeout_ms,
            "lines": self.nccl_timeouts.iter().chain(&self.nccl_errors).take(MAX_NAMES).collect::<Vec<_>>(),
        });
        Some((facts, sentence))
    }

    fn module_not_found(&self) -> Option<(Value, String)> {
        if self.python_modules.is_empty()
            && self.env_modules.is_empty()
            && !self.module_command_missing
        {
            return None;
        }
        let mut parts = Vec::new();
        if !self.python_modules.is_empty() {
            parts.push(format!(
                "Python could not import {}",
                list(&self.python_modules)
            ));
        }
        if !self.env_modules.is_empty() {
            parts.push(format!(
                "`module load` does not know {} (check `module spider`/`module avail`)",
                list(&self.env_modules)
            ));
        }
        if self.module_command_missing {
            parts.push("the `module` command does not exist in the job's shell (start the script with `#!/bin/bash -l`, or source the site's modules init)".into());
        }
        let mut modules = self.python_modules.clone();
        modules.extend(self.env_modules.iter().cloned());
        let facts = json!({
            "source": "log",
            "modules": modules,
            "python_modules": self.python_modules,
            "environment_modules": self.env_modules,
            "module_command_missing": self.module_command_missing,
            "lines": self.module_lines,
        });
        let sentence = format!("The job's log shows missing modules: {}.", parts.join("; "));
        Some((facts, sentence))
    }

    fn traceback(&self) -> Option<(Value, String)> {
        let tb = self.traceback.as_ref()?;
        let at = match (&tb.file, tb.line) {
            (Some(f), Some(n)) => format!(
                " at {f}:{n}{}",
                tb.function
                    .as_deref()
                    .map(|f| format!(" in {f}"))
                    .unwrap_or_default()
            ),
            _ => String::new(),
        };
        let facts = json!({
            "source": "log",
            "exception": tb.exception,
            "message": tb.message,
            "file": tb.file,
            "line": tb.line,
            "function": tb.function,
            "lines": tb.lines,
        });
        let sentence = format!(
            "The last Python traceback in the log ends in {}{}{}.",
            tb.exception,
            if tb.message.is_empty() {
                String::new()
            } else {
                format!(": {}", tb.message)
            },
            at
        );
        Some((facts, sentence))
    }

    fn command_not_found(&self) -> Option<(Value, String)> {
        if self.commands.is_empty() {
            return None;
        }
        let facts = json!({
            "source": "log",
            "commands": self.commands,
            "lines": self.command_lines,
        });
        let sentence = format!(
            "The job's log shows the shell could not find {} (not installed, not on PATH, or its module not loaded).",
            list(&self.commands)
        );
        Some((facts, sentence))
    }
}

/// One rule per code a log can show, in the order the findings are listed: each gives the
/// finding's facts and sentence, or `None` when the log does not show it.
type LogRule = fn(&Scan) -> Option<(Value, String)>;
const LOG_RULES: [(&str, LogRule); 5] = [
    ("cuda_oom", Scan::cuda_oom),
    ("nccl_error", Scan::nccl_error),
    ("module_not_found", Scan::module_not_found),
    ("traceback", Scan::traceback),
    ("command_not_found", Scan::command_not_found),
];

fn list(names: &[String]) -> String {
    names
        .iter()
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Adds the log's findings to the report's: a code already there (`command_not_found` from
/// exit code 127) gets the log's facts and sentence joined to it, not a second entry.
pub fn merge_findings(into: &mut Vec<Finding>, from_log: Vec<Finding>) {
    for f in from_log {
        match into.iter_mut().find(|g| g.code == f.code) {
            Some(g) => {
                for (k, v) in f.facts {
                    if k != "source" {
                        g.facts.entry(k).or_insert(v);
                    }
                }
                g.sentence = match (g.code, g.facts.get("exit_code"), g.facts.get("commands")) {
                    ("command_not_found", Some(code), Some(Value::Array(cmds))) => format!(
                        "Exit code {code}: the shell could not find {} (not installed, not on PATH, or its module not loaded).",
                        list(&cmds.iter().filter_map(|c| c.as_str().map(String::from)).collect::<Vec<_>>())
                    ),
                    _ => format!("{} {}", g.sentence, f.sentence),
                };
            }
            None => into.push(f),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars() -> PatternVars {
        PatternVars {
            job_id: 1234,
            array_job_id: None,
            array_task_id: None,
            job_name: "train".into(),
            node: "gpu07".into(),
            user: "alice".into(),
        }
    }

    #[test]
    fn patterns_expand_like_slurmstepd() {
        let v = vars();
        assert_eq!(expand("slurm-%j.out", &v), "slurm-1234.out");
        assert_eq!(expand("%x-%J.%N.%u.log", &v), "train-1234.gpu07.alice.log");
        assert_eq!(expand("100%%-%j", &v), "100%-1234");
        assert_eq!(expand("%A_%a", &v), "1234_4294967294");
        assert_eq!(expand("run\\%j.out", &v), "run%j.out");
        assert_eq!(expand("%q%", &v), "%q%");
        let a = PatternVars {
            job_id: 1240,
            array_job_id: Some(1234),
            array_task_id: Some(7),
            ..vars()
        };
        assert_eq!(expand(default_pattern(true), &a), "slurm-1234_7.out");
        assert_eq!(expand("%A_%3a-%j", &a), "1234_007-1240");
    }

    #[test]
    fn submit_lines() {
        let o = parse_submit_line("sbatch --parsable --job-name=x --output=/tmp/a/out-%j.txt --chdir=/tmp/a --mem=400M /tmp/a/job.sh -o nope").unwrap();
        assert_eq!(o.output.as_deref(), Some("/tmp/a/out-%j.txt"));
        assert_eq!(o.chdir.as_deref(), Some("/tmp/a"));
        assert_eq!(o.error, None);
        let o = parse_submit_line("sbatch -J x -o log.%j -e err.%j job.sh").unwrap();
        assert_eq!(
            (o.output.as_deref(), o.error.as_deref()),
            (Some("log.%j"), Some("err.%j"))
        );
        let o = parse_submit_line("/usr/bin/sbatch -olog -p debug --wrap sleep 40").unwrap();
        assert_eq!(o.output.as_deref(), Some("log"));
        assert!(o.wrap);
        assert_eq!(parse_submit_line("srun -o x hostname"), None);
    }

    #[test]
    fn command_not_found_shapes() {
        for (l, cmd, n) in [
            (
                "/var/spool/slurmd/job00042/slurm_script: line 7: nvidia-smi: command not found",
                "nvidia-smi",
                Some(7),
            ),
            ("bash: line 3: foo: command not found", "foo", Some(3)),
            ("bash: foo: command not found", "foo", None),
            (
                "/var/spool/slurmd/job42/slurm_script: 5: foo: not found",
                "foo",
                Some(5),
            ),
            ("zsh: command not found: foo", "foo", None),
            (
                "slurmstepd: error: execve(): ./a.out: No such file or directory",
                "./a.out",
                None,
            ),
        ] {
            assert_eq!(missing_command(l), Some((cmd.to_string(), n)), "{l}");
        }
        for l in [
            "config: not found",
            "the answer: command not found in the index, retrying",
            "ERROR: file x: not found",
        ] {
            assert_eq!(missing_command(l), None, "{l}");
        }
    }

    #[test]
    fn exception_names() {
        assert!(is_exception_name("ValueError"));
        assert!(is_exception_name("torch.cuda.OutOfMemoryError"));
        assert!(is_exception_name("KeyboardInterrupt"));
        assert!(!is_exception_name("During handling of the above exception"));
        assert!(!is_exception_name("epoch 3"));
    }

    #[test]
    fn quoting_is_bounded_and_clean() {
        let q = quote(&format!("\u{1b}[31mred\u{1b}[0m {}", "x".repeat(1000)));
        assert!(q.starts_with("red x"));
        assert_eq!(q.chars().count(), MAX_QUOTED_CHARS + 1);
    }

    #[test]
    fn merge_joins_exit_127() {
        let mut base = vec![Finding {
            code: "command_not_found",
            facts: json!({"exit_code": 127}).as_object().unwrap().clone(),
            sentence: "Exit code 127.".into(),
            site_note: None,
        }];
        let s = scan("bash: line 2: foo: command not found\n");
        merge_findings(&mut base, s.findings());
        assert_eq!(base.len(), 1);
        assert_eq!(base[0].facts["commands"], json!(["foo"]));
        assert!(base[0].sentence.contains("`foo`"));
    }
}
