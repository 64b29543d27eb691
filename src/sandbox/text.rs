//! The standard library's `replace`, measured before it builds.
//!
//! `s.replace(find, with)` builds its result in one native call, and Rhai measures a
//! string only when the call returns: an empty `find` matches at every character, so a
//! 4 MB string with a 4 MB replacement asked for 16 TB first. This version counts the
//! matches, refuses a result past `max_string_bytes`, and only then builds it.

use rhai::{Engine, EvalAltResult, ImmutableString, Position};

use super::SandboxLimits;

/// Registers the measured `replace` (string or character, for either argument).
pub(super) fn register(engine: &mut Engine, limits: &SandboxLimits) {
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
}
