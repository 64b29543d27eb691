//! The Rhai sandbox: a raw engine (no file system, no module imports, no `eval`) with the
//! standard library and limits on operations, call depth, expression depth, string,
//! array and map sizes, plus a wall-clock deadline checked from the progress callback.

mod built;
mod cgroup;
mod data_size;
pub mod filter;
pub mod forward;
mod own_folder;
pub mod private_dir;
pub mod process;
mod remove;
pub mod seccomp;
mod text;
pub mod thread;
mod visited;

use std::time::Instant;

use rhai::{Dynamic, Engine, packages::Package};

/// Sandbox limits; every one is configurable per agent (`sandbox:`).
#[derive(Debug, Clone, PartialEq)]
pub struct SandboxLimits {
    pub max_operations: u64,
    pub max_call_depth: usize,
    pub max_expr_depth: usize,
    pub max_string_bytes: usize,
    pub max_array_len: usize,
    pub max_map_len: usize,
}

impl Default for SandboxLimits {
    fn default() -> Self {
        SandboxLimits {
            max_operations: 50_000_000,
            max_call_depth: 64,
            max_expr_depth: 64,
            max_string_bytes: 4 * 1024 * 1024,
            // Rhai re-measures a container after every change, so filling one costs
            // time quadratic in its size: 10,000 keeps a runaway fill under a second.
            max_array_len: 10_000,
            max_map_len: 10_000,
        }
    }
}

/// Marker a progress callback returns when the wall-clock deadline passes.
pub const DEADLINE: &str = "deadline";

/// Marker a progress callback returns once the run is cancelled (a Stop, shutdown).
pub const CANCELLED: &str = "cancelled";

/// Marker the progress callback returns past `max_operations` (Rhai's own count misses
/// the operations of closures that native functions call).
pub const OPERATIONS: &str = "too many operations";

/// The marker ([`DEADLINE`], [`CANCELLED`]) `e` was stopped with, looking through the
/// function calls (closures included) it was raised in.
pub fn stopped_by(e: &rhai::EvalAltResult) -> Option<String> {
    match e {
        rhai::EvalAltResult::ErrorTerminated(v, _) => Some(v.to_string()),
        rhai::EvalAltResult::ErrorInFunctionCall(_, _, inner, _) => stopped_by(inner),
        _ => None,
    }
}

