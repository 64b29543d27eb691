//! The standard library's string builders, measured before they build.
//!
//! Rhai measures a call's result only when the call returns, so one native call can
//! build far past a limit first:
//! - `s.replace(find, with)`: an empty `find` matches at every character, so a 4 MB
//!   string with a 4 MB replacement asked for 16 TB. This version counts the matches,
//!   refuses a result past `max_string_bytes`, and only then builds it.
//! - `s.split(..)`, `s.split_rev(..)` and `s.to_chars()`: a 4 MB string split at every
//!   character (or at each of 4 million spaces) built about 250 MB of pieces before
//!   the array limit refused it. These versions count the pieces and refuse more than
//!   `max_array_len` before building any; their results are the standard library's.

use rhai::{Array, Dynamic, Engine, EvalAltResult, INT, ImmutableString, Position};

use super::SandboxLimits;

/// Registers the measured builders: `replace` (string or character, for either
/// argument), `split`, `split_rev` and `to_chars`.
pub(super) fn register(engine: &mut Engine, limits: &SandboxLimits) {
    register_splits(engine, limits.max_array_len);
    let max = limits.max_string_bytes;
    engine.register_fn(
        "replace",
        move |s: &mut ImmutableString, find: &str, with: &str| replace(s, find, with, max),
    );
    engine.register_fn(
        "replace",
        move |s: &mut ImmutableString, find: &str, with: char| replace(s, find, &with.to_string(), max),
    );
    engine.register_fn(
        "replace",
        move |s: &mut ImmutableString, find: char, with: &str| replace(s, &find.to_string(), with, max),
    );
    engine.register_fn(
        "replace",
        move |s: &mut ImmutableString, find: char, with: char| {
            replace(s, &find.to_string(), &with.to_string(), max)
        },
    );
}

/// Registers the measured `split`, `split_rev` and `to_chars`, with the standard
/// library's signatures (`split(index)` and the unsplit cases build two pieces at most
/// and stay the standard library's).
fn register_splits(engine: &mut Engine, max: usize) {
    engine.register_fn("split", move |s: ImmutableString, d: &str| {
        split(&s, Delim::Text(d), None, false, max)
    });
    engine.register_fn("split", move |s: ImmutableString, d: char| {
        split(&s, Delim::Char(d), None, false, max)
    });
    engine.register_fn("split", move |s: ImmutableString, d: &str, n: INT| {
        split(&s, Delim::Text(d), Some(n), false, max)
    });
    engine.register_fn("split", move |s: ImmutableString, d: char, n: INT| {
        split(&s, Delim::Char(d), Some(n), false, max)
    });
    engine.register_fn("split_rev", move |s: ImmutableString, d: &str| {
        split(&s, Delim::Text(d), None, true, max)
    });
    engine.register_fn("split_rev", move |s: ImmutableString, d: char| {
        split(&s, Delim::Char(d), None, true, max)
    });
    engine.register_fn("split_rev", move |s: ImmutableString, d: &str, n: INT| {
        split(&s, Delim::Text(d), Some(n), true, max)
    });
    engine.register_fn("split_rev", move |s: ImmutableString, d: char, n: INT| {
        split(&s, Delim::Char(d), Some(n), true, max)
    });
    engine.register_fn(
        "split",
        move |s: ImmutableString| -> Result<Array, Box<EvalAltResult>> {
            if s.is_empty() {
                return Ok(vec![s.into()]);
            }
            within(s.split_whitespace().count(), max)?;
            Ok(s.split_whitespace()
                .map(|p| Dynamic::from(ImmutableString::from(p)))
                .collect::<Array>())
        },
    );
    engine.register_fn(
        "to_chars",
        move |s: ImmutableString| -> Result<Array, Box<EvalAltResult>> {
            within(s.chars().count(), max)?;
            Ok(s.chars().map(Dynamic::from).collect::<Array>())
        },
    );
}

/// What a string is split at.
#[derive(Clone, Copy)]
enum Delim<'a> {
    Text(&'a str),
    Char(char),
}

