//! Reading a part of a large inventory that holds only entries of its lists (racks,
//! switches, hosts, links) straight from the YAML parser's events, without marked-yaml's
//! node tree: at 16,384 hosts, building and freeing that tree cost about as much CPU as
//! parsing the text.
//!
//! Every value comes out as the tree's deserializer gives it: the same scalars (numbers
//! by `str::parse`, booleans `true`/`false`, a scalar into an `Option` always `Some`),
//! the same lines and columns, an entry's span from its first event to its last. What
//! this reader is not sure to read the same way — another section, an anchor, an alias or
//! a tag, an empty scalar where a mapping or list is wanted, a value that does not
//! deserialize, an empty list — makes it give up on the part, which is then read from
//! its tree; the tree's reading reports every problem.

use std::fmt;

use marked_yaml::{Marker, Span};
use serde::de::value::BorrowedStrDeserializer;
use serde::de::{self, DeserializeOwned, DeserializeSeed, IntoDeserializer, MapAccess, SeqAccess};
use serde::de::{Deserializer, Visitor};
use yaml_rust2::parser::{Event, Parser};
use yaml_rust2::scanner::Marker as YamlMarker;

use super::raw::{self, Item};

/// marked-yaml's `Spanned<T>` asks its deserializer for a struct of this name, and
/// reads its span from the fields it is offered in this order (see `SpannedScalar`).
/// They are marked-yaml's own (0.8, which the lock pins), not its API: were they to
/// change, `Spanned` would refuse what this reader offers and every part would go to
/// the tree, which the test counting the parts read from events would show.
const SPANNED: &str = "$___::marked_data::serde::Spanned<T>";
const SPANNED_FIELDS: [&str; 9] = [
    "$___::marked_data::serde::Spanned<T>::span_start_source",
    "$___::marked_data::serde::Spanned<T>::span_start_char",
    "$___::marked_data::serde::Spanned<T>::span_start_line",
    "$___::marked_data::serde::Spanned<T>::span_start_column",
    "$___::marked_data::serde::Spanned<T>::span_end_source",
    "$___::marked_data::serde::Spanned<T>::span_end_char",
    "$___::marked_data::serde::Spanned<T>::span_end_line",
    "$___::marked_data::serde::Spanned<T>::span_end_column",
    "$___::marked_data::serde::Spanned<T>::inner",
];

/// This reader gives up on the part; its tree reads it.
#[derive(Debug)]
pub struct GiveUp;

impl fmt::Display for GiveUp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("left to the tree")
    }
}

impl std::error::Error for GiveUp {}

impl de::Error for GiveUp {
    fn custom<T: fmt::Display>(_: T) -> Self {
        GiveUp
    }
}

/// The entries a part holds of each list section, in the text's order.
pub struct Lists {
    /// The part's top-level keys (a continued list's first).
    pub keys: Vec<String>,
    /// The span of the part's top-level mapping.
    pub top: Span,
    pub racks: Vec<Item<raw::Rack>>,
    pub switches: Vec<Item<raw::Switch>>,
    pub hosts: Vec<Item<raw::Host>>,
    pub links: Vec<Item<raw::Link>>,
}

/// Reads `text` (one part, padded as the tree's parse is) when it is a mapping of list
/// sections only, its first key `continues` when that is given; None leaves it to the
/// tree.
pub fn read_lists(source: usize, text: &str, continues: Option<&str>) -> Option<Lists> {
    let mut events = Events {
        parser: Parser::new(text.chars()),
        source,
        last: Marker::new(source, 0, 0, 0),
    };
    for expected in [Event::StreamStart, Event::DocumentStart] {
        if events.next().ok()?.0 != expected {
            return None;
        }
    }
    let (Event::MappingStart(0, None), start) = events.next().ok()? else {
        return None;
    };
    let mut lists = Lists {
        keys: Vec::new(),
        top: Span::new_start(start),
        racks: Vec::new(),
        switches: Vec::new(),
        hosts: Vec::new(),
        links: Vec::new(),
    };
    loop {
        let key = match events.next().ok()? {
            (Event::MappingEnd, end) => {
                lists.top = Span::new_with_marks(start, end);
                break;
            }
            (Event::Scalar(key, _, 0, None), _) => key,
            _ => return None,
        };
        let first = lists.keys.is_empty();
        if continues.is_some_and(|c| first != (c == key)) || lists.keys.contains(&key) {
            return None;
        }
        let read = match key.as_str() {
            "racks" => entries(&mut events, &mut lists.racks),
            "switches" => entries(&mut events, &mut lists.switches),
            "hosts" => entries(&mut events, &mut lists.hosts),
            "links" => entries(&mut events, &mut lists.links),
            _ => None,
        };
        read?;
        lists.keys.push(key);
    }
    for expected in [Event::DocumentEnd, Event::StreamEnd] {
        if events.next().ok()?.0 != expected {
            return None;
        }
    }
    // A part holds at least its first list (an empty mapping is not a part of lists).
    (!lists.keys.is_empty()).then_some(lists)
}