/// A sandboxed engine for one script run. With a `deadline`, evaluation stops once it
/// passes; with `cancel`, once it is cancelled: the script's thread is not left running
/// (and calling tools) after its run has ended.
pub fn engine(
    limits: &SandboxLimits,
    deadline: Option<Instant>,
    cancel: Option<tokio_util::sync::CancellationToken>,
) -> Engine {
    let mut e = bare(limits);
    // `map`, `zip` and `for_each` build from closures' results, which Rhai measures
    // one by one and the whole only at the end: these measure as they go.
    built::register(&mut e, limits);
    visited::register(&mut e, limits);
    text::register(&mut e, limits);
    // Rhai measures a container when a function changes it, but not when an index
    // assignment adds a key to a map (`m[k] = v`), so a loop could grow a map without
    // bound. Every read of a container variable measures it against the same limits.
    //
    // Rhai does not count the operations of a closure a native function calls
    // (`a.map(|x| b.filter(|y| y == x))` ran 810,000 closures past a 100,000-operation
    // limit and past the deadline, since the progress callback is not called either).
    // Every variable read is counted here as well, closures' included, against the same
    // operation limit and deadline: a read is at least one operation anywhere else.
    //
    // Rhai's own measure counts a function pointer as nothing, so what curried
    // arguments and closures' captured variables hold is measured here too
    // (`data_size`).
    let reads = std::sync::atomic::AtomicU64::new(0);
    let max_operations = limits.max_operations;
    let measured = limits.clone();
    // Why evaluation must stop now, checked every 4096 operations or reads: the clock
    // and the token are cheap, but not free. Once it has said stop it says so at every
    // operation and read after (`halt`): a script that catches the stop in a closure
    // (`try { a.map(...) } catch {}`) meets it again at its next step, not 4096 later.
    let halt: std::sync::Arc<std::sync::OnceLock<&'static str>> = Default::default();
    let halted = halt.clone();
    let stopped = move || {
        if let Some(why) = halted.get() {
            return Some(*why);
        }
        let why = if deadline.is_some_and(|d| Instant::now() >= d) {
            Some(DEADLINE)
        } else if cancel.as_ref().is_some_and(|c| c.is_cancelled()) {
            Some(CANCELLED)
        } else {
            None
        };
        if let Some(why) = why {
            let _ = halted.set(why);
        }
        why
    };
    let terminated = |why: &'static str| -> Box<rhai::EvalAltResult> {
        rhai::EvalAltResult::ErrorTerminated(Dynamic::from(why), rhai::Position::NONE).into()
    };
    let on_var_halt = halt.clone();
    let on_var_stopped = stopped.clone();
    #[allow(deprecated)] // `on_var` is marked volatile, not deprecated.
    e.on_var(move |name, _, ctx| {
        if let Some(why) = on_var_halt.get() {
            return Err(terminated(why));
        }
        let n = reads.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        if n > max_operations {
            return Err(rhai::EvalAltResult::ErrorTooManyOperations(rhai::Position::NONE).into());
        }
        if n.is_multiple_of(4096)
            && let Some(why) = on_var_stopped()
        {
            return Err(terminated(why));
        }
        if let Some(value) = ctx.scope().get(name)
            && data_size::worth_measuring(value)
        {
            data_size::check(value, &measured)?;
        }
        Ok(None)
    });
    // Rhai hands the callback the count of the frame it runs in, and a closure called
    // from a native function (`some`, `sort`) runs in a copy whose count is thrown
    // away: nested closures that read no variable ran for hours without reaching the
    // limit or a multiple of 4096. Every call is counted here instead.
    let ops = std::sync::atomic::AtomicU64::new(0);
    let on_progress_stopped = stopped.clone();
    let on_progress_halt = halt.clone();
    e.on_progress(move |_| {
        if let Some(why) = on_progress_halt.get() {
            return Some(Dynamic::from(*why));
        }
        let n = ops.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        if n > max_operations {
            let _ = on_progress_halt.set(OPERATIONS);
            return Some(Dynamic::from(OPERATIONS));
        }
        match n.is_multiple_of(4096) {
            true => on_progress_stopped().map(Dynamic::from),
            false => None,
        }
    });
    // The standard library's `sleep` blocks the thread where no check runs: this one
    // wakes every 50 ms to check the deadline and the run's cancellation.
    let sleeping = stopped.clone();
    let sleep = move |seconds: f64| -> Result<(), Box<rhai::EvalAltResult>> {
        // NaN sleeps for no time (`clamp` passes it through, and a NaN duration panics).
        let seconds = if seconds.is_nan() {
            0.0
        } else {
            seconds.clamp(0.0, 86_400.0)
        };
        let until = Instant::now() + std::time::Duration::from_secs_f64(seconds);
        loop {
            if let Some(why) = sleeping() {
                return Err(terminated(why));
            }
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(());
            }
            std::thread::sleep(left.min(std::time::Duration::from_millis(50)));
        }
    };
    let sleep_int = sleep.clone();
    e.register_fn("sleep", move |seconds: rhai::INT| sleep_int(seconds as f64));
    e.register_fn("sleep", sleep);
    e
}

/// Deepest nesting of a value handed out of the sandbox (a tool's arguments, a
/// script's result): steward turns it into JSON, and walks that, on threads with
/// ordinary stacks.
pub const MAX_HANDED_DEPTH: usize = 64;

/// `Err(ErrorDataTooLarge)` when `value` nests arrays and maps deeper than
/// [`MAX_HANDED_DEPTH`].
pub fn check_depth(value: &Dynamic) -> Result<(), Box<rhai::EvalAltResult>> {
    fn deeper(v: &Dynamic, left: usize) -> bool {
        if let Some(a) = v.read_lock::<rhai::Array>() {
            return left == 0 || a.iter().any(|x| deeper(x, left - 1));
        }
        if let Some(m) = v.read_lock::<rhai::Map>() {
            return left == 0 || m.values().any(|x| deeper(x, left - 1));
        }
        false
    }
    match deeper(value, MAX_HANDED_DEPTH) {
        true => Err(rhai::EvalAltResult::ErrorDataTooLarge(
            format!("Nesting of a value handed out of the script (more than {MAX_HANDED_DEPTH} levels)"),
            rhai::Position::NONE,
        )
        .into()),
        false => Ok(()),
    }
}

