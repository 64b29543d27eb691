//! The size of a Rhai value, counting what Rhai's own check leaves out.
//!
//! Rhai measures arrays, maps, strings and blobs, but counts a function pointer as
//! nothing: its curried arguments (`Fn("k").curry(s)`) and a closure's captured
//! variables (curried shared values) are unmeasured, so an array of 10,000 curried
//! 2 MiB strings, or one pointer curried 10,000 times, measured as 10,000 items and no
//! bytes while holding 20 GiB. [`check`] walks those too, against the same limits.

use rhai::{Dynamic, EvalAltResult, FnPtr, ImmutableString, Position};

use super::SandboxLimits;

/// Values visited at most per check: legitimate data stays far below it (arrays and
/// maps are capped at 10,000 items in all by default).
const MAX_VISITS: usize = 200_000;

/// Deepest nesting walked: the walk recurses, and a script's thread has a 2 MiB stack.
const MAX_DEPTH: usize = 128;

#[derive(Default)]
struct Sizes {
    array_items: usize,
    map_items: usize,
    string_bytes: usize,
    visits: usize,
    /// Shared values (closures' captured variables) already counted: each counts once,
    /// however many closures hold it, and a value that holds itself (`let f = || x;
    /// x = f;`) is not walked around forever.
    shared: std::collections::HashSet<usize>,
    /// Shared values are not walked at all ([`Tally::of`]).
    skip_shared: bool,
}

/// `Err(ErrorDataTooLarge)` when `value`, with everything it carries, passes `limits`.
pub(crate) fn check(value: &Dynamic, limits: &SandboxLimits) -> Result<(), Box<EvalAltResult>> {
    let mut sizes = Sizes::default();
    let whole = add(value, &mut sizes, 0);
    verdict(whole, &sizes, limits)
}

/// `Err(ErrorDataTooLarge)` naming the first limit `sizes` passes, or the walk's bound
/// when it was not `whole`.
fn verdict(whole: bool, sizes: &Sizes, limits: &SandboxLimits) -> Result<(), Box<EvalAltResult>> {
    let too_large = |what: &str| Err(EvalAltResult::ErrorDataTooLarge(what.into(), Position::NONE).into());
    if !whole {
        return too_large("Size of data");
    }
    if sizes.string_bytes > limits.max_string_bytes {
        return too_large("Length of string");
    }
    if sizes.array_items > limits.max_array_len {
        return too_large("Size of array");
    }
    if sizes.map_items > limits.max_map_len {
        return too_large("Size of object map");
    }
    Ok(())
}

/// A running measure of a container being built or changed element by element, against
/// the sandbox's limits (`sandbox::built`): what each element adds, counted once.
pub(crate) struct Tally {
    sizes: Sizes,
    limits: SandboxLimits,
}

impl Tally {
    pub(crate) fn new(limits: &SandboxLimits) -> Tally {
        Tally {
            sizes: Sizes::default(),
            limits: limits.clone(),
        }
    }

    /// The measure of `value` alone (not checked), without shared values (closures'
    /// captured variables): what [`Tally::replace`] may take away when `value` is
    /// replaced. A shared value stays counted once in the running measure, which may
    /// then count more than is held, never less (taken away once per element that
    /// shares it, the measure could fall while memory grows).
    pub(crate) fn of(limits: &SandboxLimits, value: &Dynamic) -> Tally {
        let mut t = Tally::new(limits);
        t.sizes.skip_shared = true;
        add(value, &mut t.sizes, 0);
        t
    }

    /// Adds one element of an array and what it holds; `Err` once past the limits.
    pub(crate) fn add_item(&mut self, value: &Dynamic) -> Result<(), Box<EvalAltResult>> {
        self.sizes.array_items += 1;
        self.walk(value)
    }

    /// Adds one entry of a map and what it holds (keys are not counted, as [`check`]
    /// does not count them).
    pub(crate) fn add_entry(&mut self, value: &Dynamic) -> Result<(), Box<EvalAltResult>> {
        self.sizes.map_items += 1;
        self.walk(value)
    }

    /// Counts `now` in place of `before` (an element changed in place); `Err` once past
    /// the limits.
    pub(crate) fn replace(&mut self, before: &Tally, now: &Dynamic) -> Result<(), Box<EvalAltResult>> {
        self.sizes.array_items = self.sizes.array_items.saturating_sub(before.sizes.array_items);
        self.sizes.map_items = self.sizes.map_items.saturating_sub(before.sizes.map_items);
        self.sizes.string_bytes = self.sizes.string_bytes.saturating_sub(before.sizes.string_bytes);
        self.walk(now)
    }

    fn walk(&mut self, value: &Dynamic) -> Result<(), Box<EvalAltResult>> {
        // The visit bound is per value walked: the counts bound the whole.
        self.sizes.visits = 0;
        let whole = add(value, &mut self.sizes, 0);
        verdict(whole, &self.sizes, &self.limits)
    }
}