/// A list's entries into `into`; None if it is not a non-empty list of entries that
/// deserialize.
fn entries<T: DeserializeOwned>(events: &mut Events, into: &mut Vec<Item<T>>) -> Option<()> {
    let (Event::SequenceStart(0, None), _) = events.next().ok()? else {
        return None;
    };
    let before = into.len();
    loop {
        let at = match events.peek().ok()? {
            (Event::SequenceEnd, _) => break,
            (_, at) => *at,
        };
        let start = events.marker(at);
        let value = T::deserialize(Node { events }).ok()?;
        into.push(Item {
            span: Span::new_with_marks(start, events.last),
            value,
        });
    }
    events.next().ok()?;
    (into.len() > before).then_some(())
}

struct Events<'t> {
    parser: Parser<std::str::Chars<'t>>,
    source: usize,
    /// Where the last event taken was: a mapping or a list taken whole ends there.
    last: Marker,
}

impl Events<'_> {
    fn marker(&self, at: YamlMarker) -> Marker {
        Marker::new(self.source, at.index(), at.line(), at.col() + 1)
    }

    fn peek(&mut self) -> Result<&(Event, YamlMarker), GiveUp> {
        self.parser.peek().map_err(|_| GiveUp)
    }

    fn next(&mut self) -> Result<(Event, Marker), GiveUp> {
        let (event, at) = self.parser.next_token().map_err(|_| GiveUp)?;
        self.last = self.marker(at);
        Ok((event, self.last))
    }
}

/// The next node of the events, as a deserializer.
struct Node<'e, 't> {
    events: &'e mut Events<'t>,
}

/// What a node starts with.
enum Start {
    Scalar(Scalar),
    Mapping,
    Sequence,
}

impl Node<'_, '_> {
    fn start(&mut self) -> Result<Start, GiveUp> {
        match self.events.next()? {
            (Event::Scalar(value, _, 0, None), at) => Ok(Start::Scalar(Scalar { value, at })),
            (Event::MappingStart(0, None), _) => Ok(Start::Mapping),
            (Event::SequenceStart(0, None), _) => Ok(Start::Sequence),
            _ => Err(GiveUp),
        }
    }
}

macro_rules! by_start {
    ($($method:ident)*) => {
        $(
            fn $method<V: Visitor<'de>>(mut self, visitor: V) -> Result<V::Value, GiveUp> {
                match self.start()? {
                    Start::Scalar(scalar) => scalar.$method(visitor),
                    Start::Mapping => visitor.visit_map(Within { events: self.events }),
                    Start::Sequence => visitor.visit_seq(Within { events: self.events }),
                }
            }
        )*
    };
}

impl<'de> Deserializer<'de> for Node<'_, '_> {
    type Error = GiveUp;

