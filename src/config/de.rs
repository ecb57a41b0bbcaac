//! Reading the config's serde types (`file`) from the parsed document, so that every error
//! says what went wrong as data, not as words to take apart again.
//!
//! Invariants:
//! - An [`Error`] is one of serde's own kinds ([`Kind`]), built by the serde constructor of
//!   that name; the loader writes the message from it.
//! - An error gets its [`Place`] from the innermost value (or key) being read when it was
//!   raised: the dotted key, the span in the file, and what the type asked for. An error
//!   raised after a value was read (a `#[serde(try_from)]` rule) gets that value's place.
//! - A key's error is placed at the key, under the dotted key of the table it is in.
//! - Values are handed over as TOML's own reader hands them over (an integer as `i64`, a date
//!   as `toml::Value`'s date, an enum as a string or a one-key table), so that a type reads
//!   the same here as with `toml::from_str`.

use std::cell::Cell;
use std::fmt;
use std::marker::PhantomData;
use std::ops::Range;

use serde::de::value::MapDeserializer;
use serde::de::{self, DeserializeSeed, IntoDeserializer, Visitor};
use toml::de::{DeFloat, DeInteger, DeString, DeTable, DeValue};

type Node<'d> = toml::Spanned<DeValue<'d>>;

/// Read a `T` from a parsed document.
pub(super) fn from_document<'de, T: de::Deserialize<'de>>(
    doc: toml::Spanned<DeTable>,
) -> Result<T, Error> {
    let span = doc.span();
    let root = Node::new(span, DeValue::Table(doc.into_inner()));
    T::deserialize(ValueDe {
        node: &root,
        path: Vec::new(),
    })
}

/// One step of a dotted key: `tools`, `backup`, `[1]`.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Seg {
    Key(String),
    Index(usize),
}

/// `tools.backup.timeout`, `files[1]`.
pub(super) fn dotted(path: &[Seg]) -> String {
    let mut s = String::new();
    for seg in path {
        match seg {
            Seg::Key(k) if s.is_empty() => s.push_str(k),
            Seg::Key(k) => {
                s.push('.');
                s.push_str(k);
            }
            Seg::Index(i) => s.push_str(&format!("[{i}]")),
        }
    }
    s
}

/// What a type asked the reader for (the `deserialize_*` it called).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Want {
    Any,
    String,
    Integer,
    Number,
    Boolean,
    Array,
    Table,
}

/// What went wrong: serde's own kinds of error.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Kind {
    UnknownField {
        field: String,
        expected: &'static [&'static str],
    },
    UnknownVariant {
        variant: String,
        expected: &'static [&'static str],
    },
    /// `expected` is the type's own description, for a value read as [`Want::Any`].
    InvalidType {
        expected: String,
    },
    InvalidLength {
        len: usize,
        expected: String,
    },
    MissingField(&'static str),
    Custom(String),
}

/// Where an error was raised.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Place {
    /// The value's dotted key; for a key, the dotted key of its table.
    pub path: Vec<Seg>,
    /// The value or key as written.
    pub span: Range<usize>,
    pub on_key: bool,
    pub want: Want,
    /// The value's TOML type (`integer`, `array`, …); None for a table.
    pub found: Option<&'static str>,
}

#[derive(Debug, PartialEq)]
pub(super) struct Error {
    pub kind: Kind,
    pub place: Option<Box<Place>>,
}

impl Error {
    fn new(kind: Kind) -> Error {
        Error { kind, place: None }
    }

    /// Place an error not placed yet.
    fn at(mut self, place: impl FnOnce() -> Place) -> Error {
        if self.place.is_none() {
            self.place = Some(Box::new(place()));
        }
        self
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match &self.kind {
            Kind::UnknownField { field, .. } => write!(f, "unknown field `{field}`"),
            Kind::UnknownVariant { variant, .. } => write!(f, "unknown variant `{variant}`"),
            Kind::InvalidType { expected } => write!(f, "invalid type, expected {expected}"),
            Kind::InvalidLength { len, expected } => {
                write!(f, "invalid length {len}, expected {expected}")
            }
            Kind::MissingField(field) => write!(f, "missing field `{field}`"),
            Kind::Custom(message) => f.write_str(message),
        }
    }
}

