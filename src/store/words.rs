//! The closed sets of words of `model/words.rs` as SQLite values: written as their word and
//! read back through `FromStr`, so that a word heartbeat does not know is an error that names
//! it, never a default.

use rusqlite::types::{FromSql, FromSqlError, FromSqlResult, ToSql, ToSqlOutput, ValueRef};

use crate::model::{ApprovalState, HoldReason};

macro_rules! sql_word {
    ($($name:ident),* $(,)?) => {
        $(
            impl FromSql for $name {
                fn column_result(value: ValueRef<'_>) -> FromSqlResult<Self> {
                    value
                        .as_str()?
                        .parse()
                        .map_err(|e| FromSqlError::Other(Box::new(e)))
                }
            }

            impl ToSql for $name {
                fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
                    Ok(ToSqlOutput::from(self.as_str()))
                }
            }
        )*
    };
}

sql_word!(ApprovalState, HoldReason);

#[cfg(test)]
mod tests {
    use super::*;
    use rusqlite::Connection;

    #[test]
    fn words_go_in_and_come_out_as_their_text() {
        let conn = Connection::open_in_memory().unwrap();
        for &state in ApprovalState::ALL {
            let (text, back): (String, ApprovalState) = conn
                .query_row("SELECT ?1, ?1", [state], |r| Ok((r.get(0)?, r.get(1)?)))
                .unwrap();
            assert_eq!((text.as_str(), back), (state.as_str(), state));
        }
        for &rule in HoldReason::ALL {
            let back: HoldReason = conn.query_row("SELECT ?1", [rule], |r| r.get(0)).unwrap();
            assert_eq!(back, rule);
        }
        let err = conn
            .query_row("SELECT 'later'", [], |r| r.get::<_, HoldReason>(0))
            .unwrap_err();
        assert!(
            err.to_string().contains(r#"unknown hold reason "later""#),
            "{err}"
        );
        // Not text at all.
        assert!(
            conn.query_row("SELECT 1", [], |r| r.get::<_, ApprovalState>(0))
                .is_err()
        );
    }
}