/// Refuses an array of `pieces` past `max` (0: no limit) before it is built.
fn within(pieces: usize, max: usize) -> Result<(), Box<EvalAltResult>> {
    if max > 0 && pieces > max {
        return Err(EvalAltResult::ErrorDataTooLarge("Size of array/BLOB".into(), Position::NONE).into());
    }
    Ok(())
}

/// `s` split at `d` (from the end when `rev`), into at most `segments` pieces when
/// given, as the standard library does it: an empty `s`, a delimiter not in it, or
/// fewer than two segments give `[s]`.
fn split(
    s: &str,
    d: Delim<'_>,
    segments: Option<INT>,
    rev: bool,
    max: usize,
) -> Result<Array, Box<EvalAltResult>> {
    let absent = match d {
        Delim::Text(t) => !t.is_empty() && !s.contains(t),
        Delim::Char(c) => !s.contains(c),
    };
    if s.is_empty() || absent || segments.is_some_and(|n| n <= 1) {
        return Ok(vec![s.into()]);
    }
    let limit = segments.map_or(usize::MAX, |n| usize::try_from(n).unwrap_or(usize::MAX));
    let found = match d {
        // Before the first character, between each two and after the last.
        Delim::Text("") => s.chars().count() + 1,
        Delim::Text(t) => s.matches(t).count(),
        Delim::Char(c) => s.matches(c).count(),
    };
    within(found.saturating_add(1).min(limit), max)?;
    let piece = |p: &str| Dynamic::from(ImmutableString::from(p));
    Ok(match (d, rev, segments) {
        (Delim::Text(t), false, None) => s.split(t).map(piece).collect(),
        (Delim::Text(t), true, None) => s.rsplit(t).map(piece).collect(),
        (Delim::Text(t), false, Some(_)) => s.splitn(limit, t).map(piece).collect(),
        (Delim::Text(t), true, Some(_)) => s.rsplitn(limit, t).map(piece).collect(),
        (Delim::Char(c), false, None) => s.split(c).map(piece).collect(),
        (Delim::Char(c), true, None) => s.rsplit(c).map(piece).collect(),
        (Delim::Char(c), false, Some(_)) => s.splitn(limit, c).map(piece).collect(),
        (Delim::Char(c), true, Some(_)) => s.rsplitn(limit, c).map(piece).collect(),
    })
}