impl std::error::Error for Error {}

impl de::Error for Error {
    fn custom<T: fmt::Display>(msg: T) -> Error {
        Error::new(Kind::Custom(msg.to_string()))
    }

    fn invalid_type(_: de::Unexpected, exp: &dyn de::Expected) -> Error {
        Error::new(Kind::InvalidType {
            expected: exp.to_string(),
        })
    }

    fn invalid_length(len: usize, exp: &dyn de::Expected) -> Error {
        Error::new(Kind::InvalidLength {
            len,
            expected: exp.to_string(),
        })
    }

    fn unknown_variant(variant: &str, expected: &'static [&'static str]) -> Error {
        Error::new(Kind::UnknownVariant {
            variant: variant.to_string(),
            expected,
        })
    }

    fn unknown_field(field: &str, expected: &'static [&'static str]) -> Error {
        Error::new(Kind::UnknownField {
            field: field.to_string(),
            expected,
        })
    }

    fn missing_field(field: &'static str) -> Error {
        Error::new(Kind::MissingField(field))
    }
}

/// A value and where it is written: toml's `Spanned`, for this reader.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Spanned<T> {
    span: Range<usize>,
    value: T,
}

impl<T> Spanned<T> {
    pub(super) fn span(&self) -> Range<usize> {
        self.span.clone()
    }

    pub(super) fn get_ref(&self) -> &T {
        &self.value
    }
}

/// The name under which [`Spanned`] asks the reader for a value's span.
const SPANNED: &str = "heartbeat::config::de::Spanned";

impl<'de, T: de::Deserialize<'de>> de::Deserialize<'de> for Spanned<T> {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Spanned<T>, D::Error> {
        struct V<T>(PhantomData<T>);
        impl<'de, T: de::Deserialize<'de>> Visitor<'de> for V<T> {
            type Value = Spanned<T>;

            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a value read by the config reader")
            }

            fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Spanned<T>, A::Error> {
                let missing = || de::Error::invalid_length(0, &self);
                let start = seq.next_element()?.ok_or_else(missing)?;
                let end = seq.next_element()?.ok_or_else(missing)?;
                let value = seq.next_element()?.ok_or_else(missing)?;
                Ok(Spanned {
                    span: start..end,
                    value,
                })
            }
        }
        d.deserialize_newtype_struct(SPANNED, V(PhantomData))
    }
}

/// Reads one value of the document.
struct ValueDe<'a, 'd> {
    node: &'a Node<'d>,
    path: Vec<Seg>,
}

impl<'a, 'd> ValueDe<'a, 'd> {
    fn place(node: &Node, path: Vec<Seg>, want: Want) -> Place {
        Place {
            path,
            span: node.span(),
            on_key: false,
            want,
            found: match node.get_ref() {
                DeValue::Table(_) => None,
                other => Some(other.type_str()),
            },
        }
    }

    /// Run `read` on this value, placing any error it raises here.
    fn placed<T>(
        self,
        want: Want,
        read: impl FnOnce(Self) -> Result<T, Error>,
    ) -> Result<T, Error> {
        let (node, path) = (self.node, self.path.clone());
        read(self).map_err(|e| e.at(|| Self::place(node, path, want)))
    }

    fn child(&self, seg: Seg) -> Vec<Seg> {
        let mut path = self.path.clone();
        path.push(seg);
        path
    }

    /// The value as TOML's reader hands it over, whatever the type asked for.
    fn read<'de, V: Visitor<'de>>(self, want: Want, visitor: V) -> Result<V::Value, Error> {
        self.placed(want, |this| match this.node.get_ref() {
            DeValue::String(s) => visitor.visit_str(s),
            DeValue::Integer(n) => integer(n, visitor),
            DeValue::Float(x) => match float(x) {
                Some(x) => visitor.visit_f64(x),
                None => Err(de::Error::custom("floating-point number overflowed")),
            },
            DeValue::Boolean(b) => visitor.visit_bool(*b),
            DeValue::Datetime(d) => visitor.visit_map(MapDeserializer::new(std::iter::once((
                datetime_key(),
                d.to_string(),
            )))),
            DeValue::Array(items) => visitor.visit_seq(Items {
                iter: items.iter().enumerate(),
                de: &this,
            }),
            DeValue::Table(table) => visitor.visit_map(Entries {
                iter: table.iter(),
                next: None,
                de: &this,
            }),
        })
    }
}