/// The raw engine with the standard library and `limits`, without the per-run checks
/// of [`engine`]: for engines that run many short evaluations and allow no loops.
pub(crate) fn bare(limits: &SandboxLimits) -> Engine {
    let mut e = Engine::new_raw();
    e.register_global_module(rhai::packages::StandardPackage::new().as_shared_module());
    // `curry` copies its arguments into the pointer, and copying a pointer copies all
    // it carries: a pointer curried with itself 17 times was 131,072 nodes, which
    // `a.pad(10000, f)` copied into 100 GB, and one curried onto `this` 300,000 times
    // overflowed the stack when dropped. Closures capture without it (shared values).
    for symbol in ["eval", "import", "export", "print", "debug", "curry"] {
        e.disable_symbol(symbol);
    }
    e.set_max_operations(limits.max_operations)
        .set_max_call_levels(limits.max_call_depth)
        .set_max_expr_depths(limits.max_expr_depth, limits.max_expr_depth)
        .set_max_string_size(limits.max_string_bytes)
        .set_max_array_size(limits.max_array_len)
        .set_max_map_size(limits.max_map_len);
    e
}

/// `scripts/x.rhai:12:5: <what went wrong>`, naming the limit when one was hit.
pub fn describe(path: &str, e: &rhai::EvalAltResult) -> String {
    let pos = e.position();
    let what = match e {
        rhai::EvalAltResult::ErrorTooManyOperations(_) => {
            "sandbox limit hit: too many operations (sandbox.max_operations)".to_string()
        }
        e if stopped_by(e).as_deref() == Some(OPERATIONS) => {
            "sandbox limit hit: too many operations (sandbox.max_operations)".to_string()
        }
        rhai::EvalAltResult::ErrorStackOverflow(_) => {
            "sandbox limit hit: call depth (sandbox.max_call_depth)".to_string()
        }
        rhai::EvalAltResult::ErrorDataTooLarge(what, _) => format!(
            "sandbox limit hit: {what} too large (sandbox.max_string_bytes / max_array_len / max_map_len)"
        ),
        rhai::EvalAltResult::ErrorRuntime(v, _) => format!("runtime error: {v}"),
        other => other.to_string(),
    };
    match (pos.line(), pos.position()) {
        (Some(l), Some(c)) => format!("{path}:{l}:{c}: {what}"),
        (Some(l), None) => format!("{path}:{l}: {what}"),
        _ => format!("{path}: {what}"),
    }
}

/// Compiles a script, returning `(line, column, message)` for a syntax error.
pub fn check(source: &str, limits: &SandboxLimits) -> Result<(), (usize, usize, String)> {
    let engine = engine(limits, None, None);
    engine.compile(source).map(|_| ()).map_err(|e| {
        let pos = e.position();
        (
            pos.line().unwrap_or(1),
            pos.position().unwrap_or(1),
            e.err_type().to_string(),
        )
    })
}