/// Replaces every `find` in `s` with `with`, as `str::replace` does, unless the result
/// would pass `max` bytes (0: no limit).
fn replace(s: &mut ImmutableString, find: &str, with: &str, max: usize) -> Result<(), Box<EvalAltResult>> {
    let matches = match find.is_empty() {
        // Before every character and at the end.
        true => s.chars().count() + 1,
        false => s.matches(find).count(),
    };
    let grows = with.len().saturating_sub(find.len()).saturating_mul(matches);
    if max > 0 && s.len().saturating_add(grows) > max {
        return Err(EvalAltResult::ErrorDataTooLarge("Length of string".into(), Position::NONE).into());
    }
    if matches > 0 {
        *s = s.replace(find, with).into();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::{SandboxLimits, engine};

    fn run(src: &str) -> Result<String, String> {
        let limits = SandboxLimits {
            max_string_bytes: 1000,
            ..SandboxLimits::default()
        };
        engine(&limits, None, None)
            .eval::<rhai::Dynamic>(src)
            .map(|d| d.to_string())
            .map_err(|e| e.to_string())
    }

    #[test]
    fn replace_keeps_its_results_and_refuses_a_result_past_the_limit_before_building_it() {
        for (src, want) in [
            (r#"let s = "a-b-c"; s.replace("-", "+"); s"#, "a+b+c"),
            (r#"let s = "a-b-c"; s.replace("-", '+'); s"#, "a+b+c"),
            (r#"let s = "a-b-c"; s.replace('-', "--"); s"#, "a--b--c"),
            (r#"let s = "a-b-c"; s.replace('-', '_'); s"#, "a_b_c"),
            (r#"let s = "ab"; s.replace("", "."); s"#, ".a.b."),
            (r#"let s = "éé"; s.replace("", "|"); s"#, "|é|é|"),
            (r#"let s = "abc"; s.replace("x", "yyyy"); s"#, "abc"),
            (r#"let s = "aaaa"; s.replace("aa", "b"); s"#, "bb"),
        ] {
            assert_eq!(run(src), Ok(want.to_string()), "{src}");
        }
        // 100 characters with an empty pattern: 101 insertions of 100 bytes.
        let err = run(r#"let s = "x"; s.pad(100, "x"); let t = "y"; t.pad(100, "y"); s.replace("", t); s"#)
            .unwrap_err();
        assert!(
            err.contains("too large") || err.contains("Length of string"),
            "{err}"
        );
        // Just inside the limit is fine.
        assert!(run(r#"let s = "x"; s.pad(500, "x"); s.replace("x", "yy"); s.len()"#).is_ok());
    }

    /// Every form keeps the standard library's result (as a plain engine gives it).
    #[test]
    fn splits_keep_the_standard_librarys_results() {
        let plain = rhai::Engine::new();
        for src in [
            r#""a,b,,c".split(",")"#,
            r#""a,b,,c".split(',')"#,
            r#""a,b,,c".split(",", 2)"#,
            r#""a,b,,c".split(',', 3)"#,
            r#""a,b,,c".split(",", 1)"#,
            r#""a,b,,c".split(",", 0)"#,
            r#""a,b,,c".split(",", -5)"#,
            r#""a,b,,c".split_rev(",")"#,
            r#""a,b,,c".split_rev(',')"#,
            r#""a,b,,c".split_rev(",", 2)"#,
            r#""a,b,,c".split_rev(',', 2)"#,
            r#""abc".split("")"#,
            r#""éé".split("")"#,
            r#""abc".split("", 2)"#,
            r#""abc".split_rev("")"#,
            r#""abc".split("x")"#,
            r#""".split(",")"#,
            r#""".split("")"#,
            r#""a::b".split("::")"#,
            r#""  a  b\tc ".split()"#,
            r#""".split()"#,
            r#""héllo".to_chars()"#,
            r#""".to_chars()"#,
            r#"const S = "x-y"; S.split("-")"#,
            r#""abcdef".split(2)"#,
        ] {
            let want = plain
                .eval::<rhai::Dynamic>(src)
                .map(|d| format!("{d:?}"))
                .unwrap();
            let limits = SandboxLimits::default();
            let got = engine(&limits, None, None)
                .eval::<rhai::Dynamic>(src)
                .map(|d| format!("{d:?}"))
                .unwrap();
            assert_eq!(got, want, "{src}");
        }
    }

    /// Pieces past `max_array_len` are refused before any is built: a string split at
    /// every character or space, or into characters.
    #[test]
    fn splits_past_the_array_limit_are_refused_before_building() {
        let limits = SandboxLimits {
            max_array_len: 100,
            ..SandboxLimits::default()
        };
        let run = |src: &str| {
            engine(&limits, None, None)
                .eval::<rhai::Dynamic>(src)
                .map(|d| d.to_string())
                .map_err(|e| e.to_string())
        };
        for src in [
            r#"let s = "x"; s.pad(200, "x"); s.split("")"#,
            r#"let s = " "; s.pad(200, " "); s.split(" ")"#,
            r#"let s = " "; s.pad(200, " "); s.split(' ')"#,
            r#"let s = " "; s.pad(200, " "); s.split_rev(" ")"#,
            r#"let s = "a "; s.pad(400, "a "); s.split()"#,
            r#"let s = "x"; s.pad(200, "x"); s.to_chars()"#,
            r#"let s = " "; s.pad(200, " "); s.split(" ", 150)"#,
        ] {
            let err = run(src).unwrap_err();
            assert!(err.contains("Size of array"), "{src}: {err}");
        }
        // At the limit, and with few enough segments, it works.
        assert!(run(r#"let s = " "; s.pad(99, " "); s.split(" ").len()"#).is_ok());
        assert_eq!(
            run(r#"let s = " "; s.pad(200, " "); s.split(" ", 50).len()"#),
            Ok("50".into())
        );
    }
}