/// The one key of the table as which TOML's reader hands over a date: `toml_datetime`'s
/// own, learned from how its `Datetime` asks to be read.
fn datetime_key() -> &'static str {
    struct Probe<'c>(&'c Cell<&'static str>);
    impl<'de> de::Deserializer<'de> for Probe<'_> {
        type Error = Error;

        fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Error> {
            Err(de::Error::custom("not a date"))
        }

        fn deserialize_struct<V: Visitor<'de>>(
            self,
            _name: &'static str,
            fields: &'static [&'static str],
            _: V,
        ) -> Result<V::Value, Error> {
            self.0.set(fields.first().copied().unwrap_or_default());
            Err(de::Error::custom("probed"))
        }

        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes
            byte_buf option unit unit_struct newtype_struct seq tuple tuple_struct map enum
            identifier ignored_any
        }
    }
    let key = Cell::new("");
    let _probed = <toml::value::Datetime as de::Deserialize>::deserialize(Probe(&key));
    key.get()
}

fn integer<'de, V: Visitor<'de>>(n: &DeInteger, visitor: V) -> Result<V::Value, Error> {
    let (text, radix) = (n.as_str(), n.radix());
    if let Ok(n) = i64::from_str_radix(text, radix) {
        visitor.visit_i64(n)
    } else if let Ok(n) = u64::from_str_radix(text, radix) {
        visitor.visit_u64(n)
    } else {
        Err(de::Error::custom("integer number overflowed"))
    }
}

/// A float as TOML reads it: `inf` only where it is written.
fn float(x: &DeFloat) -> Option<f64> {
    let f: f64 = x.as_str().parse().ok()?;
    (!f.is_infinite() || x.as_str().contains("inf")).then_some(f)
}

impl<'de> de::Deserializer<'de> for ValueDe<'_, '_> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.read(Want::Any, visitor)
    }

    fn deserialize_bool<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.read(Want::Boolean, visitor)
    }

    fn deserialize_i64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.read(Want::Integer, visitor)
    }

    fn deserialize_f64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.read(Want::Number, visitor)
    }

    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.read(Want::String, visitor)
    }

    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.read(Want::String, visitor)
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.read(Want::Array, visitor)
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.read(Want::Table, visitor)
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        // serde would read a struct from an array by position (`budget = [1]` as its first
        // field): a config table is a table, or the value is refused.
        if let DeValue::Array(_) = self.node.get_ref() {
            return self.placed(Want::Table, |_| {
                Err(de::Error::invalid_type(de::Unexpected::Seq, &"a table"))
            });
        }
        self.read(Want::Table, visitor)
    }

    /// A value is always there: an absent key is never read.
    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.placed(Want::Any, |this| visitor.visit_some(this))
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Error> {
        if name == SPANNED {
            return self.placed(Want::Any, |this| {
                let span = this.node.span();
                visitor.visit_seq(SpanParts {
                    start: Some(span.start),
                    end: Some(span.end),
                    value: Some(this),
                })
            });
        }
        self.placed(Want::Any, |this| visitor.visit_newtype_struct(this))
    }

    /// A string names a variant; so does a table of one key, whose value the variant reads.
    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.placed(Want::String, |this| match this.node.get_ref() {
            DeValue::String(s) => visitor.visit_enum(s.as_ref().into_deserializer()),
            DeValue::Table(table) => match table.len() {
                0 => Err(de::Error::custom(
                    "wanted exactly 1 element, found 0 elements",
                )),
                1 => visitor.visit_enum(Variant { table, de: &this }),
                _ => Err(de::Error::custom(
                    "wanted exactly 1 element, more than 1 element",
                )),
            },
            _ => Err(Error::new(Kind::InvalidType {
                expected: "a string".into(),
            })),
        })
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_unit()
    }

    serde::forward_to_deserialize_any! {
        u8 u16 u32 u64 i8 i16 i32 i128 u128 f32 char bytes byte_buf unit unit_struct
        tuple tuple_struct identifier
    }
}