/// Tool names passed as string literals to `tool(...)`, for validation.
pub fn literal_tools(source: &str) -> Vec<(usize, usize, String)> {
    let Ok(re) = regex::Regex::new(r#"\btool\(\s*"([^"]+)""#) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (i, line) in source.lines().enumerate() {
        let code = line.split("//").next().unwrap_or_default();
        for c in re.captures_iter(code) {
            if let Some(m) = c.get(1) {
                out.push((i + 1, m.start() + 1, m.as_str().to_string()));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(src: &str, limits: &SandboxLimits) -> Result<Dynamic, String> {
        // A deadline far past what the operation limits allow, so a loaded machine's
        // slowness never stops a script before the limit under test does.
        engine(
            limits,
            Some(Instant::now() + std::time::Duration::from_secs(60)),
            None,
        )
        .eval::<Dynamic>(src)
        .map_err(|e| match stopped_by(&e).as_deref() {
            Some(OPERATIONS) => "Too many operations (counted by the progress callback)".into(),
            _ => e.to_string(),
        })
    }

    #[test]
    fn limits_stop_runaway_scripts() {
        let l = SandboxLimits {
            max_operations: 100_000,
            ..SandboxLimits::default()
        };
        assert!(run("loop {}", &l).unwrap_err().contains("Too many operations"));
        // Closures a native function calls count too.
        let nested = "let a = []; a.pad(900, 0); let b = a; a.map(|x| b.filter(|y| y == x).len()).len()";
        let err = run(nested, &l).unwrap_err();
        assert!(err.contains("Too many operations"), "{err}");
        let l = SandboxLimits::default();
        assert!(
            run("fn f(n) { f(n + 1) } f(0)", &l)
                .unwrap_err()
                .contains("Stack overflow")
        );
        let small = SandboxLimits {
            max_string_bytes: 1000,
            ..SandboxLimits::default()
        };
        assert!(
            run(r#"let s = "x"; loop { s += s; }"#, &small)
                .unwrap_err()
                .to_lowercase()
                .contains("length of string")
        );
        let arr = SandboxLimits {
            max_array_len: 1000,
            ..SandboxLimits::default()
        };
        assert!(
            run("let a = []; loop { a.push(1); }", &arr)
                .unwrap_err()
                .to_lowercase()
                .contains("size of array")
        );
        assert!(run(r#"eval("1")"#, &l).is_err());
        assert!(run(r#"import "std" as s;"#, &l).is_err());
        assert_eq!(
            run("let a = [1, 2, 3]; a.len() + 40", &l)
                .unwrap()
                .as_int()
                .unwrap(),
            43
        );
    }

    #[test]
    fn runaway_arrays_and_maps_hit_their_size_limits_not_the_deadline() {
        for src in [
            "let a = []; loop { a.push(1); }",
            "let m = #{}; let i = 0; loop { m[`k${i}`] = i; i += 1; }",
            "let a = []; loop { let b = []; for j in 0..100 { b.push(j); } a.push(b); }",
            r#"let a = []; let s = "x"; for i in 0..21 { s += s; } loop { a.push(s + a.len()); }"#,
        ] {
            // Smaller containers than the defaults: every read of a container is
            // measured whole (`data_size`), which a debug build does slowly.
            let limits = SandboxLimits {
                max_array_len: 2_000,
                max_map_len: 2_000,
                ..SandboxLimits::default()
            };
            let e = engine(
                &limits,
                Some(Instant::now() + std::time::Duration::from_secs(30)),
                None,
            );
            let err = e.eval::<Dynamic>(src).unwrap_err();
            assert!(
                matches!(*err, rhai::EvalAltResult::ErrorDataTooLarge(..)),
                "{src}: {err}"
            );
        }
    }

    #[test]
    fn the_deadline_stops_an_infinite_loop() {
        let started = Instant::now();
        let e = engine(
            &SandboxLimits {
                max_operations: 0,
                ..SandboxLimits::default()
            },
            Some(Instant::now() + std::time::Duration::from_millis(200)),
            None,
        );
        let err = e.eval::<Dynamic>("loop {}").unwrap_err();
        assert!(matches!(*err, rhai::EvalAltResult::ErrorTerminated(..)), "{err}");
        assert!(started.elapsed() < std::time::Duration::from_secs(2));
    }

    /// A cancelled run's script stops, in a plain loop and in closures a native function
    /// calls (where Rhai calls no progress callback): its thread does not run on.
    #[test]
    fn cancelling_stops_a_running_script() {
        for src in [
            "loop {}",
            "let a = []; a.pad(1000, 0); loop { a.map(|x| x + 1); }",
        ] {
            let cancel = tokio_util::sync::CancellationToken::new();
            let e = engine(
                &SandboxLimits {
                    max_operations: u64::MAX,
                    ..SandboxLimits::default()
                },
                Some(Instant::now() + std::time::Duration::from_secs(60)),
                Some(cancel.clone()),
            );
            let started = Instant::now();
            let canceller = std::thread::spawn(move || {
                std::thread::sleep(std::time::Duration::from_millis(100));
                cancel.cancel();
            });
            let err = e.eval::<Dynamic>(src).unwrap_err();
            canceller.join().unwrap();
            assert_eq!(stopped_by(&err).as_deref(), Some(CANCELLED), "{src}: {err}");
            assert!(started.elapsed() < std::time::Duration::from_secs(10), "{src}");
        }
    }

    /// `curry` is refused when a script is compiled; closures, which capture without
    /// it, still work.
    #[test]
    fn curry_is_refused_and_closures_still_capture() {
        let l = SandboxLimits::default();
        for src in [
            r#"let f = Fn("x"); f = f.curry(f);"#,
            r#"fn k(a) { a } let f = curry(Fn("k"), 1);"#,
        ] {
            let err = engine(&l, None, None).compile(src).unwrap_err().to_string();
            assert!(
                err.contains("reserved keyword 'curry' is disabled")
                    || err.contains("Expecting name of a property"),
                "{src}: {err}"
            );
        }
        assert_eq!(
            run("let x = 5; let f = |y| x + y; x = 7; f.call(1)", &l).map(|d| d.to_string()),
            Ok("8".to_string())
        );
    }

    /// `sleep` wakes for the deadline and for a cancellation.
    #[test]
    fn sleep_stops_at_the_deadline_and_on_cancel() {
        let started = Instant::now();
        let e = engine(
            &SandboxLimits::default(),
            Some(Instant::now() + std::time::Duration::from_millis(200)),
            None,
        );
        let err = e.eval::<Dynamic>("sleep(1000000)").unwrap_err();
        assert_eq!(stopped_by(&err).as_deref(), Some(DEADLINE), "{err}");
        let cancel = tokio_util::sync::CancellationToken::new();
        let e = engine(&SandboxLimits::default(), None, Some(cancel.clone()));
        let canceller = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(100));
            cancel.cancel();
        });
        let err = e.eval::<Dynamic>("sleep(1000000.5)").unwrap_err();
        canceller.join().unwrap();
        assert_eq!(stopped_by(&err).as_deref(), Some(CANCELLED), "{err}");
        assert!(started.elapsed() < std::time::Duration::from_secs(10));
        // A short one just sleeps.
        assert!(
            engine(&SandboxLimits::default(), None, None)
                .eval::<Dynamic>("sleep(0.01); 1")
                .is_ok()
        );
    }

    /// A stop raised inside a closure a native function calls cannot be caught: it is
    /// passed on unwrapped, and once raised it is raised again at every step.
    #[test]
    fn a_stop_inside_a_closure_cannot_be_caught() {
        let started = Instant::now();
        for src in [
            "loop { try { [0].map(|x| { loop { } }) } catch {} }",
            "loop { try { [0, 1].filter(|x| { loop { } }) } catch {} }",
        ] {
            let e = engine(
                &SandboxLimits {
                    max_operations: u64::MAX,
                    ..SandboxLimits::default()
                },
                Some(Instant::now() + std::time::Duration::from_millis(200)),
                None,
            );
            let err = e.eval::<Dynamic>(src).unwrap_err();
            assert_eq!(stopped_by(&err).as_deref(), Some(DEADLINE), "{src}: {err}");
        }
        assert!(started.elapsed() < std::time::Duration::from_secs(20));
    }

    /// Closures a native function calls, nested and reading no variable, still count
    /// every operation: Rhai counted them on copies it threw away.
    #[test]
    fn nested_closures_that_read_no_variable_hit_the_operation_limit() {
        let l = SandboxLimits {
            max_operations: 100_000,
            ..SandboxLimits::default()
        };
        let mut src = String::from("fn l0() { false }\n");
        for i in 1..=6 {
            src.push_str(&format!(
                "fn l{i}() {{ [0,0,0,0,0,0,0,0,0,0].some(|| l{}()) }}\n",
                i - 1
            ));
        }
        src.push_str("l6()");
        let err = engine(&l, None, None).eval::<Dynamic>(&src).unwrap_err();
        assert_eq!(stopped_by(&err).as_deref(), Some(OPERATIONS), "{err}");
        assert!(describe("s.rhai", &err).contains("too many operations (sandbox.max_operations)"));
    }

    /// A value nested as deep as the item limits allow is walked on a script's thread
    /// without overflowing its stack, and is refused before it leaves the sandbox.
    #[tokio::test]
    async fn deep_nesting_stays_on_the_scripts_thread() {
        let printed = thread::run("deep", || {
            let src = "fn deep() { for i in 0..9999 { this = [this.take()]; } this.to_string().len() }
                       let v = 0; v.deep()";
            engine(&SandboxLimits::default(), None, None)
                .eval::<Dynamic>(src)
                .map(|d| d.to_string())
                .map_err(|e| e.to_string())
        })
        .await
        .unwrap();
        assert_eq!(printed, Ok("19999".to_string()), "[[...0...]] printed whole");
        let deep = thread::run("deep", || {
            let src = "fn deep() { for i in 0..100 { this = [this.take()]; } this } let v = 0; v.deep()";
            let v = engine(&SandboxLimits::default(), None, None)
                .eval::<Dynamic>(src)
                .unwrap();
            (check_depth(&v).map_err(|e| e.to_string()), v.is_array())
        })
        .await
        .unwrap();
        assert!(deep.1);
        assert!(deep.0.unwrap_err().contains("more than 64 levels"));
        let mut shallow = Dynamic::from(1_i64);
        for _ in 0..MAX_HANDED_DEPTH {
            shallow = Dynamic::from_array(vec![shallow]);
        }
        assert!(check_depth(&shallow).is_ok());
    }
}