    by_start! {
        deserialize_any deserialize_bool deserialize_u8 deserialize_u16 deserialize_u32
        deserialize_u64 deserialize_i8 deserialize_i16 deserialize_i32 deserialize_i64
        deserialize_f32 deserialize_f64 deserialize_str deserialize_string
        deserialize_identifier deserialize_map deserialize_seq
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, GiveUp> {
        // As the tree's: no value is "none"; an absent field is the struct's business.
        visitor.visit_some(self)
    }

    fn deserialize_struct<V: Visitor<'de>>(
        mut self,
        name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, GiveUp> {
        match self.start()? {
            Start::Scalar(scalar) => scalar.deserialize_struct(name, fields, visitor),
            // A mapping's or list's span would be wanted before its end is read.
            _ if name == SPANNED => Err(GiveUp),
            Start::Mapping => visitor.visit_map(Within {
                events: self.events,
            }),
            Start::Sequence => Err(GiveUp),
        }
    }

    serde::forward_to_deserialize_any! {
        i128 u128 char bytes byte_buf unit unit_struct newtype_struct tuple tuple_struct
        enum ignored_any
    }
}

/// The entries of the mapping or the list just started.
struct Within<'e, 't> {
    events: &'e mut Events<'t>,
}

impl<'de> MapAccess<'de> for Within<'_, '_> {
    type Error = GiveUp;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, GiveUp> {
        match self.events.next()? {
            (Event::MappingEnd, _) => Ok(None),
            (Event::Scalar(value, _, 0, None), at) => {
                seed.deserialize(Scalar { value, at }).map(Some)
            }
            _ => Err(GiveUp),
        }
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, GiveUp> {
        seed.deserialize(Node {
            events: self.events,
        })
    }
}

impl<'de> SeqAccess<'de> for Within<'_, '_> {
    type Error = GiveUp;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, GiveUp> {
        if let (Event::SequenceEnd, _) = self.events.peek()? {
            self.events.next()?;
            return Ok(None);
        }
        seed.deserialize(Node {
            events: self.events,
        })
        .map(Some)
    }
}

/// A scalar and where it starts (the tree's scalars have no end).
struct Scalar {
    value: String,
    at: Marker,
}

macro_rules! parsed {
    ($($method:ident $visit:ident $ty:ty;)*) => {
        $(
            fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, GiveUp> {
                visitor.$visit(self.value.parse::<$ty>().map_err(|_| GiveUp)?)
            }
        )*
    };
}

impl<'de> Deserializer<'de> for Scalar {
    type Error = GiveUp;

    parsed! {
        deserialize_u8 visit_u8 u8;
        deserialize_u16 visit_u16 u16;
        deserialize_u32 visit_u32 u32;
        deserialize_u64 visit_u64 u64;
        deserialize_i8 visit_i8 i8;
        deserialize_i16 visit_i16 i16;
        deserialize_i32 visit_i32 i32;
        deserialize_i64 visit_i64 i64;
        deserialize_f32 visit_f32 f32;
        deserialize_f64 visit_f64 f64;
    }

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, GiveUp> {
        visitor.visit_string(self.value)
    }

    fn deserialize_bool<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, GiveUp> {
        // The tree also reads `True`, `TRUE` and the like; those are left to it.
        match self.value.as_str() {
            "true" => visitor.visit_bool(true),
            "false" => visitor.visit_bool(false),
            _ => Err(GiveUp),
        }
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, GiveUp> {
        visitor.visit_some(self)
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, GiveUp> {
        if name == SPANNED && fields == SPANNED_FIELDS {
            visitor.visit_map(SpannedScalar {
                scalar: Some(self),
                sent: 0,
            })
        } else {
            // The tree reads an empty scalar as an empty mapping; that is left to it.
            Err(GiveUp)
        }
    }

    fn deserialize_map<V: Visitor<'de>>(self, _: V) -> Result<V::Value, GiveUp> {
        Err(GiveUp)
    }

    fn deserialize_seq<V: Visitor<'de>>(self, _: V) -> Result<V::Value, GiveUp> {
        Err(GiveUp)
    }

    serde::forward_to_deserialize_any! {
        i128 u128 char str string bytes byte_buf unit unit_struct newtype_struct tuple
        tuple_struct enum identifier ignored_any
    }
}

/// A scalar as marked-yaml offers it to `Spanned<T>`: its start's source, character,
/// line and column (a scalar's span has no end), then the scalar.
struct SpannedScalar {
    scalar: Option<Scalar>,
    sent: usize,
}

impl<'de> MapAccess<'de> for SpannedScalar {
    type Error = GiveUp;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, GiveUp> {
        let key = match self.sent {
            0..=3 => SPANNED_FIELDS[self.sent],
            4 => SPANNED_FIELDS[8],
            _ => return Ok(None),
        };
        seed.deserialize(BorrowedStrDeserializer::new(key))
            .map(Some)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, GiveUp> {
        self.sent += 1;
        let at = self.scalar.as_ref().ok_or(GiveUp)?.at;
        let number = match self.sent {
            1 => at.source(),
            2 => at.character(),
            3 => at.line(),
            4 => at.column(),
            _ => return seed.deserialize(self.scalar.take().ok_or(GiveUp)?),
        };
        seed.deserialize(number.into_deserializer())
    }
}