impl<'de, 'a, 'd> IntoDeserializer<'de, Error> for ValueDe<'a, 'd> {
    type Deserializer = Self;

    fn into_deserializer(self) -> Self {
        self
    }
}

/// An array's items.
struct Items<'a, 'b, 'd> {
    iter: std::iter::Enumerate<std::slice::Iter<'a, Node<'d>>>,
    de: &'b ValueDe<'a, 'd>,
}

impl<'de> de::SeqAccess<'de> for Items<'_, '_, '_> {
    type Error = Error;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, Error> {
        let Some((i, node)) = self.iter.next() else {
            return Ok(None);
        };
        let item = ValueDe {
            node,
            path: self.de.child(Seg::Index(i)),
        };
        item.placed(Want::Any, |item| seed.deserialize(item))
            .map(Some)
    }
}

/// A table's keys and values.
struct Entries<'a, 'b, 'd> {
    iter: toml::map::Iter<'a, toml::Spanned<DeString<'d>>, Node<'d>>,
    next: Option<(&'a str, &'a Node<'d>)>,
    de: &'b ValueDe<'a, 'd>,
}

impl<'de> de::MapAccess<'de> for Entries<'_, '_, '_> {
    type Error = Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Error> {
        let Some((key, node)) = self.iter.next() else {
            return Ok(None);
        };
        self.next = Some((key.get_ref().as_ref(), node));
        read_key(key, &self.de.path, seed).map(Some)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, Error> {
        let (key, node) = self.next.take().expect("a value follows its key");
        let value = ValueDe {
            node,
            path: self.de.child(Seg::Key(key.to_string())),
        };
        value.placed(Want::Any, |value| seed.deserialize(value))
    }
}

/// Read a key as a string, placing any error at the key, under the table's dotted key.
fn read_key<'de, K: DeserializeSeed<'de>>(
    key: &toml::Spanned<DeString>,
    table: &[Seg],
    seed: K,
) -> Result<K::Value, Error> {
    let text: &str = key.get_ref();
    seed.deserialize(text.into_deserializer())
        .map_err(|e: Error| {
            e.at(|| Place {
                path: table.to_vec(),
                span: key.span(),
                on_key: true,
                want: Want::String,
                found: Some("string"),
            })
        })
}

/// An enum written as a table of one key: the key names the variant.
struct Variant<'a, 'b, 'd> {
    table: &'a DeTable<'d>,
    de: &'b ValueDe<'a, 'd>,
}

impl<'de, 'a, 'd> de::EnumAccess<'de> for Variant<'a, '_, 'd> {
    type Error = Error;
    type Variant = ValueDe<'a, 'd>;

    fn variant_seed<S: DeserializeSeed<'de>>(
        self,
        seed: S,
    ) -> Result<(S::Value, Self::Variant), Error> {
        let (key, node) = self.table.iter().next().expect("a table of one key");
        let variant = read_key(key, &self.de.path, seed)?;
        let value = ValueDe {
            node,
            path: self.de.child(Seg::Key(key.get_ref().to_string())),
        };
        Ok((variant, value))
    }
}

/// The value of an enum's one key: what TOML's reader takes for a variant's data.
impl<'de> de::VariantAccess<'de> for ValueDe<'_, '_> {
    type Error = Error;

    fn unit_variant(self) -> Result<(), Error> {
        let error = match self.node.get_ref() {
            DeValue::Array(items) if items.is_empty() => return Ok(()),
            DeValue::Table(table) if table.is_empty() => return Ok(()),
            DeValue::Array(_) => "expected empty array".to_string(),
            DeValue::Table(_) => "expected empty table".to_string(),
            other => format!("expected table, found {}", other.type_str()),
        };
        self.placed(Want::Any, |_| Err(de::Error::custom(error)))
    }

