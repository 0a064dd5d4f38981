//! Text tables for people: each column as wide as its widest cell, header included, so that a
//! header stays over its column whatever the lengths of the keys below it.

/// Where a column's cells sit in its width.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    Left,
    Right,
}

/// A header and rows of cells, printed with one space between columns.
#[derive(Debug)]
pub struct Table {
    columns: Vec<(String, Align)>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(columns: &[(&str, Align)]) -> Table {
        Table {
            columns: columns
                .iter()
                .map(|(h, a)| ((*h).to_string(), *a))
                .collect(),
            rows: vec![],
        }
    }

    /// A row: a cell per column (missing ones are empty).
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// The header and the rows, a line each. The last column is not padded (no trailing
    /// spaces); widths count characters, as the formatter's padding does (`µs` is one wide).
    pub fn text(&self) -> String {
        let cell = |row: &[String], i: usize| row.get(i).map_or("", String::as_str).to_string();
        let widths: Vec<usize> = (0..self.columns.len())
            .map(|i| {
                self.rows
                    .iter()
                    .map(|r| cell(r, i).chars().count())
                    .chain([self.columns[i].0.chars().count()])
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let header: Vec<String> = self.columns.iter().map(|(h, _)| h.clone()).collect();
        let mut out = String::new();
        for row in std::iter::once(&header).chain(&self.rows) {
            let mut line = String::new();
            for (i, ((_, align), w)) in self.columns.iter().zip(&widths).enumerate() {
                let c = cell(row, i);
                if i > 0 {
                    line.push(' ');
                }
                let last = i + 1 == self.columns.len();
                match (align, last) {
                    (Align::Left, true) => line.push_str(&c),
                    (Align::Left, false) => line.push_str(&format!("{c:<w$}")),
                    (Align::Right, _) => line.push_str(&format!("{c:>w$}")),
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_sit_over_their_columns_whatever_the_cells_lengths() {
        let mut t = Table::new(&[
            ("WORKLOAD", Align::Left),
            ("TRIALS", Align::Right),
            ("DESCRIPTION", Align::Left),
        ]);
        t.row(vec![
            "0123456789abcdef0123456789".into(),
            "7".into(),
            "matmul(m=1,n=2,k=3)".into(),
        ]);
        t.row(vec!["ab".into(), "12345678".into(), "x".into()]);
        let text = t.text();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3, "{text}");
        // Every column starts where its header does.
        let start = |l: &str, of: &str| l.find(of).unwrap();
        assert_eq!(
            start(lines[0], "TRIALS") + "TRIALS".len(),
            start(lines[2], "12345678") + 8
        );
        assert_eq!(start(lines[0], "DESCRIPTION"), start(lines[1], "matmul"));
        assert_eq!(start(lines[0], "DESCRIPTION"), start(lines[2], "x"));
        assert!(lines.iter().all(|l| !l.ends_with(' ')), "{text:?}");
    }

    #[test]
    fn widths_count_characters() {
        let mut t = Table::new(&[("TIME", Align::Right), ("X", Align::Left)]);
        t.row(vec!["150.0 µs".into(), "a".into()]);
        t.row(vec!["1.000 ms".into(), "b".into()]);
        let text = t.text();
        let cols: Vec<usize> = text.lines().map(|l| l.chars().count()).collect();
        assert_eq!(cols[1], cols[2], "{text}");
    }
}
