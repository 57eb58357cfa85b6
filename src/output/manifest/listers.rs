//! Which input files list each session of the home, kept beside the manifest's entries.

use std::collections::HashMap;

/// Session path → the files that list it. A path is held by its xxh3-128 digest and a file by
/// its number, not as strings: this map has an entry per session of the home, ~40 bytes each
/// this way against ~220 with the strings (14 MB for a run writing 64,000 sessions).
#[derive(Debug, Default)]
pub(super) struct Listers {
    /// The first file that lists a path: one, for almost every session.
    first: HashMap<u128, u32>,
    /// The others, for a path more than one file lists (a renamed or duplicated input).
    more: HashMap<u128, Vec<u32>>,
    /// Files by number, and numbers by file key.
    keys: Vec<String>,
    numbers: HashMap<String, u32>,
}

impl Listers {
    pub(super) fn path(path: &str) -> u128 {
        super::super::rollouts::path_key(path)
    }

    pub(super) fn number(&mut self, key: &str) -> u32 {
        if let Some(&n) = self.numbers.get(key) {
            return n;
        }
        let n = u32::try_from(self.keys.len()).unwrap_or(u32::MAX);
        self.keys.push(key.to_string());
        self.numbers.insert(key.to_string(), n);
        n
    }

    /// The keys of the files that list `path`.
    pub(super) fn of(&self, path: &str) -> impl Iterator<Item = &str> {
        self.of_key(Listers::path(path))
    }

    /// The keys of the files that list the path of key `path` ([`Listers::path`]).
    pub(super) fn of_key(&self, path: u128) -> impl Iterator<Item = &str> {
        let first = self.first.get(&path).into_iter();
        let more = self.more.get(&path).into_iter().flatten();
        first
            .chain(more)
            .filter_map(|&n| self.keys.get(n as usize).map(String::as_str))
    }

    pub(super) fn add(&mut self, path: u128, key: &str) {
        let n = self.number(key);
        match self.first.get(&path) {
            None => {
                self.first.insert(path, n);
            }
            Some(&first) if first == n => {}
            Some(_) => {
                let more = self.more.entry(path).or_default();
                if !more.contains(&n) {
                    more.push(n);
                }
            }
        }
    }

    pub(super) fn remove(&mut self, path: u128, key: &str) {
        let Some(&n) = self.numbers.get(key) else {
            return;
        };
        let more = self.more.get_mut(&path);
        if self.first.get(&path) == Some(&n) {
            match more.and_then(Vec::pop) {
                Some(next) => self.first.insert(path, next),
                None => self.first.remove(&path),
            };
        } else if let Some(more) = more {
            more.retain(|&m| m != n);
        }
        if self.more.get(&path).is_some_and(Vec::is_empty) {
            self.more.remove(&path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(listers: &Listers, path: &str) -> Vec<String> {
        let mut keys: Vec<String> = listers.of(path).map(str::to_string).collect();
        keys.sort();
        keys
    }

    #[test]
    fn listers_answer_who_lists_a_session_as_files_come_and_go() {
        let mut listers = Listers::default();
        listers.add(Listers::path("s/a.jsonl"), "/in/one");
        listers.add(Listers::path("s/a.jsonl"), "/in/one");
        listers.add(Listers::path("s/b.jsonl"), "/in/one");
        assert_eq!(of(&listers, "s/a.jsonl"), ["/in/one"]);
        // A renamed input lists the same sessions: both files are listers.
        listers.add(Listers::path("s/a.jsonl"), "/in/renamed");
        listers.add(Listers::path("s/a.jsonl"), "/in/third");
        assert_eq!(
            of(&listers, "s/a.jsonl"),
            ["/in/one", "/in/renamed", "/in/third"]
        );
        // The first lister leaves: the others stay, whichever was first.
        listers.remove(Listers::path("s/a.jsonl"), "/in/one");
        assert_eq!(of(&listers, "s/a.jsonl"), ["/in/renamed", "/in/third"]);
        listers.remove(Listers::path("s/a.jsonl"), "/in/third");
        listers.remove(Listers::path("s/a.jsonl"), "/in/unknown");
        assert_eq!(of(&listers, "s/a.jsonl"), ["/in/renamed"]);
        listers.remove(Listers::path("s/a.jsonl"), "/in/renamed");
        assert!(of(&listers, "s/a.jsonl").is_empty());
        assert!(listers.first.len() == 1 && listers.more.is_empty());
        assert_eq!(of(&listers, "s/b.jsonl"), ["/in/one"]);
        assert!(of(&listers, "s/never.jsonl").is_empty());
    }
}