    fn newtype_variant_seed<T: DeserializeSeed<'de>>(self, seed: T) -> Result<T::Value, Error> {
        seed.deserialize(self)
    }

    fn tuple_variant<V: Visitor<'de>>(self, _len: usize, visitor: V) -> Result<V::Value, Error> {
        de::Deserializer::deserialize_seq(self, visitor)
    }

    fn struct_variant<V: Visitor<'de>>(
        self,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        de::Deserializer::deserialize_map(self, visitor)
    }
}

/// What [`Spanned`] reads: the start, the end, then the value.
struct SpanParts<'a, 'd> {
    start: Option<usize>,
    end: Option<usize>,
    value: Option<ValueDe<'a, 'd>>,
}

impl<'de> de::SeqAccess<'de> for SpanParts<'_, '_> {
    type Error = Error;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, Error> {
        if let Some(start) = self.start.take() {
            return seed.deserialize(start.into_deserializer()).map(Some);
        }
        if let Some(end) = self.end.take() {
            return seed.deserialize(end.into_deserializer()).map(Some);
        }
        match self.value.take() {
            Some(value) => seed.deserialize(value).map(Some),
            None => Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde::Deserialize;

    use super::*;

    /// One key of each kind the tests read.
    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct File {
        t: Option<Inner>,
        r: Option<Required>,
        mode: Option<Mode>,
        list: Option<Vec<Vec<i64>>>,
        counts: Option<Vec<Count>>,
        tools: Option<BTreeMap<Name, i64>>,
    }

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Inner {
        a: Option<i64>,
    }

    #[derive(Debug, Deserialize)]
    struct Required {
        a: i64,
    }

    #[derive(Debug, PartialEq, Deserialize)]
    #[serde(rename_all = "snake_case")]
    enum Mode {
        Quiet,
        Loud,
    }

    /// An integer of 0 or more, refused after it is read.
    #[derive(Debug, Deserialize)]
    #[serde(try_from = "i64")]
    struct Count(u32);

    impl TryFrom<i64> for Count {
        type Error = String;

        fn try_from(n: i64) -> Result<Count, String> {
            u32::try_from(n)
                .map(Count)
                .map_err(|_| format!("{n}: too small"))
        }
    }

    /// A name without a space, refused after it is read.
    #[derive(Debug, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
    #[serde(try_from = "String")]
    struct Name(String);

    impl TryFrom<String> for Name {
        type Error = &'static str;

        fn try_from(s: String) -> Result<Name, &'static str> {
            match s.contains(' ') {
                true => Err("a space"),
                false => Ok(Name(s)),
            }
        }
    }

    fn read<T: de::DeserializeOwned>(text: &str) -> Result<T, Error> {
        from_document(DeTable::parse(text).unwrap())
    }

    /// The error's kind, its dotted key, the text at its span, whether it is at a key, and
    /// what the type asked for.
    fn error(text: &str) -> (Kind, String, &str, bool, Want) {
        let e = read::<File>(text).unwrap_err();
        let place = e.place.expect("every error is placed");
        (
            e.kind,
            dotted(&place.path),
            &text[place.span],
            place.on_key,
            place.want,
        )
    }

    #[test]
    fn values_read_as_toml_hands_them_over() {
        let text = "mode = { quiet = {} }\nlist = [[1, 0x10]]\ncounts = [3]\n\
                    [t]\na = -2\n[r]\na = 1\n[tools]\nx = 5";
        let file: File = read(text).unwrap();
        assert_eq!(file.mode, Some(Mode::Quiet));
        assert_eq!(file.list, Some(vec![vec![1, 16]]));
        assert_eq!(file.counts.unwrap()[0].0, 3);
        assert_eq!((file.t.unwrap().a, file.r.unwrap().a), (Some(-2), 1));
        assert_eq!(file.tools.unwrap()[&Name("x".into())], 5);
    }

    #[test]
    fn spans_dates_and_numbers() {
        #[derive(Deserialize)]
        struct Values {
            n: Spanned<Vec<Spanned<u64>>>,
            when: toml::Value,
            x: f64,
        }
        let text = "n = [1, 0x10]\nwhen = 1979-05-27\nx = 1.5";
        let values: Values = read(text).unwrap();
        assert_eq!(&text[values.n.span()], "[1, 0x10]");
        let items: Vec<(u64, &str)> = (values.n.get_ref().iter())
            .map(|n| (*n.get_ref(), &text[n.span()]))
            .collect();
        assert_eq!(items, [(1, "1"), (16, "0x10")]);
        assert_eq!(values.when.to_string(), "1979-05-27");
        assert!(values.when.is_datetime());
        assert_eq!(values.x, 1.5);
    }

    #[test]
    fn an_unknown_field_is_placed_at_its_key_under_its_table() {
        let (kind, path, at, on_key, _) = error("[t]\na = 1\nb = 2");
        assert_eq!(
            kind,
            Kind::UnknownField {
                field: "b".into(),
                expected: &["a"],
            }
        );
        assert_eq!((path.as_str(), at, on_key), ("t", "b", true));
    }

    #[test]
    fn an_unknown_variant_is_placed_at_the_value_or_at_the_key_naming_it() {
        let (kind, path, at, on_key, want) = error("mode = 'shout'");
        assert_eq!(
            kind,
            Kind::UnknownVariant {
                variant: "shout".into(),
                expected: &["quiet", "loud"],
            }
        );
        assert_eq!(
            (path.as_str(), at, on_key, want),
            ("mode", "'shout'", false, Want::String)
        );
        let (_, path, at, on_key, _) = error("mode = { shout = 1 }");
        assert_eq!((path.as_str(), at, on_key), ("mode", "shout", true));
        // A known variant given data it does not take: toml's own words, at the data.
        let (kind, path, at, _, _) = error("mode = { loud = 1 }");
        assert_eq!(kind, Kind::Custom("expected table, found integer".into()));
        assert_eq!((path.as_str(), at), ("mode.loud", "1"));
    }

    #[test]
    fn an_invalid_type_says_what_the_type_asked_for() {
        let (kind, path, at, on_key, want) = error("list = [[1], [2, 'x']]");
        assert!(matches!(kind, Kind::InvalidType { .. }), "{kind:?}");
        assert_eq!(
            (path.as_str(), at, on_key, want),
            ("list[1][1]", "'x'", false, Want::Integer)
        );
        let place = read::<File>("list = 5").unwrap_err().place.unwrap();
        assert_eq!((place.want, place.found), (Want::Array, Some("integer")));
        let place = read::<File>("list = [{}]").unwrap_err().place.unwrap();
        assert_eq!(place.found, None, "a table");
    }

    #[test]
    fn a_table_is_never_read_from_an_array() {
        for text in ["t = []", "t = [1]"] {
            let (kind, path, at, _, want) = error(text);
            assert!(matches!(kind, Kind::InvalidType { .. }), "{kind:?}");
            assert_eq!((path.as_str(), at, want), ("t", &text[4..], Want::Table));
        }
    }

    #[test]
    fn a_missing_field_is_placed_at_its_table() {
        let (kind, path, at, _, _) = error("r = { b = 1 }");
        assert_eq!(kind, Kind::MissingField("a"));
        assert_eq!((path.as_str(), at), ("r", "{ b = 1 }"));
    }

    #[test]
    fn a_rule_that_refuses_a_value_after_reading_it_is_placed_at_that_value() {
        let (kind, path, at, on_key, _) = error("counts = [1, -1]");
        assert_eq!(kind, Kind::Custom("-1: too small".into()));
        assert_eq!((path.as_str(), at, on_key), ("counts[1]", "-1", false));
    }

    #[test]
    fn a_rule_that_refuses_a_key_is_placed_at_the_key_under_its_table() {
        let (kind, path, at, on_key, _) = error("[tools]\nok = 1\n\"my tool\" = 2");
        assert_eq!(kind, Kind::Custom("a space".into()));
        assert_eq!((path.as_str(), at, on_key), ("tools", "\"my tool\"", true));
    }

    #[test]
    fn dotted_keys() {
        let key = |s: &str| Seg::Key(s.into());
        let path = [key("tools"), key("backup"), Seg::Index(2), key("x")];
        assert_eq!(dotted(&path), "tools.backup[2].x");
        assert_eq!(dotted(&[]), "");
    }
}