/// Adds `value` to `sizes`; `false` once [`MAX_VISITS`] is passed. A shared value being
/// written right now (Rhai gives up on its lock) is skipped: it is measured again when
/// next read.
fn add(value: &Dynamic, sizes: &mut Sizes, depth: usize) -> bool {
    sizes.visits += 1;
    if sizes.visits > MAX_VISITS || depth > MAX_DEPTH {
        return false;
    }
    if value.is_shared() {
        if sizes.skip_shared {
            return true;
        }
        return match value.read_lock::<Dynamic>() {
            Some(inner) => {
                let cell = std::ptr::from_ref::<Dynamic>(&inner) as usize;
                !sizes.shared.insert(cell) || add(&inner, sizes, depth + 1)
            }
            None => true,
        };
    }
    if let Some(array) = value.read_lock::<rhai::Array>() {
        sizes.array_items += array.len();
        return array.iter().all(|v| add(v, sizes, depth + 1));
    }
    if let Some(map) = value.read_lock::<rhai::Map>() {
        sizes.map_items += map.len();
        return map.values().all(|v| add(v, sizes, depth + 1));
    }
    if let Some(s) = value.read_lock::<ImmutableString>() {
        sizes.string_bytes += s.len();
        return true;
    }
    if let Some(blob) = value.read_lock::<rhai::Blob>() {
        sizes.array_items += 1 + blob.len();
        return true;
    }
    if let Some(f) = value.read_lock::<FnPtr>() {
        // Each curried value is an item, as in an array: copying the pointer copies it.
        sizes.array_items += f.curry().len();
        return f.iter_curry().all(|v| add(v, sizes, depth + 1));
    }
    true
}

/// Whether a variable's value needs measuring on read: containers, and what can carry
/// them (function pointers, shared values).
pub(crate) fn worth_measuring(value: &Dynamic) -> bool {
    value.is_shared() || value.is_array() || value.is_map() || value.is_fnptr()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> SandboxLimits {
        SandboxLimits {
            max_string_bytes: 1000,
            max_array_len: 100,
            max_map_len: 100,
            ..SandboxLimits::default()
        }
    }

    fn run(script: &str) -> Result<Dynamic, String> {
        let engine = super::super::engine(&limits(), None, None);
        engine.eval::<Dynamic>(script).map_err(|e| e.to_string())
    }

    #[test]
    fn curried_arguments_and_captured_variables_count_against_the_limits() {
        // `curry` is refused (its copies are deep); closures capture instead, and each
        // captured value counts as an item, as in an array.
        for src in [
            r#"fn k(x) { x } let f = Fn("k").curry(1);"#,
            r#"let f = curry(Fn("k"), 1);"#,
        ] {
            assert!(run(src).is_err(), "{src}");
        }
        let closures = |n: usize| {
            run(&format!(
                "let a = []; for i in 0..{n} {{ let t = i; a.push(|| t); }} let b = a; b.len()"
            ))
        };
        assert_eq!(closures(40).map(|d| d.to_string()), Ok("40".to_string()));
        let many = closures(60);
        assert!(many.as_ref().is_err_and(|e| e.contains("too large")), "{many:?}");
        // Closures capturing a large string each.
        let captured = run(r#"fn big() { let s = "x"; s.pad(600, "y"); s }
               let a = [];
               for i in 0..100 { let t = big() + i; a.push(|| t); }
               a.len()"#);
        assert!(
            captured.as_ref().is_err_and(|e| e.contains("too large")),
            "{captured:?}"
        );
    }

    /// A value that holds itself through a closure is walked once, not around and
    /// around (that overflowed the stack and aborted the process); closures sharing one
    /// captured value count it once.
    #[test]
    fn values_holding_themselves_and_shared_captures_count_once() {
        let cyclic = run("let x = 0; let f = || x; x = f; let y = x; 1");
        assert_eq!(cyclic.map(|d| d.as_int().unwrap_or(-1)), Ok(1));
        let map = run("let m = #{}; let f = || m; m.f = f; let n = m; 2");
        assert_eq!(map.map(|d| d.as_int().unwrap_or(-1)), Ok(2));
        let shared = run(r#"fn big() { let s = "x"; s.pad(600, "y"); s }
               let t = big();
               let a = [];
               for i in 0..20 { a.push(|| t); }
               a.len()"#);
        assert_eq!(shared.map(|d| d.as_int().unwrap_or(-1)), Ok(20));
    }

    #[test]
    fn ordinary_data_and_small_closures_pass() {
        let fine = run(r#"let a = [];
               let limit = 3;
               for i in 0..50 { a.push(|x| x > limit); }
               let m = #{ names: ["ana", "bo"], n: 2 };
               a.filter(|f| f.call(5)).len() + m.names.len()"#);
        assert_eq!(fine.map(|d| d.as_int().unwrap_or(-1)), Ok(52));
    }
}
