//! The files a ChatGPT export points to (`image_asset_pointer` parts), by the export's own
//! naming: beside a loose `conversations.json`, or inside the export zip. Each is read once,
//! only inside the export, within [`IMAGE_CAP`].

use std::collections::BTreeMap;
use std::path::Path;

use crate::input::inside::{InputTree, Refusal, IMAGE_CAP};
use crate::source::archive::{MemberError, ZipFile};

/// Files an export may point to, by name: the folder beside a loose `conversations.json`, or
/// the entries of the export zip it was read from. Listed once per input file (see
/// [`FileCache`](crate::input::format::FileCache)); a zip's directory is read once, and its entries
/// are read through one opened archive.
#[derive(Debug, Default)]
pub struct ImageFiles {
    at: Place,
}

#[derive(Debug, Default)]
enum Place {
    /// Nothing to point to (standard input).
    #[default]
    Nowhere,
    /// A loose export: each name's path below the export folder, read only inside it
    /// ([`InputTree`]).
    Folder {
        dir: std::path::PathBuf,
        follow: bool,
        files: BTreeMap<String, std::path::PathBuf>,
    },
    /// The export zip and the index of each entry, by file name.
    Zip {
        archive: ZipFile,
        entries: BTreeMap<String, usize>,
    },
}

impl ImageFiles {
    /// The files an export at `path` can point to: inside it when it is a zip, else in its
    /// folder and that folder's `dalle-generations/` and `user-*/` folders. A symlink there is
    /// listed only with `follow` and then read only if it leads inside the folder; a folder
    /// behind one is entered only when it is inside too.
    pub fn beside(path: &Path, follow: bool) -> ImageFiles {
        let is_zip = path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("zip"));
        if is_zip {
            return ImageFiles::in_zip(path);
        }
        let Some(dir) = path.parent() else {
            return ImageFiles::default();
        };
        let dir = if dir.as_os_str().is_empty() {
            Path::new(".")
        } else {
            dir
        };
        let inside = |link: &Path| -> bool {
            let (Ok(root), Ok(target)) = (std::fs::canonicalize(dir), std::fs::canonicalize(link))
            else {
                return false;
            };
            target.starts_with(root)
        };
        // (name, path below the folder), sorted: the first of a name is the one read.
        let mut found: Vec<(String, std::path::PathBuf)> = Vec::new();
        let mut subdirs = Vec::new();
        for (name, file_type, below) in list(dir, Path::new("")) {
            let wanted_dir = name == "dalle-generations" || name.starts_with("user-");
            let is_dir = match () {
                () if file_type.is_dir() => true,
                () if file_type.is_symlink() && follow && wanted_dir => {
                    let link = dir.join(&below);
                    link.is_dir() && inside(&link)
                }
                () => false,
            };
            if is_dir && wanted_dir {
                subdirs.push(below);
            } else if name.starts_with("file") {
                // Whatever it is: reading it decides (a symlink without --follow, a FIFO and
                // the like are refused then, with the reason).
                found.push((name, below));
            }
        }
        for sub in subdirs {
            for (name, _, below) in list(dir, &sub) {
                found.push((name, below));
            }
        }
        found.sort();
        let mut files = BTreeMap::new();
        for (name, below) in found {
            files.entry(name).or_insert(below);
        }
        ImageFiles {
            at: Place::Folder {
                dir: dir.to_path_buf(),
                follow,
                files,
            },
        }
    }

    fn in_zip(path: &Path) -> ImageFiles {
        let Ok(archive) = ZipFile::open(path) else {
            return ImageFiles::default();
        };
        let mut named: Vec<(&str, &str, usize)> = archive
            .files()
            .map(|(n, i)| (n.rsplit('/').next().unwrap_or(n), n, i))
            .filter(|(base, _, _)| !base.ends_with(".json") && !base.ends_with(".html"))
            .collect();
        named.sort();
        let mut entries = BTreeMap::new();
        for (base, _, index) in named {
            entries.entry(base.to_string()).or_insert(index);
        }
        ImageFiles {
            at: Place::Zip { archive, entries },
        }
    }

    /// The bytes of the file the export id `id` names, at most [`IMAGE_CAP`].
    fn read(&self, id: &str) -> Result<Vec<u8>, Refusal> {
        match &self.at {
            Place::Nowhere => Err(Refusal::Missing),
            Place::Folder { dir, follow, files } => {
                let below = named(files, id).ok_or(Refusal::Missing)?;
                let tree = InputTree {
                    root: Some(dir),
                    follow: *follow,
                };
                let below = below.to_str().ok_or(Refusal::Missing)?;
                tree.read(dir, below, IMAGE_CAP)
            }
            Place::Zip { archive, entries } => {
                let index = *named(entries, id).ok_or(Refusal::Missing)?;
                archive.read(index, IMAGE_CAP).map_err(|err| match err {
                    MemberError::Unreadable => Refusal::Unreadable,
                    MemberError::TooLarge => Refusal::TooLarge,
                })
            }
        }
    }

    /// The `data:` URL of the file an asset pointer names (`file-service://file-XYZ`,
    /// `sediment://file_XYZ`), when it is here and is an image; else why not.
    pub(super) fn resolve(&self, pointer: &str) -> Result<String, Refusal> {
        let id = pointer
            .strip_prefix("file-service://")
            .or_else(|| pointer.strip_prefix("sediment://"))
            .unwrap_or(pointer);
        if id.is_empty() {
            return Err(Refusal::Missing);
        }
        let bytes = self.read(id)?;
        let mime = image_mime(&bytes).ok_or(Refusal::NotImage)?;
        use base64::Engine;
        let data = base64::engine::general_purpose::STANDARD.encode(&bytes);
        Ok(format!("data:{mime};base64,{data}"))
    }
}

