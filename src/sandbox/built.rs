//! The standard library's array and map functions that build or change a container
//! from a closure's results (`map`, `zip`, `for_each`), measured as they go; those that
//! only test or fold elements are in [`super::visited`].
//!
//! Rhai checks each closure result alone, and the container only once the function
//! returns: `a.map(|i| s + i)` over 10,000 items with a 4 MB `s` built 40 GB before
//! that check, and the process was killed for memory. These versions keep a running
//! measure ([`data_size::Tally`]) against the same limits, and stop at the first
//! element past them. They are registered on the engine itself, which Rhai searches
//! before its packages, and keep the standard library's calling conventions (the
//! element as `this` for a closure without parameters, else as its first argument,
//! with the index after it when the closure takes one more).

use rhai::{Array, Dynamic, Engine, EvalAltResult, FnPtr, FuncRegistration, INT, Map, NativeCallContext};

use super::SandboxLimits;
use super::data_size::Tally;

pub(super) type Result<T> = std::result::Result<T, Box<EvalAltResult>>;

/// Registers the measured functions on `engine`.
pub(super) fn register(engine: &mut Engine, limits: &SandboxLimits) {
    let l = limits.clone();
    FuncRegistration::new("map")
        .with_purity(true)
        .register_into_engine(
            engine,
            move |ctx: NativeCallContext, array: &mut Array, f: FnPtr| -> Result<Array> {
                let mut source = InPlace::of(&l, array.iter())?;
                let mut tally = Tally::new(&l);
                let mut out = Array::with_capacity(array.len());
                for (i, item) in array.iter_mut().enumerate() {
                    let value = call_on(&ctx, &f, "map", Some(item), [], [index(i)], Some(0))?;
                    source.changed(i, item)?;
                    tally.add_item(&value)?;
                    out.push(value);
                }
                Ok(out)
            },
        );
    let l = limits.clone();
    FuncRegistration::new("map")
        .with_purity(true)
        .register_into_engine(
            engine,
            move |ctx: NativeCallContext, map: &mut Map, f: FnPtr| -> Result<Map> {
                let mut source = InPlace::of(&l, map.values())?;
                let mut tally = Tally::new(&l);
                let mut out = Map::new();
                for (i, (key, item)) in map.iter_mut().enumerate() {
                    let value = call_on(&ctx, &f, "map", Some(item), [key.clone().into()], [], Some(1))?;
                    source.changed(i, item)?;
                    tally.add_entry(&value)?;
                    out.insert(key.clone(), value);
                }
                Ok(out)
            },
        );
    let l = limits.clone();
    FuncRegistration::new("zip")
        .with_purity(true)
        .register_into_engine(
            engine,
            move |ctx: NativeCallContext, array: &mut Array, other: Array, f: FnPtr| -> Result<Array> {
                let mut tally = Tally::new(&l);
                let mut out = Array::with_capacity(array.len().min(other.len()));
                for (i, (x, y)) in array.iter_mut().zip(other).enumerate() {
                    let value = call_on(&ctx, &f, "zip", None, [x.clone(), y], [index(i)], None)?;
                    tally.add_item(&value)?;
                    out.push(value);
                }
                Ok(out)
            },
        );
    let l = limits.clone();
    FuncRegistration::new("for_each")
        .with_purity(false)
        .register_into_engine(
            engine,
            move |ctx: NativeCallContext, array: &mut Array, f: FnPtr| -> Result<()> {
                let mut source = InPlace::of(&l, array.iter())?;
                for (i, item) in array.iter_mut().enumerate() {
                    let _changed_in_place = call_on(&ctx, &f, "for_each", Some(item), [], [index(i)], None)?;
                    source.changed(i, item)?;
                }
                Ok(())
            },
        );
}

/// The elements a closure is handed as `this`, measured before and again after each
/// call: a closure may change its element in place (`this = big`), in `map` as in
/// `for_each`.
pub(super) struct InPlace {
    tally: Tally,
    before: Vec<Tally>,
}

impl InPlace {
    pub(super) fn of<'a>(
        limits: &SandboxLimits,
        items: impl Iterator<Item = &'a Dynamic>,
    ) -> Result<InPlace> {
        let mut tally = Tally::new(limits);
        let mut before = Vec::new();
        for item in items {
            tally.add_item(item)?;
            before.push(Tally::of(limits, item));
        }
        Ok(InPlace { tally, before })
    }

    /// Element `i` as the closure left it; `Err` once the container passes the limits.
    pub(super) fn changed(&mut self, i: usize, item: &Dynamic) -> Result<()> {
        match self.before.get(i) {
            Some(before) => self.tally.replace(before, item),
            None => Ok(()),
        }
    }
}

pub(super) fn index(i: usize) -> Dynamic {
    INT::try_from(i).unwrap_or(INT::MAX).into()
}

/// Calls `f` as the standard library does: bound to `this` with `args`; when `f` takes
/// no such parameters and `move_this` says where, with `this` inserted into `args`
/// there; then with `extras` (the index) after `args` as well. An error is wrapped as
/// raised in a call to `caller`, as the standard library's are.
pub(super) fn call_on<const N: usize, const E: usize>(
    ctx: &NativeCallContext,
    f: &FnPtr,
    caller: &str,
    this: Option<&mut Dynamic>,
    args: [Dynamic; N],
    extras: [Dynamic; E],
    move_this: Option<usize>,
) -> Result<Dynamic> {
    call_forms(ctx, f, this, args, extras, move_this).map_err(|e| match e.is_system_exception() {
        // A stop, a deadline, a limit: passed on as it is, which no `try` can catch.
        true => e,
        false => Box::new(EvalAltResult::ErrorInFunctionCall(
            caller.to_string(),
            ctx.call_source().unwrap_or_default().to_string(),
            e,
            rhai::Position::NONE,
        )),
    })
}

