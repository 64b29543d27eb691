//! YAML read into a [`Value`] with a bound on its size. An alias repeats its anchor's
//! whole value, so a few kilobytes (an anchor of 10,000 items named by 10,000 aliases)
//! would become 10⁸ values and gigabytes; serde_yaml bounds how many aliases it
//! follows, not what they expand to. Every config, skill front matter, eval case and
//! price list is read through here.

use std::cell::Cell;
use std::fmt;

use serde::de::{
    self, DeserializeSeed, Deserializer, EnumAccess, MapAccess, SeqAccess, VariantAccess, Visitor,
};
use serde_yaml::Value;
use serde_yaml::value::{Mapping, Tag, TaggedValue};

/// Most values (scalars, lists, mappings, each counted once where it appears, aliases
/// expanded) one file may hold: a large agent's file holds a few hundred.
pub const MAX_VALUES: usize = 100_000;

/// `text` as a YAML value, or serde_yaml's error (with its location); more than
/// [`MAX_VALUES`] values is an error too.
pub fn value(text: &str) -> Result<Value, serde_yaml::Error> {
    let count = Cell::new(0);
    Bounded(&count).deserialize(serde_yaml::Deserializer::from_str(text))
}

/// A value's reader that counts what it builds against [`MAX_VALUES`].
#[derive(Clone, Copy)]
struct Bounded<'a>(&'a Cell<usize>);

impl Bounded<'_> {
    fn tick<E: de::Error>(self) -> Result<(), E> {
        let n = self.0.get() + 1;
        self.0.set(n);
        if n > MAX_VALUES {
            return Err(E::custom(format!(
                "the file holds more than {MAX_VALUES} values once its aliases (*name) are expanded"
            )));
        }
        Ok(())
    }
}

impl<'de> DeserializeSeed<'de> for Bounded<'_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Bounded<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any YAML value")
    }

    fn visit_bool<E: de::Error>(self, b: bool) -> Result<Value, E> {
        self.tick()?;
        Ok(Value::Bool(b))
    }

    fn visit_i64<E: de::Error>(self, i: i64) -> Result<Value, E> {
        self.tick()?;
        Ok(Value::Number(i.into()))
    }

    fn visit_u64<E: de::Error>(self, u: u64) -> Result<Value, E> {
        self.tick()?;
        Ok(Value::Number(u.into()))
    }

    fn visit_f64<E: de::Error>(self, f: f64) -> Result<Value, E> {
        self.tick()?;
        Ok(Value::Number(f.into()))
    }

    fn visit_str<E: de::Error>(self, s: &str) -> Result<Value, E> {
        self.tick()?;
        Ok(Value::String(s.to_owned()))
    }

    fn visit_string<E: de::Error>(self, s: String) -> Result<Value, E> {
        self.tick()?;
        Ok(Value::String(s))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        self.tick()?;
        Ok(Value::Null)
    }

    fn visit_none<E: de::Error>(self) -> Result<Value, E> {
        self.visit_unit()
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        self.deserialize(deserializer)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        self.tick()?;
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(self)? {
            items.push(item);
        }
        Ok(Value::Sequence(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        self.tick()?;
        let mut mapping = Mapping::new();
        while let Some(key) = map.next_key_seed(self)? {
            if mapping.contains_key(&key) {
                // serde_yaml's own words for it.
                let shown = match &key {
                    Value::String(s) => format!("with key {s:?}"),
                    Value::Null => "with null key".to_string(),
                    Value::Bool(b) => format!("with key `{b}`"),
                    Value::Number(n) => format!("with key {n}"),
                    _ => "in YAML map".to_string(),
                };
                return Err(de::Error::custom(format!("duplicate entry {shown}")));
            }
            let value = map.next_value_seed(self)?;
            mapping.insert(key, value);
        }
        Ok(Value::Mapping(mapping))
    }

    fn visit_enum<A: EnumAccess<'de>>(self, data: A) -> Result<Value, A::Error> {
        // A tagged value (`!Tag value`): the tag is the variant's name.
        self.tick()?;
        let (tag, contents): (String, _) = data.variant()?;
        if tag.is_empty() {
            return Err(de::Error::custom("empty YAML tag is not allowed"));
        }
        let value = contents.newtype_variant_seed(self)?;
        Ok(Value::Tagged(Box::new(TaggedValue {
            tag: Tag::new(tag),
            value,
        })))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_what_serde_yaml_reads() {
        let text =
            "a: 1\nb: [x, 2.5, true, null]\nc: {d: !Thing {e: f}}\nanchor: &a [1, 2]\nalias: *a\n-1: neg\n";
        let ours = value(text).unwrap_or_else(|e| panic!("{e}"));
        let theirs: Value = serde_yaml::from_str(text).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(ours, theirs);
        let dup = value("a: 1\na: 2\n").unwrap_err().to_string();
        assert!(dup.starts_with("duplicate entry with key \"a\""), "{dup}");
        assert!(value("a: [1\n").is_err());
    }

    #[test]
    fn aliases_cannot_expand_a_small_file_into_a_large_value() {
        let items = vec!["0"; 1000].join(",");
        let aliases = vec!["*a"; 1000].join(",");
        let text = format!("a: &a [{items}]\nb: [{aliases}]\n");
        assert!(text.len() < 10_000);
        let err = value(&text).unwrap_err().to_string();
        assert!(err.contains("more than 100000 values"), "{err}");
        // Nested aliases, each level ten of the one before.
        let mut nested = String::from("l0: &l0 [0,0,0,0,0,0,0,0,0,0]\n");
        for i in 1..9 {
            let p = i - 1;
            nested.push_str(&format!(
                "l{i}: &l{i} [{}]\n",
                vec![format!("*l{p}"); 10].join(",")
            ));
        }
        assert!(value(&nested).is_err());
    }
}