/// The entries of the folder `below` the export folder `dir`: name, type (a symlink is one,
/// not what it points to) and path below `dir`.
fn list(dir: &Path, below: &Path) -> Vec<(String, std::fs::FileType, std::path::PathBuf)> {
    let Ok(entries) = std::fs::read_dir(dir.join(below)) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name().to_string_lossy().to_string();
            let file_type = entry.file_type().ok()?;
            Some((name, file_type, below.join(entry.file_name())))
        })
        .collect()
}

/// The value of the name that export id `id` names: the name itself, or a name starting with
/// it followed by `-` or `.` (`file-AbC123-photo.png`, `file_00ab...-uuid.png`,
/// `file-AbC123.png`), the first in name order, as the export's own files are named. Never a
/// name that only starts with it: `sediment://file` is not `file_XYZ.png`.
fn named<'m, V>(map: &'m BTreeMap<String, V>, id: &str) -> Option<&'m V> {
    if let Some(value) = map.get(id) {
        return Some(value);
    }
    // `-` sorts before `.`: the first match in name order is the first of these.
    ['-', '.'].into_iter().find_map(|separator| {
        let prefix = format!("{id}{separator}");
        map.range(prefix.clone()..)
            .next()
            .filter(|(name, _)| name.starts_with(&prefix))
            .map(|(_, value)| value)
    })
}

/// The MIME type of an image Codex loads, from its first bytes.
fn image_mime(bytes: &[u8]) -> Option<&'static str> {
    if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some("image/png")
    } else if bytes.starts_with(&[0xff, 0xd8, 0xff]) {
        Some("image/jpeg")
    } else if bytes.starts_with(b"GIF8") {
        Some("image/gif")
    } else if bytes.len() > 12 && &bytes[0..4] == b"RIFF" && &bytes[8..12] == b"WEBP" {
        Some("image/webp")
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_export_id_names_a_file_exactly_or_up_to_a_dash_or_dot() {
        let files: BTreeMap<String, &str> = [
            "file-AbC123-photo one.png",
            "file-AbC123.png",
            "file-AbC1234.png",
            "file_00ab-uuid.webp",
            "file_00abc.png",
            "file_XYZ.png",
            "plain",
        ]
        .into_iter()
        .map(|n| (n.to_string(), n))
        .collect();
        let found = |id: &str| named(&files, id).copied();
        assert_eq!(found("file-AbC123"), Some("file-AbC123-photo one.png"));
        assert_eq!(found("file-AbC1234"), Some("file-AbC1234.png"));
        assert_eq!(found("file_00ab"), Some("file_00ab-uuid.webp"));
        assert_eq!(found("file_XYZ"), Some("file_XYZ.png"));
        assert_eq!(found("plain"), Some("plain"));
        // `sediment://file` is not `file_XYZ.png` (nor any `file_` name).
        for none in ["file_", "file_XY", "file-AbC12", "file_00a", "fil", "pla"] {
            assert_eq!(found(none), None, "{none}");
        }
    }
}