/// [`call_on`]'s forms, tried in turn.
fn call_forms<const N: usize, const E: usize>(
    ctx: &NativeCallContext,
    f: &FnPtr,
    mut this: Option<&mut Dynamic>,
    args: [Dynamic; N],
    extras: [Dynamic; E],
    move_this: Option<usize>,
) -> Result<Dynamic> {
    // Only "no such function" for `f` itself moves on: an error raised inside it is its.
    let missing = |e: &EvalAltResult| matches!(e, EvalAltResult::ErrorFunctionNotFound(sig, _) if sig.starts_with(f.fn_name()));
    match f.call_raw(ctx, this.as_deref_mut(), args.clone()) {
        Err(e) if missing(&e) => {}
        other => return other,
    }
    if let (Some(at), Some(item)) = (move_this, this.as_deref()) {
        let mut moved = args.to_vec();
        moved.insert(at.min(moved.len()), item.clone());
        match f.call_raw(ctx, None, moved) {
            Err(e) if missing(&e) => {}
            other => return other,
        }
        let mut moved: Vec<Dynamic> = args.into_iter().chain(extras).collect();
        moved.insert(at.min(N), item.clone());
        return f.call_raw(ctx, None, moved);
    }
    let all: Vec<Dynamic> = args.into_iter().chain(extras).collect();
    f.call_raw(ctx, this, all)
}

#[cfg(test)]
pub(super) mod tests {
    use super::super::{SandboxLimits, engine};
    use rhai::Dynamic;

    fn run(src: &str) -> Result<Dynamic, String> {
        let limits = SandboxLimits {
            max_string_bytes: 1000,
            ..SandboxLimits::default()
        };
        engine(&limits, None, None)
            .eval::<Dynamic>(src)
            .map_err(|e| e.to_string())
    }

    /// Building past the limits stops at the first element past them, not after the
    /// whole result was built (which took the process's memory before): the closure
    /// ran twice, not a hundred times.
    #[test]
    fn building_from_closures_stops_at_the_limit() {
        for (build, ticks) in [
            ("a.map(|i| { tick(); s + i })", 2),
            ("a.zip(a, |x, y| { tick(); s + x })", 2),
            ("a.for_each(|i| { tick(); this = s + i })", 2),
            ("m.map(|k, v| { tick(); s + v })", 2),
            // Changing the element in place, in `map` too.
            ("a.map(|| { tick(); this = s + this; 0 })", 2),
            // Elements that share one captured value (counted once, and kept counted):
            // replacing them must not make the measure fall while memory grows.
            (
                "let t = s; let f = || t; a.clear(); a.pad(100, f); a.for_each(|| { tick(); this = s + \"z\" })",
                1,
            ),
        ] {
            let src = format!(
                r#"let s = "x"; s.pad(600, "y");
                   let a = []; a.pad(100, 0);
                   let m = #{{}}; for i in 0..100 {{ m[`k${{i}}`] = i; }}
                   {build}"#
            );
            let (err, calls) = refused_after(&src);
            assert!(err.contains("too large"), "{build}: {err}");
            assert_eq!(calls, ticks, "{build}");
        }
    }

    /// Runs `src` with 1,000-byte strings, where `tick()` counts closure calls: the
    /// error it stopped with, and how many calls ran first.
    pub(in crate::sandbox) fn refused_after(src: &str) -> (String, usize) {
        let limits = SandboxLimits {
            max_string_bytes: 1000,
            ..SandboxLimits::default()
        };
        let mut e = engine(&limits, None, None);
        let calls = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = calls.clone();
        e.register_fn("tick", move || {
            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        });
        let err = e.eval::<Dynamic>(src).unwrap_err().to_string();
        (err, calls.load(std::sync::atomic::Ordering::SeqCst))
    }

    /// The standard library's calling conventions hold: the element as `this` or as the
    /// first argument, the index after it, a map's key before its value, and constants.
    #[test]
    fn the_standard_calling_conventions_hold() {
        for (src, want) in [
            ("[1, 2, 3].map(|x| x * 2)", "[2, 4, 6]"),
            ("[1, 2, 3].map(|x, i| x + i)", "[1, 3, 5]"),
            ("[1, 2, 3].map(|| this * 10)", "[10, 20, 30]"),
            ("const C = [1, 2]; C.map(|x| x + 1)", "[2, 3]"),
            ("[1, 2].zip([3, 4], |a, b| a + b)", "[4, 6]"),
            ("[1, 2].zip([3, 4], |a, b, i| a + b + i)", "[4, 7]"),
            ("let a = [1, 2]; a.for_each(|| this *= 10); a", "[10, 20]"),
            ("let a = [1, 2]; a.for_each(|i| this += i); a", "[1, 3]"),
            (r#"#{a: 1, b: 2}.map(|k, v| k + v).values()"#, r#"["a1", "b2"]"#),
            (r#"#{a: 1}.map(|k| this + 1).values()"#, "[2]"),
            ("fn twice(x) { x * 2 } [1, 2].map(Fn(\"twice\"))", "[2, 4]"),
        ] {
            assert_eq!(run(src).map(|d| d.to_string()), Ok(want.to_string()), "{src}");
        }
        // An error inside the closure is its own, not a search for another form, and
        // says where it was raised, as the standard library's do.
        let err = run("[1].map(|x| x.nothing_here())").unwrap_err();
        assert!(
            err.contains("nothing_here") && err.contains("in call to function 'map'"),
            "{err}"
        );
    }
}
